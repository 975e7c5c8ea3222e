//! A deadline for a whole HTTP request body. The read timeout bounds each
//! pause within a body, so a client dripping a byte every few seconds kept
//! its connection and task for as long as it liked; here the body as a
//! whole must have arrived within the deadline of the request's start, or
//! reading it fails (answered `400 malformed_request`, as a paused body).

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::HeaderMap;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Sleep;
use tokio_stream::Stream;

/// Why a body's read failed.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0:?}")]
pub struct BodyTooSlow(Duration);

/// `request` with its body bounded by `deadline` (a request without a body
/// is left as it is).
pub fn with_body_deadline(request: Request, deadline: Duration) -> Request {
    if !has_body(request.headers()) {
        return request;
    }
    request.map(|body| {
        Body::from_stream(Deadline {
            inner: body.into_data_stream(),
            sleep: Box::pin(tokio::time::sleep(deadline)),
            deadline,
            expired: false,
        })
    })
}

/// Whether the head announces a body (HTTP/1.1: a length or chunks).
fn has_body(headers: &HeaderMap) -> bool {
    headers.contains_key(axum::http::header::TRANSFER_ENCODING)
        || headers
            .get(axum::http::header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0")
}

struct Deadline {
    inner: axum::body::BodyDataStream,
    sleep: Pin<Box<Sleep>>,
    deadline: Duration,
    expired: bool,
}

impl Stream for Deadline {
    type Item = Result<Bytes, axum::BoxError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.expired {
            return Poll::Ready(None);
        }
        if let Poll::Ready(next) = Pin::new(&mut self.inner).poll_next(cx) {
            return Poll::Ready(next.map(|r| r.map_err(Into::into)));
        }
        if self.sleep.as_mut().poll(cx).is_ready() {
            self.expired = true;
            return Poll::Ready(Some(Err(BodyTooSlow(self.deadline).into())));
        }
        Poll::Pending
    }
}
