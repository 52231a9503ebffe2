//! TLS for broker connections (`security.protocol=SSL` or `SASL_SSL`), on rustls with its ring
//! provider.
//!
//! - Trusted CAs: certificates given by the caller (Kafka's `ssl.truststore.*`), else the
//!   system's roots (Kafka would use the JVM's).
//! - Mutual TLS: a client certificate chain and key (Kafka's `ssl.keystore.*`).
//! - Hostname verification on by default; off when Kafka's
//!   `ssl.endpoint.identification.algorithm` is empty. The chain is always verified.
//! - The stores these come in are read here: PEM, PKCS#12, encrypted PKCS#8 keys and Java
//!   KeyStore files (JKS, read directly; JCEKS's certificates and JKS-protected keys, its other
//!   keys refused with the `keytool` command that converts the file; see `tls/jks.rs`).
//!
//! A failed handshake becomes a message that says what to fix: an untrusted CA,
//! a certificate for another name, an expired certificate, a broker that wants a client
//! certificate, a listener that does not speak TLS.

use std::fmt;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{AlertDescription, CertificateError, DigitallySignedStruct, SignatureScheme};

use crate::secret::Secret;
use crate::transport::Stream;

mod jks;

/// A TLS protocol version (Kafka's `ssl.enabled.protocols`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TlsVersion {
    /// TLS 1.2.
    Tls12,
    /// TLS 1.3.
    Tls13,
}

/// Where the CAs a client trusts come from.
#[derive(Clone)]
pub enum Trust {
    /// The operating system's roots (`/etc/ssl/certs`, or `SSL_CERT_FILE`).
    System,
    /// These CA certificates only.
    Certificates(Vec<CertificateDer<'static>>),
}

impl fmt::Debug for Trust {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Trust::System => f.write_str("System"),
            Trust::Certificates(c) => write!(f, "Certificates({} certificates)", c.len()),
        }
    }
}

/// A client certificate chain and its private key, for mutual TLS. `Debug` never shows the key.
pub struct ClientIdentity {
    /// The client's certificate first, then its issuers.
    pub chain: Vec<CertificateDer<'static>>,
    /// The private key of the first certificate.
    pub key: PrivateKeyDer<'static>,
}

impl Clone for ClientIdentity {
    fn clone(&self) -> Self {
        Self {
            chain: self.chain.clone(),
            key: self.key.clone_key(),
        }
    }
}

impl fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientIdentity")
            .field("certificates", &self.chain.len())
            .field("key", &"[redacted]")
            .finish()
    }
}

/// What a [`TlsConfig`] is made from.
#[derive(Debug, Clone)]
pub struct TlsOptions {
    /// The CAs to trust.
    pub trust: Trust,
    /// Where they came from, for messages (e.g. "ssl.truststore.location=/etc/kafka/ca.pem").
    pub trust_origin: String,
    /// The client's certificate and key, for brokers that ask for one (mutual TLS).
    pub identity: Option<ClientIdentity>,
    /// Whether the broker's certificate must name the host connected to (Kafka's default).
    pub verify_hostname: bool,
    /// The versions offered; empty means TLS 1.2 and 1.3.
    pub versions: Vec<TlsVersion>,
}

impl Default for TlsOptions {
    fn default() -> Self {
        Self {
            trust: Trust::System,
            trust_origin: "the system's CA certificates".into(),
            identity: None,
            verify_hostname: true,
            versions: Vec::new(),
        }
    }
}

/// TLS settings ready for connections. Cheap to share (`Arc`).
pub struct TlsConfig {
    rustls: Arc<rustls::ClientConfig>,
    trust_origin: String,
    has_identity: bool,
    verify_hostname: bool,
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConfig")
            .field("trust", &self.trust_origin)
            .field("client_certificate", &self.has_identity)
            .field("verify_hostname", &self.verify_hostname)
            .finish()
    }
}

