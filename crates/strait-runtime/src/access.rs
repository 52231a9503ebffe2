//! Who may control a runtime over HTTP (`docs/security.md`, "The HTTP API"): the requests that
//! change something (`POST /v1/flows/{flow}/pause|resume`, `POST /v1/reload`) pass through
//! [`guard`]; the reads do not.
//!
//! - A request from a browser is refused (403), token or not: one with an `Origin` header (every
//!   cross-origin request a page makes carries one), or with a form's content type
//!   (`application/x-www-form-urlencoded`, `multipart/form-data`, `text/plain`, which a page may
//!   send anywhere without asking first). A command line client sends neither.
//! - With a [`ControlToken`], a request must carry it (`Authorization: Bearer <token>`,
//!   compared in constant time), else 401 with `WWW-Authenticate: Bearer`.
//! - Without one, control is open on a loopback address (only this host reaches it: the
//!   default `127.0.0.1:9876`), and refused (403, saying how to give a token) on any other.
//!
//! Each control request is logged at info, with its caller (peer address, whether it carried
//! the token), what it asked and the answer's status.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use subtle::ConstantTimeEq as _;

/// The shortest token taken: a guessable token is no lock.
const MIN_TOKEN_LEN: usize = 16;

/// The bearer token control requests must carry. Its `Debug` does not show it.
#[derive(Clone)]
pub struct ControlToken(Arc<str>);

impl std::fmt::Debug for ControlToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ControlToken([redacted])")
    }
}

/// Why a token is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum BadToken {
    /// Shorter than [`MIN_TOKEN_LEN`] characters (after the whitespace around it is trimmed).
    #[error(
        "the control token has {len} characters; give at least {MIN_TOKEN_LEN} (e.g. `openssl \
         rand -hex 32`)"
    )]
    TooShort {
        /// Its length.
        len: usize,
    },
    /// A character that cannot travel in an `Authorization` header as it is.
    #[error(
        "the control token holds a space, a control or a non-ASCII character; use letters, \
         digits and -._~+/="
    )]
    Character,
}

impl ControlToken {
    /// `value` without the whitespace around it (a file's last newline): printable ASCII
    /// without spaces, at least 16 characters.
    pub fn new(value: &str) -> Result<ControlToken, BadToken> {
        let value = value.trim();
        if !value.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(BadToken::Character);
        }
        if value.len() < MIN_TOKEN_LEN {
            return Err(BadToken::TooShort { len: value.len() });
        }
        Ok(ControlToken(Arc::from(value)))
    }

    /// The token itself, for a client to send (`strait flow`, `strait reload`).
    pub fn secret(&self) -> &str {
        &self.0
    }

    /// Whether `given` is this token, in a time that does not depend on where they differ.
    fn matches(&self, given: &[u8]) -> bool {
        bool::from(self.0.as_bytes().ct_eq(given))
    }
}

/// Who may send control requests to one listener.
#[derive(Debug, Clone)]
pub(crate) enum Access {
    /// Requests must carry this token.
    Token(ControlToken),
    /// No token: anyone who reaches the (loopback) address.
    Loopback,
    /// No token on an address others reach: no control over HTTP.
    ReadOnly,
}

impl Access {
    /// The access of a listener bound to `addr` with `token`.
    pub(crate) fn new(addr: SocketAddr, token: Option<ControlToken>) -> Access {
        match token {
            Some(token) => Access::Token(token),
            None if addr.ip().is_loopback() => Access::Loopback,
            None => Access::ReadOnly,
        }
    }
}

/// A refusal, as `{"error": "..."}`.
fn refuse(code: StatusCode, message: &str) -> Response {
    let mut answer = (code, Json(json!({ "error": message }))).into_response();
    if code == StatusCode::UNAUTHORIZED {
        answer.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer realm=\"strait\""),
        );
    }
    answer
}

/// Why a request is refused before its token is looked at: it came from a browser.
fn from_a_browser(headers: &HeaderMap) -> Option<&'static str> {
    if headers.contains_key(header::ORIGIN) {
        return Some(
            "a request with an Origin header (from a web page) may not pause, resume or reload \
             strait; send it without one, e.g. with `strait flow` or `strait reload`",
        );
    }
    let form = headers
        .get_all(header::CONTENT_TYPE)
        .iter()
        .any(|value| match value.to_str() {
            Ok(value) => {
                let media = value.split(';').next().unwrap_or_default().trim();
                [
                    "application/x-www-form-urlencoded",
                    "multipart/form-data",
                    "text/plain",
                ]
                .iter()
                .any(|form| media.eq_ignore_ascii_case(form))
            }
            // Bytes a form would not send; not a form either.
            Err(_) => false,
        });
    form.then_some(
        "a form's content type (application/x-www-form-urlencoded, multipart/form-data, \
         text/plain) may not pause, resume or reload strait; send no body, or application/json",
    )
}

