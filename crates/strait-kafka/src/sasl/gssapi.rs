//! SASL/GSSAPI (RFC 4752) with Kerberos 5, as Kafka's Java client does it (its
//! `SaslClientAuthenticator` over the JDK's `GssKrb5Client`), on MIT Kerberos's GSS-API
//! library loaded at run time ([`strait_gssapi`]).
//!
//! 1. The target is the host-based service `<sasl.kerberos.service.name>@<broker host>`, the
//!    host as the connection dialled it (Kerberos: `kafka/broker1.example.com@REALM`).
//! 2. `gss_init_sec_context` tokens go to the broker in `SaslAuthenticate` messages until the
//!    context is established (mutual authentication: the broker's AP-REP comes back, and the
//!    client answers it with an empty message, as Java's client does).
//! 3. The broker sends its wrapped 4-byte security-layer offer (a bit mask, then its largest
//!    message); the client unwraps it and answers, wrapped without encryption: "no security
//!    layer" (1), the largest message it takes (65536, what Java sends), and its authorization
//!    id, the client principal.
//! 4. The broker's empty answer ends the exchange.
//!
//! Every GSS-API call may block on a KDC, so each step runs on tokio's blocking pool.
//! Credentials come from the JAAS line's keytab and principal (or a ticket cache), never from
//! process-wide settings: see [`GssapiConfig::credential_store`].

use std::path::PathBuf;
use std::sync::Arc;

use strait_gssapi::{Context, CredentialStore, Credentials};

/// The largest message the client says it takes after the exchange (Java's default; with no
/// security layer nothing is ever wrapped).
const MAX_RECEIVE: u32 = 65536;
/// RFC 4752's "no security layer" bit.
const NO_SECURITY_LAYER: u8 = 1;

/// GSSAPI settings: `sasl.kerberos.service.name` and what the `Krb5LoginModule` line gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GssapiConfig {
    /// `sasl.kerberos.service.name` (or the JAAS option `serviceName`): the brokers' service,
    /// usually `kafka`.
    pub service_name: String,
    /// The client principal (`mm2@EXAMPLE.COM`); `None` only with a ticket cache, whose own
    /// principal is then used.
    pub principal: Option<String>,
    /// `useKeyTab=true` and `keyTab`: a keytab with the principal's keys.
    pub keytab: Option<PathBuf>,
    /// `useTicketCache=true`: credentials from a ticket cache, `ticketCache` or (`None`) the
    /// default one (`KRB5CCNAME`).
    pub ticket_cache: Option<Option<String>>,
}

impl GssapiConfig {
    /// Where the credentials come from, as MIT's credential store options.
    ///
    /// - A keytab alone: `client_keytab` with an in-memory cache of this process named after
    ///   the principal and keytab, so every connection (and re-authentication) with this identity
    ///   shares its tickets, and the library gets new ones from the keytab before they expire.
    ///   No file cache is read or written.
    /// - A ticket cache: that cache (`FILE:` when a bare path), or the default; with a keytab
    ///   too (Java's `useTicketCache=true useKeyTab=true`: the cache first, else the keytab),
    ///   the keytab refreshes the cache.
    pub fn credential_store(&self) -> CredentialStore {
        let client_keytab = self
            .keytab
            .as_ref()
            .map(|k| format!("FILE:{}", k.display()));
        let ccache = match &self.ticket_cache {
            Some(Some(cache)) if cache.contains(':') && !cache.starts_with('/') => {
                Some(cache.clone())
            }
            Some(Some(cache)) => Some(format!("FILE:{cache}")),
            Some(None) => None,
            None => self.keytab.as_ref().map(|k| {
                format!(
                    "MEMORY:strait-gssapi {} {}",
                    self.principal.as_deref().unwrap_or("-"),
                    k.display()
                )
            }),
        };
        CredentialStore {
            principal: self.principal.clone(),
            client_keytab,
            ccache,
        }
    }

    /// Where the credentials come from, for messages.
    fn source(&self) -> String {
        let who = match &self.principal {
            Some(p) => format!("principal `{p}`"),
            None => "the ticket cache's principal".to_owned(),
        };
        let cache = match &self.ticket_cache {
            Some(Some(cache)) => Some(format!("ticket cache {cache}")),
            Some(None) => Some("the default ticket cache".to_owned()),
            None => None,
        };
        let keytab = self
            .keytab
            .as_ref()
            .map(|k| format!("keytab {}", k.display()));
        match (cache, keytab) {
            (Some(c), Some(k)) => format!("{who} ({c}, then {k})"),
            (Some(c), None) => format!("{who} ({c})"),
            (None, Some(k)) => format!("{who} ({k})"),
            (None, None) => who,
        }
    }
}

