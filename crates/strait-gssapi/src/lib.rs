//! The few GSS-API calls SASL/GSSAPI (Kerberos) needs, from MIT Kerberos's
//! `libgssapi_krb5.so.2` **loaded at run time** (`dlopen`), so that a strait binary starts on
//! machines without Kerberos and only a cluster configured for GSSAPI needs the library.
//!
//! The declarations are our own (RFC 2744's C bindings, and MIT's `gss_acquire_cred_from`
//! credential-store extension, krb5 1.11+), for the functions used: `gss_import_name`,
//! `gss_acquire_cred_from`, `gss_init_sec_context`, `gss_wrap`, `gss_unwrap`,
//! `gss_inquire_context`, `gss_display_name`, `gss_display_status` and the `gss_release_*`
//! / `gss_delete_sec_context` that free what they return.
//!
//! Credentials come from a credential store ([`CredentialStore`]: `client_keytab`, `ccache`),
//! so the keytab and principal of one cluster's `sasl.jaas.config` are used for it alone,
//! without process-wide `KRB5_CLIENT_KTNAME` or `KRB5CCNAME`. Where the KDCs are
//! (`krb5.conf`) is the library's business: `/etc/krb5.conf`, or the file `KRB5_CONFIG` names.
//!
//! Every call can block (it may talk to a KDC): call them off an async runtime's threads.
//! This is the only crate of strait with `unsafe` code.

use std::ffi::{c_char, c_int, c_void, CString};
use std::fmt;
use std::ptr;
use std::sync::{Arc, OnceLock};

/// The library's file name (the soname of MIT Kerberos's GSS-API library).
pub const LIBRARY: &str = "libgssapi_krb5.so.2";

/// An environment variable naming another file to load instead of [`LIBRARY`] (a path, or a
/// name the dynamic loader finds), e.g. a MIT Kerberos installed outside the loader's path.
pub const LIBRARY_ENV: &str = "STRAIT_GSSAPI_LIBRARY";

type OmUint32 = u32;
type GssName = *mut c_void;
type GssCtx = *mut c_void;
type GssCred = *mut c_void;

#[repr(C)]
struct Buffer {
    length: usize,
    value: *mut c_void,
}

impl Buffer {
    fn empty() -> Buffer {
        Buffer {
            length: 0,
            value: ptr::null_mut(),
        }
    }

    /// A buffer pointing at `bytes` (the library only reads input buffers).
    fn borrowing(bytes: &[u8]) -> Buffer {
        Buffer {
            length: bytes.len(),
            value: bytes.as_ptr() as *mut c_void,
        }
    }
}

#[repr(C)]
struct Oid {
    length: OmUint32,
    elements: *mut c_void,
}

#[repr(C)]
struct OidSet {
    count: usize,
    elements: *mut Oid,
}

#[repr(C)]
struct KeyValue {
    key: *const c_char,
    value: *const c_char,
}

#[repr(C)]
struct KeyValueSet {
    count: OmUint32,
    elements: *const KeyValue,
}

/// 1.2.840.113554.1.2.1.4, `GSS_C_NT_HOSTBASED_SERVICE`: `service@host`.
static NT_HOSTBASED_SERVICE: [u8; 10] =
    [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x01, 0x04];
/// 1.2.840.113554.1.2.2.1, `GSS_KRB5_NT_PRINCIPAL_NAME`: `user@REALM`.
static NT_KRB5_PRINCIPAL: [u8; 10] = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02, 0x01];
/// 1.2.840.113554.1.2.2, the Kerberos 5 mechanism.
static MECH_KRB5: [u8; 9] = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02];

fn oid(bytes: &'static [u8]) -> Oid {
    Oid {
        length: bytes.len() as OmUint32,
        elements: bytes.as_ptr() as *mut c_void,
    }
}

