//! The byte stream under a broker connection (`connection.rs`): what opens it ([`Transport`],
//! TCP by default) and what TLS (`tls.rs`) and an OAuth token endpoint (`sasl/`) run over. A
//! module of its own below the connection, so that they need nothing of it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite};

/// A byte stream to a broker: TCP, or TLS over TCP.
pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Stream for T {}

/// A boxed future, for the [`Transport`] seam.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// How to open a byte stream to a broker address (TCP by default; tests may put something else
/// here). TLS, when `Security::tls` is set, runs on the stream this opens; SASL, which speaks
/// Kafka frames, goes after the ApiVersions exchange in `BrokerConnection::connect`.
pub trait Transport: Send + Sync + fmt::Debug + 'static {
    /// Opens a stream to `addr` (`host:port`).
    fn connect<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, std::io::Result<Box<dyn Stream>>>;
}

/// Plain TCP, `security.protocol=PLAINTEXT`.
#[derive(Debug, Default, Clone, Copy)]
pub struct TcpTransport;

impl Transport for TcpTransport {
    fn connect<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, std::io::Result<Box<dyn Stream>>> {
        Box::pin(async move {
            let stream = tokio::net::TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            Ok(Box::new(stream) as Box<dyn Stream>)
        })
    }
}
