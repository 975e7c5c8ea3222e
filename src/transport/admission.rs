//! Admission control: budgets of what the server holds at once over both
//! transports, the queries waiting for a worker and being answered, and
//! before them the bytes of the query bodies being read, parsed and
//! answered. A request that would take a total past its budget is refused
//! at once (HTTP 429, gRPC `RESOURCE_EXHAUSTED`), so a burst of large
//! batches cannot grow the server's memory without bound; a client retries
//! later or elsewhere.

use crate::service::ServiceError;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// What is admitted and not yet given back (queries, or body bytes),
/// against a budget.
#[derive(Debug)]
pub struct Admission {
    budget: usize,
    held: AtomicUsize,
    /// The refusal, from the amount asked and the budget.
    refusal: fn(usize, usize) -> ServiceError,
}

/// An amount admitted; given back when dropped.
#[derive(Debug)]
pub struct Admitted {
    admission: Arc<Admission>,
    queries: usize,
}

impl Admission {
    /// A budget of queries.
    pub fn new(budget: usize) -> Arc<Self> {
        Self::with_refusal(budget, |queries, budget| ServiceError::Overloaded {
            queries,
            budget,
        })
    }

    /// A budget of request-body bytes.
    pub fn for_body_bytes(budget: usize) -> Arc<Self> {
        Self::with_refusal(budget, |bytes, budget| ServiceError::BodiesOverloaded {
            bytes,
            budget,
        })
    }

    fn with_refusal(budget: usize, refusal: fn(usize, usize) -> ServiceError) -> Arc<Self> {
        Arc::new(Self {
            budget,
            held: AtomicUsize::new(0),
            refusal,
        })
    }

    /// Admits `queries` (or bytes), or refuses them when what is already
    /// held and these would pass the budget. A request alone is always
    /// admitted (a budget under the per-request limit refuses no request
    /// that limit allows on an idle server).
    pub fn admit(self: &Arc<Self>, queries: usize) -> Result<Admitted, ServiceError> {
        let mut held = self.held.load(Ordering::Relaxed);
        loop {
            let total = held.saturating_add(queries);
            if held > 0 && total > self.budget {
                return Err((self.refusal)(queries, self.budget));
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

    /// Queries (or bytes) held now.
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
