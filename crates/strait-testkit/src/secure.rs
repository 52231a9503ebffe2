//! A real broker with TLS and SASL SCRAM, and the test certificates for it.
//!
//! [`SecureBroker`] is one nisshi broker on loopback started with `--cert/--key` (its listener
//! then speaks only TLS) and/or `--authentication` (SCRAM-SHA-256 and -512). nisshi's
//! `user create` talks plain TCP without authenticating, so users are made first on a plain,
//! unauthenticated run of the same sqlite store, which is then stopped and started again with
//! the security options. nisshi does not ask clients for certificates (no mutual TLS).
//!
//! [`TestCa`] makes certificates at test time with rcgen: a CA, server certificates for any
//! names, expired ones, client certificates.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

use crate::env;

/// A certificate authority for tests.
#[derive(Debug)]
pub struct TestCa {
    params: CertificateParams,
    key: KeyPair,
    pem: String,
    der: Vec<u8>,
}

/// A certificate issued by a [`TestCa`], with its key.
#[derive(Debug, Clone)]
pub struct TestCert {
    /// The certificate then the CA's, PEM.
    pub chain_pem: String,
    /// The private key, PKCS#8 PEM.
    pub key_pem: String,
    /// The certificate, DER.
    pub cert_der: Vec<u8>,
    /// The private key, PKCS#8 DER.
    pub key_der: Vec<u8>,
    /// The issuing CA's certificate, DER.
    pub ca_der: Vec<u8>,
}

impl TestCa {
    /// A new self-signed CA called `name`.
    ///
    /// # Panics
    ///
    /// If rcgen fails.
    pub fn new(name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().expect("CA key");
        let cert = params.self_signed(&key).expect("self-signed CA");
        TestCa {
            pem: cert.pem(),
            der: cert.der().to_vec(),
            params,
            key,
        }
    }

    /// The CA certificate, PEM.
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// The CA certificate, DER.
    pub fn der(&self) -> &[u8] {
        &self.der
    }

    /// A server certificate for `names` (DNS names or IP addresses), valid now.
    pub fn server_cert(&self, names: &[&str]) -> TestCert {
        self.issue(
            names,
            "strait test broker",
            ExtendedKeyUsagePurpose::ServerAuth,
            false,
        )
    }

    /// A server certificate for `names` that expired on 2001-01-01.
    pub fn expired_server_cert(&self, names: &[&str]) -> TestCert {
        self.issue(
            names,
            "strait test broker",
            ExtendedKeyUsagePurpose::ServerAuth,
            true,
        )
    }

    /// A client certificate (for mutual TLS) with common name `name`.
    pub fn client_cert(&self, name: &str) -> TestCert {
        self.issue(&[], name, ExtendedKeyUsagePurpose::ClientAuth, false)
    }

    fn issue(
        &self,
        names: &[&str],
        common_name: &str,
        usage: ExtendedKeyUsagePurpose,
        expired: bool,
    ) -> TestCert {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names).expect("certificate params");
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.extended_key_usages = vec![usage];
        if expired {
            params.not_before = date_time_ymd(2000, 1, 1);
            params.not_after = date_time_ymd(2001, 1, 1);
        }
        let key = KeyPair::generate().expect("key");
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).expect("certificate");
        TestCert {
            chain_pem: format!("{}{}", cert.pem(), self.pem),
            key_pem: key.serialize_pem(),
            cert_der: cert.der().to_vec(),
            key_der: key.serialize_der(),
            ca_der: self.der.clone(),
        }
    }
}

/// A SCRAM mechanism of a broker user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scram {
    /// SCRAM-SHA-256.
    Sha256,
    /// SCRAM-SHA-512.
    Sha512,
}

impl Scram {
    fn as_arg(self) -> &'static str {
        match self {
            Scram::Sha256 => "scram256",
            Scram::Sha512 => "scram512",
        }
    }
}

/// How to start a [`SecureBroker`].
#[derive(Debug, Clone, Default)]
pub struct SecureBrokerOptions {
    /// The broker's certificate: its listener speaks only TLS.
    pub tls: Option<TestCert>,
    /// Users (name, password, mechanism); when any, the broker requires SASL authentication.
    pub users: Vec<(String, String, Scram)>,
    /// The port to advertise in metadata, when a proxy in front of the broker listens there.
    pub advertised_port: Option<u16>,
}

/// One real broker with TLS and/or SASL on loopback, stopped on drop (a watchdog also stops it
/// if the test process dies). If the test is panicking, its directory and log are kept and the
/// log's tail is printed.
#[derive(Debug)]
pub struct SecureBroker {
    /// `127.0.0.1:PORT` where the broker listens.
    pub listen: String,
    /// What metadata names it by: `listen` unless a port to advertise was given.
    pub bootstrap: String,
    /// The broker's log.
    pub log: PathBuf,
    dir: PathBuf,
    child: Child,
    watchdog: Option<Child>,
}