/// Whether MIT Kerberos's GSS-API library loads, with every function GSSAPI needs; why not
/// (e.g. "libgssapi_krb5.so.2 not found; install your distribution's MIT Kerberos GSS-API
/// library ...") if not.
pub fn check_library() -> Result<(), String> {
    strait_gssapi::check_library().map_err(|e| e.to_string())
}

/// The host of `host:port` (`[v6]:port` too).
fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

/// What a GSS-API error means, where the library's words leave it open.
fn hint(message: &str) -> &'static str {
    let m = message.to_ascii_lowercase();
    if m.contains("server") && m.contains("not found in kerberos database") {
        " (is sasl.kerberos.service.name right, and does the KDC know the broker by this host \
         name?)"
    } else if m.contains("client") && m.contains("not found in kerberos database") {
        " (the KDC does not know the principal)"
    } else if m.contains("clock skew") {
        " (this machine's clock and the KDC's or the broker's differ by more than the allowed \
         skew: synchronise them)"
    } else if m.contains("no key table entry") {
        " (the keytab has no key for this principal: ktadd it)"
    } else if m.contains("preauthentication failed")
        || m.contains("password incorrect")
        || m.contains("decrypt integrity check failed")
    {
        " (the keytab's key is not the principal's current one: export the keytab again)"
    } else if m.contains("cannot find kdc") || m.contains("cannot contact any kdc") {
        " (check krb5.conf, or the file KRB5_CONFIG names)"
    } else {
        ""
    }
}

/// The principals a keytab file holds keys for (`name/instance@REALM`), in file order without
/// repeats; `None` when it does not read as a keytab (format 0x0502 or 0x0501).
fn keytab_principals(bytes: &[u8]) -> Option<Vec<String>> {
    fn take<'a>(bytes: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        if bytes.len() < n {
            return None;
        }
        let (head, rest) = bytes.split_at(n);
        *bytes = rest;
        Some(head)
    }
    fn u16_of(bytes: &mut &[u8]) -> Option<u16> {
        take(bytes, 2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }
    fn text<'a>(bytes: &mut &'a [u8]) -> Option<&'a [u8]> {
        let n = u16_of(bytes)? as usize;
        take(bytes, n)
    }
    let mut rest = bytes;
    let version = match take(&mut rest, 2)? {
        [5, 2] => 2,
        [5, 1] => 1,
        _ => return None,
    };
    let mut principals: Vec<String> = Vec::new();
    while !rest.is_empty() {
        let size = take(&mut rest, 4).map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))?;
        let mut entry = take(&mut rest, size.unsigned_abs() as usize)?;
        if size <= 0 {
            continue; // A hole left by a removed entry.
        }
        let mut components = u16_of(&mut entry)? as usize;
        if version == 1 {
            components = components.checked_sub(1)?; // v1 counts the realm too.
        }
        let realm = String::from_utf8_lossy(text(&mut entry)?).into_owned();
        let mut name = Vec::with_capacity(components);
        for _ in 0..components {
            name.push(String::from_utf8_lossy(text(&mut entry)?).into_owned());
        }
        let principal = format!("{}@{realm}", name.join("/"));
        if !principals.contains(&principal) {
            principals.push(principal);
        }
    }
    Some(principals)
}

/// When the keytab at `path` reads and has no key for `principal` (a name without a realm
/// matches any realm): which principals it has.
fn keytab_lacks(path: &std::path::Path, principal: &str) -> Option<Vec<String>> {
    let principals = keytab_principals(&std::fs::read(path).ok()?)?;
    let found = principals.iter().any(|p| {
        p == principal || (!principal.contains('@') && p.split('@').next() == Some(principal))
    });
    (!found).then_some(principals)
}

/// Where a GSSAPI exchange is.
enum State {
    /// Context tokens go back and forth.
    Negotiating,
    /// Established: the next answer is the broker's wrapped security-layer offer.
    Established,
    /// The answer to the offer is sent; the broker's next answer ends the exchange.
    Answered,
}

/// One GSSAPI exchange (one authentication of one connection).
pub(crate) struct GssapiClient {
    context: Context,
    state: State,
    /// For messages: the client, the target.
    source: String,
    target: String,
}

