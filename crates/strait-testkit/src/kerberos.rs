//! An MIT Kerberos KDC for tests ([`Kdc`]): realm [`REALM`] on a free loopback port, its
//! database, stash, `kdc.conf`, `krb5.conf` and log in a temporary directory, stopped on drop
//! (the directory and log kept, and the log's tail printed, when the test is panicking), and
//! by a watchdog if the test process dies.
//!
//! It is Debian's `krb5-kdc` (`krb5kdc`, `kdb5_util`, `kadmin.local`), which
//! `scripts/test-broker install` installs with apt-get. Missing tools are a panic saying so:
//! nothing skips.
//!
//! The `krb5.conf` it writes ([`Kdc::krb5_conf`]) is for both sides: Java reads it with
//! `-Djava.security.krb5.conf` ([`Kdc::jvm_options`]), MIT's library (strait) with
//! `KRB5_CONFIG`. It turns off DNS (`dns_lookup_*`, `dns_canonicalize_hostname`, `rdns`), so
//! `kafka@localhost` means `kafka/localhost@STRAIT.TEST`, and makes clients use TCP
//! (`udp_preference_limit = 1`).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::env;

/// The test realm.
pub const REALM: &str = "STRAIT.TEST";

const TOOLS: [&str; 4] = ["krb5kdc", "kdb5_util", "kadmin.local", "kinit"];

/// A running KDC, stopped on drop.
#[derive(Debug)]
pub struct Kdc {
    /// Its directory (database, configs, keytabs, log).
    pub dir: PathBuf,
    /// The `krb5.conf` naming it.
    pub krb5_conf: PathBuf,
    /// `127.0.0.1:PORT`, TCP (and UDP).
    pub addr: String,
    /// The KDC's log.
    pub log: PathBuf,
    kdc_conf: PathBuf,
    child: Child,
    /// Kills the KDC if the test process dies without dropping it.
    watchdog: Option<Child>,
}

/// Where a Kerberos tool is: `PATH`, then the sbin directories Debian puts them in (not on a
/// non-root `PATH`).
fn tool(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/local/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "{name} is not installed: the Kerberos tests need MIT Kerberos's KDC and tools \
                 (Debian, Ubuntu: apt-get install krb5-kdc krb5-admin-server krb5-user; \
                 `scripts/test-broker install` does it)"
            )
        })
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("no free loopback port: {e}"))
}

