//! The client side of SCRAM (RFC 5802) with SHA-256 and SHA-512 (RFC 7677), as Kafka's
//! `ScramSaslClient` speaks it: no channel binding (`n,,`), the password used as UTF-8 bytes
//! without SASLprep (Kafka's `ScramFormatter.normalize`), at least 4096 iterations, and
//! Kafka's `tokenauth=true` extension for delegation tokens.
//!
//! ```text
//! client-first  n,,n=<user>,r=<client nonce>[,tokenauth=true]
//! server-first  r=<client nonce + server nonce>,s=<salt>,i=<iterations>
//! client-final  c=biws,r=<nonce>,p=<proof>
//! server-final  v=<server signature>   or   e=<error>
//! ```

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use ring::{digest, hmac, pbkdf2};

use crate::secret::Secret;

/// The hash of a SCRAM mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScramHash {
    /// SCRAM-SHA-256.
    Sha256,
    /// SCRAM-SHA-512.
    Sha512,
    /// SCRAM-SHA-1, only to check the exchange against RFC 5802's example.
    #[cfg(test)]
    Sha1,
}

impl ScramHash {
    /// The SASL mechanism name.
    pub fn mechanism(self) -> &'static str {
        match self {
            ScramHash::Sha256 => "SCRAM-SHA-256",
            ScramHash::Sha512 => "SCRAM-SHA-512",
            #[cfg(test)]
            ScramHash::Sha1 => "SCRAM-SHA-1",
        }
    }

    fn hmac(self) -> hmac::Algorithm {
        match self {
            ScramHash::Sha256 => hmac::HMAC_SHA256,
            ScramHash::Sha512 => hmac::HMAC_SHA512,
            #[cfg(test)]
            ScramHash::Sha1 => hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
        }
    }

    fn digest(self) -> &'static digest::Algorithm {
        match self {
            ScramHash::Sha256 => &digest::SHA256,
            ScramHash::Sha512 => &digest::SHA512,
            #[cfg(test)]
            ScramHash::Sha1 => &digest::SHA1_FOR_LEGACY_USE_ONLY,
        }
    }

    fn pbkdf2(self) -> pbkdf2::Algorithm {
        match self {
            ScramHash::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
            ScramHash::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
            #[cfg(test)]
            ScramHash::Sha1 => pbkdf2::PBKDF2_HMAC_SHA1,
        }
    }

    fn output_len(self) -> usize {
        self.digest().output_len()
    }
}

/// Kafka's lowest accepted iteration count for SCRAM-SHA-256 and -512
/// (`ScramMechanism.minIterations`); a server asking for fewer is refused.
const MIN_ITERATIONS: u32 = 4096;

/// Kafka's highest (`ScramMechanism.maxIterations`), which also bounds the work a server can
/// make us do.
const MAX_ITERATIONS: u32 = 16_384 * 64;

/// Why a SCRAM exchange failed on the client side.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScramError {
    /// The server's message does not parse.
    #[error("malformed SCRAM message from the broker: {0}")]
    Malformed(&'static str),
    /// The server's nonce does not extend ours (a replayed or foreign exchange).
    #[error("the broker's SCRAM nonce does not start with the client's")]
    NonceMismatch,
    /// Too few or too many iterations.
    #[error("the broker asks for {0} SCRAM iterations; Kafka accepts 4096 to 1048576")]
    Iterations(u32),
    /// The server said `e=...`.
    #[error("the broker refused the SCRAM proof: {0} (wrong user name or password?)")]
    Server(String),
    /// The server's signature is wrong: it does not know the password.
    #[error(
        "the broker's SCRAM signature is wrong: it does not hold this user's credentials (a \
         broker that is not the one it claims to be?)"
    )]
    BadServerSignature,
}

/// One SCRAM exchange, client side.
pub(crate) struct ScramClient {
    hash: ScramHash,
    password: Secret,
    client_nonce: String,
    first_bare: String,
    server_signature: Option<Vec<u8>>,
}

impl std::fmt::Debug for ScramClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramClient")
            .field("hash", &self.hash)
            .finish_non_exhaustive()
    }
}

