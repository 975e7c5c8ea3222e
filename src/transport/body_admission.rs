//! Admission of query bodies before they are read. A request's body is
//! counted against the server's byte budget ([`Service::body_admission`])
//! from its head (HTTP: the announced `Content-Length`; gRPC: the length
//! prefix of a unary call's message) until its answer has been sent, so
//! bodies being read, parsed and answered never pass the budget together:
//! a body past it is refused before the server reads it. (Admitting on the
//! query count alone came after the body was read and parsed, which is
//! where most of a burst's memory was.)

use super::admission::Admitted;
use crate::service::Service;
use axum::body::{Body, Bytes};
use axum::response::Response;
use http_body::{Frame, SizeHint};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tonic::codegen::{http, BoxFuture, Service as TowerService};
use tonic::server::NamedService;

/// A body with chunks already read put back in front of it, holding an
/// admission until it has been sent (or dropped).
struct Held<B> {
    head: VecDeque<Bytes>,
    rest: B,
    _admitted: Option<Admitted>,
}

impl<B> http_body::Body for Held<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        if let Some(chunk) = self.head.pop_front() {
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        Pin::new(&mut self.rest).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.head.is_empty() && self.rest.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let head: usize = self.head.iter().map(Bytes::len).sum();
        let rest = self.rest.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(rest.lower() + head as u64);
        if let Some(upper) = rest.upper() {
            hint.set_upper(upper + head as u64);
        }
        hint
    }
}

/// `response` with `admitted` held until its body has been sent: the
/// answer, serialised or not yet encoded, is part of what a request holds.
pub(crate) fn hold_until_sent(response: Response, admitted: Admitted) -> Response {
    response.map(|body| {
        Body::new(Held {
            head: VecDeque::new(),
            rest: body,
            _admitted: Some(admitted),
        })
    })
}

/// The bytes an HTTP request's head says its body holds, for admission:
/// its `Content-Length` (at most `limit`), `limit` for a body sent in
/// chunks (it may grow to it), `None` for a request without a body.
pub(crate) fn announced_body_bytes(headers: &http::HeaderMap, limit: usize) -> Option<usize> {
    if let Some(length) = headers.get(http::header::CONTENT_LENGTH) {
        let length = length.to_str().ok().and_then(|v| v.parse::<u64>().ok());
        return match length {
            Some(0) => None,
            Some(n) => Some(n.min(limit as u64) as usize),
            None => Some(limit),
        };
    }
    headers
        .contains_key(http::header::TRANSFER_ENCODING)
        .then_some(limit)
}

/// The unary gRPC calls whose message is a query batch.
const ADMITTED_CALLS: [&str; 2] = [
    "/bspq.v1.Collision/Trace",
    "/bspq.v1.Collision/PointContents",
];

/// The gRPC `Collision` service with its unary query calls admitted on
/// their message's length prefix, before the message is read. A
/// `TraceStream` reads one message at a time and answers it before the
/// next: what a stream holds is bounded by one message, and its batches
/// meet the query budget.
#[derive(Clone)]
pub(crate) struct AdmitMessages<S> {
    pub inner: S,
    pub service: Arc<Service>,
}

impl<S> TowerService<http::Request<tonic::body::Body>> for AdmitMessages<S>
where
    S: TowerService<http::Request<tonic::body::Body>, Response = Response, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<Response, Infallible>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        if !ADMITTED_CALLS.contains(&request.uri().path()) {
            return Box::pin(self.inner.call(request));
        }
        // The ready service answers this call; a fresh clone waits for the
        // next poll_ready.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let admission = Arc::clone(&self.service.body_admission);
        // A length past the message limit is refused by tonic as too large;
        // it holds no more than the limit until then.
        let limit = self.service.limits.max_body_bytes;
        Box::pin(async move {
            let (parts, mut body) = request.into_parts();
            let (head, length) = read_prefix(&mut body).await;
            let admitted = match admission.admit(length.min(limit)) {
                Ok(admitted) => admitted,
                Err(e) => return Ok(super::grpc::status(&e).into_http::<Body>()),
            };
            let body = tonic::body::Body::new(Held {
                head,
                rest: body,
                _admitted: None,
            });
            let response = inner.call(http::Request::from_parts(parts, body)).await?;
            Ok(hold_until_sent(response, admitted))
        })
    }
}

impl<S: NamedService> NamedService for AdmitMessages<S> {
    const NAME: &'static str = S::NAME;
}

/// Reads a gRPC body's first chunks up to its message's 5-byte prefix
/// (a compression flag, then the length, big-endian): the chunks read and
/// the length (0 when the body ends first; the call then fails as it
/// would have).
async fn read_prefix(body: &mut tonic::body::Body) -> (VecDeque<Bytes>, usize) {
    let mut head = VecDeque::new();
    let mut prefix = Vec::with_capacity(5);
    while prefix.len() < 5 {
        let frame =
            std::future::poll_fn(|cx| http_body::Body::poll_frame(Pin::new(&mut *body), cx)).await;
        let Some(Ok(frame)) = frame else { break };
        let Ok(data) = frame.into_data() else { break };
        prefix.extend(data.iter().take(5 - prefix.len()));
        head.push_back(data);
    }
    let length = match prefix[..] {
        [_, a, b, c, d] => u32::from_be_bytes([a, b, c, d]) as usize,
        _ => 0,
    };
    (head, length)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announced_lengths() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut h = http::HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, http::HeaderValue::from_static(v));
            }
            h
        };
        assert_eq!(announced_body_bytes(&headers(&[]), 100), None);
        assert_eq!(
            announced_body_bytes(&headers(&[("content-length", "0")]), 100),
            None
        );
        assert_eq!(
            announced_body_bytes(&headers(&[("content-length", "42")]), 100),
            Some(42)
        );
        assert_eq!(
            announced_body_bytes(&headers(&[("content-length", "4200")]), 100),
            Some(100)
        );
        assert_eq!(
            announced_body_bytes(&headers(&[("transfer-encoding", "chunked")]), 100),
            Some(100)
        );
    }
}
