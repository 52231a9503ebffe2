//! What the tests read from a running strait, in-process or a child process alike: its HTTP
//! API over plain HTTP/1.1 (`GET`, `POST` without a body, JSON, `/metrics` samples) and its log
//! file, polled until something shows.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::prometheus::Metrics;

/// `method path` on `addr`, without a body: status code and body.
pub fn request(addr: SocketAddr, method: &str, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(20)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\
         Connection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no HTTP head in {text:?}")))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status in {head:?}")))?;
    Ok((status, body.to_owned()))
}

/// `GET path` on `addr`: status code and body.
pub fn get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    request(addr, "GET", path)
}

/// `GET path` on `addr`: status code and the body parsed as JSON.
pub fn get_json(addr: SocketAddr, path: &str) -> std::io::Result<(u16, serde_json::Value)> {
    let (status, body) = get(addr, path)?;
    let body =
        serde_json::from_str(&body).map_err(|e| std::io::Error::other(format!("{e}: {body:?}")))?;
    Ok((status, body))
}

/// The current `/metrics` samples on `addr`; empty while it does not answer yet.
pub fn metrics(addr: SocketAddr) -> Metrics {
    match get(addr, "/metrics") {
        Ok((200, text)) => Metrics::parse(&text),
        _ => Metrics::default(),
    }
}

/// Polls `/metrics` on `addr` until `done` holds, for at most `secs` seconds; the last samples.
/// Failing, it shows them and the log at `log`.
pub fn metrics_until(
    addr: SocketAddr,
    log: &Path,
    secs: u64,
    what: &str,
    done: impl Fn(&Metrics) -> bool,
) -> Metrics {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let m = metrics(addr);
        if done(&m) {
            return m;
        }
        assert!(
            Instant::now() < deadline,
            "not within {secs} s: {what}\nmetrics:\n{}\nlog:\n{}",
            m.text,
            log_text(log)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The log at `path` so far (empty before it exists).
pub fn log_text(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Polls the log at `path` until it holds `text`, for at most `secs` seconds; the log then.
pub fn log_until(path: &Path, secs: u64, text: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let log = log_text(path);
        if log.contains(text) {
            return log;
        }
        assert!(
            Instant::now() < deadline,
            "the log does not say {text:?} within {secs} s:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