const GSS_S_COMPLETE: OmUint32 = 0;
const GSS_S_CONTINUE_NEEDED: OmUint32 = 1;
const GSS_C_GSS_CODE: c_int = 1;
const GSS_C_MECH_CODE: c_int = 2;
const GSS_C_INITIATE: c_int = 1;
const GSS_C_INDEFINITE: OmUint32 = 0xffff_ffff;
/// Flags of `gss_init_sec_context`.
const GSS_C_MUTUAL_FLAG: OmUint32 = 2;
const GSS_C_CONF_FLAG: OmUint32 = 16;
const GSS_C_INTEG_FLAG: OmUint32 = 32;

fn is_error(major: OmUint32) -> bool {
    major & 0xffff_0000 != 0
}

type ImportName =
    unsafe extern "C" fn(*mut OmUint32, *const Buffer, *const Oid, *mut GssName) -> OmUint32;
type AcquireCredFrom = unsafe extern "C" fn(
    *mut OmUint32,
    GssName,
    OmUint32,
    *const OidSet,
    c_int,
    *const KeyValueSet,
    *mut GssCred,
    *mut *mut OidSet,
    *mut OmUint32,
) -> OmUint32;
type InitSecContext = unsafe extern "C" fn(
    *mut OmUint32,
    GssCred,
    *mut GssCtx,
    GssName,
    *const Oid,
    OmUint32,
    OmUint32,
    *const c_void,
    *const Buffer,
    *mut *mut Oid,
    *mut Buffer,
    *mut OmUint32,
    *mut OmUint32,
) -> OmUint32;
type Wrap = unsafe extern "C" fn(
    *mut OmUint32,
    GssCtx,
    c_int,
    OmUint32,
    *const Buffer,
    *mut c_int,
    *mut Buffer,
) -> OmUint32;
type Unwrap = unsafe extern "C" fn(
    *mut OmUint32,
    GssCtx,
    *const Buffer,
    *mut Buffer,
    *mut c_int,
    *mut OmUint32,
) -> OmUint32;
type InquireContext = unsafe extern "C" fn(
    *mut OmUint32,
    GssCtx,
    *mut GssName,
    *mut GssName,
    *mut OmUint32,
    *mut *mut Oid,
    *mut OmUint32,
    *mut c_int,
    *mut c_int,
) -> OmUint32;
type DisplayName =
    unsafe extern "C" fn(*mut OmUint32, GssName, *mut Buffer, *mut *mut Oid) -> OmUint32;
type DisplayStatus = unsafe extern "C" fn(
    *mut OmUint32,
    OmUint32,
    c_int,
    *const Oid,
    *mut OmUint32,
    *mut Buffer,
) -> OmUint32;
type ReleaseBuffer = unsafe extern "C" fn(*mut OmUint32, *mut Buffer) -> OmUint32;
type ReleaseName = unsafe extern "C" fn(*mut OmUint32, *mut GssName) -> OmUint32;
type ReleaseCred = unsafe extern "C" fn(*mut OmUint32, *mut GssCred) -> OmUint32;
type DeleteSecContext = unsafe extern "C" fn(*mut OmUint32, *mut GssCtx, *mut Buffer) -> OmUint32;

/// The loaded library's functions.
struct Library {
    import_name: ImportName,
    acquire_cred_from: AcquireCredFrom,
    init_sec_context: InitSecContext,
    wrap: Wrap,
    unwrap: Unwrap,
    inquire_context: InquireContext,
    display_name: DisplayName,
    display_status: DisplayStatus,
    release_buffer: ReleaseBuffer,
    release_name: ReleaseName,
    release_cred: ReleaseCred,
    delete_sec_context: DeleteSecContext,
}

impl fmt::Debug for Library {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Library")
    }
}

#[cfg(unix)]
mod dl {
    use std::ffi::{c_char, c_int, c_void, CStr};

    #[cfg(target_os = "linux")]
    const RTLD_NOW: c_int = 2;
    #[cfg(not(target_os = "linux"))]
    const RTLD_NOW: c_int = 2;
    #[cfg(target_os = "linux")]
    const RTLD_LOCAL: c_int = 0;
    #[cfg(not(target_os = "linux"))]
    const RTLD_LOCAL: c_int = 4;

