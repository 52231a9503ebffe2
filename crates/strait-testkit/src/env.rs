//! Where the test tools live: the scripts in this repository and the per-machine cache that
//! `scripts/test-broker install` fills (Apache Kafka's jars, the Python venv).

use std::path::PathBuf;

/// `scripts/` at the workspace root.
pub(crate) fn scripts_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("..")
        .join("scripts")
}

/// `$STRAIT_CACHE`, by default `$HOME/.cache/strait` (the same rule as `scripts/test-broker`).
pub(crate) fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("STRAIT_CACHE").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| panic!("HOME is not set"));
    PathBuf::from(home).join(".cache").join("strait")
}

/// The Kafka jars that `scripts/test-broker install` fetches: `$STRAIT_KAFKA_HOME/lib`, else
/// `$STRAIT_CACHE/kafka-<KAFKA_VERSION>/lib`.
pub(crate) fn kafka_lib() -> PathBuf {
    let home = match std::env::var_os("STRAIT_KAFKA_HOME").filter(|p| !p.is_empty()) {
        Some(home) => PathBuf::from(home),
        None => cache_dir().join(format!("kafka-{}", crate::java::KAFKA_VERSION)),
    };
    home.join("lib")
}

/// MirrorMaker 2's jars, which `scripts/test-broker install` fetches: `$STRAIT_MM2_HOME/lib`, else
/// `$STRAIT_CACHE/mm2-<MM2_VERSION>/lib`.
pub(crate) fn mm2_lib() -> PathBuf {
    let home = match std::env::var_os("STRAIT_MM2_HOME").filter(|p| !p.is_empty()) {
        Some(home) => PathBuf::from(home),
        None => cache_dir().join(format!("mm2-{}", crate::java::MM2_VERSION)),
    };
    home.join("lib")
}

/// Panics, saying how to install it, when MirrorMaker 2 is not installed.
pub(crate) fn require_mm2() {
    let jar = mm2_lib().join(format!("connect-mirror-{}.jar", crate::java::MM2_VERSION));
    if !jar.is_file() {
        panic!(
            "MirrorMaker 2 not installed: run scripts/test-broker install (no {})",
            jar.display()
        );
    }
}

/// Panics, saying how to install it, when Kafka is not installed.
pub(crate) fn require_kafka() {
    let jar = kafka_lib().join(format!("kafka_2.13-{}.jar", crate::java::KAFKA_VERSION));
    if !jar.is_file() {
        panic!(
            "Apache Kafka not installed: run scripts/test-broker install (no {})",
            jar.display()
        );
    }
}

/// The venv python that has confluent-kafka: `$STRAIT_TEST_PYTHON`, else the cached venv.
pub(crate) fn python() -> PathBuf {
    match std::env::var_os("STRAIT_TEST_PYTHON").filter(|p| !p.is_empty()) {
        Some(python) => PathBuf::from(python),
        None => cache_dir().join("venv").join("bin").join("python"),
    }
}

/// A new, empty directory `<temp>/<prefix>-<pid>-<n>-<nanos>`, unique across processes and
/// threads.
pub(crate) fn unique_dir(prefix: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::{SystemTime, UNIX_EPOCH};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let base = std::env::temp_dir();
    loop {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("{prefix}-{}-{n}-{nanos:09}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => return dir,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => panic!("cannot create {}: {e}", dir.display()),
        }
    }
}

/// Runs `scripts/<script> stop --dir DIR EXTRA...`, for a fixture's `Drop`: failures are
/// printed, not raised, since a drop must not panic.
pub(crate) fn stop_with_script(script: &str, dir: &std::path::Path, extra: &[&str]) {
    let script = scripts_dir().join(script);
    match std::process::Command::new("bash")
        .arg(&script)
        .arg("stop")
        .arg("--dir")
        .arg(dir)
        .args(extra)
        .output()
    {
        Ok(output) if output.status.success() => {}
        Ok(output) => eprintln!(
            "strait-testkit: {} stop failed ({}): {}",
            script.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ),
        Err(e) => eprintln!("strait-testkit: cannot run {}: {e}", script.display()),
    }
}

/// The last `lines` lines of the log file at `path` (empty if it cannot be read).
pub(crate) fn log_tail(path: &std::path::Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
