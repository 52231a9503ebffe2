//! Java KeyStore files, read as Java's own `JavaKeyStore` and `KeyProtector` write them (the
//! layout is Java's, documented by its source, not by a standard).
//!
//! A JKS file (magic `FEEDFEED`) is, all integers big-endian:
//!
//! - magic (4 bytes), version (4: 1 or 2), entry count (4);
//! - each entry: a tag (4: 1 a private key, 2 a trusted certificate), its alias (Java's
//!   `writeUTF`: a 2-byte length, then modified UTF-8), its creation time (8, milliseconds);
//!   - a private key: the protected key (4-byte length, then a DER `EncryptedPrivateKeyInfo`),
//!     the chain length (4), then each certificate;
//!   - a trusted certificate: one certificate;
//!   - a certificate: (version 2 only) its type (`writeUTF`, "X.509"), then its DER (4-byte
//!     length, then the bytes);
//! - the integrity digest: SHA-1 over the store password as UTF-16BE, the ASCII string
//!   "Mighty Aphrodite", then every byte before the digest.
//!
//! A private key is protected with Sun's own algorithm (OID `1.3.6.1.4.1.42.2.17.1.1`): the
//! encrypted data is a 20-byte salt, the key XORed with a stream of SHA-1 blocks (the first
//! SHA-1(password ‖ salt), each next SHA-1(password ‖ the block before)), and a 20-byte check,
//! SHA-1(password ‖ the plain PKCS#8 key), that tells a wrong password. The password is UTF-16BE
//! there too.
//!
//! JCEKS (magic `CECECECE`, version 2) shares the layout and the digest, and adds secret-key
//! entries (tag 3, serialized Java objects) and private keys protected with
//! PBEWithMD5AndTripleDES. Its certificates, and its keys protected the JKS way, are read;
//! those others are refused with the `keytool` command that converts the file to PKCS#12.
//!
//! The bytes are outside data: every length and count is checked against the bytes that are
//! left before anything is taken or allocated, and nothing here panics on any input.

use pkcs8::der::asn1::{AnyRef, ContextSpecific, ObjectIdentifier};
use pkcs8::der::{Decode, Encode, SliceReader, Tag, TagMode, TagNumber, Tagged};
use pkcs8::spki::SubjectPublicKeyInfoRef;
use ring::digest::{Context, SHA1_FOR_LEGACY_USE_ONLY};

use super::StoreError;
use crate::secret::Secret;

const JKS_MAGIC: u32 = 0xFEED_FEED;
const JCEKS_MAGIC: u32 = 0xCECE_CECE;
const PRIVATE_KEY: u32 = 1;
const TRUSTED_CERTIFICATE: u32 = 2;
const SECRET_KEY: u32 = 3;
/// What Java's `JavaKeyStore` and `JceKeyStore` put after the password in the digest.
const WHITENER: &[u8] = b"Mighty Aphrodite";
const SHA1_LEN: usize = 20;
/// Sun's JKS key protection (`KeyProtector`).
const JKS_KEY_PROTECTION: ObjectIdentifier =
    ObjectIdentifier::new_unwrap("1.3.6.1.4.1.42.2.17.1.1");
/// id-ecPublicKey: an EC key in PKCS#8 or a certificate.
const EC_PUBLIC_KEY: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");

/// JKS or JCEKS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Jks,
    Jceks,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Jks => "JKS",
            Kind::Jceks => "JCEKS",
        }
    }
}

/// The entries of a Java KeyStore file, private keys still protected.
#[derive(Debug)]
pub(super) struct JavaKeyStore {
    kind: Kind,
    entries: Vec<Entry>,
}

#[derive(Debug)]
enum Entry {
    Key(ProtectedKey),
    Trusted { certificate: Vec<u8> },
}

/// A private-key entry as stored. `Debug` shows no key bytes.
struct ProtectedKey {
    alias: String,
    /// A DER `EncryptedPrivateKeyInfo`.
    protected: Vec<u8>,
    chain: Vec<Vec<u8>>,
}