    // On glibc 2.34 and later, and on the BSDs and macOS, these are in the C library std
    // already links; older glibc keeps them in libdl.
    #[cfg_attr(all(target_os = "linux", target_env = "gnu"), link(name = "dl"))]
    extern "C" {
        fn dlopen(filename: *const c_char, flag: c_int) -> *mut c_void;
        fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
        fn dlerror() -> *mut c_char;
    }

    fn last_error() -> String {
        // SAFETY: dlerror returns NULL or a NUL-terminated string valid until the next dl* call
        // on this thread; it is copied at once.
        unsafe {
            let message = dlerror();
            if message.is_null() {
                "unknown error".to_owned()
            } else {
                CStr::from_ptr(message).to_string_lossy().into_owned()
            }
        }
    }

    /// Opens a shared library, never closed.
    pub(super) fn open(name: &CStr) -> Result<*mut c_void, String> {
        // SAFETY: `name` is NUL-terminated; dlopen runs the library's initialisers, which for
        // MIT Kerberos only set up its own state.
        let handle = unsafe { dlopen(name.as_ptr(), RTLD_NOW | RTLD_LOCAL) };
        if handle.is_null() {
            Err(last_error())
        } else {
            Ok(handle)
        }
    }

    /// The address of `symbol` in `handle`.
    pub(super) fn symbol(handle: *mut c_void, symbol: &CStr) -> Result<*mut c_void, String> {
        // SAFETY: `handle` came from dlopen and is never closed; `symbol` is NUL-terminated.
        let address = unsafe { dlsym(handle, symbol.as_ptr()) };
        if address.is_null() {
            Err(last_error())
        } else {
            Ok(address)
        }
    }
}

fn load() -> Result<Library, String> {
    match std::env::var(LIBRARY_ENV)
        .ok()
        .filter(|v| !v.trim().is_empty())
    {
        Some(name) => load_named(&name, true),
        None => load_named(LIBRARY, false),
    }
}

/// Loads `name`; `configured`: it came from [`LIBRARY_ENV`].
#[cfg(unix)]
fn load_named(name: &str, configured: bool) -> Result<Library, String> {
    let c_name = CString::new(name).map_err(|_| format!("{LIBRARY_ENV} holds a NUL"))?;
    let handle = dl::open(&c_name).map_err(|e| {
        if configured {
            format!("cannot load {name} (from {LIBRARY_ENV}): {e}")
        } else {
            format!(
                "{name} not found; install your distribution's MIT Kerberos GSS-API library \
                 (Debian, Ubuntu: libgssapi-krb5-2; Fedora, RHEL: krb5-libs; Alpine: krb5-libs) \
                 or name it in {LIBRARY_ENV} ({e})"
            )
        }
    })?;
    macro_rules! function {
        ($name:literal, $ty:ty) => {{
            let address = dl::symbol(handle, $name).map_err(|e| {
                format!(
                    "{name} has no {}: strait needs MIT Kerberos 1.11 or later ({e})",
                    $name.to_string_lossy()
                )
            })?;
            // SAFETY: the symbol is the GSS-API function of that name, whose C signature (RFC
            // 2744, MIT's gssapi_ext.h for gss_acquire_cred_from) is what `$ty` declares.
            unsafe { std::mem::transmute::<*mut c_void, $ty>(address) }
        }};
    }
    Ok(Library {
        import_name: function!(c"gss_import_name", ImportName),
        acquire_cred_from: function!(c"gss_acquire_cred_from", AcquireCredFrom),
        init_sec_context: function!(c"gss_init_sec_context", InitSecContext),
        wrap: function!(c"gss_wrap", Wrap),
        unwrap: function!(c"gss_unwrap", Unwrap),
        inquire_context: function!(c"gss_inquire_context", InquireContext),
        display_name: function!(c"gss_display_name", DisplayName),
        display_status: function!(c"gss_display_status", DisplayStatus),
        release_buffer: function!(c"gss_release_buffer", ReleaseBuffer),
        release_name: function!(c"gss_release_name", ReleaseName),
        release_cred: function!(c"gss_release_cred", ReleaseCred),
        delete_sec_context: function!(c"gss_delete_sec_context", DeleteSecContext),
    })
}