impl ScramClient {
    /// Starts an exchange for `username`. `nonce` must be printable ASCII without `,` (tests
    /// pass RFC nonces; [`random_nonce`] makes one). `token_auth` adds Kafka's
    /// `tokenauth=true` (the user name is a delegation token id, the password its HMAC).
    pub(crate) fn new(
        hash: ScramHash,
        username: &str,
        password: &Secret,
        nonce: String,
        token_auth: bool,
    ) -> Self {
        let mut first_bare = format!("n={},r={nonce}", sasl_name(username));
        if token_auth {
            first_bare.push_str(",tokenauth=true");
        }
        Self {
            hash,
            password: password.clone(),
            client_nonce: nonce,
            first_bare,
            server_signature: None,
        }
    }

    /// The client-first message.
    pub(crate) fn client_first(&self) -> Vec<u8> {
        format!("n,,{}", self.first_bare).into_bytes()
    }

    /// Reads the server-first message and returns the client-final message.
    pub(crate) fn client_final(&mut self, server_first: &[u8]) -> Result<Vec<u8>, ScramError> {
        let server_first =
            std::str::from_utf8(server_first).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        if let Some(e) = attribute(server_first, 'e') {
            return Err(ScramError::Server(e.to_owned()));
        }
        if server_first.starts_with("m=") {
            return Err(ScramError::Malformed(
                "a mandatory extension (m=) strait does not know",
            ));
        }
        let nonce = attribute(server_first, 'r').ok_or(ScramError::Malformed("no nonce (r=)"))?;
        let salt = attribute(server_first, 's').ok_or(ScramError::Malformed("no salt (s=)"))?;
        let iterations =
            attribute(server_first, 'i').ok_or(ScramError::Malformed("no iteration count (i=)"))?;
        if !nonce.starts_with(&self.client_nonce) || nonce.len() == self.client_nonce.len() {
            return Err(ScramError::NonceMismatch);
        }
        let salt = STANDARD
            .decode(salt)
            .map_err(|_| ScramError::Malformed("the salt is not base64"))?;
        let iterations: u32 = iterations
            .parse()
            .map_err(|_| ScramError::Malformed("the iteration count is not a number"))?;
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
            return Err(ScramError::Iterations(iterations));
        }
        let iterations =
            std::num::NonZeroU32::new(iterations).ok_or(ScramError::Iterations(iterations))?;

        let mut salted = vec![0u8; self.hash.output_len()];
        pbkdf2::derive(
            self.hash.pbkdf2(),
            iterations,
            &salt,
            self.password.expose().as_bytes(),
            &mut salted,
        );
        let salted = hmac::Key::new(self.hash.hmac(), &salted);
        let client_key = hmac::sign(&salted, b"Client Key");
        let stored_key = digest::digest(self.hash.digest(), client_key.as_ref());
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.first_bare);
        let client_signature = hmac::sign(
            &hmac::Key::new(self.hash.hmac(), stored_key.as_ref()),
            auth_message.as_bytes(),
        );
        let proof: Vec<u8> = client_key
            .as_ref()
            .iter()
            .zip(client_signature.as_ref())
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = hmac::sign(&salted, b"Server Key");
        let server_signature = hmac::sign(
            &hmac::Key::new(self.hash.hmac(), server_key.as_ref()),
            auth_message.as_bytes(),
        );
        self.server_signature = Some(server_signature.as_ref().to_vec());
        Ok(format!("{without_proof},p={}", STANDARD.encode(proof)).into_bytes())
    }

    /// Checks the server-final message: the server proves it knows the password too.
    pub(crate) fn verify_server_final(&self, server_final: &[u8]) -> Result<(), ScramError> {
        let server_final =
            std::str::from_utf8(server_final).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        if let Some(e) = attribute(server_final, 'e') {
            return Err(ScramError::Server(e.to_owned()));
        }
        let v = attribute(server_final, 'v')
            .ok_or(ScramError::Malformed("no server signature (v=)"))?;
        let v = STANDARD
            .decode(v)
            .map_err(|_| ScramError::Malformed("the server signature is not base64"))?;
        let expected = self
            .server_signature
            .as_deref()
            .ok_or(ScramError::Malformed("server-final before server-first"))?;
        if !same_bytes(expected, &v) {
            return Err(ScramError::BadServerSignature);
        }
        Ok(())
    }
}

/// Whether two byte strings are equal, looking at every byte whatever the first difference.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A fresh client nonce: 24 random bytes, base64 (never a `,`).
pub(crate) fn random_nonce() -> String {
    let bytes: [u8; 24] = rand::random();
    STANDARD.encode(bytes)
}

/// RFC 5802's `saslname`: `=` and `,` escaped.
fn sasl_name(username: &str) -> String {
    username.replace('=', "=3D").replace(',', "=2C")
}

