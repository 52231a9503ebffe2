//! A real Apache Kafka broker with TLS and/or SASL, and the test certificates for it.
//!
//! [`SecureBroker`] is one single-node Kafka cluster on loopback (`scripts/test-broker start`)
//! whose client listener speaks TLS (a PEM key store made from a [`TestCert`], optionally asking
//! for client certificates), SASL (SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN; SCRAM users are made
//! at format time with `--add-scram`, PLAIN users in the listener's JAAS line), or both.
//!
//! [`TestCa`] makes certificates at test time with rcgen: a CA, server certificates for any
//! names, expired ones, client certificates.

use std::path::{Path, PathBuf};

use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

use crate::brokers::BrokerSet;
use crate::clusters::ClusterOptions;
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
    fn mechanism(self) -> &'static str {
        match self {
            Scram::Sha256 => "SCRAM-SHA-256",
            Scram::Sha512 => "SCRAM-SHA-512",
        }
    }
}

/// How to start a [`SecureBroker`].
#[derive(Debug, Clone, Default)]
pub struct SecureBrokerOptions {
    /// The broker's certificate: its client listener speaks only TLS.
    pub tls: Option<TestCert>,
    /// With `tls`: the CA (PEM) whose client certificates the broker requires (mutual TLS).
    pub client_ca_pem: Option<String>,
    /// Users (name, password, SCRAM mechanism); when any, the broker requires SASL
    /// authentication. Every user can also log in with PLAIN and the same password.
    pub users: Vec<(String, String, Scram)>,
    /// `connections.max.reauth.ms` (KIP-368): the broker closes a SASL connection whose session
    /// is older, unless the client authenticates again before then.
    pub reauth_ms: Option<u64>,
    /// The port to advertise in metadata, when a proxy in front of the broker listens there.
    pub advertised_port: Option<u16>,
    /// SASL/GSSAPI (Kerberos) on the client listener, with the other mechanisms when `users`
    /// has any. The broker is then known as `localhost` (its service principal's host).
    pub gssapi: Option<GssapiListener>,
}

/// A GSSAPI (Kerberos) listener: the broker's service principal, its keytab and the realm's
/// `krb5.conf` (see [`crate::Kdc`]).
#[derive(Debug, Clone)]
pub struct GssapiListener {
    /// `sasl.kerberos.service.name` (`kafka`).
    pub service_name: String,
    /// The broker's principal, `kafka/localhost@STRAIT.TEST`.
    pub principal: String,
    /// A keytab with its key.
    pub keytab: PathBuf,
    /// The realm's `krb5.conf`, given to the broker's JVM as `-Djava.security.krb5.conf`.
    pub krb5_conf: PathBuf,
}

/// One real broker with TLS and/or SASL on loopback, stopped on drop (a watchdog also stops it
/// if the test process dies). If the test is panicking, its directory and log are kept and the
/// log's tail is printed.
#[derive(Debug)]
pub struct SecureBroker {
    /// `127.0.0.1:PORT` where the broker's client listener listens.
    pub listen: String,
    /// What metadata names it by: `listen` unless a port to advertise was given (and
    /// `localhost:PORT` with GSSAPI).
    pub bootstrap: String,
    /// The broker's log.
    pub log: PathBuf,
    set: BrokerSet,
}

