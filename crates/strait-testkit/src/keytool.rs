//! Java KeyStore files made by the JDK's own `keytool` at test time, from [`TestCert`]s: the
//! stores MM2 configurations point at, made the way operators make them.
//!
//! `keytool` must be installed (it comes with the JDK the Kafka tests need): every helper here
//! panics with a clear message when it is not, so a test that needs one never passes without it.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::secure::TestCert;

/// The JDK's `keytool`: `$JAVA_HOME/bin/keytool` when `JAVA_HOME` is set and has one, else
/// `keytool` on the `PATH`.
fn keytool_program() -> PathBuf {
    std::env::var_os("JAVA_HOME")
        .map(|home| PathBuf::from(home).join("bin").join("keytool"))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("keytool"))
}

/// Runs `keytool` with `args` and returns its standard output.
///
/// # Panics
///
/// If `keytool` cannot be run (the message says to install a JDK) or exits non-zero (the
/// message carries its output).
pub fn keytool(args: &[&str]) -> String {
    let program = keytool_program();
    let output = Command::new(&program)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {} ({e}): these tests need the JDK's keytool (install a JDK, e.g. \
                 `apt-get install openjdk-17-jdk-headless`, or set JAVA_HOME)",
                program.display()
            )
        });
    if !output.status.success() {
        panic!(
            "keytool {} failed ({}):\n{}{}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A Java KeyStore of `store_type` (`JKS`, `JCEKS`) at `dir/name`, holding `cert`'s key and
/// chain (the certificate, then its CA's) under `alias`, the store protected by
/// `store_password` and the key by `key_password`. Made as an operator makes one from PEM
/// files: a PKCS#12 file first, then `keytool -importkeystore`. An existing store gets one more
/// key.
///
/// # Panics
///
/// If `keytool` is missing or fails.
pub fn java_keystore(
    dir: &Path,
    name: &str,
    store_type: &str,
    cert: &TestCert,
    alias: &str,
    store_password: &str,
    key_password: &str,
) -> PathBuf {
    let mut p12 = p12_keystore::KeyStore::new();
    let chain = [
        p12_keystore::Certificate::from_der(&cert.cert_der).expect("certificate"),
        p12_keystore::Certificate::from_der(&cert.ca_der).expect("CA certificate"),
    ];
    let key = p12_keystore::PrivateKey::from_der(&cert.key_der).expect("key");
    p12.add_entry(
        alias,
        p12_keystore::KeyStoreEntry::PrivateKeyChain(p12_keystore::PrivateKeyChain::new(
            vec![1, 2, 3, 4],
            key,
            chain,
        )),
    );
    let p12_path = dir.join(format!("{name}.{alias}.p12"));
    std::fs::write(
        &p12_path,
        p12.writer("p12-pass").write().expect("write PKCS#12"),
    )
    .expect("write the PKCS#12 file");
    let path = dir.join(name);
    keytool(&[
        "-importkeystore",
        "-noprompt",
        "-srckeystore",
        &p12_path.to_string_lossy(),
        "-srcstoretype",
        "PKCS12",
        "-srcstorepass",
        "p12-pass",
        "-srcalias",
        alias,
        "-destkeystore",
        &path.to_string_lossy(),
        "-deststoretype",
        store_type,
        "-deststorepass",
        store_password,
        "-destkeypass",
        key_password,
        "-destalias",
        alias,
    ]);
    path
}

/// A Java KeyStore of `store_type` (`JKS`, `JCEKS`) at `dir/name` holding each of `cas`
/// (alias, DER certificate) as a trusted certificate, imported with `keytool -importcert`. An
/// existing store gets more entries.
///
/// # Panics
///
/// If `keytool` is missing or fails.
pub fn java_truststore(
    dir: &Path,
    name: &str,
    store_type: &str,
    cas: &[(&str, &[u8])],
    store_password: &str,
) -> PathBuf {
    let path = dir.join(name);
    for (alias, der) in cas {
        let file = dir.join(format!("{name}.{alias}.der"));
        std::fs::write(&file, der).expect("write the certificate");
        keytool(&[
            "-importcert",
            "-noprompt",
            "-alias",
            alias,
            "-file",
            &file.to_string_lossy(),
            "-keystore",
            &path.to_string_lossy(),
            "-storetype",
            store_type,
            "-storepass",
            store_password,
        ]);
    }
    path
}