/// Whether `headers` carry `token` as `Authorization: Bearer <token>`.
fn carries(headers: &HeaderMap, token: &ControlToken) -> bool {
    headers.get_all(header::AUTHORIZATION).iter().any(|value| {
        let value = value.as_bytes();
        let scheme = b"bearer ";
        value.len() > scheme.len()
            && value[..scheme.len()].eq_ignore_ascii_case(scheme)
            && token.matches(value[scheme.len()..].trim_ascii())
    })
}

/// The middleware of every control route: refuses what [`Access`] does not let through, and
/// logs each request with its caller and its answer.
pub(crate) async fn guard(State(access): State<Access>, request: Request, next: Next) -> Response {
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(peer)| peer.to_string())
        .unwrap_or_else(|| "unknown".to_owned());
    let asked = format!("{} {}", request.method(), request.uri().path());
    let headers = request.headers();
    let authenticated = match &access {
        Access::Token(token) => carries(headers, token),
        Access::Loopback | Access::ReadOnly => false,
    };
    let refused = if let Some(why) = from_a_browser(headers) {
        Some(refuse(StatusCode::FORBIDDEN, why))
    } else {
        match &access {
            Access::Token(_) if authenticated => None,
            Access::Token(_) => Some(refuse(
                StatusCode::UNAUTHORIZED,
                "pause, resume and reload need the control token: send `Authorization: Bearer \
                 <token>` (`strait flow` and `strait reload` send it with \
                 --control-token-file FILE or STRAIT_CONTROL_TOKEN)",
            )),
            Access::Loopback => None,
            Access::ReadOnly => Some(refuse(
                StatusCode::FORBIDDEN,
                "this strait listens on an address other hosts reach and has no control token: \
                 it serves reads only. Give `strait run` a token (--control-token-file FILE, or \
                 STRAIT_CONTROL_TOKEN) to pause, resume and reload over HTTP",
            )),
        }
    };
    let answer = match refused {
        Some(answer) => answer,
        None => next.run(request).await,
    };
    tracing::info!(
        peer = %peer,
        authenticated,
        request = %asked,
        status = answer.status().as_u16(),
        "control request"
    );
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_trimmed_long_and_plain() {
        let token = ControlToken::new("0123456789abcdef\n").expect("a token");
        assert!(token.matches(b"0123456789abcdef"));
        assert!(!token.matches(b"0123456789abcdeF"));
        assert!(!token.matches(b"0123456789abcde"));
        assert_eq!(
            ControlToken::new("short").unwrap_err(),
            BadToken::TooShort { len: 5 }
        );
        assert_eq!(
            ControlToken::new("0123456789 abcdef").unwrap_err(),
            BadToken::Character
        );
        assert_eq!(format!("{token:?}"), "ControlToken([redacted])");
    }

    #[test]
    fn the_bearer_scheme_is_read_whatever_its_case() {
        let token = ControlToken::new("0123456789abcdef").expect("a token");
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            "bearer 0123456789abcdef".parse().expect("a value"),
        );
        assert!(carries(&headers, &token));
        headers.insert(
            header::AUTHORIZATION,
            "Basic 0123456789abcdef".parse().expect("a value"),
        );
        assert!(!carries(&headers, &token));
        headers.insert(header::AUTHORIZATION, "Bearer ".parse().expect("a value"));
        assert!(!carries(&headers, &token));
    }

    #[test]
    fn form_types_are_browsers_whatever_their_parameters() {
        let mut headers = HeaderMap::new();
        assert_eq!(from_a_browser(&headers), None);
        headers.insert(
            header::CONTENT_TYPE,
            "Text/Plain; charset=utf-8".parse().expect("a value"),
        );
        assert!(from_a_browser(&headers).is_some());
        headers.insert(
            header::CONTENT_TYPE,
            "application/json".parse().expect("a value"),
        );
        assert_eq!(from_a_browser(&headers), None);
        headers.insert(header::ORIGIN, "null".parse().expect("a value"));
        assert!(from_a_browser(&headers).is_some());
    }
}