#[cfg(not(unix))]
fn load_named(_name: &str, _configured: bool) -> Result<Library, String> {
    Err(format!(
        "GSSAPI needs MIT Kerberos's {LIBRARY}, which strait loads on Linux and other Unix \
         systems only"
    ))
}

fn library() -> Result<&'static Library, Error> {
    static LIBRARY: OnceLock<Result<Library, String>> = OnceLock::new();
    LIBRARY
        .get_or_init(load)
        .as_ref()
        .map_err(|e| Error::Library(e.clone()))
}

/// Whether the library can be loaded (and has every function needed); why not if not.
pub fn check_library() -> Result<(), Error> {
    library().map(|_| ())
}

/// Why a GSS-API operation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The library cannot be loaded.
    Library(String),
    /// A call failed: which, and the library's own words for its major and minor status.
    Call {
        /// The GSS-API function.
        call: &'static str,
        /// Its major status.
        major: u32,
        /// Its minor (Kerberos) status.
        minor: u32,
        /// `gss_display_status` of both, e.g. "Unspecified GSS failure.  Minor code may
        /// provide more information: Server not found in Kerberos database".
        message: String,
    },
    /// An argument the library cannot take (a string holding NUL).
    Argument(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Library(message) | Error::Argument(message) => f.write_str(message),
            Error::Call { call, message, .. } => write!(f, "{call}: {message}"),
        }
    }
}

impl std::error::Error for Error {}

impl Library {
    /// The library's text for one status code of `kind`.
    fn status_text(&self, code: OmUint32, kind: c_int) -> Vec<String> {
        let mut texts = Vec::new();
        let mut context: OmUint32 = 0;
        let mech = oid(&MECH_KRB5);
        // Messages come one at a time; a bad library could loop, so at most a few.
        for _ in 0..8 {
            let mut minor = 0;
            let mut text = Buffer::empty();
            // SAFETY: all pointers are to live locals; the library fills `text`, released below.
            let major = unsafe {
                (self.display_status)(&mut minor, code, kind, &mech, &mut context, &mut text)
            };
            if is_error(major) {
                break;
            }
            let piece = self.take_buffer(&mut text);
            let piece = String::from_utf8_lossy(&piece).trim().to_owned();
            if !piece.is_empty() {
                texts.push(piece);
            }
            if context == 0 {
                break;
            }
        }
        texts
    }

    /// An [`Error::Call`] for `call`'s statuses, in the library's words. Must run on the thread
    /// that made the call: MIT keeps the details of the last error per thread.
    fn error(&self, call: &'static str, major: OmUint32, minor: OmUint32) -> Error {
        let mut texts = self.status_text(major, GSS_C_GSS_CODE);
        if minor != 0 {
            texts.extend(self.status_text(minor, GSS_C_MECH_CODE));
        }
        let message = if texts.is_empty() {
            format!("major status {major:#x}, minor status {minor:#x}")
        } else {
            texts.join(": ")
        };
        Error::Call {
            call,
            major,
            minor,
            message,
        }
    }

    /// Copies a buffer the library allocated, and releases it.
    fn take_buffer(&self, buffer: &mut Buffer) -> Vec<u8> {
        let bytes = if buffer.value.is_null() || buffer.length == 0 {
            Vec::new()
        } else {
            // SAFETY: the library filled `buffer` with `length` bytes at `value`.
            unsafe { std::slice::from_raw_parts(buffer.value as *const u8, buffer.length) }.to_vec()
        };
        let mut minor = 0;
        // SAFETY: `buffer` was allocated by the library (or is empty, which it accepts).
        unsafe { (self.release_buffer)(&mut minor, buffer) };
        bytes
    }

