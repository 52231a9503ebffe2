//! The runtime's control without a cluster (the quick tier): a [`Runtime`] started in this
//! process on a config whose clusters do not answer, its HTTP API on port 0. Its flow waits for
//! them and can be paused; a flow it does not run is named, through the handle (404 through the
//! API); a file that does not load changes nothing (400); a reload starts the flows added and
//! stops the ones removed; a taken port is refused at start; shutdown ends it at once, also
//! while a worker tries to join its group on the target and a heartbeat writer to connect.

mod running;

use std::time::{Duration, Instant};

use running::{write_properties, Running};
use strait_core::status::FlowState;
use strait_runtime::{ControlError, Error, Options, Requested, Runtime};

/// A loopback port nothing listens on (bound, then let go).
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// The flow `flow` (`A->B` or `B->A`) between two clusters that do not answer, run by this
/// process alone (no workers' group to join on a target that does not answer), with its
/// heartbeat writer waiting for the target too.
fn config_text(flow: &str, port: u16) -> String {
    format!(
        "clusters = A, B\n\
         A.bootstrap.servers = 127.0.0.1:{port}\n\
         B.bootstrap.servers = 127.0.0.1:{port}\n\
         {flow}.enabled = true\n\
         strait.workers.enabled = false\n"
    )
}