impl std::fmt::Debug for ProtectedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProtectedKey")
            .field("alias", &self.alias)
            .field("certificates", &self.chain.len())
            .field("key", &"[redacted]")
            .finish()
    }
}

/// A private key and its chain, taken from a store.
pub(super) struct KeyEntry {
    /// The PKCS#8 key.
    pub(super) key: Vec<u8>,
    /// The key's certificate first, then its issuers.
    pub(super) chain: Vec<Vec<u8>>,
}

impl std::fmt::Debug for KeyEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyEntry")
            .field("certificates", &self.chain.len())
            .field("key", &"[redacted]")
            .finish()
    }
}

/// Reads a JKS or JCEKS file. With a `password`, the file's integrity digest must match it
/// (Java checks it only when a password is given, and so does this).
pub(super) fn parse(bytes: &[u8], password: Option<&Secret>) -> Result<JavaKeyStore, StoreError> {
    let mut input = Input {
        bytes,
        at: 0,
        kind: Kind::Jks,
    };
    let kind = match input.u32()? {
        JKS_MAGIC => Kind::Jks,
        JCEKS_MAGIC => Kind::Jceks,
        _ => return Err(damaged(Kind::Jks, "it does not start with FEEDFEED")),
    };
    input.kind = kind;
    let version = input.u32()?;
    if !matches!((kind, version), (Kind::Jks, 1 | 2) | (Kind::Jceks, 2)) {
        return Err(damaged(kind, &format!("unknown version {version}")));
    }
    let count = input.u32()?;
    // No capacity from `count`: each entry takes at least one byte, so a count larger than the
    // file ends in a "truncated" error, not in a large allocation.
    let mut entries = Vec::new();
    for _ in 0..count {
        let tag = input.u32()?;
        let alias = input.utf()?;
        let _created_ms = input.u64()?;
        match tag {
            PRIVATE_KEY => {
                let protected = input.sized()?.to_vec();
                let chain_len = input.u32()?;
                let mut chain = Vec::new();
                for _ in 0..chain_len {
                    chain.push(input.certificate(version)?);
                }
                entries.push(Entry::Key(ProtectedKey {
                    alias,
                    protected,
                    chain,
                }));
            }
            TRUSTED_CERTIFICATE => entries.push(Entry::Trusted {
                certificate: input.certificate(version)?,
            }),
            // A serialized Java object with no length in front: it cannot even be skipped.
            SECRET_KEY if kind == Kind::Jceks => {
                return Err(StoreError::JavaKeyStore { kind: "JCEKS" })
            }
            other => return Err(damaged(kind, &format!("unknown entry type {other}"))),
        }
    }
    if let Some(password) = password {
        let signed = &bytes[..input.at];
        let stored = input.take(SHA1_LEN)?;
        let mut digest = Context::new(&SHA1_FOR_LEGACY_USE_ONLY);
        digest.update(&utf16be(password));
        digest.update(WHITENER);
        digest.update(signed);
        if digest.finish().as_ref() != stored {
            return Err(StoreError::WrongPassword);
        }
    }
    Ok(JavaKeyStore { kind, entries })
}

impl JavaKeyStore {
    /// The certificates a Java trust manager would trust: every trusted-certificate entry, and
    /// the first certificate of each private-key entry (as Java's `TrustStoreUtil` takes them).
    pub(super) fn trusted_certificates(&self) -> Vec<Vec<u8>> {
        self.entries
            .iter()
            .filter_map(|entry| match entry {
                Entry::Trusted { certificate } => Some(certificate.clone()),
                Entry::Key(key) => key.chain.first().cloned(),
            })
            .collect()
    }