    fn import_name(&'static self, text: &str, kind: &'static [u8]) -> Result<Name, Error> {
        let input = Buffer::borrowing(text.as_bytes());
        let name_type = oid(kind);
        let mut minor = 0;
        let mut name: GssName = ptr::null_mut();
        // SAFETY: `input` points at `text`, alive for the call; the library copies it.
        let major = unsafe { (self.import_name)(&mut minor, &input, &name_type, &mut name) };
        if is_error(major) {
            return Err(self.error("gss_import_name", major, minor));
        }
        Ok(Name { lib: self, name })
    }

    fn display_name(&self, name: GssName) -> Result<String, Error> {
        let mut minor = 0;
        let mut text = Buffer::empty();
        // SAFETY: `name` is a live name; the library fills `text`, released by take_buffer.
        let major = unsafe { (self.display_name)(&mut minor, name, &mut text, ptr::null_mut()) };
        if is_error(major) {
            return Err(self.error("gss_display_name", major, minor));
        }
        Ok(String::from_utf8_lossy(&self.take_buffer(&mut text)).into_owned())
    }
}

/// A name the library made, released on drop.
struct Name {
    lib: &'static Library,
    name: GssName,
}

impl Drop for Name {
    fn drop(&mut self) {
        let mut minor = 0;
        // SAFETY: `name` came from gss_import_name and is released once.
        unsafe { (self.lib.release_name)(&mut minor, &mut self.name) };
    }
}

/// Where the client's Kerberos credentials come from: MIT's credential store options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CredentialStore {
    /// The client principal (`mm2@EXAMPLE.COM`); `None`: the credential cache's.
    pub principal: Option<String>,
    /// `client_keytab`: a keytab holding the principal's keys, from which the library gets
    /// (and, before they expire, gets again) tickets.
    pub client_keytab: Option<String>,
    /// `ccache`: the credential cache (`FILE:/tmp/krb5cc_1000`, `MEMORY:name`); `None`: the
    /// default one (`KRB5CCNAME`, or krb5.conf's `default_ccache_name`).
    pub ccache: Option<String>,
}

/// A client's Kerberos credentials, released on drop. Shareable between threads (MIT locks
/// its credential handles).
pub struct Credentials {
    lib: &'static Library,
    cred: GssCred,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Credentials")
    }
}

// SAFETY: a credential handle is an opaque pointer that MIT's library guards with its own
// mutex; it may be used from, and released on, any thread.
unsafe impl Send for Credentials {}
// SAFETY: as above: concurrent gss_init_sec_context calls on one handle are locked inside.
unsafe impl Sync for Credentials {}

impl Drop for Credentials {
    fn drop(&mut self) {
        let mut minor = 0;
        // SAFETY: `cred` came from gss_acquire_cred_from and is released once.
        unsafe { (self.lib.release_cred)(&mut minor, &mut self.cred) };
    }
}

