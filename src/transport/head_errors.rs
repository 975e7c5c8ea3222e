//! JSON bodies for the errors hyper answers itself. A request whose head
//! does not parse (a garbage request line, a raw 0xFF in the path, a path
//! or a head over the limits) never reaches the router: hyper writes a bare
//! 400, 414 or 431 with an empty body and closes the connection. This
//! wrapper around the connection's socket replaces that bare answer, as it
//! is written, by the same status with the error table's JSON body.
//!
//! Only an answer the router cannot have written is replaced: one of those
//! three statuses with `content-length: 0` and no `content-type` (every
//! error of the router carries a JSON body).

use crate::metrics::Metrics;
use crate::service::ServiceError;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A connection's socket whose bare head-error answers get a JSON body.
pub(crate) struct HeadErrorBodies<S> {
    inner: S,
    metrics: Arc<Metrics>,
    /// A replacement answer, and how much of it is written.
    pending: Vec<u8>,
    written: usize,
}

impl<S> HeadErrorBodies<S> {
    pub(crate) fn new(inner: S, metrics: Arc<Metrics>) -> Self {
        Self {
            inner,
            metrics,
            pending: Vec::new(),
            written: 0,
        }
    }
}

/// The error of a bare answer hyper wrote for a request head it refused.
fn refused_head(answer: &[u8]) -> Option<ServiceError> {
    let error = if answer.starts_with(b"HTTP/1.1 400 ") {
        ServiceError::BadRequestHead
    } else if answer.starts_with(b"HTTP/1.1 414 ") {
        ServiceError::UriTooLong
    } else if answer.starts_with(b"HTTP/1.1 431 ") {
        ServiceError::HeadersTooLarge
    } else {
        return None;
    };
    let end = answer.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&answer[..end]).to_ascii_lowercase();
    let bare = head.contains("\r\ncontent-length: 0") && !head.contains("\r\ncontent-type:");
    bare.then_some(error)
}

/// `error`'s answer: its status, the JSON error body, and the connection
/// closed (hyper closes it after a refused head).
fn json_answer(error: &ServiceError) -> Vec<u8> {
    let (status, _) = error.statuses();
    let reason = axum::http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Error");
    let body = error.to_json().to_string();
    let mut answer = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    answer.extend_from_slice(body.as_bytes());
    answer
}

impl<S: AsyncWrite + Unpin> HeadErrorBodies<S> {
    /// Writes what is left of a replacement answer.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.pending.len() {
            let n =
                ready!(Pin::new(&mut self.inner).poll_write(cx, &self.pending[self.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        self.pending.clear();
        self.written = 0;
        Poll::Ready(Ok(()))
    }

    /// Takes `buf` in place of writing it when it is a bare head-error
    /// answer; `Some(its length)` then.
    fn replace(&mut self, buf: &[u8]) -> Option<usize> {
        let error = refused_head(buf)?;
        self.metrics.count_error(error.code(), "http");
        self.pending = json_answer(&error);
        self.written = 0;
        Some(buf.len())
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for HeadErrorBodies<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for HeadErrorBodies<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        ready!(self.poll_pending(cx))?;
        if let Some(n) = self.replace(buf) {
            return Poll::Ready(Ok(n));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        ready!(self.poll_pending(cx))?;
        if let Some(first) = bufs.iter().find(|b| !b.is_empty()) {
            if let Some(n) = self.replace(first) {
                return Poll::Ready(Ok(n));
            }
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bare_head_errors_are_replaced() {
        let bare = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: Sun, 29 Nov 2026 12:00:00 GMT\r\n\r\n";
        assert_eq!(refused_head(bare), Some(ServiceError::HeadersTooLarge));
        let ours = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(refused_head(ours), None);
        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(refused_head(ok), None);
        let answer = String::from_utf8(json_answer(&ServiceError::UriTooLong)).expect("text");
        let (head, body) = answer.split_once("\r\n\r\n").expect("a head");
        assert!(head.starts_with("HTTP/1.1 414 URI Too Long\r\n"));
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let body: serde_json::Value = serde_json::from_str(body).expect("JSON");
        assert_eq!(body["error"]["code"], "uri_too_long");
    }
}
