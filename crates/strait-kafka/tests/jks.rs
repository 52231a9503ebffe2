//! Java KeyStore files (JKS, JCEKS) as the JDK's `keytool` makes them at test time, read by
//! strait directly: a key store with a key and its chain, trust stores with several CAs, key
//! and store passwords (right, wrong, different from each other, absent), keys `keytool`
//! generated itself (EC keys without their public key), several keys, an empty store, JCEKS,
//! and damaged or arbitrary bytes, which must give an error and never a panic.
//!
//! `keytool` must be installed: without it these tests fail, saying so.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use proptest::prelude::*;
use rustls::pki_types::CertificateDer;
use strait_kafka::tls::{
    read_keystore, read_truststore, ClientIdentity, StoreError, StoreFormat, TlsConfig, TlsOptions,
    Trust,
};
use strait_kafka::Secret;
use strait_testkit::{java_keystore, java_truststore, keytool, TestCa};

/// A fresh directory for one test's files, removed when dropped.
struct Dir(PathBuf);

impl std::ops::Deref for Dir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn dir(name: &str) -> Dir {
    let dir = std::env::temp_dir().join(format!("strait-jks-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Dir(dir)
}

fn secret(s: &str) -> Secret {
    Secret::new(s)
}

/// rustls accepts the identity: the key is usable and is the certificate's.
fn assert_usable(identity: ClientIdentity, ca_der: &[u8]) {
    TlsConfig::new(TlsOptions {
        trust: Trust::Certificates(vec![ca_der.to_vec().into()]),
        identity: Some(identity),
        ..TlsOptions::default()
    })
    .unwrap_or_else(|e| panic!("the identity from the JKS file is refused: {e}"));
}

#[test]
fn a_jks_keystore_gives_its_key_and_chain() {
    let d = dir("keystore");
    let ca = TestCa::new("jks CA");
    let cert = ca.client_cert("jks client");
    let path = java_keystore(
        &d,
        "client.jks",
        "JKS",
        &cert,
        "client",
        "store-pw",
        "store-pw",
    );
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(StoreFormat::detect(&bytes), Some(StoreFormat::Jks));

    // ssl.keystore.password opens the key too when ssl.key.password is unset, as in Java.
    let identity = read_keystore(&bytes, Some(&secret("store-pw")), None).unwrap();
    assert_eq!(
        identity.chain,
        vec![
            CertificateDer::from(cert.cert_der.clone()),
            CertificateDer::from(ca.der().to_vec())
        ]
    );
    assert!(!format!("{identity:?}").contains("store-pw"));
    assert_usable(identity, ca.der());
    // The same with ssl.key.password set to the same password.
    let identity = read_keystore(&bytes, Some(&secret("store-pw")), Some(&secret("store-pw")));
    assert_usable(identity.unwrap(), ca.der());

    // A wrong store password fails the integrity check, and says nothing of the password.
    let err = read_keystore(&bytes, Some(&secret("wrong-pw")), None).unwrap_err();
    assert_eq!(err, StoreError::WrongPassword);
    assert!(!err.to_string().contains("wrong-pw"), "{err}");
    // No store password: Java skips the integrity check; the key still needs a password.
    let err = read_keystore(&bytes, None, None).unwrap_err();
    assert_eq!(
        err,
        StoreError::JksKeyPasswordNeeded {
            alias: "client".into()
        }
    );
    assert!(err.to_string().contains("ssl.key.password"), "{err}");
    assert_usable(
        read_keystore(&bytes, None, Some(&secret("store-pw"))).unwrap(),
        ca.der(),
    );

    // As a truststore, a key entry gives its certificate, as Java's trust manager takes it.
    assert_eq!(
        read_truststore(&bytes, Some(&secret("store-pw"))).unwrap(),
        vec![CertificateDer::from(cert.cert_der.clone())]
    );
}

#[test]
fn a_key_password_different_from_the_store_password() {
    let d = dir("keypass");
    let ca = TestCa::new("jks CA");
    let cert = ca.client_cert("jks client");
    let path = java_keystore(&d, "client.jks", "JKS", &cert, "me", "store-pw", "key-pw");
    let bytes = std::fs::read(&path).unwrap();

    let identity = read_keystore(&bytes, Some(&secret("store-pw")), Some(&secret("key-pw")));
    assert_usable(identity.unwrap(), ca.der());

    // Without ssl.key.password the store's password is tried, and does not open the key.
    let err = read_keystore(&bytes, Some(&secret("store-pw")), None).unwrap_err();
    assert_eq!(
        err,
        StoreError::WrongJksKeyPassword {
            alias: "me".into(),
            password_key: "ssl.keystore.password"
        }
    );
    // A wrong ssl.key.password.
    let err =
        read_keystore(&bytes, Some(&secret("store-pw")), Some(&secret("nope-pw"))).unwrap_err();
    assert_eq!(
        err,
        StoreError::WrongJksKeyPassword {
            alias: "me".into(),
            password_key: "ssl.key.password"
        }
    );
    let shown = err.to_string();
    assert!(
        shown.contains("`me`") && shown.contains("ssl.key.password"),
        "{shown}"
    );
    assert!(
        !shown.contains("nope-pw") && !shown.contains("key-pw"),
        "{shown}"
    );
}

#[test]
fn a_jks_truststore_gives_every_ca() {
    let d = dir("truststore");
    let cas = [
        TestCa::new("CA one"),
        TestCa::new("CA two"),
        TestCa::new("CA three"),
    ];
    let path = java_truststore(
        &d,
        "truststore.jks",
        "JKS",
        &[
            ("one", cas[0].der()),
            ("two", cas[1].der()),
            ("three", cas[2].der()),
        ],
        "trust-pw",
    );
    let bytes = std::fs::read(&path).unwrap();
    let mut expected: Vec<Vec<u8>> = cas.iter().map(|ca| ca.der().to_vec()).collect();
    expected.sort();
    for password in [Some(secret("trust-pw")), None] {
        let mut read: Vec<Vec<u8>> = read_truststore(&bytes, password.as_ref())
            .unwrap()
            .iter()
            .map(|c| c.to_vec())
            .collect();
        read.sort();
        assert_eq!(read, expected);
    }
    assert_eq!(
        read_truststore(&bytes, Some(&secret("trust-px"))).unwrap_err(),
        StoreError::WrongPassword
    );
    // A truststore is no keystore.
    assert_eq!(
        read_keystore(&bytes, Some(&secret("trust-pw")), None).unwrap_err(),
        StoreError::NoPrivateKey
    );
}

#[test]
fn keys_keytool_generated_itself_are_usable() {
    // keytool writes EC keys without their public key (ring, under rustls, needs it: strait
    // takes it from the certificate); RSA keys as they are. Both in JKS and, converted by
    // keytool, in PKCS#12.
    let d = dir("genkeypair");
    for (alias, alg) in [("ec", "EC"), ("rsa", "RSA")] {
        let jks = d.join(format!("{alias}.jks"));
        let jks_path = jks.to_string_lossy().into_owned();
        keytool(&[
            "-genkeypair",
            "-keyalg",
            alg,
            "-alias",
            alias,
            "-dname",
            "CN=strait",
            "-validity",
            "2",
            "-storetype",
            "JKS",
            "-keystore",
            &jks_path,
            "-storepass",
            "store-pw",
            "-keypass",
            "store-pw",
        ]);
        let bytes = std::fs::read(&jks).unwrap();
        let identity = read_keystore(&bytes, Some(&secret("store-pw")), None).unwrap();
        assert_eq!(identity.chain.len(), 1);
        let self_signed = identity.chain[0].to_vec();
        assert_usable(identity, &self_signed);

        let p12 = d.join(format!("{alias}.p12"));
        keytool(&[
            "-importkeystore",
            "-noprompt",
            "-srckeystore",
            &jks_path,
            "-srcstoretype",
            "JKS",
            "-srcstorepass",
            "store-pw",
            "-destkeystore",
            &p12.to_string_lossy(),
            "-deststoretype",
            "PKCS12",
            "-deststorepass",
            "store-pw",
        ]);
        let bytes = std::fs::read(&p12).unwrap();
        let identity = read_keystore(&bytes, Some(&secret("store-pw")), None).unwrap();
        assert_usable(identity, &self_signed);
    }
}

#[test]
fn several_private_keys_are_refused_with_their_aliases() {
    // A Java KeyStore and a PKCS#12 file alike: strait does not pick one silently.
    for (store, kind) in [("two.jks", "JKS"), ("two.p12", "PKCS12")] {
        let d = dir(&format!("several-{kind}"));
        let ca = TestCa::new("jks CA");
        java_keystore(
            &d,
            store,
            kind,
            &ca.client_cert("a"),
            "first",
            "pw-pw-pw",
            "pw-pw-pw",
        );
        let path = java_keystore(
            &d,
            store,
            kind,
            &ca.client_cert("b"),
            "second",
            "pw-pw-pw",
            "pw-pw-pw",
        );
        let bytes = std::fs::read(path).unwrap();
        let err = read_keystore(&bytes, Some(&secret("pw-pw-pw")), None).unwrap_err();
        let StoreError::SeveralPrivateKeys { mut aliases } = err.clone() else {
            panic!("{kind}: expected several keys, got {err}");
        };
        aliases.sort();
        assert_eq!(aliases, ["first", "second"], "{kind}");
        assert!(err.to_string().contains("-srcalias ALIAS"), "{err}");
    }
}

#[test]
fn an_empty_store() {
    let d = dir("empty");
    let path = d.join("empty.jks");
    let p = path.to_string_lossy().into_owned();
    keytool(&[
        "-genkeypair",
        "-keyalg",
        "EC",
        "-alias",
        "gone",
        "-dname",
        "CN=gone",
        "-storetype",
        "JKS",
        "-keystore",
        &p,
        "-storepass",
        "store-pw",
        "-keypass",
        "store-pw",
    ]);
    keytool(&[
        "-delete",
        "-alias",
        "gone",
        "-keystore",
        &p,
        "-storepass",
        "store-pw",
    ]);
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(&bytes[8..12], &[0, 0, 0, 0], "keytool left entries");
    assert_eq!(
        read_truststore(&bytes, Some(&secret("store-pw"))).unwrap_err(),
        StoreError::NoCertificate
    );
    assert_eq!(
        read_keystore(&bytes, Some(&secret("store-pw")), None).unwrap_err(),
        StoreError::NoPrivateKey
    );
}

#[test]
fn jceks_certificates_are_read_and_its_keys_refused() {
    let d = dir("jceks");
    let ca = TestCa::new("jceks CA");
    let path = java_truststore(&d, "trust.jceks", "JCEKS", &[("ca", ca.der())], "trust-pw");
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(StoreFormat::detect(&bytes), Some(StoreFormat::Jceks));
    assert_eq!(
        read_truststore(&bytes, Some(&secret("trust-pw"))).unwrap(),
        vec![CertificateDer::from(ca.der().to_vec())]
    );
    assert_eq!(
        read_truststore(&bytes, Some(&secret("trust-px"))).unwrap_err(),
        StoreError::WrongPassword
    );

    // JCEKS protects private keys with PBEWithMD5AndTripleDES: refused with the conversion.
    let cert = ca.client_cert("c");
    let path = java_keystore(&d, "key.jceks", "JCEKS", &cert, "c", "store-pw", "store-pw");
    let bytes = std::fs::read(&path).unwrap();
    let err = read_keystore(&bytes, Some(&secret("store-pw")), None).unwrap_err();
    assert_eq!(err, StoreError::JavaKeyStore { kind: "JCEKS" });
    let shown = err.to_string();
    assert!(shown.contains("keytool -importkeystore"), "{shown}");
    assert!(shown.contains("-srcstoretype JCEKS"), "{shown}");
    // Its certificates still make a truststore.
    assert_eq!(
        read_truststore(&bytes, Some(&secret("store-pw"))).unwrap(),
        vec![CertificateDer::from(cert.cert_der)]
    );
}

/// A keystore (key, chain) and a truststore (two CAs) made once by keytool, for the damage
/// tests.
fn sample_stores() -> &'static [Vec<u8>; 2] {
    static STORES: OnceLock<[Vec<u8>; 2]> = OnceLock::new();
    STORES.get_or_init(|| {
        let d = dir("samples");
        let ca = TestCa::new("sample CA");
        let other = TestCa::new("other CA");
        let key = java_keystore(
            &d,
            "k.jks",
            "JKS",
            &ca.client_cert("k"),
            "k",
            "store-pw",
            "key-pw",
        );
        let trust = java_truststore(
            &d,
            "t.jks",
            "JKS",
            &[("a", ca.der()), ("b", other.der())],
            "store-pw",
        );
        [std::fs::read(key).unwrap(), std::fs::read(trust).unwrap()]
    })
}

fn read_both(bytes: &[u8], password: Option<&Secret>) -> [Result<(), StoreError>; 2] {
    [
        read_truststore(bytes, password).map(drop),
        read_keystore(bytes, password, Some(&secret("key-pw"))).map(drop),
    ]
}

#[test]
fn truncated_and_corrupted_stores_give_errors() {
    for store in sample_stores() {
        // Every truncation: an error, never a panic. With the password the digest is needed,
        // so every proper prefix fails.
        for len in 0..store.len() {
            for result in read_both(&store[..len], Some(&secret("store-pw"))) {
                let err = result.expect_err("a truncated store was read");
                assert!(!err.to_string().contains("store-pw"), "{err}");
            }
            let _ = read_both(&store[..len], None);
        }
        // One byte changed anywhere past the magic: the integrity digest tells.
        for at in 4..store.len() {
            let mut damaged = store.clone();
            damaged[at] ^= 0x5A;
            for result in read_both(&damaged, Some(&secret("store-pw"))) {
                assert!(result.is_err(), "a store damaged at byte {at} was read");
            }
            let _ = read_both(&damaged, None);
        }
    }
    let err = read_truststore(&sample_stores()[1][..30], None).unwrap_err();
    assert!(
        err.to_string().contains("JKS file is damaged or truncated"),
        "{err}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(
        magic in prop::sample::select(vec![[0xFEu8, 0xED, 0xFE, 0xED], [0xCE, 0xCE, 0xCE, 0xCE]]),
        rest in prop::collection::vec(any::<u8>(), 0..512),
        password in prop::option::of("[a-z]{0,8}"),
    ) {
        let mut bytes = magic.to_vec();
        bytes.extend(rest);
        let password = password.map(Secret::new);
        let _ = read_both(&bytes, password.as_ref());
    }

    #[test]
    fn mutated_real_stores_never_panic(
        which in 0usize..2,
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = sample_stores()[which].clone();
        for (at, value) in edits {
            let at = at.index(bytes.len());
            bytes[at] = value;
        }
        let len = cut.index(bytes.len() + 1);
        let _ = read_both(&bytes[..len], None);
        let _ = read_both(&bytes, Some(&secret("store-pw")));
    }
}