    /// The one private key, opened with `password` (`ssl.key.password`, else the store's, as
    /// Kafka and Java do; `password_key` names the setting it came from, for messages), and its
    /// chain. Several private keys are refused: Java's key manager picks one per handshake,
    /// from the CAs the broker names, which strait does not reproduce.
    pub(super) fn private_key(
        &self,
        password: Option<&Secret>,
        password_key: &'static str,
    ) -> Result<KeyEntry, StoreError> {
        let keys: Vec<&ProtectedKey> = self
            .entries
            .iter()
            .filter_map(|entry| match entry {
                Entry::Key(key) => Some(key),
                Entry::Trusted { .. } => None,
            })
            .collect();
        let ProtectedKey {
            alias,
            protected,
            chain,
        } = match keys[..] {
            [] => return Err(StoreError::NoPrivateKey),
            [one] => one,
            _ => {
                return Err(StoreError::SeveralPrivateKeys {
                    aliases: keys.iter().map(|key| key.alias.clone()).collect(),
                })
            }
        };
        if chain.is_empty() {
            return Err(StoreError::NoCertificate);
        }
        let Some(password) = password else {
            return Err(StoreError::JksKeyPasswordNeeded {
                alias: alias.clone(),
            });
        };
        let key = recover_key(self.kind, alias, protected, password, password_key)?;
        let key = with_ec_public_key(key, &chain[0]);
        Ok(KeyEntry {
            key,
            chain: chain.clone(),
        })
    }
}

/// The plain PKCS#8 key of a JKS-protected `EncryptedPrivateKeyInfo`.
fn recover_key(
    kind: Kind,
    alias: &str,
    protected: &[u8],
    password: &Secret,
    password_key: &'static str,
) -> Result<Vec<u8>, StoreError> {
    let not_a_key = || damaged(kind, &format!("the private key `{alias}` is not readable"));
    let (algorithm, data) = encrypted_private_key_info(protected).ok_or_else(not_a_key)?;
    if algorithm != JKS_KEY_PROTECTION {
        // JCEKS's PBEWithMD5AndTripleDES, or anything else.
        return Err(StoreError::JavaKeyStore { kind: "JCEKS" });
    }
    if data.len() < 2 * SHA1_LEN {
        return Err(not_a_key());
    }
    let (salt, rest) = data.split_at(SHA1_LEN);
    let (encrypted, check) = rest.split_at(rest.len() - SHA1_LEN);
    let password = utf16be(password);
    let mut plain = Vec::with_capacity(encrypted.len());
    let mut block = salt.to_vec();
    for chunk in encrypted.chunks(SHA1_LEN) {
        let mut digest = Context::new(&SHA1_FOR_LEGACY_USE_ONLY);
        digest.update(&password);
        digest.update(&block);
        block = digest.finish().as_ref().to_vec();
        plain.extend(chunk.iter().zip(&block).map(|(c, k)| c ^ k));
    }
    let mut digest = Context::new(&SHA1_FOR_LEGACY_USE_ONLY);
    digest.update(&password);
    digest.update(&plain);
    if digest.finish().as_ref() != check {
        return Err(StoreError::WrongJksKeyPassword {
            alias: alias.to_owned(),
            password_key,
        });
    }
    Ok(plain)
}

/// The algorithm and encrypted data of a DER `EncryptedPrivateKeyInfo`.
fn encrypted_private_key_info(der: &[u8]) -> Option<(ObjectIdentifier, &[u8])> {
    let outer = AnyRef::from_der(der).ok()?;
    let mut fields = SliceReader::new(outer.value()).ok()?;
    let algorithm = pkcs8::spki::AlgorithmIdentifierRef::decode(&mut fields).ok()?;
    let data = pkcs8::der::asn1::OctetStringRef::decode(&mut fields).ok()?;
    Some((algorithm.oid, data.as_bytes()))
}

