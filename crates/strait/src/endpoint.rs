//! The HTTP API of a running `strait run`, as the commands that talk to it reach it
//! (`strait status`, `strait flow pause|resume`, `strait reload`): one request per connection,
//! HTTP/1.0, so an answer ends when the connection closes and is never chunked, with the
//! control token when one is given; an error answer's message ([`error_of`]).

use anyhow::{anyhow, bail, Context as _};
use serde_json::Value;
use std::time::Duration;
use strait_core::status::StatusReport;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// How long to wait for the instance to answer a read.
const TIMEOUT: Duration = Duration::from_secs(5);

/// Where the instance answers: `http://HOST:PORT[/prefix]`.
#[derive(Debug)]
pub(crate) struct Endpoint {
    pub(crate) url: String,
    /// `HOST:PORT`.
    authority: String,
    /// The path before `/v1/...`, without a trailing slash.
    prefix: String,
    /// Sent as `Authorization: Bearer` with every request, when given.
    token: Option<strait_runtime::ControlToken>,
}

impl Endpoint {
    pub(crate) fn parse(url: &str) -> anyhow::Result<Self> {
        let rest = if let Some(rest) = url.strip_prefix("http://") {
            rest
        } else if url.starts_with("https://") {
            bail!("{url}: strait's HTTP API is plain HTTP; give http://HOST:PORT");
        } else if url.contains("://") {
            bail!("{url}: give http://HOST:PORT");
        } else {
            url
        };
        let (authority, prefix) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        if authority.is_empty() {
            bail!("{url}: no host; give http://HOST:PORT");
        }
        let has_port = authority
            .rsplit_once(':')
            .is_some_and(|(_, p)| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            && !authority.ends_with(']');
        let authority = if has_port {
            authority.to_owned()
        } else {
            format!("{authority}:80")
        };
        Ok(Self {
            url: url.trim_end_matches('/').to_owned(),
            authority,
            prefix: prefix.to_owned(),
            token: None,
        })
    }

    /// The same endpoint, its requests carrying `token` (the control requests need it when the
    /// instance has one).
    pub(crate) fn with_token(mut self, token: Option<strait_runtime::ControlToken>) -> Self {
        self.token = token;
        self
    }

    /// `GET /v1/status`, or an error that says what is (not) there.
    pub(crate) async fn status(&self) -> anyhow::Result<StatusReport> {
        let answer = self.call("GET", "/v1/status", TIMEOUT).await?;
        parse_status(&self.url, &answer)
    }

    /// `method path` (the path after the prefix, e.g. `/v1/reload`); the answer's status code
    /// and body. Waits `timeout` for the answer: a pause or a reload answers once done.
    pub(crate) async fn request(
        &self,
        method: &str,
        path: &str,
        timeout: Duration,
    ) -> anyhow::Result<(u16, String)> {
        let answer = self.call(method, path, timeout).await?;
        split_answer(&answer)
            .map(|(code, body)| (code, body.to_owned()))
            .ok_or_else(|| {
                anyhow!(
                    "{} did not answer in HTTP: is it a strait instance's --listen address?",
                    self.url
                )
            })
    }

    async fn call(&self, method: &str, path: &str, timeout: Duration) -> anyhow::Result<Vec<u8>> {
        let connect = tokio::net::TcpStream::connect(&self.authority);
        let mut stream = match tokio::time::timeout(TIMEOUT, connect).await {
            Err(_) => bail!(
                "no strait instance answers at {}: no connection within {} s",
                self.url,
                TIMEOUT.as_secs()
            ),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => bail!(
                "no strait instance is running at {}: nothing listens on {} (connection \
                 refused). Start one with `strait run --config FILE` (its HTTP API listens on \
                 127.0.0.1:9876 by default), or give its address with --url",
                self.url,
                self.authority
            ),
            Ok(Err(e)) => {
                return Err(anyhow!(e))
                    .with_context(|| format!("cannot reach a strait instance at {}", self.url))
            }
            Ok(Ok(s)) => s,
        };
        let authorization = self
            .token
            .as_ref()
            .map(|t| format!("Authorization: Bearer {}\r\n", t.secret()))
            .unwrap_or_default();
        let request = format!(
            "{method} {}{path} HTTP/1.0\r\nHost: {}\r\nAccept: application/json\r\n\
             {authorization}Content-Length: 0\r\n\r\n",
            self.prefix, self.authority
        );
        let mut answer = Vec::new();
        let exchange = async {
            stream.write_all(request.as_bytes()).await?;
            stream.read_to_end(&mut answer).await
        };
        match tokio::time::timeout(timeout, exchange).await {
            Err(_) => bail!(
                "{} accepted the connection but sent no answer within {} s",
                self.url,
                timeout.as_secs()
            ),
            Ok(Err(e)) => {
                return Err(anyhow!(e))
                    .with_context(|| format!("reading the answer of {}", self.url))
            }
            Ok(Ok(_)) => {}
        }
        Ok(answer)
    }
}

/// What a path segment escapes: all but RFC 3986's unreserved characters.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// A flow's name as one path segment: `A->B` as `A-%3EB`.
pub(crate) fn path_segment(name: &str) -> String {
    percent_encoding::utf8_percent_encode(name, SEGMENT).to_string()
}

/// The `{"error": ...}` of an answer, or the answer.
pub(crate) fn error_of(code: u16, body: &str) -> String {
    match serde_json::from_str::<Value>(body) {
        Ok(v) if v["error"].is_string() => v["error"].as_str().unwrap_or_default().to_owned(),
        _ => format!("answered {code}: {}", body.trim()),
    }
}

/// A raw HTTP answer's status code and body.
fn split_answer(answer: &[u8]) -> Option<(u16, &str)> {
    let text = std::str::from_utf8(answer).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, body))
}