/// Why TLS settings cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A Java KeyStore entry strait cannot read: a JCEKS secret key, or a private key protected
    /// the JCEKS way (PBEWithMD5AndTripleDES).
    #[error(
        "it is a Java KeyStore ({kind}) file with a key strait cannot read (JCEKS-protected \
         private keys and secret keys are not read); convert it to PKCS#12 with \
         `keytool -importkeystore -srckeystore FILE -srcstoretype {kind} -destkeystore FILE.p12 \
         -deststoretype PKCS12` and point the setting at FILE.p12"
    )]
    JavaKeyStore {
        /// JKS or JCEKS.
        kind: &'static str,
    },
    /// The store's integrity check (PKCS#12's MAC, a Java KeyStore's digest) failed.
    #[error("wrong password (the store's integrity check failed), or the file is damaged")]
    WrongPassword,
    /// The PKCS#12 integrity check failed and no password was given.
    #[error("the PKCS#12 file is protected by a password, and none is set")]
    PasswordNeeded,
    /// No certificate at all.
    #[error("it holds no certificate")]
    NoCertificate,
    /// No private key.
    #[error("it holds no private key")]
    NoPrivateKey,
    /// An encrypted private key and no password for it.
    #[error("the private key is encrypted and no key password is set (ssl.key.password)")]
    KeyPasswordNeeded,
    /// An encrypted private key that the password does not open.
    #[error("cannot decrypt the private key: wrong key password (ssl.key.password)?")]
    WrongKeyPassword,
    /// A Java KeyStore private key that the password does not open.
    #[error("cannot recover the private key `{alias}`: wrong password ({password_key})")]
    WrongJksKeyPassword {
        /// The key's alias in the store.
        alias: String,
        /// The setting the password came from: `ssl.key.password`, else the store's password
        /// (`ssl.keystore.password`), as Java falls back to it.
        password_key: &'static str,
    },
    /// A Java KeyStore private key and no password at all.
    #[error(
        "the private key `{alias}` is protected by a password and neither ssl.key.password nor \
         ssl.keystore.password is set"
    )]
    JksKeyPasswordNeeded {
        /// The key's alias in the store.
        alias: String,
    },
    /// A Java KeyStore or PKCS#12 file with more than one private key.
    #[error(
        "it holds {} private keys ({}); strait needs exactly one (Java's key manager would \
         pick one at each handshake from the CAs the broker names); keep the one to use with \
         `keytool -importkeystore -srckeystore FILE -srcalias ALIAS -destkeystore ONE.p12`",
        aliases.len(),
        aliases.join(", ")
    )]
    SeveralPrivateKeys {
        /// The aliases of the private keys.
        aliases: Vec<String>,
    },
    /// Not a store format strait reads, or damaged.
    #[error("{0}")]
    Malformed(String),
    /// No truststore is set and the system has no CA certificates.
    #[error("no truststore is set and the system has no CA certificates")]
    NoSystemCertificates,
    /// A CA certificate rustls cannot use.
    #[error("a CA certificate cannot be used: {0}")]
    BadCaCertificate(String),
    /// rustls refused the client certificate and key (e.g. a key that is not the
    /// certificate's).
    #[error("the client certificate and key cannot be used together: {0}")]
    BadClientCertificate(String),
    /// rustls refused the settings.
    #[error("{0}")]
    Rejected(String),
}

/// The kinds of store files, recognised by their first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreFormat {
    /// `-----BEGIN ...` text.
    Pem,
    /// DER: a PKCS#12 file.
    Pkcs12,
    /// Java KeyStore (`FEEDFEED`).
    Jks,
    /// Java JCEKS (`CECECECE`).
    Jceks,
}

impl StoreFormat {
    /// The format of `bytes`, if it is one of those.
    pub fn detect(bytes: &[u8]) -> Option<StoreFormat> {
        if bytes.starts_with(&[0xFE, 0xED, 0xFE, 0xED]) {
            Some(StoreFormat::Jks)
        } else if bytes.starts_with(&[0xCE, 0xCE, 0xCE, 0xCE]) {
            Some(StoreFormat::Jceks)
        } else if bytes.first() == Some(&0x30) {
            Some(StoreFormat::Pkcs12)
        } else if bytes.windows(11).any(|w| w == b"-----BEGIN ") {
            // PEM, possibly after text such as openssl's "Bag Attributes".
            Some(StoreFormat::Pem)
        } else {
            None
        }
    }
}

