//! The cap on open connections (both listeners share it): a connection
//! holds a slot from its accept to its close, and one accepted while every
//! slot is taken is refused at once, so idle or slow clients cannot use up
//! the process's file descriptors and lock everyone else out.

use crate::metrics::Metrics;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Slots for the connections open at once.
#[derive(Debug, Clone)]
pub struct ConnectionLimit {
    slots: Arc<Semaphore>,
    metrics: Arc<Metrics>,
}

/// A connection holding its slot (and counted open) until dropped.
#[derive(Debug)]
pub struct Counted<S> {
    inner: S,
    _slot: Slot,
}

#[derive(Debug)]
struct Slot {
    _permit: OwnedSemaphorePermit,
    metrics: Arc<Metrics>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.metrics.connections_open.dec();
    }
}

impl ConnectionLimit {
    pub fn new(max: usize, metrics: Arc<Metrics>) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(max.max(1))),
            metrics,
        }
    }

    /// `stream` holding a slot, or `Err(stream)` (counted as refused on
    /// `transport`) when none is free.
    pub fn admit<S>(&self, stream: S, transport: &str) -> Result<Counted<S>, S> {
        match Arc::clone(&self.slots).try_acquire_owned() {
            Ok(permit) => {
                self.metrics.connections_open.inc();
                Ok(Counted {
                    inner: stream,
                    _slot: Slot {
                        _permit: permit,
                        metrics: Arc::clone(&self.metrics),
                    },
                })
            }
            Err(_) => {
                self.metrics
                    .connections_refused
                    .with_label_values(&[transport])
                    .inc();
                Err(stream)
            }
        }
    }
}

impl<S> Counted<S> {
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl tonic::transport::server::Connected for Counted<tokio::net::TcpStream> {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}
