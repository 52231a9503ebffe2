//! Who may control a runtime over HTTP, and what no client can do to its server, without a
//! cluster (the quick tier): a [`Runtime`] in this process on a config whose clusters do not
//! answer. With a control token, pause needs it (401 without, with `WWW-Authenticate: Bearer`);
//! a browser's request (an `Origin` header, a form's content type) is refused, token or not;
//! without a token, control is open on loopback and refused beyond it, where reads still
//! answer; a half-sent request is closed at the header timeout and does not hold a shutdown;
//! connections past the cap are closed (`docs/security.md`, "The HTTP API"; the answer
//! timeouts are tested in `src/server.rs`, with a handler slow on purpose). The log is the
//! process's: run under nextest (a process per test) or with `--test-threads=1`.

mod running;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use running::{write_properties, Running};
use strait_runtime::{ControlToken, HttpLimits, Options};

const TOKEN: &str = "s3cret-token-0123456789";
const PAUSE: &str = "/v1/flows/A-%3EB/pause";

/// A loopback port nothing listens on (bound, then let go).
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A directory of the test's own and a config in it: `A->B` between clusters that do not
/// answer, run by this process alone.
fn config(name: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("strait-access-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let port = closed_port();
    let text = format!(
        "clusters = A, B\n\
         A.bootstrap.servers = 127.0.0.1:{port}\n\
         B.bootstrap.servers = 127.0.0.1:{port}\n\
         A->B.enabled = true\n\
         strait.workers.enabled = false\n"
    );
    let config = write_properties(&dir, "access.properties", &text);
    (dir, config)
}

/// Starts a runtime on `config` listening on `listen` (port 0) with `token` and `limits`.
fn start(
    dir: &std::path::Path,
    config: &std::path::Path,
    listen: [u8; 4],
    token: Option<&str>,
    limits: HttpLimits,
) -> Running {
    let options = Options {
        listen: Some(SocketAddr::from((listen, 0))),
        watch_config: false,
        control_token: token.map(|t| ControlToken::new(t).expect("a good token")),
        http: limits,
    };
    Running::start_options(config, dir.join("strait.log"), options)
}

/// The loopback address of a runtime's port, whatever address it is bound to.
fn loopback(strait: &Running) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], strait.addr().port()))
}

/// An answer: status code, head (lower-cased) and body.
struct Answer {
    code: u16,
    head: String,
    body: String,
}

impl Answer {
    /// The body's `error`, which every refusal must have.
    fn error(&self) -> String {
        let value: serde_json::Value = serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("{e}: not JSON: {:?}", self.body));
        value["error"]
            .as_str()
            .unwrap_or_else(|| panic!("no error in {:?}", self.body))
            .to_owned()
    }
}

/// `POST path` on `addr` with `headers` (each `Name: value`) and `body`.
fn post(addr: SocketAddr, path: &str, headers: &[&str], body: &str) -> Answer {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let mut request = format!("POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    for header in headers {
        request.push_str(header);
        request.push_str("\r\n");
    }
    request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(request.as_bytes()).expect("write");
    let mut text = String::new();
    stream.read_to_string(&mut text).expect("read the answer");
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP answer");
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status code");
    Answer {
        code,
        head: head.to_ascii_lowercase(),
        body: body.to_owned(),
    }
}