impl Kdc {
    /// Makes the realm's database and starts the KDC; waits until it accepts connections.
    ///
    /// # Panics
    ///
    /// If the tools are missing or the KDC does not start.
    pub fn start() -> Kdc {
        for name in TOOLS {
            tool(name);
        }
        let dir = env::unique_dir("strait-kdc");
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let log = dir.join("kdc.log");
        let krb5_conf = dir.join("krb5.conf");
        let kdc_conf = dir.join("kdc.conf");
        let write = |path: &Path, text: String| {
            std::fs::write(path, text)
                .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        };
        let d = dir.display();
        write(
            &krb5_conf,
            format!(
                "[libdefaults]
    default_realm = {REALM}
    dns_lookup_realm = false
    dns_lookup_kdc = false
    dns_canonicalize_hostname = false
    rdns = false
    udp_preference_limit = 1
    ticket_lifetime = 1h
    forwardable = false
    default_ccache_name = FILE:{d}/ccache
    default_client_keytab_name = FILE:{d}/no-default-client.keytab
    default_keytab_name = FILE:{d}/no-default.keytab

[realms]
    {REALM} = {{
        kdc = {addr}
    }}

[domain_realm]
    localhost = {REALM}
    .localhost = {REALM}
"
            ),
        );
        write(
            &kdc_conf,
            format!(
                "[kdcdefaults]
    kdc_ports = {port}
    kdc_tcp_ports = {port}

[realms]
    {REALM} = {{
        database_name = {d}/principal
        key_stash_file = {d}/stash
        acl_file = {d}/kadm5.acl
        kdc_listen = 127.0.0.1:{port}
        kdc_tcp_listen = 127.0.0.1:{port}
        max_life = 1h
        max_renewable_life = 0
    }}

[logging]
    kdc = FILE:{d}/kdc.log
    default = FILE:{d}/kdc.log
"
            ),
        );
        write(&dir.join("kadm5.acl"), String::new());
        let mut kdc = Kdc {
            dir: dir.clone(),
            krb5_conf,
            addr,
            log,
            kdc_conf,
            // Replaced below; a child that is already gone, so a failure before then has
            // nothing to stop.
            child: Command::new("true")
                .spawn()
                .unwrap_or_else(|e| panic!("cannot run true: {e}")),
            watchdog: None,
        };
        kdc.run(
            "kdb5_util",
            &["create", "-s", "-r", REALM, "-P", "strait-test-master-key"],
        );
        let child = kdc
            .command("krb5kdc")
            .args(["-n", "-r", REALM])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start krb5kdc: {e}"));
        let mut old = std::mem::replace(&mut kdc.child, child);
        let _ = old.wait();
        // Until either is gone; the KDC is killed only if this process went first (so a pid
        // reused after the KDC's own exit is never hit).
        kdc.watchdog = Command::new("sh")
            .arg("-c")
            .arg(
                "while kill -0 \"$1\" 2>/dev/null && kill -0 \"$2\" 2>/dev/null; do sleep 1; done; \
                 kill -0 \"$1\" 2>/dev/null || kill \"$2\" 2>/dev/null",
            )
            .arg("kdc-watchdog")
            .arg(std::process::id().to_string())
            .arg(kdc.child.id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok();
        kdc.wait_listening();
        kdc
    }

    fn command(&self, name: &str) -> Command {
        let mut command = Command::new(tool(name));
        command
            .env("KRB5_CONFIG", &self.krb5_conf)
            .env("KRB5_KDC_PROFILE", &self.kdc_conf);
        command
    }

    /// Runs a Kerberos tool, panicking with its output if it fails.
    fn run(&self, name: &str, args: &[&str]) -> String {
        let output = self
            .command(name)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {name}: {e}"));
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        if !output.status.success() {
            panic!(
                "{name} {} failed ({}):\n{text}",
                args.join(" "),
                output.status
            );
        }
        text
    }

    fn wait_listening(&mut self) {
        let addr: SocketAddr = self.addr.parse().expect("a socket address");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "krb5kdc exited ({status}):\n{}",
                    env::log_tail(&self.log, 20)
                );
            }
            if Instant::now() > deadline {
                panic!(
                    "krb5kdc does not listen on {} after 20 s:\n{}",
                    self.addr,
                    env::log_tail(&self.log, 20)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `name@REALM`.
    pub fn principal(&self, name: &str) -> String {
        format!("{name}@{REALM}")
    }

    /// Adds principal `name` (e.g. `kafka/localhost`, `mm2`) with a random key.
    pub fn add_principal(&self, name: &str) {
        self.kadmin(&format!("addprinc -randkey {name}"));
    }

    /// A keytab `file` (in the KDC's directory) with the current keys of `principals`. The
    /// keys are exported as they are (`-norandkey`), so earlier keytabs stay valid.
    pub fn keytab(&self, file: &str, principals: &[&str]) -> PathBuf {
        let path = self.dir.join(file);
        for principal in principals {
            self.kadmin(&format!(
                "ktadd -norandkey -k {} {principal}",
                path.display()
            ));
        }
        path
    }

    /// `kinit -kt keytab -c FILE:cache principal`: a ticket cache at `cache` holding
    /// `principal`'s ticket-granting ticket (what a user's `kinit` leaves).
    pub fn kinit(&self, principal: &str, keytab: &Path, cache: &Path) {
        let keytab = keytab.display().to_string();
        let cache = format!("FILE:{}", cache.display());
        self.run("kinit", &["-kt", &keytab, "-c", &cache, principal]);
    }

    /// Limits the tickets of `name` (a client or service principal) to `seconds`.
    pub fn max_ticket_life(&self, name: &str, seconds: u32) {
        self.kadmin(&format!("modprinc -maxlife \"{seconds} seconds\" {name}"));
    }

    /// Deletes principal `name`: the KDC no longer knows it, keytabs or not.
    pub fn delete_principal(&self, name: &str) {
        self.kadmin(&format!("delprinc -force {name}"));
    }

    /// Gives `name` a new random key: keytabs made before hold a key the KDC no longer has.
    pub fn change_key(&self, name: &str) {
        self.kadmin(&format!("cpw -randkey {name}"));
    }

    fn kadmin(&self, query: &str) -> String {
        let text = self.run("kadmin.local", &["-r", REALM, "-q", query]);
        // kadmin.local exits 0 even when the query fails.
        let lower = text.to_lowercase();
        if lower.contains("error") || lower.contains("failed") || lower.contains("not found") {
            panic!("kadmin.local -q \"{query}\": {text}");
        }
        text
    }

    /// JVM options for a Java program that uses this realm (`-Djava.security.krb5.conf`).
    pub fn jvm_options(&self) -> String {
        format!("-Djava.security.krb5.conf={}", self.krb5_conf.display())
    }

    /// The last `lines` lines of the KDC's log.
    pub fn log_tail(&self, lines: usize) -> String {
        env::log_tail(&self.log, lines)
    }
}

impl Drop for Kdc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(watchdog) = &mut self.watchdog {
            let _ = watchdog.kill();
            let _ = watchdog.wait();
        }
        if std::thread::panicking() {
            eprintln!(
                "strait-testkit: the KDC's log {}:\n{}",
                self.log.display(),
                env::log_tail(&self.log, 30)
            );
            eprintln!("strait-testkit: kept {}", self.dir.display());
        } else if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            eprintln!("strait-testkit: cannot remove {}: {e}", self.dir.display());
        }
    }
}
