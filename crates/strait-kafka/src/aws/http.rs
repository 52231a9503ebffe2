//! The little HTTP/1.1 client the credential chain needs for STS and the machine's credential
//! endpoints (ECS, EC2 instance metadata): one request per connection
//! (`Connection: close`), over TLS (rustls with ring and the system's CAs) for `https://`,
//! plain for `http://` (a local endpoint such as the tests' fake STS).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// The most of an answer read.
const MAX_RESPONSE: usize = 1 << 20;

/// Where a request goes.
#[derive(Debug, Clone, PartialEq)]
pub struct Url {
    /// `https` (else `http`).
    pub https: bool,
    /// The host, without brackets for IPv6.
    pub host: String,
    /// The port.
    pub port: u16,
    /// The path (`/` at least), without the query.
    pub path: String,
}

impl Url {
    /// Parses `http[s]://host[:port][/path]` (a query is refused: the caller adds its own).
    pub fn parse(url: &str) -> Result<Url, String> {
        let bad = || format!("`{url}` is not an http(s) URL");
        let (https, rest) = if let Some(rest) = url.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = url.strip_prefix("http://") {
            (false, rest)
        } else {
            return Err(bad());
        };
        if rest.contains(['?', '#']) {
            return Err(format!("`{url}`: a query or fragment is not expected"));
        }
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let default_port = if https { 443 } else { 80 };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (host, after) = v6.split_once(']').ok_or_else(bad)?;
            let port = match after.strip_prefix(':') {
                Some(p) => p.parse().map_err(|_| bad())?,
                None if after.is_empty() => default_port,
                None => return Err(bad()),
            };
            (host.to_owned(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_owned(), p.parse().map_err(|_| bad())?),
                None => (authority.to_owned(), default_port),
            }
        };
        if host.is_empty() {
            return Err(bad());
        }
        Ok(Url {
            https,
            host,
            port,
            path: path.to_owned(),
        })
    }

    /// The `Host` header: the host, with the port when not the scheme's default.
    pub fn host_header(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == if self.https { 443 } else { 80 } {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }
}

/// An answer: status code and body.
#[derive(Debug)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The body (de-chunked).
    pub body: Vec<u8>,
}

/// Sends `POST` of `body` to `url` with `headers` (`Host`, `Content-Length` and
/// `Connection` are added), within `timeout`.
pub async fn post(
    url: &Url,
    headers: &[(String, String)],
    body: &[u8],
    timeout: Duration,
) -> Result<Response, String> {
    send("POST", url, headers, body, timeout).await
}

/// Sends `method` (`GET`, `PUT`, `POST`) of `body` to `url` with `headers`, within `timeout`.
pub async fn send(
    method: &str,
    url: &Url,
    headers: &[(String, String)],
    body: &[u8],
    timeout: Duration,
) -> Result<Response, String> {
    tokio::time::timeout(timeout, send_inner(method, url, headers, body))
        .await
        .map_err(|_| format!("no answer from {} within {timeout:?}", url.host_header()))?
}

async fn send_inner(
    method: &str,
    url: &Url,
    headers: &[(String, String)],
    body: &[u8],
) -> Result<Response, String> {
    let mut request = format!(
        "{method} {} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        url.path,
        url.host_header(),
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    let mut bytes = request.into_bytes();
    bytes.extend_from_slice(body);
    let where_ = url.host_header();
    let tcp = TcpStream::connect((url.host.as_str(), url.port))
        .await
        .map_err(|e| format!("cannot connect to {where_}: {e}"))?;
    let raw = if url.https {
        let name = rustls::pki_types::ServerName::try_from(url.host.clone())
            .map_err(|e| format!("{}: {e}", url.host))?;
        let tls = tokio_rustls::TlsConnector::from(tls_config()?)
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS with {where_} failed: {e}"))?;
        exchange(tls, &bytes).await
    } else {
        exchange(tcp, &bytes).await
    }
    .map_err(|e| format!("{where_}: {e}"))?;
    parse_response(&raw).map_err(|e| format!("{where_}: {e}"))
}

async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    request: &[u8],
) -> Result<Vec<u8>, String> {
    stream
        .write_all(request)
        .await
        .map_err(|e| format!("cannot send the request: {e}"))?;
    stream.flush().await.map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => {
                raw.extend_from_slice(&buf[..n]);
                if raw.len() > MAX_RESPONSE {
                    return Err("the answer is larger than 1 MiB".into());
                }
            }
            // A server that closes without TLS close_notify has still said everything.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => break,
            Err(e) => return Err(format!("reading the answer failed: {e}")),
        }
    }
    Ok(raw)
}

/// Splits status line, headers and body; de-chunks a chunked body.
fn parse_response(raw: &[u8]) -> Result<Response, String> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("the answer has no complete HTTP header")?;
    let head = String::from_utf8_lossy(&raw[..end]);
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .filter(|_| status_line.starts_with("HTTP/1."))
        .ok_or_else(|| format!("not an HTTP answer: `{status_line}`"))?;
    let mut chunked = false;
    let mut length = None;
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            let value = value.trim();
            if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.eq_ignore_ascii_case("chunked");
            } else if name.eq_ignore_ascii_case("content-length") {
                length = value.parse::<usize>().ok();
            }
        }
    }
    let body = &raw[end + 4..];
    let body = if chunked {
        dechunk(body)?
    } else {
        match length {
            Some(n) if n <= body.len() => body[..n].to_vec(),
            Some(_) => return Err("the answer ends before its Content-Length".into()),
            None => body.to_vec(),
        }
    };
    Ok(Response { status, body })
}

fn dechunk(mut data: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let line_end = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("a chunk has no size line")?;
        let size_text = String::from_utf8_lossy(&data[..line_end]);
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| format!("bad chunk size `{size_text}`"))?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        if data.len() < size {
            return Err("the answer ends inside a chunk".into());
        }
        out.extend_from_slice(&data[..size]);
        data = data.get(size + 2..).unwrap_or_default();
    }
}

fn tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let mut roots = rustls::RootCertStore::empty();
            roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
            if roots.is_empty() {
                return Err("no system CA certificates to verify STS with".into());
            }
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map(|b| Arc::new(b.with_root_certificates(roots).with_no_client_auth()))
                .map_err(|e| e.to_string())
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u = Url::parse("https://sts.us-east-1.amazonaws.com").unwrap();
        assert_eq!(
            (u.https, u.host.as_str(), u.port, u.path.as_str()),
            (true, "sts.us-east-1.amazonaws.com", 443, "/")
        );
        assert_eq!(u.host_header(), "sts.us-east-1.amazonaws.com");
        let u = Url::parse("http://127.0.0.1:4566/x").unwrap();
        assert_eq!(u.host_header(), "127.0.0.1:4566");
        assert_eq!(u.path, "/x");
        let u = Url::parse("http://[::1]:80").unwrap();
        assert_eq!(
            (u.host.as_str(), u.host_header().as_str()),
            ("::1", "[::1]")
        );
        assert!(Url::parse("ftp://x").is_err());
        assert!(Url::parse("https://x/?a=b").is_err());
    }

    #[test]
    fn responses() {
        let r = parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcdef").unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"abc"[..]));
        let r = parse_response(
            b"HTTP/1.1 403 Forbidden\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x\r\nde\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!((r.status, r.body.as_slice()), (403, &b"abcde"[..]));
        assert!(parse_response(b"garbage").is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nab").is_err());
    }
}