#[test]
fn control_needs_the_token_and_refuses_browsers() {
    let (dir, config) = config("token");
    let strait = start(
        &dir,
        &config,
        [127, 0, 0, 1],
        Some(TOKEN),
        HttpLimits::default(),
    );
    let addr = strait.addr();
    let bearer = format!("Authorization: Bearer {TOKEN}");

    let without = post(addr, PAUSE, &[], "");
    assert_eq!(without.code, 401, "{}", without.body);
    assert!(
        without.head.contains("www-authenticate: bearer"),
        "{}",
        without.head
    );
    assert!(
        without.error().contains("control token"),
        "{}",
        without.body
    );
    let wrong = post(
        addr,
        PAUSE,
        &["Authorization: Bearer s3cret-token-0123456780"],
        "",
    );
    assert_eq!(wrong.code, 401, "{}", wrong.body);
    assert_eq!(post(addr, "/v1/reload", &[], "").code, 401);
    // Nothing was paused by the refused requests.
    assert!(
        strait
            .status()
            .flows
            .iter()
            .all(|f| f.state != strait_core::status::FlowState::Paused),
        "{:?}",
        strait.status()
    );

    let with = post(addr, PAUSE, &[&bearer], "");
    assert_eq!(with.code, 200, "{}", with.body);
    assert!(with.body.contains("\"changed\":true"), "{}", with.body);

    // A web page's request, even one that carries the token.
    let page = post(addr, PAUSE, &[&bearer, "Origin: http://evil.example"], "");
    assert_eq!(page.code, 403, "{}", page.body);
    assert!(page.error().contains("Origin"), "{}", page.body);
    let form = post(
        addr,
        "/v1/flows/A-%3EB/resume",
        &[&bearer, "Content-Type: application/x-www-form-urlencoded"],
        "a=b",
    );
    assert_eq!(form.code, 403, "{}", form.body);
    assert!(form.error().contains("content type"), "{}", form.body);

    // Reads need no token.
    let (code, body) = strait.get("/healthz").expect("/healthz");
    assert_eq!(code, 200, "{body}");

    // Who asked what, and whether it was let through.
    let log = strait.log_until(5, "authenticated=true");
    let line = log
        .lines()
        .find(|l| l.contains("control request") && l.contains("authenticated=true"))
        .unwrap_or_else(|| panic!("no control request line:\n{log}"));
    assert!(
        line.contains("peer=127.0.0.1:") && line.contains("POST /v1/flows/A-%3EB/pause"),
        "{line}"
    );
    assert!(
        log.lines()
            .any(|l| l.contains("control request") && l.contains("status=401")),
        "{log}"
    );
    assert!(!log.contains(TOKEN), "the token reached the log:\n{log}");
    strait.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn without_a_token_control_is_open_on_loopback_only() {
    let (dir, config) = config("loopback");
    let strait = start(&dir, &config, [127, 0, 0, 1], None, HttpLimits::default());
    let addr = strait.addr();
    // A browser's form is refused on loopback too (a page reaches 127.0.0.1 from the
    // browser's host).
    let form = post(addr, PAUSE, &["Content-Type: text/plain"], "x");
    assert_eq!(form.code, 403, "{}", form.body);
    let page = post(addr, PAUSE, &["Origin: http://evil.example"], "");
    assert_eq!(page.code, 403, "{}", page.body);
    // A command line client's request goes through, as before.
    let plain = post(addr, PAUSE, &[], "");
    assert_eq!(plain.code, 200, "{}", plain.body);
    strait.shutdown();

    let strait = start(&dir, &config, [0, 0, 0, 0], None, HttpLimits::default());
    let addr = loopback(&strait);
    strait.log_until(5, "serves reads only");
    for path in [PAUSE, "/v1/flows/A-%3EB/resume", "/v1/reload"] {
        let refused = post(addr, path, &[], "");
        assert_eq!(refused.code, 403, "{path}: {}", refused.body);
        assert!(
            refused.error().contains("--control-token-file"),
            "{path}: {}",
            refused.body
        );
    }
    let (code, body) = running::get(addr, "/healthz").expect("/healthz");
    assert_eq!(code, 200, "{body}");
    strait.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Connects to `addr` and sends the first line of a request, and nothing more.
fn half_sent(addr: SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\n")
        .expect("write");
    stream
}

/// Whether the server closed `stream` within `secs` seconds (it reads nothing more).
fn closed_within(stream: &mut TcpStream, secs: u64) -> bool {
    stream
        .set_read_timeout(Some(Duration::from_secs(secs)))
        .expect("timeout");
    let mut buf = [0_u8; 512];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            // hyper may answer 408 before it closes.
            Ok(_) => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return false;
            }
            Err(_) => return true,
        }
    }
}

#[test]
fn a_half_sent_request_is_closed_at_the_header_timeout() {
    let (dir, config) = config("header");
    let limits = HttpLimits {
        header_read_timeout: Duration::from_secs(1),
        ..HttpLimits::default()
    };
    let strait = start(&dir, &config, [127, 0, 0, 1], None, limits);
    let mut stream = half_sent(strait.addr());
    let sent = Instant::now();
    assert!(
        closed_within(&mut stream, 10),
        "a half-sent request is still open after {:?}",
        sent.elapsed()
    );
    assert!(
        sent.elapsed() < Duration::from_secs(5),
        "{:?}",
        sent.elapsed()
    );
    strait.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_half_sent_request_does_not_hold_a_shutdown() {
    let (dir, config) = config("shutdown");
    // The default limits: the header timeout (10 s) is longer than the shutdown's grace (5 s).
    let strait = start(&dir, &config, [127, 0, 0, 1], None, HttpLimits::default());
    let _stream = half_sent(strait.addr());
    std::thread::sleep(Duration::from_millis(200));
    let asked = Instant::now();
    let (done, stopped) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        strait.shutdown();
        let _ = done.send(());
    });
    assert!(
        stopped.recv_timeout(Duration::from_secs(20)).is_ok(),
        "the shutdown still waits for a half-sent request after 20 s"
    );
    assert!(
        asked.elapsed() < Duration::from_secs(8),
        "shutdown took {:?}",
        asked.elapsed()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn connections_past_the_cap_are_closed() {
    let (dir, config) = config("cap");
    let limits = HttpLimits {
        max_connections: 2,
        ..HttpLimits::default()
    };
    let strait = start(&dir, &config, [127, 0, 0, 1], None, limits);
    let addr = strait.addr();
    let first = TcpStream::connect(addr).expect("connect");
    let _second = TcpStream::connect(addr).expect("connect");
    std::thread::sleep(Duration::from_millis(300));
    let mut third = TcpStream::connect(addr).expect("connect");
    assert!(closed_within(&mut third, 5), "a third connection is served");
    // One of the two closed, a new one is served.
    drop(first);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match running::get(addr, "/healthz") {
            Ok((200, _)) => break,
            other => assert!(
                Instant::now() < deadline,
                "no connection served after one of two closed: {other:?}"
            ),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    strait.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}