/// The CA certificates of a truststore: PEM, PKCS#12 (every certificate in it), or a Java
/// KeyStore (JKS or JCEKS: its trusted-certificate entries and the first certificate of each
/// private-key entry, as Java trusts them). A password, when given, must pass the store's
/// integrity check.
pub fn read_truststore(
    bytes: &[u8],
    password: Option<&Secret>,
) -> Result<Vec<CertificateDer<'static>>, StoreError> {
    let certs = match detect(bytes)? {
        StoreFormat::Pem => pem_certificates(bytes)?,
        StoreFormat::Jks | StoreFormat::Jceks => jks::parse(bytes, password)?
            .trusted_certificates()
            .into_iter()
            .map(CertificateDer::from)
            .collect(),
        StoreFormat::Pkcs12 => {
            let archive = open_pkcs12(bytes, password)?;
            archive
                .certs
                .iter()
                .map(|bag| CertificateDer::from(bag.cert.as_der().to_vec()))
                .collect()
        }
    };
    if certs.is_empty() {
        return Err(StoreError::NoCertificate);
    }
    Ok(certs)
}

/// The client certificate chain and key of a keystore: PEM (key and certificates in one file),
/// PKCS#12 or a Java KeyStore. `key_password` opens an encrypted PEM key; PKCS#12 keys are
/// opened with the store's password, as `keytool` writes them; a Java KeyStore's key with
/// `key_password`, else with the store's password (as Java and Kafka do). A Java KeyStore or a
/// PKCS#12 file must hold exactly one private key ([`StoreError::SeveralPrivateKeys`]).
pub fn read_keystore(
    bytes: &[u8],
    store_password: Option<&Secret>,
    key_password: Option<&Secret>,
) -> Result<ClientIdentity, StoreError> {
    match detect(bytes)? {
        StoreFormat::Pem => read_pem_identity(bytes, bytes, key_password),
        StoreFormat::Jks | StoreFormat::Jceks => {
            let (password, password_key) = match key_password {
                Some(password) => (Some(password), "ssl.key.password"),
                None => (store_password, "ssl.keystore.password"),
            };
            let entry = jks::parse(bytes, store_password)?.private_key(password, password_key)?;
            Ok(ClientIdentity {
                chain: entry.chain.into_iter().map(CertificateDer::from).collect(),
                key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(entry.key)),
            })
        }
        StoreFormat::Pkcs12 => {
            let store = p12_keystore::KeyStore::from_pkcs12(
                bytes,
                store_password.map_or("", Secret::expose),
                p12_keystore::Pkcs12ImportPolicy::Strict,
            )
            .map_err(|e| pkcs12_error(e, store_password.is_some()))?;
            // As for a Java KeyStore: one key, or the operator says which.
            let chains: Vec<(&String, &p12_keystore::PrivateKeyChain)> = store
                .entries()
                .filter_map(|(alias, entry)| match entry {
                    p12_keystore::KeyStoreEntry::PrivateKeyChain(chain) => Some((alias, chain)),
                    _ => None,
                })
                .collect();
            let chain = match chains.as_slice() {
                [] => return Err(StoreError::NoPrivateKey),
                [(_, chain)] => *chain,
                several => {
                    return Err(StoreError::SeveralPrivateKeys {
                        aliases: several.iter().map(|(alias, _)| (*alias).clone()).collect(),
                    })
                }
            };
            let Some(first) = chain.certs().first() else {
                return Err(StoreError::NoCertificate);
            };
            // keytool writes EC keys without their public key, which rustls needs.
            let key = jks::with_ec_public_key(chain.key().as_der().to_vec(), first.as_der());
            Ok(ClientIdentity {
                chain: chain
                    .certs()
                    .iter()
                    .map(|c| CertificateDer::from(c.as_der().to_vec()))
                    .collect(),
                key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key)),
            })
        }
    }
}

