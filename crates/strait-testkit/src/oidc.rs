//! A real OpenID Connect token server for the OAUTHBEARER tests: NAV's `mock-oauth2-server`
//! (from Maven Central, installed by `scripts/test-broker install`), run standalone on a
//! loopback port. It answers the client credentials grant with RS256-signed JWTs and publishes
//! its keys (JWKS), which is what a Kafka broker's `OAuthBearerValidatorCallbackHandler`
//! checks tokens against.
//!
//! Issuers are paths: `<base>/<issuer>/token`, `<base>/<issuer>/jwks`. Issuer
//! [`OidcServer::SHORT`] gives tokens that live [`OidcServer::SHORT_LIFETIME_S`] seconds (for
//! refresh and re-authentication tests), any other issuer one hour. Tokens name the client id
//! in `sub` and the requested scope in `aud`; the server accepts any client secret.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::env;
use crate::mm2::start_watchdog;

/// The version `scripts/oidc/pom.xml` pins.
pub const OIDC_SERVER_VERSION: &str = "6.0.2";

/// A running token server, stopped on drop.
#[derive(Debug)]
pub struct OidcServer {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// The server's log.
    pub log: PathBuf,
    child: Child,
    watchdog: Option<Child>,
}

impl OidcServer {
    /// The issuer whose tokens are short-lived.
    pub const SHORT: &'static str = "short";
    /// How long [`OidcServer::SHORT`]'s tokens live.
    pub const SHORT_LIFETIME_S: u64 = 12;

    /// Starts the server (logging into `dir`) and waits until it answers.
    ///
    /// # Panics
    ///
    /// If it is not installed or does not start within 60 s.
    pub fn start(dir: &Path) -> OidcServer {
        let lib = env::cache_dir()
            .join(format!("mock-oauth2-server-{OIDC_SERVER_VERSION}"))
            .join("lib");
        assert!(
            lib.join(format!("mock-oauth2-server-{OIDC_SERVER_VERSION}.jar"))
                .is_file(),
            "mock-oauth2-server is not installed in {}: run scripts/test-broker install",
            lib.display()
        );
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let log = dir.join("oidc.log");
        let out = std::fs::File::create(&log)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", log.display()));
        let err = out.try_clone().expect("log file");
        let marker = format!("-Dstrait.test.oidc={}", dir.display());
        // The short issuer: `sub` is the client id, `aud` and `scope` "kafka", whatever scope
        // was asked for.
        let config = format!(
            r#"{{"tokenCallbacks":[{{"issuerId":"{}","tokenExpiry":{},"requestMappings":[{{"requestParam":"grant_type","match":"*","claims":{{"sub":"${{clientId}}","aud":["kafka"],"scope":"kafka"}}}}]}}]}}"#,
            Self::SHORT,
            Self::SHORT_LIFETIME_S
        );
        let java = std::env::var_os("JAVA_HOME")
            .map(|home| PathBuf::from(home).join("bin").join("java"))
            .filter(|p| p.is_file())
            .unwrap_or_else(|| PathBuf::from("java"));
        let child = Command::new(java)
            .arg("-Xmx128m")
            .arg(&marker)
            .arg("-cp")
            .arg(format!("{}/*", lib.display()))
            .arg("no.nav.security.mock.oauth2.StandaloneMockOAuth2ServerKt")
            .env("SERVER_HOSTNAME", "127.0.0.1")
            .env("SERVER_PORT", port.to_string())
            .env("JSON_CONFIG", config)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start mock-oauth2-server: {e}"));
        let watchdog = start_watchdog(child.id(), Path::new(&marker));
        let mut server = OidcServer {
            base: format!("http://127.0.0.1:{port}"),
            log,
            child,
            watchdog,
        };
        server.wait_ready(port);
        server
    }

    fn wait_ready(&mut self, port: u16) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "mock-oauth2-server exited ({status}):\n{}",
                    env::log_tail(&self.log, 30)
                );
            }
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "mock-oauth2-server did not listen on {port} within 60 s:\n{}",
                env::log_tail(&self.log, 30)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The issuer's identifier (`iss` of its tokens).
    pub fn issuer(&self, issuer: &str) -> String {
        format!("{}/{issuer}", self.base)
    }

    /// The issuer's token endpoint.
    pub fn token_url(&self, issuer: &str) -> String {
        format!("{}/{issuer}/token", self.base)
    }

    /// The issuer's keys (JWKS).
    pub fn jwks_url(&self, issuer: &str) -> String {
        format!("{}/{issuer}/jwks", self.base)
    }
}

impl Drop for OidcServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(mut watchdog) = self.watchdog.take() {
            let _ = watchdog.kill();
            let _ = watchdog.wait();
        }
    }
}
