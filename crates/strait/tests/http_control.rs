//! What the binary adds to the runtime's HTTP control, without a cluster (the quick tier):
//! `strait flow` and `strait reload` send the control token `strait run` was given
//! (`--control-token-file`, `STRAIT_CONTROL_TOKEN`), and are refused without it; a second
//! SIGTERM while `strait run` stops exits at once, with 130; a single one waits for a half-sent
//! HTTP request no longer than the server's grace.

mod running;

use std::io::Write as _;
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use running::{run_to_end, write_properties, Strait};

const TOKEN: &str = "token-of-the-test-0123456789";

/// A directory of the test's own and a config in it: `A->B` between clusters that do not
/// answer (its flow waits for them), run by this process alone.
fn config(name: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("strait-http-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let port = running::free_port();
    let text = format!(
        "clusters = A, B\n\
         A.bootstrap.servers = 127.0.0.1:{port}\n\
         B.bootstrap.servers = 127.0.0.1:{port}\n\
         A->B.enabled = true\n\
         strait.workers.enabled = false\n"
    );
    let config = write_properties(&dir, "control.properties", &text);
    (dir, config)
}

#[test]
fn flow_and_reload_send_the_control_token() {
    let (dir, config) = config("token");
    let token_file = dir.join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).expect("token file");
    let token_path = token_file.to_str().expect("utf-8 path");
    let strait = Strait::run_with(
        &config,
        dir.join("strait.log"),
        &["--control-token-file", token_path],
    );
    strait.log_until(30, "HTTP API listening");
    let url = strait.url();

    let refused = run_to_end(&dir, &["flow", "pause", "A->B", "--url", &url], &[]);
    assert!(!refused.ok(), "{}", refused.both());
    assert!(
        refused.stderr.contains("control token"),
        "{}",
        refused.both()
    );

    let paused = run_to_end(
        &dir,
        &[
            "flow",
            "pause",
            "A->B",
            "--url",
            &url,
            "--control-token-file",
            token_path,
        ],
        &[],
    );
    assert!(paused.ok(), "{}", paused.both());
    assert!(paused.stdout.contains("A->B: paused"), "{}", paused.both());

    let reloaded = run_to_end(
        &dir,
        &["reload", "--url", &url],
        &[("STRAIT_CONTROL_TOKEN", TOKEN)],
    );
    assert!(reloaded.ok(), "{}", reloaded.both());
    assert!(reloaded.stdout.contains("unchanged"), "{}", reloaded.both());

    // A token too short to be one is refused before anything is sent.
    let short = run_to_end(
        &dir,
        &["reload", "--url", &url],
        &[("STRAIT_CONTROL_TOKEN", "abc")],
    );
    assert_eq!(short.code(), Some(1), "{}", short.both());
    assert!(short.stderr.contains("at least 16"), "{}", short.both());

    let log = strait.log_text();
    assert!(
        log.contains("control request") && log.contains("authenticated=true"),
        "{log}"
    );
    assert!(!log.contains(TOKEN), "the token reached the log:\n{log}");
    strait.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The first SIGTERM starts a graceful stop, which waits (up to 5 s) for an HTTP connection
/// that sent half a request; a second SIGTERM ends the process at once.
#[test]
fn a_second_sigterm_exits_at_once() {
    let (dir, config) = config("sigterm");
    let mut strait = Strait::run(&config, dir.join("strait.log"));
    strait.log_until(30, "HTTP API listening");
    let mut half = TcpStream::connect(("127.0.0.1", strait.port)).expect("connect");
    half.write_all(b"GET /healthz HTTP/1.1\r\n").expect("write");
    std::thread::sleep(Duration::from_millis(200));

    strait.signal("TERM");
    strait.log_until(10, "stopping");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        strait.wait_exit(1).is_none(),
        "the stop did not wait for the open connection: the test shows nothing\n{}",
        strait.log_text()
    );
    let second = Instant::now();
    strait.signal("TERM");
    let status = strait.wait_exit(3).unwrap_or_else(|| {
        panic!(
            "strait still runs 3 s after a second SIGTERM:\n{}",
            strait.log_text()
        )
    });
    assert!(
        second.elapsed() < Duration::from_secs(2),
        "{:?}",
        second.elapsed()
    );
    assert_eq!(status.code(), Some(130), "{}", strait.log_text());
    assert!(
        strait.log_text().contains("a second stop signal"),
        "{}",
        strait.log_text()
    );
    drop(half);
    let _ = std::fs::remove_dir_all(&dir);
}

/// One SIGTERM with a half-sent HTTP request open: the stop waits for it at most its 5 s grace
/// and exits 0 (it waited for the connection for 91 s before).
#[test]
fn one_sigterm_stops_despite_a_half_sent_request() {
    let (dir, config) = config("grace");
    let mut strait = Strait::run(&config, dir.join("strait.log"));
    strait.log_until(30, "HTTP API listening");
    let mut half = TcpStream::connect(("127.0.0.1", strait.port)).expect("connect");
    half.write_all(b"GET /healthz HTTP/1.1\r\n").expect("write");
    std::thread::sleep(Duration::from_millis(200));
    let asked = Instant::now();
    strait.signal("TERM");
    let status = strait.wait_exit(20).unwrap_or_else(|| {
        panic!(
            "strait still runs 20 s after SIGTERM:\n{}",
            strait.log_text()
        )
    });
    assert!(
        asked.elapsed() < Duration::from_secs(8),
        "{:?}",
        asked.elapsed()
    );
    assert_eq!(status.code(), Some(0), "{}", strait.log_text());
    drop(half);
    let _ = std::fs::remove_dir_all(&dir);
}