/// A client identity from PEM text: the certificates of `chain_pem` and the private key of
/// `key_pem` (PKCS#8, PKCS#1 or SEC1; an `ENCRYPTED PRIVATE KEY` is opened with
/// `key_password`). Kafka's `ssl.keystore.certificate.chain` and `ssl.keystore.key`.
pub fn read_pem_identity(
    chain_pem: &[u8],
    key_pem: &[u8],
    key_password: Option<&Secret>,
) -> Result<ClientIdentity, StoreError> {
    let chain = pem_certificates(chain_pem)?;
    if chain.is_empty() {
        return Err(StoreError::NoCertificate);
    }
    Ok(ClientIdentity {
        chain,
        key: pem_private_key(key_pem, key_password)?,
    })
}

/// The certificates of PEM text (other sections are skipped).
pub fn pem_certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, StoreError> {
    let pem = normalize_pem(pem);
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| StoreError::Malformed("not valid PEM".into()))
}

/// PEM text laid out canonically: each `-----BEGIN X-----` and `-----END X-----` on its own
/// line, the base64 between them without blanks. Kafka reads PEM given in a config value
/// (`ssl.keystore.key`, ...) even when the properties file folded it onto one line, with
/// spaces where the line breaks were; so does this.
fn normalize_pem(pem: &[u8]) -> String {
    let text = String::from_utf8_lossy(pem);
    let mut out = String::with_capacity(text.len() + 64);
    let mut rest: &str = &text;
    while let Some(begin) = rest.find("-----BEGIN ") {
        let after_begin = &rest[begin + "-----BEGIN ".len()..];
        let Some(label_end) = after_begin.find("-----") else {
            break;
        };
        let label = &after_begin[..label_end];
        let body_and_more = &after_begin[label_end + 5..];
        let end_marker = format!("-----END {label}-----");
        let Some(body_end) = body_and_more.find(&end_marker) else {
            break;
        };
        let body: String = body_and_more[..body_end]
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        out.push_str(&format!("-----BEGIN {label}-----\n"));
        let mut line = body.as_str();
        while !line.is_empty() {
            let (chunk, tail) = line.split_at(line.len().min(64));
            out.push_str(chunk);
            out.push('\n');
            line = tail;
        }
        out.push_str(&end_marker);
        out.push('\n');
        rest = &body_and_more[body_end + end_marker.len()..];
    }
    out
}

fn pem_private_key(
    pem: &[u8],
    password: Option<&Secret>,
) -> Result<PrivateKeyDer<'static>, StoreError> {
    const BEGIN: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
    const END: &str = "-----END ENCRYPTED PRIVATE KEY-----";
    let text = normalize_pem(pem);
    let pem = text.as_bytes();
    if let Some(start) = text.find(BEGIN) {
        let Some(len) = text[start..].find(END) else {
            return Err(StoreError::Malformed(
                "an ENCRYPTED PRIVATE KEY section has no END line".into(),
            ));
        };
        let section = &text[start..start + len + END.len()];
        let Some(password) = password else {
            return Err(StoreError::KeyPasswordNeeded);
        };
        let (_, der) = pkcs8::der::pem::decode_vec(section.as_bytes()).map_err(|_| {
            StoreError::Malformed("the ENCRYPTED PRIVATE KEY is not valid PEM".into())
        })?;
        let info = pkcs8::EncryptedPrivateKeyInfo::try_from(der.as_slice())
            .map_err(|_| StoreError::Malformed("the ENCRYPTED PRIVATE KEY is not PKCS#8".into()))?;
        let plain = info
            .decrypt(password.expose().as_bytes())
            .map_err(|_| StoreError::WrongKeyPassword)?;
        return Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
            plain.as_bytes().to_vec(),
        )));
    }
    match PrivateKeyDer::from_pem_slice(pem) {
        Ok(key) => Ok(key),
        Err(rustls::pki_types::pem::Error::NoItemsFound) => Err(StoreError::NoPrivateKey),
        Err(_) => Err(StoreError::Malformed(
            "the private key is not valid PEM".into(),
        )),
    }
}