/// The value of attribute `name` (`name=value`) in a comma-separated SCRAM message.
fn attribute(message: &str, name: char) -> Option<&str> {
    message.split(',').find_map(|part| {
        let mut chars = part.chars();
        (chars.next() == Some(name) && chars.next() == Some('=')).then(|| &part[2..])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exchange(
        hash: ScramHash,
        client_nonce: &str,
        server_first: &str,
        client_final: &str,
        server_final: &str,
    ) {
        let mut client = ScramClient::new(
            hash,
            "user",
            &Secret::new("pencil"),
            client_nonce.to_owned(),
            false,
        );
        assert_eq!(
            client.client_first(),
            format!("n,,n=user,r={client_nonce}").into_bytes()
        );
        let ours = client.client_final(server_first.as_bytes()).unwrap();
        assert_eq!(String::from_utf8(ours).unwrap(), client_final);
        client.verify_server_final(server_final.as_bytes()).unwrap();
        let mut forged = server_final.to_owned();
        forged.replace_range(2..3, if &forged[2..3] == "A" { "B" } else { "A" });
        assert_eq!(
            client.verify_server_final(forged.as_bytes()),
            Err(ScramError::BadServerSignature)
        );
    }

    /// RFC 5802 §5, the example exchange (SCRAM-SHA-1).
    #[test]
    fn rfc5802_example() {
        exchange(
            ScramHash::Sha1,
            "fyko+d2lbbFgONRv9qkxdawL",
            "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
            "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
            "v=rmF9pqV8S7suAoZWja4dJRkFsKQ=",
        );
    }

    /// RFC 7677 §3, the example exchange (SCRAM-SHA-256).
    #[test]
    fn rfc7677_example() {
        exchange(
            ScramHash::Sha256,
            "rOprNGfwEbeRWgbNEkqO",
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
             p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
            "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
        );
    }

    /// SCRAM-SHA-512 has no RFC example; this one is RFC 7677's exchange computed with Python's
    /// `hashlib.pbkdf2_hmac` and `hmac` (an implementation that shares nothing with ring).
    #[test]
    fn sha512_cross_checked() {
        exchange(
            ScramHash::Sha512,
            "rOprNGfwEbeRWgbNEkqO",
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
             p=gMGXRcevScNtxZ6/8lQYpGtnsNAc3mGcmNomv+xnoOMw+3R2xNJdMNnzMlTN8PPC6wdp6dybEmDYXYTxwnYPJQ==",
            "v=ZQnYEgWQMFmmsM8aQMF0nDDCy/AgCzkwk8CmMZYcMg0vSVlKDanekLtifDSeVGT4+5ZxXnJq199RVG2rR7N7Zw==",
        );
    }

    #[test]
    fn names_are_escaped_and_token_auth_is_an_extension() {
        let client = ScramClient::new(
            ScramHash::Sha256,
            "a,b=c",
            &Secret::new("x"),
            "N".into(),
            true,
        );
        assert_eq!(
            client.client_first(),
            b"n,,n=a=2Cb=3Dc,r=N,tokenauth=true".to_vec()
        );
    }

    #[test]
    fn bad_server_messages() {
        let mut c = ScramClient::new(
            ScramHash::Sha256,
            "u",
            &Secret::new("p"),
            "abc".into(),
            false,
        );
        assert_eq!(
            c.client_final(b"r=xyz123,s=QSXCR+Q6sek8bf92,i=4096"),
            Err(ScramError::NonceMismatch)
        );
        assert_eq!(
            c.client_final(b"r=abc,s=QSXCR+Q6sek8bf92,i=4096"),
            Err(ScramError::NonceMismatch)
        );
        assert!(matches!(
            c.client_final(b"r=abcdef,i=4096"),
            Err(ScramError::Malformed(_))
        ));
        assert!(matches!(
            c.client_final(b"e=unknown-user"),
            Err(ScramError::Server(e)) if e == "unknown-user"
        ));
        assert!(matches!(
            c.verify_server_final(b"e=invalid-proof"),
            Err(ScramError::Server(e)) if e == "invalid-proof"
        ));
        assert_eq!(
            c.client_final(b"r=abcdef,s=QSXCR+Q6sek8bf92,i=1000"),
            Err(ScramError::Iterations(1000))
        );
        assert!(!random_nonce().contains(','));
        assert_ne!(random_nonce(), random_nonce());
    }
}