impl Credentials {
    /// Acquires initiator credentials from `store` (`gss_acquire_cred_from`). With a keytab,
    /// this may not talk to the KDC yet: the first [`Context::step`] does.
    ///
    /// # Errors
    ///
    /// The library is missing, or has no credentials for the principal (e.g. the keytab has
    /// no key for it, the cache holds another principal's or none).
    pub fn acquire(store: &CredentialStore) -> Result<Credentials, Error> {
        let lib = library()?;
        let name = match &store.principal {
            Some(principal) => Some(lib.import_name(principal, &NT_KRB5_PRINCIPAL)?),
            None => None,
        };
        let mut strings = Vec::new();
        for (key, value) in [
            ("client_keytab", &store.client_keytab),
            ("ccache", &store.ccache),
        ] {
            if let Some(value) = value {
                let value = CString::new(value.as_str())
                    .map_err(|_| Error::Argument(format!("{key} holds a NUL character")))?;
                strings.push((CString::new(key).expect("no NUL"), value));
            }
        }
        let elements: Vec<KeyValue> = strings
            .iter()
            .map(|(k, v)| KeyValue {
                key: k.as_ptr(),
                value: v.as_ptr(),
            })
            .collect();
        let set = KeyValueSet {
            count: elements.len() as OmUint32,
            elements: elements.as_ptr(),
        };
        let mut krb5 = oid(&MECH_KRB5);
        let mechs = OidSet {
            count: 1,
            elements: &mut krb5,
        };
        let mut minor = 0;
        let mut cred: GssCred = ptr::null_mut();
        // SAFETY: every pointer is to a live local (`strings` owns the C strings the key-value
        // elements point at); the library copies what it keeps. `cred` receives a handle
        // released by Credentials' Drop.
        let major = unsafe {
            (lib.acquire_cred_from)(
                &mut minor,
                name.as_ref().map_or(ptr::null_mut(), |n| n.name),
                GSS_C_INDEFINITE,
                &mechs,
                GSS_C_INITIATE,
                &set,
                &mut cred,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        if is_error(major) {
            return Err(lib.error("gss_acquire_cred_from", major, minor));
        }
        Ok(Credentials { lib, cred })
    }
}

/// What one [`Context::step`] gives.
#[derive(Debug)]
pub struct Step {
    /// The token to send to the acceptor (may be empty).
    pub token: Vec<u8>,
    /// Whether the context is established (no more tokens are expected).
    pub established: bool,
}

/// A Kerberos security context with a service (the initiator's side), deleted on drop.
pub struct Context {
    lib: &'static Library,
    cred: Arc<Credentials>,
    target: Name,
    ctx: GssCtx,
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Context")
    }
}

// SAFETY: a context is used by one thread at a time (`&mut self` for steps, `&self` for
// wrap/unwrap which the library allows concurrently with nothing else here since Context is not
// Sync); moving it to another thread between calls is fine.
unsafe impl Send for Context {}

impl Drop for Context {
    fn drop(&mut self) {
        if !self.ctx.is_null() {
            let mut minor = 0;
            // SAFETY: `ctx` came from gss_init_sec_context and is deleted once; no token is
            // wanted back.
            unsafe { (self.lib.delete_sec_context)(&mut minor, &mut self.ctx, ptr::null_mut()) };
        }
    }
}

impl Context {
    /// A context with the host-based service `service@host` (`kafka@broker1.example.com`),
    /// which Kerberos names `service/host@REALM`.
    ///
    /// # Errors
    ///
    /// The name does not import.
    pub fn new(cred: Arc<Credentials>, service_at_host: &str) -> Result<Context, Error> {
        let lib = cred.lib;
        let target = lib.import_name(service_at_host, &NT_HOSTBASED_SERVICE)?;
        Ok(Context {
            lib,
            cred,
            target,
            ctx: ptr::null_mut(),
        })
    }