fn detect(bytes: &[u8]) -> Result<StoreFormat, StoreError> {
    match StoreFormat::detect(bytes) {
        Some(format) => Ok(format),
        None if bytes.is_empty() => Err(StoreError::Malformed("the file is empty".into())),
        None => Err(StoreError::Malformed(
            "neither PEM (-----BEGIN ...), PKCS#12 nor a Java KeyStore (JKS, JCEKS)".into(),
        )),
    }
}

fn open_pkcs12(
    bytes: &[u8],
    password: Option<&Secret>,
) -> Result<p12_keystore::Pkcs12Archive, StoreError> {
    p12_keystore::Pkcs12Archive::from_pkcs12(bytes, password.map_or("", Secret::expose))
        .map_err(|e| pkcs12_error(e, password.is_some()))
}

fn pkcs12_error(e: p12_keystore::error::Error, had_password: bool) -> StoreError {
    use p12_keystore::error::Error as E;
    match e {
        E::MacError(_) if had_password => StoreError::WrongPassword,
        E::MacError(_) => StoreError::PasswordNeeded,
        other => StoreError::Malformed(format!("not a readable PKCS#12 file: {other}")),
    }
}

impl TlsConfig {
    /// Builds the rustls client config.
    pub fn new(options: TlsOptions) -> Result<Self, StoreError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        match &options.trust {
            Trust::System => {
                let found = rustls_native_certs::load_native_certs();
                roots.add_parsable_certificates(found.certs);
                if roots.is_empty() {
                    return Err(StoreError::NoSystemCertificates);
                }
            }
            Trust::Certificates(certs) => {
                for cert in certs {
                    roots
                        .add(cert.clone())
                        .map_err(|e| StoreError::BadCaCertificate(e.to_string()))?;
                }
            }
        }
        let versions: Vec<&'static rustls::SupportedProtocolVersion> = match &options.versions[..] {
            [] => vec![&rustls::version::TLS13, &rustls::version::TLS12],
            chosen => chosen
                .iter()
                .map(|v| match v {
                    TlsVersion::Tls12 => &rustls::version::TLS12,
                    TlsVersion::Tls13 => &rustls::version::TLS13,
                })
                .collect(),
        };
        let verifier =
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
                .build()
                .map_err(|e| StoreError::BadCaCertificate(e.to_string()))?;
        let verifier: Arc<dyn ServerCertVerifier> = if options.verify_hostname {
            verifier
        } else {
            Arc::new(ChainOnly(verifier))
        };
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&versions)
            .map_err(|e| StoreError::Rejected(e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let has_identity = options.identity.is_some();
        let config = match options.identity {
            Some(identity) => builder
                .with_client_auth_cert(identity.chain, identity.key)
                .map_err(|e| StoreError::BadClientCertificate(e.to_string()))?,
            None => builder.with_no_client_auth(),
        };
        Ok(Self {
            rustls: Arc::new(config),
            trust_origin: options.trust_origin,
            has_identity,
            verify_hostname: options.verify_hostname,
        })
    }

    /// Whether the broker's certificate must name the host.
    pub fn verifies_hostname(&self) -> bool {
        self.verify_hostname
    }

    /// Whether a client certificate is offered.
    pub fn has_client_certificate(&self) -> bool {
        self.has_identity
    }

    /// Runs the TLS handshake on `stream`, connected to `addr` (`host:port`). The error is
    /// rustls's, wrapped in `io::Error` as tokio-rustls returns it; see [`describe`].
    pub(crate) async fn handshake(
        &self,
        addr: &str,
        stream: Box<dyn Stream>,
    ) -> std::io::Result<Box<dyn Stream>> {
        let name = server_name(addr)?;
        let connector = tokio_rustls::TlsConnector::from(Arc::clone(&self.rustls));
        let tls = connector.connect(name, stream).await?;
        Ok(Box::new(tls))
    }
}

/// The host of `host:port` (IPv6 in brackets) as a TLS server name.
fn server_name(addr: &str) -> std::io::Result<ServerName<'static>> {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_owned()).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("`{host}` is not a host name or IP address TLS can verify"),
        )
    })
}