/// `key` with the public key of `certificate` added when `key` is an EC key without one.
/// Java writes EC keys without their public key (it is optional in SEC 1), and ring, under
/// rustls, refuses such a key; the certificate holds the same public key. Any other key is
/// returned as it is (rustls says so if it does not fit the certificate).
pub(super) fn with_ec_public_key(key: Vec<u8>, certificate: &[u8]) -> Vec<u8> {
    add_ec_public_key(&key, certificate).unwrap_or(key)
}

fn add_ec_public_key(key: &[u8], certificate: &[u8]) -> Option<Vec<u8>> {
    let info = pkcs8::PrivateKeyInfo::from_der(key).ok()?;
    if info.algorithm.oid != EC_PUBLIC_KEY {
        return None;
    }
    // ECPrivateKey ::= SEQUENCE { version, privateKey, [0] parameters OPTIONAL,
    //                             [1] publicKey OPTIONAL }
    let ec = AnyRef::from_der(info.private_key).ok()?;
    let mut reader = SliceReader::new(ec.value()).ok()?;
    let mut fields = Vec::new();
    while let Ok(field) = AnyRef::decode(&mut reader) {
        fields.push(field);
    }
    let public_key_tag = Tag::ContextSpecific {
        constructed: true,
        number: TagNumber::N1,
    };
    if fields.iter().any(|f| f.tag() == public_key_tag) {
        return None;
    }
    let spki = certificate_public_key(certificate)?;
    if spki.algorithm.oid != EC_PUBLIC_KEY {
        return None;
    }
    let public_key = ContextSpecific {
        tag_number: TagNumber::N1,
        tag_mode: TagMode::Explicit,
        value: spki.subject_public_key,
    }
    .to_der()
    .ok()?;
    fields.push(AnyRef::from_der(&public_key).ok()?);
    let ec_private_key = fields.to_der().ok()?;
    pkcs8::PrivateKeyInfo {
        algorithm: info.algorithm,
        private_key: &ec_private_key,
        public_key: None,
    }
    .to_der()
    .ok()
}

/// The `SubjectPublicKeyInfo` of a DER X.509 certificate.
fn certificate_public_key(certificate: &[u8]) -> Option<SubjectPublicKeyInfoRef<'_>> {
    let cert = AnyRef::from_der(certificate).ok()?;
    let mut cert_fields = SliceReader::new(cert.value()).ok()?;
    let tbs = AnyRef::decode(&mut cert_fields).ok()?;
    let mut fields = SliceReader::new(tbs.value()).ok()?;
    // [0] version (absent in v1), serialNumber, signature, issuer, validity, subject.
    let mut field = AnyRef::decode(&mut fields).ok()?;
    if field.tag().is_context_specific() {
        field = AnyRef::decode(&mut fields).ok()?;
    }
    let _serial = field;
    for _ in 0..4 {
        AnyRef::decode(&mut fields).ok()?;
    }
    SubjectPublicKeyInfoRef::decode(&mut fields).ok()
}

/// A password as Java hands it to these digests: each UTF-16 code unit, big-endian.
fn utf16be(password: &Secret) -> Vec<u8> {
    password
        .expose()
        .encode_utf16()
        .flat_map(u16::to_be_bytes)
        .collect()
}

fn damaged(kind: Kind, detail: &str) -> StoreError {
    StoreError::Malformed(format!(
        "the {} file is damaged or truncated: {detail}",
        kind.name()
    ))
}

/// A cursor over the file's bytes; every read checks what is left first.
struct Input<'a> {
    bytes: &'a [u8],
    at: usize,
    kind: Kind,
}