    /// One `gss_init_sec_context`: `input` is the acceptor's last token (`None` at first).
    /// Asks for mutual authentication, integrity and confidentiality, as Java's GSSAPI SASL
    /// client does.
    ///
    /// # Errors
    ///
    /// The library's, e.g. the KDC does not know the service or the client, clocks differ.
    pub fn step(&mut self, input: Option<&[u8]>) -> Result<Step, Error> {
        let input = input.map(Buffer::borrowing);
        let mech = oid(&MECH_KRB5);
        let mut minor = 0;
        let mut output = Buffer::empty();
        // SAFETY: every pointer is to a live local or field; `input` borrows the caller's
        // bytes for the call; `output` is released by take_buffer; `ctx` is updated in place.
        let major = unsafe {
            (self.lib.init_sec_context)(
                &mut minor,
                self.cred.cred,
                &mut self.ctx,
                self.target.name,
                &mech,
                GSS_C_MUTUAL_FLAG | GSS_C_CONF_FLAG | GSS_C_INTEG_FLAG,
                0,
                ptr::null(),
                input.as_ref().map_or(ptr::null(), |b| b as *const Buffer),
                ptr::null_mut(),
                &mut output,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        let token = self.lib.take_buffer(&mut output);
        if is_error(major) {
            return Err(self.lib.error("gss_init_sec_context", major, minor));
        }
        match major & 0xffff {
            GSS_S_COMPLETE => Ok(Step {
                token,
                established: true,
            }),
            GSS_S_CONTINUE_NEEDED => Ok(Step {
                token,
                established: false,
            }),
            other => Err(Error::Call {
                call: "gss_init_sec_context",
                major,
                minor,
                message: format!("unexpected supplementary status {other:#x}"),
            }),
        }
    }

    /// Wraps `message` for the acceptor, encrypted when `confidential`.
    ///
    /// # Errors
    ///
    /// The library's (the context is not established, ...).
    pub fn wrap(&self, message: &[u8], confidential: bool) -> Result<Vec<u8>, Error> {
        let input = Buffer::borrowing(message);
        let mut minor = 0;
        let mut output = Buffer::empty();
        // SAFETY: pointers to live locals; `output` is released by take_buffer.
        let major = unsafe {
            (self.lib.wrap)(
                &mut minor,
                self.ctx,
                c_int::from(confidential),
                0,
                &input,
                ptr::null_mut(),
                &mut output,
            )
        };
        let token = self.lib.take_buffer(&mut output);
        if is_error(major) {
            return Err(self.lib.error("gss_wrap", major, minor));
        }
        Ok(token)
    }

    /// Unwraps (checks, decrypts) a token from the acceptor.
    ///
    /// # Errors
    ///
    /// The token is not one of this context's (bad integrity, wrong format).
    pub fn unwrap(&self, token: &[u8]) -> Result<Vec<u8>, Error> {
        let input = Buffer::borrowing(token);
        let mut minor = 0;
        let mut output = Buffer::empty();
        // SAFETY: pointers to live locals; `output` is released by take_buffer.
        let major = unsafe {
            (self.lib.unwrap)(
                &mut minor,
                self.ctx,
                &input,
                &mut output,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        let message = self.lib.take_buffer(&mut output);
        if is_error(major) {
            return Err(self.lib.error("gss_unwrap", major, minor));
        }
        Ok(message)
    }

    /// The client principal the context authenticates (`mm2@EXAMPLE.COM`).
    ///
    /// # Errors
    ///
    /// The context is not started.
    pub fn initiator(&self) -> Result<String, Error> {
        let mut minor = 0;
        let mut source: GssName = ptr::null_mut();
        // SAFETY: `ctx` is live; only the source name is asked for (the other outputs are
        // NULL, which the function allows); it is released by Name's Drop.
        let major = unsafe {
            (self.lib.inquire_context)(
                &mut minor,
                self.ctx,
                &mut source,
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        if is_error(major) {
            return Err(self.lib.error("gss_inquire_context", major, minor));
        }
        let source = Name {
            lib: self.lib,
            name: source,
        };
        self.lib.display_name(source.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_statuses() {
        assert!(!is_error(GSS_S_COMPLETE));
        assert!(!is_error(GSS_S_CONTINUE_NEEDED));
        // GSS_S_FAILURE (13 << 16), GSS_S_BAD_NAME (2 << 16).
        assert!(is_error(13 << 16));
        assert!(is_error(2 << 16));
    }

    #[test]
    fn a_missing_library_says_what_to_install() {
        let e = load_named("libstrait-no-such-gssapi.so.2", false).unwrap_err();
        assert!(
            e.starts_with(
                "libstrait-no-such-gssapi.so.2 not found; install your distribution's MIT \
                 Kerberos GSS-API library"
            ),
            "{e}"
        );
        let e = load_named("/nowhere/libgssapi_krb5.so.2", true).unwrap_err();
        assert!(e.contains(LIBRARY_ENV), "{e}");
        // A library without the GSS-API functions.
        let e = load_named("libc.so.6", false).unwrap_err();
        assert!(e.contains("has no gss_import_name"), "{e}");
    }

    #[test]
    fn the_installed_library_loads() {
        // The tests' machines have MIT Kerberos (scripts/test-broker install).
        load_named(LIBRARY, false).unwrap();
    }
}