/// Verifies the chain, not the name: `ssl.endpoint.identification.algorithm=` (empty).
/// webpki checks the chain before the name, so a name error means the chain was good.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// The rustls error inside an I/O error from a TLS stream, if there is one.
pub(crate) fn rustls_error(e: &std::io::Error) -> Option<&rustls::Error> {
    e.get_ref()?.downcast_ref::<rustls::Error>()
}

/// What went wrong with TLS, said so that the reader knows what to fix. `during_handshake`:
/// whether the error came before the handshake finished (a closed connection then means the
/// listener does not speak TLS).
pub(crate) fn describe(
    e: &std::io::Error,
    tls: &TlsConfig,
    host: &str,
    during_handshake: bool,
) -> Option<String> {
    let Some(err) = rustls_error(e) else {
        let closed = matches!(
            e.kind(),
            std::io::ErrorKind::UnexpectedEof
                | std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::BrokenPipe
        );
        return (during_handshake && closed).then(|| {
            "the broker closed the connection during the TLS handshake: is this listener TLS? \
             (security.protocol SSL and SASL_SSL need a TLS listener; PLAINTEXT and \
             SASL_PLAINTEXT a plain one)"
                .to_owned()
        });
    };
    Some(match err {
        rustls::Error::InvalidCertificate(cert) => describe_certificate(cert, tls, host),
        rustls::Error::AlertReceived(alert) => describe_alert(*alert, tls),
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => format!(
            "the broker did not answer as a TLS server ({err}): is this listener TLS? \
             (security.protocol SSL and SASL_SSL need a TLS listener)"
        ),
        rustls::Error::NoCertificatesPresented => "the broker presented no certificate".to_owned(),
        other => format!("{other}"),
    })
}