impl std::fmt::Debug for GssapiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GssapiClient")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

/// Runs `work` on the blocking pool (GSS-API calls may wait for a KDC).
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| format!("the GSSAPI task failed: {e}"))?
}

impl GssapiClient {
    /// Acquires the credentials and makes the first token for the broker at `addr`.
    pub(crate) async fn start(
        config: &GssapiConfig,
        addr: &str,
    ) -> Result<(GssapiClient, Vec<u8>), String> {
        let config = config.clone();
        let host = host_of(addr).to_owned();
        blocking(move || {
            let source = config.source();
            if let Some(keytab) = &config.keytab {
                if let Err(e) = std::fs::File::open(keytab) {
                    return Err(format!(
                        "cannot read the keytab {} (sasl.jaas.config keyTab) of {}: {e}",
                        keytab.display(),
                        config
                            .principal
                            .as_deref()
                            .unwrap_or("the ticket cache's principal")
                    ));
                }
            }
            let service = &config.service_name;
            let target = format!("{service}/{host}");
            let credentials = Credentials::acquire(&config.credential_store()).map_err(|e| {
                let e = e.to_string();
                let lacking = config
                    .keytab
                    .as_deref()
                    .zip(config.principal.as_deref())
                    .and_then(|(keytab, principal)| keytab_lacks(keytab, principal));
                match lacking {
                    Some(has) => format!(
                        "no Kerberos credentials for {source}: the keytab has no key for this \
                         principal (it has keys for: {}); the library says: {e}",
                        if has.is_empty() {
                            "none".to_owned()
                        } else {
                            has.join(", ")
                        }
                    ),
                    None => format!("no Kerberos credentials for {source}: {e}{}", hint(&e)),
                }
            })?;
            let mut context = Context::new(Arc::new(credentials), &format!("{service}@{host}"))
                .map_err(|e| format!("bad service name `{target}`: {e}"))?;
            let first = context.step(None).map_err(|e| {
                let e = e.to_string();
                format!(
                    "{source} cannot get a Kerberos ticket for the broker's service `{target}` \
                     (sasl.kerberos.service.name `{service}`, broker host `{host}`): {e}{}",
                    hint(&e)
                )
            })?;
            let state = if first.established {
                State::Established
            } else {
                State::Negotiating
            };
            Ok((
                GssapiClient {
                    context,
                    state,
                    source,
                    target,
                },
                first.token,
            ))
        })
        .await
    }

    /// Reads the broker's answer: the next message, or `None` when the exchange is over.
    pub(crate) async fn step(
        self,
        answer: Vec<u8>,
    ) -> Result<(GssapiClient, Option<Vec<u8>>), String> {
        blocking(move || self.step_blocking(&answer)).await
    }

    fn step_blocking(mut self, answer: &[u8]) -> Result<(GssapiClient, Option<Vec<u8>>), String> {
        match self.state {
            State::Negotiating => {
                let step = self.context.step(Some(answer)).map_err(|e| {
                    let e = e.to_string();
                    format!(
                        "the broker's Kerberos answer for `{}` does not verify: {e}{}",
                        self.target,
                        hint(&e)
                    )
                })?;
                if step.established {
                    self.state = State::Established;
                }
                // Established without a token: Java's client sends an empty message.
                Ok((self, Some(step.token)))
            }
            State::Established => {
                let offer = self.context.unwrap(answer).map_err(|e| {
                    format!("the broker's security-layer offer does not unwrap: {e}")
                })?;
                if offer.len() != 4 {
                    return Err(format!(
                        "the broker's security-layer offer is {} bytes, not 4",
                        offer.len()
                    ));
                }
                if offer[0] & NO_SECURITY_LAYER == 0 {
                    return Err(format!(
                        "the broker requires a SASL security layer (offer {:#04x}); strait, like \
                         Kafka's Java client, uses none (protect the connection with \
                         SASL_SSL instead)",
                        offer[0]
                    ));
                }
                let authorization_id = self
                    .context
                    .initiator()
                    .map_err(|e| format!("the client principal's name: {e}"))?;
                let mut response = Vec::with_capacity(4 + authorization_id.len());
                response.push(NO_SECURITY_LAYER);
                response.extend_from_slice(&MAX_RECEIVE.to_be_bytes()[1..]);
                response.extend_from_slice(authorization_id.as_bytes());
                let wrapped = self
                    .context
                    .wrap(&response, false)
                    .map_err(|e| format!("cannot wrap the security-layer answer: {e}"))?;
                self.state = State::Answered;
                Ok((self, Some(wrapped)))
            }
            State::Answered => Ok((self, None)),
        }
    }