impl SecureBroker {
    /// Starts the broker (after making its users, if any) and waits until it accepts
    /// connections.
    ///
    /// # Panics
    ///
    /// If the broker binary is not installed, or the broker does not start.
    pub fn start(options: SecureBrokerOptions) -> SecureBroker {
        let bin = env::broker_bin();
        if !bin.is_file() {
            panic!(
                "test broker not installed: run scripts/test-broker install (no broker binary at {})",
                bin.display()
            );
        }
        let dir = env::unique_dir("strait-secure-test");
        let log = dir.join("broker.log");
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let bootstrap = format!("127.0.0.1:{}", options.advertised_port.unwrap_or(port));
        let storage = if options.users.is_empty() {
            "memory://nisshi/".to_owned()
        } else {
            "sqlite://secure.db".to_owned()
        };
        let base = |extra: &[String]| {
            let mut args: Vec<String> = [
                "broker",
                "--cluster-id",
                "secure",
                "--group-initial-rebalance-delay",
                "0s",
            ]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
            args.push("--listener-url".into());
            args.push(format!("tcp://{listen}"));
            args.push("--advertised-listener-url".into());
            args.push(format!("tcp://{bootstrap}"));
            args.push("--storage-engine".into());
            args.push(storage.clone());
            args.extend_from_slice(extra);
            args
        };

        if !options.users.is_empty() {
            // A plain run of the same store, only to create the users.
            let mut plain = launch(&bin, &dir, &log, &base(&[]));
            wait_until_ready(&mut plain, &listen, true, &log);
            for (name, password, mechanism) in &options.users {
                let output = Command::new(&bin)
                    .args(["user", "create", name, password, "--mechanism"])
                    .arg(mechanism.as_arg())
                    .arg("--broker")
                    .arg(format!("tcp://{listen}"))
                    .current_dir(&dir)
                    .output()
                    .unwrap_or_else(|e| panic!("cannot run {} user create: {e}", bin.display()));
                assert!(
                    output.status.success(),
                    "nisshi user create {name} failed: {}{}",
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr)
                );
            }
            stop(&mut plain);
        }

        let mut extra = Vec::new();
        if let Some(cert) = &options.tls {
            let chain = dir.join("broker-chain.pem");
            let key = dir.join("broker-key.pem");
            write(&chain, &cert.chain_pem);
            write(&key, &cert.key_pem);
            extra.push("--cert".to_owned());
            extra.push(chain.display().to_string());
            extra.push("--key".to_owned());
            extra.push(key.display().to_string());
        }
        if !options.users.is_empty() {
            extra.push("--authentication".to_owned());
        }
        let mut child = launch(&bin, &dir, &log, &base(&extra));
        wait_until_ready(&mut child, &listen, options.tls.is_none(), &log);
        let watchdog = start_watchdog(child.id());
        SecureBroker {
            listen,
            bootstrap,
            log,
            dir,
            child,
            watchdog,
        }
    }

    /// The broker's working directory (certificates, store, log).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The last `lines` lines of the broker's log.
    pub fn log_tail(&self, lines: usize) -> String {
        crate::env::log_tail(&self.log, lines)
    }
}

impl Drop for SecureBroker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(watchdog) = &mut self.watchdog {
            let _ = watchdog.kill();
            let _ = watchdog.wait();
        }
        if std::thread::panicking() {
            eprintln!(
                "strait-testkit: last lines of {}:\n{}\nstrait-testkit: kept {}",
                self.log.display(),
                self.log_tail(30),
                self.dir.display()
            );
        } else if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            eprintln!("strait-testkit: cannot remove {}: {e}", self.dir.display());
        }
    }
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("no free loopback port: {e}"))
}

fn launch(bin: &Path, dir: &Path, log: &Path, args: &[String]) -> Child {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap_or_else(|e| panic!("cannot open {}: {e}", log.display()));
    let err = out
        .try_clone()
        .unwrap_or_else(|e| panic!("cannot open {}: {e}", log.display()));
    let mut command = Command::new(bin);
    // nisshi also reads its options from these variables: none of the caller's may leak in.
    for var in [
        "CLUSTER_ID",
        "LISTENER_URL",
        "ADVERTISED_LISTENER_URL",
        "STORAGE_ENGINE",
        "SCHEMA_REGISTRY",
        "GROUP_INITIAL_REBALANCE_DELAY",
        "GROUP_POLL_INTERVAL",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ] {
        command.env_remove(var);
    }
    command
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()))
}

/// Waits until the broker accepts connections (and, for a plain listener, answers ApiVersions).
fn wait_until_ready(child: &mut Child, listen: &str, plain: bool, log: &Path) {
    let addr: SocketAddr = listen.parse().expect("loopback address");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = String::new();
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "broker exited ({status}) before it was ready; log {}:\n{}",
                log.display(),
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        let probe = if plain {
            api_versions(&addr)
        } else {
            TcpStream::connect_timeout(&addr, Duration::from_secs(1)).map(drop)
        };
        match probe {
            Ok(()) => return,
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("broker on {listen} not ready within 30 s ({last})");
}

/// An ApiVersions v0 request answered with our correlation id.
fn api_versions(addr: &SocketAddr) -> std::io::Result<()> {
    let mut stream = TcpStream::connect_timeout(addr, Duration::from_secs(1))?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    let client_id = b"strait-testkit";
    let mut body = Vec::new();
    body.extend_from_slice(&18i16.to_be_bytes());
    body.extend_from_slice(&0i16.to_be_bytes());
    body.extend_from_slice(&0x5742i32.to_be_bytes());
    body.extend_from_slice(&(client_id.len() as i16).to_be_bytes());
    body.extend_from_slice(client_id);
    let mut request = (body.len() as i32).to_be_bytes().to_vec();
    request.extend_from_slice(&body);
    stream.write_all(&request)?;
    let mut head = [0u8; 8];
    stream.read_exact(&mut head)?;
    if head[4..8] != 0x5742i32.to_be_bytes() {
        return Err(std::io::Error::other("wrong correlation id"));
    }
    Ok(())
}

/// SIGTERM, then SIGKILL if the broker is still there after 5 s.
fn stop(child: &mut Child) {
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// A shell loop that kills the broker once this test process is gone.
fn start_watchdog(broker: u32) -> Option<Child> {
    let script = format!(
        "while kill -0 {parent} 2>/dev/null && kill -0 {broker} 2>/dev/null; do sleep 1; done; \
         kill -9 {broker} 2>/dev/null",
        parent = std::process::id()
    );
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()
}
