//! Admission control: a budget of queries held by the server at once
//! (waiting for a worker and being answered, over both transports). A
//! batch that would take the total past the budget is refused at once
//! (HTTP 429, gRPC `RESOURCE_EXHAUSTED`), so a burst of large batches
//! cannot grow the server's memory without bound; a client retries later
//! or elsewhere.

use crate::service::ServiceError;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The queries admitted and not yet answered, against a budget.
#[derive(Debug)]
pub struct Admission {
    budget: usize,
    held: AtomicUsize,
}

/// Queries admitted; given back when dropped.
#[derive(Debug)]
pub struct Admitted {
    admission: Arc<Admission>,
    queries: usize,
}

impl Admission {
    pub fn new(budget: usize) -> Arc<Self> {
        Arc::new(Self {
            budget,
            held: AtomicUsize::new(0),
        })
    }

    /// Admits a batch of `queries`, or refuses it when the queries already
    /// held and these would pass the budget. A batch alone is always
    /// admitted (a budget under the per-request limit refuses no batch that
    /// limit allows on an idle server).
    pub fn admit(self: &Arc<Self>, queries: usize) -> Result<Admitted, ServiceError> {
        let mut held = self.held.load(Ordering::Relaxed);
        loop {
            let total = held.saturating_add(queries);
            if held > 0 && total > self.budget {
                return Err(ServiceError::Overloaded {
                    queries,
                    budget: self.budget,
                });
            }
            match self
                .held
                .compare_exchange_weak(held, total, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => {
                    return Ok(Admitted {
                        admission: Arc::clone(self),
                        queries,
                    })
                }
                Err(now) => held = now,
            }
        }
    }

    /// Queries held now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.admission
            .held
            .fetch_sub(self.queries, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_admitted_within_the_budget() {
        let admission = Admission::new(100);
        let a = admission.admit(60).expect("within");
        let b = admission.admit(40).expect("exactly the budget");
        assert_eq!(
            admission.admit(1).expect_err("past it").statuses(),
            (429, crate::service::grpc_code::RESOURCE_EXHAUSTED)
        );
        drop(a);
        assert_eq!(admission.held(), 40);
        let c = admission.admit(60).expect("room again");
        drop((b, c));
        assert_eq!(admission.held(), 0);
        // Alone, a batch over the budget still runs.
        let big = admission.admit(1_000).expect("alone");
        assert!(admission.admit(1).is_err());
        drop(big);
    }
}