/// Waits up to 10 s for `flow` to show one of `states`.
fn wait_state(strait: &Running, flow: &str, states: &[FlowState]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let status = strait.status();
        let now = status.flows.iter().find(|f| f.flow == flow);
        if now.is_some_and(|f| states.contains(&f.state)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{flow} is not {states:?} within 10 s: {now:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_runtime_takes_pause_resume_and_reload_without_a_cluster() {
    let dir = std::env::temp_dir().join(format!("strait-runtime-control-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let port = closed_port();
    let config = write_properties(&dir, "control.properties", &config_text("A->B", port));
    let strait = Running::start_with(&config, dir.join("strait.log"), false);

    let (code, health) = strait.get_json("/healthz").expect("/healthz");
    assert_eq!(code, 200, "{health}");
    assert_eq!(health["flows"], serde_json::json!(["A->B"]));
    // Its flow waits for the clusters, and says so.
    wait_state(&strait, "A->B", &[FlowState::Starting, FlowState::Waiting]);

    // A flow waiting for its clusters pauses at once; resumed, it waits again.
    let asked = strait.pause("A->B").expect("pause");
    assert_eq!((asked.requested, asked.changed), (Requested::Pause, true));
    let again = strait.pause("A->B").expect("pause again");
    assert!(!again.changed, "{again:?}");
    wait_state(&strait, "A->B", &[FlowState::Paused]);
    let asked = strait.resume("A->B").expect("resume");
    assert_eq!((asked.requested, asked.changed), (Requested::Run, true));

    // A flow it does not run is named, with the ones it runs.
    let unknown = strait.pause("X->Y").expect_err("no such flow");
    assert!(
        matches!(&unknown, ControlError::NoFlow { running, .. } if running == &["A->B"]),
        "{unknown:?}"
    );
    assert_eq!(unknown.to_string(), "no flow X->Y; this instance runs A->B");
    let (code, body) = strait.post("/v1/flows/X-%3EY/pause").expect("POST pause");
    assert_eq!(code, 404, "{body}");
    assert!(body.contains("no flow X->Y"), "{body}");

    // A file that does not load changes nothing.
    let good = std::fs::read_to_string(&config).expect("config");
    std::fs::write(&config, format!("{good}A->B.enabled = maybe\n")).expect("write");
    let refused = strait.reload().expect_err("a file that does not load");
    assert!(matches!(refused, ControlError::Reload(_)), "{refused:?}");
    assert!(
        refused.to_string().contains("the flows run on as before"),
        "{refused}"
    );
    let (code, body) = strait.post("/v1/reload").expect("POST reload");
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("enabled"), "{body}");
    assert_eq!(strait.status().flows.len(), 1);

    // B->A instead of A->B: one started, the other stopped and gone from the API.
    std::fs::write(&config, config_text("B->A", port)).expect("write");
    let done = strait.reload().expect("reload");
    assert_eq!(
        (done.started, done.stopped, done.restarted, done.unchanged),
        (
            vec!["B->A".to_owned()],
            vec!["A->B".to_owned()],
            vec![],
            vec![]
        )
    );
    let (_, health) = strait.get_json("/healthz").expect("/healthz");
    assert_eq!(health["flows"], serde_json::json!(["B->A"]));

    // The port it listens on is taken for a second runtime.
    let taken = strait.addr();
    let tokio = tokio::runtime::Runtime::new().expect("tokio");
    let options = Options {
        listen: Some(taken),
        watch_config: false,
        ..Options::default()
    };
    let refused = tokio
        .block_on(Runtime::start(&config, options))
        .expect_err("a taken port");
    assert!(matches!(refused, Error::Listen { .. }), "{refused:?}");
    assert!(!refused.can_retry());
    assert!(
        refused
            .to_string()
            .starts_with(&format!("cannot serve HTTP on {taken}")),
        "{refused}"
    );

    // Shutdown does not wait for clusters that never answered, the heartbeat writer's either.
    let asked = Instant::now();
    strait.shutdown();
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "shutdown took {:?}",
        asked.elapsed()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A flow run by workers (the default) whose target does not answer: its worker keeps trying
/// to join the workers' group, and its heartbeat writer to connect; a shutdown waits for
/// neither (each took its connect's full patience, 10 s and 60 s, before).
#[test]
fn shutdown_does_not_wait_for_a_worker_joining_an_unreachable_target() {
    let dir = std::env::temp_dir().join(format!("strait-runtime-join-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let port = closed_port();
    let text = format!(
        "clusters = A, B\n\
         A.bootstrap.servers = 127.0.0.1:{port}\n\
         B.bootstrap.servers = 127.0.0.1:{port}\n\
         A->B.enabled = true\n"
    );
    let config = write_properties(&dir, "join.properties", &text);
    let strait = Running::start_with(&config, dir.join("strait.log"), false);
    strait.log_until(10, "does not answer");
    let asked = Instant::now();
    strait.shutdown();
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "shutdown took {:?}",
        asked.elapsed()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A cluster that does not answer is said once in the log when it stops answering, not at
/// every attempt (before: a `cannot connect` WARN line at each attempt of each client, about
/// four a second, forever), and `/v1/status` and `/readyz` name the broker, the error and how
/// long it has lasted (before: `last_error: null` once the flow ran).
#[test]
fn a_cluster_that_does_not_answer_is_said_once_and_shown_with_its_cause() {
    let dir = std::env::temp_dir().join(format!("strait-runtime-quiet-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let (a, b) = (closed_port(), closed_port());
    let text = format!(
        "clusters = A, B\n\
         A.bootstrap.servers = 127.0.0.1:{a}\n\
         B.bootstrap.servers = 127.0.0.1:{b}\n\
         A->B.enabled = true\n"
    );
    let config = write_properties(&dir, "quiet.properties", &text);
    let strait = Running::start_with(&config, dir.join("strait.log"), false);
    strait.log_until(10, "does not answer");
    // Attempts go on with backoff (at most a second apart) while the log stays quiet.
    std::thread::sleep(Duration::from_secs(5));
    let log = strait.log_text();
    let warned: Vec<&str> = log
        .lines()
        .filter(|l| {
            l.contains("WARN") && (l.contains(&format!(":{a}")) || l.contains(&format!(":{b}")))
        })
        .collect();
    assert!(
        (1..=2).contains(&warned.len()),
        "one WARN line per broker that does not answer, got {}:\n{}",
        warned.len(),
        warned.join("\n")
    );
    // The worker cannot join its group on B: the flow may not be in the status yet, and
    // `/readyz` names the brokers either way.
    let (code, ready) = strait.get_json("/readyz").expect("/readyz");
    assert_eq!(code, 503);
    let shown: Vec<strait_core::status::Unreachable> =
        serde_json::from_value(ready["flows"][0]["unreachable"].clone()).expect("unreachable");
    let (broker_a, broker_b) = (format!("127.0.0.1:{a}"), format!("127.0.0.1:{b}"));
    assert!(
        shown
            .iter()
            .any(|u| u.cluster == "B" && u.broker == broker_b),
        "{ready}"
    );
    for u in &shown {
        let ours = (u.cluster == "A" && u.broker == broker_a)
            || (u.cluster == "B" && u.broker == broker_b);
        assert!(ours, "{u:?}");
        assert!(u.error.contains("refused"), "{u:?}");
        assert!(
            u.for_seconds >= 4.0,
            "lasted since the first attempt: {u:?}"
        );
        assert!(u.attempts > 1, "{u:?}");
    }
    if let Some(flow) = strait.status().flows.iter().find(|f| f.flow == "A->B") {
        let brokers = |all: &[strait_core::status::Unreachable]| {
            all.iter()
                .map(|u| (u.cluster.clone(), u.broker.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(brokers(&flow.unreachable), brokers(&shown), "{flow:?}");
    }
    strait.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}