impl SecureBroker {
    /// Starts the broker (its SCRAM users made when its storage is formatted) and waits until
    /// it is up.
    ///
    /// # Panics
    ///
    /// If Kafka is not installed, or the broker does not start.
    pub fn start(options: SecureBrokerOptions) -> SecureBroker {
        let sasl = !options.users.is_empty() || options.gssapi.is_some();
        // A Kerberos service principal names the broker's host: clients must call it that.
        let host = if options.gssapi.is_some() {
            "localhost"
        } else {
            "127.0.0.1"
        };
        let protocol = match (options.tls.is_some(), sasl) {
            (false, false) => "PLAINTEXT",
            (true, false) => "SSL",
            (false, true) => "SASL_PLAINTEXT",
            (true, true) => "SASL_SSL",
        };
        let advertised = match options.advertised_port {
            Some(port) => port.to_string(),
            None => "@PORT@".to_owned(),
        };
        let mut config = ClusterOptions::default()
            .property(
                "listeners",
                "CLIENT://127.0.0.1:@PORT@,CONTROLLER://127.0.0.1:@CONTROLLER_PORT@,INTERNAL://127.0.0.1:@INTERNAL_PORT@",
            )
            .property(
                "advertised.listeners",
                &format!("CLIENT://{host}:{advertised},INTERNAL://127.0.0.1:@INTERNAL_PORT@"),
            )
            .property(
                "listener.security.protocol.map",
                &format!("CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT,CLIENT:{protocol}"),
            );
        if let Some(cert) = &options.tls {
            config = config
                .property("listener.name.client.ssl.keystore.type", "PEM")
                .property(
                    "listener.name.client.ssl.keystore.certificate.chain",
                    &cert.chain_pem,
                )
                .property("listener.name.client.ssl.keystore.key", &cert.key_pem);
            if let Some(ca) = &options.client_ca_pem {
                config = config
                    .property("listener.name.client.ssl.client.auth", "required")
                    .property("listener.name.client.ssl.truststore.type", "PEM")
                    .property("listener.name.client.ssl.truststore.certificates", ca);
            }
        }
        let mut mechanisms = Vec::new();
        if !options.users.is_empty() {
            mechanisms.extend(["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"]);
        }
        if let Some(gssapi) = &options.gssapi {
            mechanisms.push("GSSAPI");
            config = config
                .property(
                    "listener.name.client.sasl.kerberos.service.name",
                    &gssapi.service_name,
                )
                .property(
                    "listener.name.client.gssapi.sasl.jaas.config",
                    &format!(
                        "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true \
                         storeKey=true keyTab=\"{}\" principal=\"{}\";",
                        gssapi.keytab.display(),
                        gssapi.principal
                    ),
                );
            config = config.jvm_option(&format!(
                "-Djava.security.krb5.conf={}",
                gssapi.krb5_conf.display()
            ));
        }
        if !mechanisms.is_empty() {
            config = config.property(
                "listener.name.client.sasl.enabled.mechanisms",
                &mechanisms.join(","),
            );
        }
        if !options.users.is_empty() {
            for mechanism in ["scram-sha-256", "scram-sha-512"] {
                config = config.property(
                    &format!("listener.name.client.{mechanism}.sasl.jaas.config"),
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;",
                );
            }
            let plain_users: String = options
                .users
                .iter()
                .map(|(name, password, _)| format!(" user_{name}=\"{password}\""))
                .collect();
            config = config.property(
                "listener.name.client.plain.sasl.jaas.config",
                &format!(
                    "org.apache.kafka.common.security.plain.PlainLoginModule required{plain_users};"
                ),
            );
            for (name, password, mechanism) in &options.users {
                config.format_args.push("--add-scram".to_owned());
                config.format_args.push(format!(
                    "{}=[name={name},password={password}]",
                    mechanism.mechanism()
                ));
            }
        }
        if let Some(ms) = options.reauth_ms {
            config = config.property("connections.max.reauth.ms", &ms.to_string());
        }
        let set = BrokerSet::start("strait-secure-test", &["secure"], &config);
        let broker = set.brokers[0].clone();
        let port = broker
            .bootstrap
            .rsplit_once(':')
            .map(|(_, port)| port.to_owned())
            .unwrap_or_default();
        SecureBroker {
            bootstrap: format!(
                "{host}:{}",
                options.advertised_port.map_or(port, |p| p.to_string())
            ),
            listen: broker.bootstrap.clone(),
            log: broker.log,
            set,
        }
    }

    /// The broker's directory (properties, data, log).
    pub fn dir(&self) -> &Path {
        self.set.dir()
    }

    /// The last `lines` lines of the broker's log.
    pub fn log_tail(&self, lines: usize) -> String {
        crate::env::log_tail(&self.log, lines)
    }
}
