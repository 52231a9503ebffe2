//! Where the test tools live: the scripts in this repository and the per-machine cache that
//! `scripts/test-broker install` fills.

use std::path::PathBuf;

/// `scripts/` at the workspace root.
pub(crate) fn scripts_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("..")
        .join("scripts")
}

/// `$STRAIT_CACHE`, by default `$HOME/.cache/strait` (the same rule as `scripts/test-broker`).
fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("STRAIT_CACHE").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| panic!("HOME is not set"));
    PathBuf::from(home).join(".cache").join("strait")
}

/// The broker binary: `$STRAIT_TEST_BROKER_BIN`, else the cached nisshi build.
pub(crate) fn broker_bin() -> PathBuf {
    match std::env::var_os("STRAIT_TEST_BROKER_BIN").filter(|p| !p.is_empty()) {
        Some(bin) => PathBuf::from(bin),
        None => cache_dir().join("nisshi-0.8.1").join("bin").join("nisshi"),
    }
}

/// The venv python that has confluent-kafka: `$STRAIT_TEST_PYTHON`, else the cached venv.
pub(crate) fn python() -> PathBuf {
    match std::env::var_os("STRAIT_TEST_PYTHON").filter(|p| !p.is_empty()) {
        Some(python) => PathBuf::from(python),
        None => cache_dir().join("venv").join("bin").join("python"),
    }
}