/// The status from a raw HTTP answer.
fn parse_status(url: &str, answer: &[u8]) -> anyhow::Result<StatusReport> {
    let Some((code, body)) = split_answer(answer) else {
        bail!("{url} did not answer in HTTP: is it a strait instance's --listen address?");
    };
    match code {
        200 => serde_json::from_str(body)
            .with_context(|| format!("{url}/v1/status did not answer a strait status")),
        404 => bail!(
            "{url} has no /v1/status: it is not a strait instance, or one older than this \
             command"
        ),
        _ => bail!("{url}/v1/status answered {code}: {}", body.trim()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_host_port_and_prefix() {
        let e = Endpoint::parse("http://127.0.0.1:9876").unwrap();
        assert_eq!(
            (e.authority.as_str(), e.prefix.as_str()),
            ("127.0.0.1:9876", "")
        );
        let e = Endpoint::parse("mirror.internal/strait/").unwrap();
        assert_eq!(
            (e.authority.as_str(), e.prefix.as_str()),
            ("mirror.internal:80", "/strait")
        );
        let e = Endpoint::parse("http://[::1]:9000").unwrap();
        assert_eq!(e.authority, "[::1]:9000");
        assert!(Endpoint::parse("https://x:1").is_err());
        assert!(Endpoint::parse("http://").is_err());
    }

    #[test]
    fn a_non_strait_answer_is_named() {
        let e = parse_status("http://h:1", b"HTTP/1.0 404 Not Found\r\n\r\n").unwrap_err();
        assert!(e.to_string().contains("no /v1/status"), "{e}");
        let e = parse_status("http://h:1", b"SSH-2.0-OpenSSH").unwrap_err();
        assert!(e.to_string().contains("did not answer in HTTP"), "{e}");
        let ok = parse_status("http://h:1", b"HTTP/1.0 200 OK\r\n\r\n{\"flows\":[]}").unwrap();
        assert!(ok.flows.is_empty());
    }

    #[test]
    fn flow_names_travel_as_one_segment() {
        assert_eq!(path_segment("us-east->eu_west"), "us-east-%3Eeu_west");
        assert_eq!(path_segment("a b/c"), "a%20b%2Fc");
    }
}