fn describe_certificate(cert: &CertificateError, tls: &TlsConfig, host: &str) -> String {
    match cert {
        CertificateError::UnknownIssuer => format!(
            "the broker's certificate is not signed by a trusted CA (trusted: {}); set \
             ssl.truststore.location (or ssl.truststore.certificates) to the CA that signed the \
             broker's certificate",
            tls.trust_origin
        ),
        CertificateError::NotValidForName => format!(
            "the broker's certificate is not valid for `{host}`; connect by a name the \
             certificate holds, or turn hostname verification off with \
             ssl.endpoint.identification.algorithm= (empty)"
        ),
        CertificateError::NotValidForNameContext { presented, .. } => format!(
            "the broker's certificate is not valid for `{host}` (it is for: {}); connect by a \
             name the certificate holds, or turn hostname verification off with \
             ssl.endpoint.identification.algorithm= (empty)",
            if presented.is_empty() {
                "no names".to_owned()
            } else {
                presented
                    .iter()
                    .map(|p| bare_name(p))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ),
        CertificateError::Expired => {
            "the broker's certificate has expired; the broker needs a renewed certificate"
                .to_owned()
        }
        CertificateError::ExpiredContext { time, not_after } => format!(
            "the broker's certificate expired at {} (now {}); the broker needs a renewed \
             certificate",
            utc(not_after),
            utc(time)
        ),
        CertificateError::NotValidYet => {
            "the broker's certificate is not valid yet: check the clocks".to_owned()
        }
        CertificateError::NotValidYetContext { time, not_before } => format!(
            "the broker's certificate is not valid before {} (now {}): check the clocks",
            utc(not_before),
            utc(time)
        ),
        CertificateError::Revoked => "the broker's certificate is revoked".to_owned(),
        other => format!("the broker's certificate was refused: {other:?}"),
    }
}

/// `kafka.example` from rustls's `DnsName("kafka.example")` (or `IpAddress(...)`).
fn bare_name(presented: &str) -> &str {
    match presented.split_once('(') {
        Some((_, rest)) => rest.trim_end_matches(')').trim_matches('"'),
        None => presented,
    }
}

fn describe_alert(alert: AlertDescription, tls: &TlsConfig) -> String {
    match alert {
        // TLS 1.3 names it certificate_required; Java's TLS (Kafka's brokers) answers an empty
        // client certificate with bad_certificate. Either way the only certificate it can mean
        // is the one this client did not send.
        AlertDescription::CertificateRequired | AlertDescription::BadCertificate
            if !tls.has_identity =>
        {
            "the broker requires a client certificate (mutual TLS) and none is set: set \
             ssl.keystore.location (or ssl.keystore.certificate.chain and ssl.keystore.key)"
                .to_owned()
        }
        AlertDescription::BadCertificate
        | AlertDescription::UnknownCA
        | AlertDescription::CertificateRequired
        | AlertDescription::CertificateUnknown
        | AlertDescription::CertificateExpired
        | AlertDescription::CertificateRevoked
        | AlertDescription::UnsupportedCertificate
        | AlertDescription::AccessDenied
        | AlertDescription::DecryptError
            if tls.has_identity =>
        {
            format!(
                "the broker refused this client's certificate ({alert:?}): it must be signed by a \
                 CA the broker trusts and be valid (ssl.keystore.*)"
            )
        }
        AlertDescription::UnknownCA
        | AlertDescription::CertificateUnknown
        | AlertDescription::HandshakeFailure
            if !tls.has_identity =>
        {
            format!(
                "the broker ended the handshake ({alert:?}); if it requires a client \
                 certificate (mutual TLS), set ssl.keystore.location"
            )
        }
        AlertDescription::ProtocolVersion | AlertDescription::HandshakeFailure => format!(
            "no TLS version or cipher suite in common with the broker ({alert:?}); strait speaks \
             TLS 1.2 and 1.3 (ssl.enabled.protocols)"
        ),
        other => format!("the broker sent TLS alert {other:?}"),
    }
}

/// `YYYY-MM-DD hh:mm:ss UTC`, for expiry dates in messages.
fn utc(t: &UnixTime) -> String {
    let secs = t.as_secs();
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = crate::civil::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats_are_recognised() {
        assert_eq!(
            StoreFormat::detect(b"\n-----BEGIN CERTIFICATE-----"),
            Some(StoreFormat::Pem)
        );
        assert_eq!(
            StoreFormat::detect(b"Bag Attributes\n  friendlyName: ca\n-----BEGIN CERTIFICATE-----"),
            Some(StoreFormat::Pem)
        );
        assert_eq!(
            StoreFormat::detect(&[0xFE, 0xED, 0xFE, 0xED, 0]),
            Some(StoreFormat::Jks)
        );
        assert_eq!(
            StoreFormat::detect(&[0xCE, 0xCE, 0xCE, 0xCE]),
            Some(StoreFormat::Jceks)
        );
        assert_eq!(
            StoreFormat::detect(&[0x30, 0x82]),
            Some(StoreFormat::Pkcs12)
        );
        assert_eq!(StoreFormat::detect(b"hello"), None);
    }

    #[test]
    fn pem_folded_onto_one_line_is_read() {
        let canonical = "-----BEGIN CERTIFICATE-----\nAAAA\nBBBB\n-----END CERTIFICATE-----\n";
        assert_eq!(
            normalize_pem(
                b"junk -----BEGIN CERTIFICATE----- AAAA BBBB -----END CERTIFICATE----- x"
            ),
            "-----BEGIN CERTIFICATE-----\nAAAABBBB\n-----END CERTIFICATE-----\n"
        );
        assert_eq!(
            normalize_pem(canonical.as_bytes()),
            "-----BEGIN CERTIFICATE-----\nAAAABBBB\n-----END CERTIFICATE-----\n"
        );
        assert_eq!(normalize_pem(b"-----BEGIN X----- unterminated"), "");
    }

    #[test]
    fn dates_are_utc() {
        assert_eq!(
            utc(&UnixTime::since_unix_epoch(Duration::ZERO)),
            "1970-01-01 00:00:00 UTC"
        );
        assert_eq!(
            utc(&UnixTime::since_unix_epoch(Duration::from_secs(
                951_827_696
            ))),
            "2000-02-29 12:34:56 UTC"
        );
    }

    #[test]
    fn server_names() {
        assert!(matches!(
            server_name("127.0.0.1:9093").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(matches!(
            server_name("[::1]:9093").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(matches!(
            server_name("kafka-1.example:9093").unwrap(),
            ServerName::DnsName(_)
        ));
    }
}