    /// What to add to the broker's refusal.
    pub(crate) fn refusal(&self) -> String {
        format!(
            "the broker refused the Kerberos authentication of {} to `{}`",
            self.source, self.target
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> GssapiConfig {
        GssapiConfig {
            service_name: "kafka".into(),
            principal: Some("mm2@EXAMPLE.COM".into()),
            keytab: Some("/etc/security/keytabs/mm2.keytab".into()),
            ticket_cache: None,
        }
    }

    #[test]
    fn hosts() {
        assert_eq!(host_of("broker1.example.com:9092"), "broker1.example.com");
        assert_eq!(host_of("[::1]:9092"), "::1");
        assert_eq!(host_of("localhost"), "localhost");
    }

    #[test]
    fn a_keytab_gets_a_memory_cache_of_its_own() {
        let store = config().credential_store();
        assert_eq!(store.principal.as_deref(), Some("mm2@EXAMPLE.COM"));
        assert_eq!(
            store.client_keytab.as_deref(),
            Some("FILE:/etc/security/keytabs/mm2.keytab")
        );
        assert!(store
            .ccache
            .as_deref()
            .is_some_and(|c| c.starts_with("MEMORY:")));
    }

    #[test]
    fn ticket_caches() {
        let mut config = config();
        config.keytab = None;
        config.principal = None;
        config.ticket_cache = Some(None);
        let store = config.credential_store();
        assert_eq!(store.ccache, None);
        assert_eq!(store.client_keytab, None);
        config.ticket_cache = Some(Some("/tmp/krb5cc_1000".into()));
        assert_eq!(
            config.credential_store().ccache.as_deref(),
            Some("FILE:/tmp/krb5cc_1000")
        );
        config.ticket_cache = Some(Some("KEYRING:persistent:1000".into()));
        assert_eq!(
            config.credential_store().ccache.as_deref(),
            Some("KEYRING:persistent:1000")
        );
        assert_eq!(
            config.source(),
            "the ticket cache's principal (ticket cache KEYRING:persistent:1000)"
        );
    }

    /// A keytab entry as MIT writes it (format 0x0502).
    fn entry(components: &[&str], realm: &str) -> Vec<u8> {
        let mut e = Vec::new();
        e.extend_from_slice(&(components.len() as u16).to_be_bytes());
        for part in std::iter::once(&realm).chain(components) {
            e.extend_from_slice(&(part.len() as u16).to_be_bytes());
            e.extend_from_slice(part.as_bytes());
        }
        e.extend_from_slice(&1u32.to_be_bytes()); // name type
        e.extend_from_slice(&0u32.to_be_bytes()); // timestamp
        e.push(2); // kvno
        e.extend_from_slice(&18u16.to_be_bytes()); // aes256-cts
        e.extend_from_slice(&32u16.to_be_bytes());
        e.extend_from_slice(&[7; 32]);
        e.extend_from_slice(&2u32.to_be_bytes());
        let mut framed = (e.len() as i32).to_be_bytes().to_vec();
        framed.extend(e);
        framed
    }

    #[test]
    fn keytab_principals_are_read() {
        let mut keytab = vec![5, 2];
        keytab.extend(entry(&["kafka", "localhost"], "EXAMPLE.COM"));
        keytab.extend((-12i32).to_be_bytes());
        keytab.extend([0; 12]);
        keytab.extend(entry(&["mm2"], "EXAMPLE.COM"));
        keytab.extend(entry(&["mm2"], "EXAMPLE.COM"));
        assert_eq!(
            keytab_principals(&keytab),
            Some(vec![
                "kafka/localhost@EXAMPLE.COM".to_owned(),
                "mm2@EXAMPLE.COM".to_owned()
            ])
        );
        assert_eq!(keytab_principals(b"not a keytab"), None);
        // Cut short: not a keytab, never a panic.
        for n in 0..keytab.len() {
            let _ = keytab_principals(&keytab[..n]);
        }
    }

    #[test]
    fn hints_for_what_gss_says() {
        assert!(
            hint("Server kafkax/localhost@R not found in Kerberos database")
                .contains("sasl.kerberos.service.name")
        );
        assert!(hint("Client 'x@R' not found in Kerberos database").contains("principal"));
        assert!(hint("Clock skew too great").contains("clock"));
        assert_eq!(hint("something else"), "");
    }
}