impl<'a> Input<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], StoreError> {
        let left = self.bytes.len() - self.at;
        if n > left {
            return Err(damaged(
                self.kind,
                &format!("{n} bytes wanted at byte {}, {left} left", self.at),
            ));
        }
        let taken = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(taken)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], StoreError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn u32(&mut self) -> Result<u32, StoreError> {
        self.array().map(u32::from_be_bytes)
    }

    fn u64(&mut self) -> Result<u64, StoreError> {
        self.array().map(u64::from_be_bytes)
    }

    /// Java's `readUTF`: a 2-byte length, then modified UTF-8 (read as UTF-8; only aliases and
    /// certificate types are written so, and they are only shown).
    fn utf(&mut self) -> Result<String, StoreError> {
        let len = u16::from_be_bytes(self.array()?);
        Ok(String::from_utf8_lossy(self.take(usize::from(len))?).into_owned())
    }

    /// A 4-byte length, then that many bytes.
    fn sized(&mut self) -> Result<&'a [u8], StoreError> {
        let len = self.u32()?;
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        self.take(len)
    }

    fn certificate(&mut self, version: u32) -> Result<Vec<u8>, StoreError> {
        if version == 2 {
            let kind = self.utf()?;
            if kind != "X.509" {
                return Err(StoreError::Malformed(format!(
                    "it holds a certificate of type `{kind}`; strait reads X.509 certificates"
                )));
            }
        }
        Ok(self.sized()?.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A version-1 store (no certificate types; `keytool` has written version 2 since Java 1.2),
    /// made here since no current `keytool` makes one: one trusted certificate, its digest.
    fn version_1_store(password: &str, certificate: &[u8]) -> Vec<u8> {
        let mut bytes = Vec::new();
        bytes.extend(JKS_MAGIC.to_be_bytes());
        bytes.extend(1u32.to_be_bytes());
        bytes.extend(1u32.to_be_bytes());
        bytes.extend(TRUSTED_CERTIFICATE.to_be_bytes());
        bytes.extend(2u16.to_be_bytes());
        bytes.extend(b"ca");
        bytes.extend(0u64.to_be_bytes());
        bytes.extend(u32::try_from(certificate.len()).unwrap().to_be_bytes());
        bytes.extend(certificate);
        let mut digest = Context::new(&SHA1_FOR_LEGACY_USE_ONLY);
        digest.update(&utf16be(&Secret::new(password)));
        digest.update(WHITENER);
        digest.update(&bytes);
        bytes.extend(digest.finish().as_ref());
        bytes
    }

    #[test]
    fn version_1_stores_and_non_ascii_passwords() {
        let store = version_1_store("pässwörd€", b"\x30\x03\x02\x01\x01");
        let parsed = parse(&store, Some(&Secret::new("pässwörd€"))).unwrap();
        assert_eq!(
            parsed.trusted_certificates(),
            vec![b"\x30\x03\x02\x01\x01".to_vec()]
        );
        assert_eq!(
            parse(&store, Some(&Secret::new("passwort"))).unwrap_err(),
            StoreError::WrongPassword
        );
        assert_eq!(
            utf16be(&Secret::new("a€")),
            vec![0x00, b'a', 0x20, 0xAC],
            "Java's chars, big-endian"
        );
    }

    #[test]
    fn lengths_beyond_the_file_are_refused_before_anything_is_allocated() {
        // An entry count and a certificate length of 4 GiB in a 37-byte file.
        let mut bytes = Vec::new();
        bytes.extend(JKS_MAGIC.to_be_bytes());
        bytes.extend(2u32.to_be_bytes());
        bytes.extend(u32::MAX.to_be_bytes());
        bytes.extend(TRUSTED_CERTIFICATE.to_be_bytes());
        bytes.extend(0u16.to_be_bytes());
        bytes.extend(0u64.to_be_bytes());
        bytes.extend(5u16.to_be_bytes());
        bytes.extend(b"X.509");
        bytes.extend(u32::MAX.to_be_bytes());
        let err = parse(&bytes, None).unwrap_err();
        assert!(
            err.to_string()
                .contains("4294967295 bytes wanted at byte 37, 0 left"),
            "{err}"
        );
        let mut other_type = bytes[..26].to_vec();
        other_type.extend(3u16.to_be_bytes());
        other_type.extend(b"PGP");
        assert!(parse(&other_type, None)
            .unwrap_err()
            .to_string()
            .contains("type `PGP`"));
    }
}
