//! Config providers (Kafka's KIP-297; MM2 resolves them in its own file, KIP-421): a value may
//! hold `${provider:path:key}` references, replaced when the file is read, so that no secret
//! needs to sit in the properties file.
//!
//! The providers, as Kafka declares them:
//!
//! ```properties
//! config.providers = file, env, dir
//! config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider
//! config.providers.env.class  = org.apache.kafka.common.config.provider.EnvVarConfigProvider
//! config.providers.dir.class  = org.apache.kafka.common.config.provider.DirectoryConfigProvider
//! ```
//!
//! - `FileConfigProvider`: `${file:/etc/kafka/secrets.properties:password}` is the key
//!   `password` of that properties file (read as Java reads properties).
//! - `DirectoryConfigProvider`: `${dir:/run/secrets:password}` is the content of the file
//!   `/run/secrets/password` (a mounted Kubernetes secret, say), as is. strait's addition: a
//!   name with `*` or `?` is a pattern, `${dir:/run/secrets/ca:*.crt}` the text of every
//!   matching file one after the other (PEM certificates, as Strimzi's `trustedCertificates`
//!   `pattern` takes them), read again at each load.
//! - `EnvVarConfigProvider`: `${env:KAFKA_PASSWORD}` is that environment variable.
//!
//! Kafka's parameters are honoured: `config.providers.<name>.param.allowed.paths` (file and
//! directory providers: only files under these directories) and
//! `config.providers.<name>.param.allowlist.pattern` (env provider: only matching names).
//!
//! **strait's built-ins.** When `config.providers` is not set, strait provides `env`, `file`
//! and `directory` under those names without any declaration. When it is set, exactly the
//! declared providers exist, as in Kafka.
//!
//! **Stricter than Kafka.** Kafka leaves a reference it cannot resolve in place, so the brokers
//! would receive the literal `${...}` text; strait refuses to start instead, naming the key and
//! line. References are not resolved recursively, as in Kafka. The `config.providers*` keys are
//! consumed here and never reach the rest of the config.

use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path, PathBuf};

use regex::Regex;

use super::error::{ConfigError, ConfigErrorReason};
use super::properties::{self, Properties};
use crate::filter::{java_trim, split_list};

const FILE_CLASS: &str = "org.apache.kafka.common.config.provider.FileConfigProvider";
const DIRECTORY_CLASS: &str = "org.apache.kafka.common.config.provider.DirectoryConfigProvider";
const ENV_CLASS: &str = "org.apache.kafka.common.config.provider.EnvVarConfigProvider";

/// What a provider reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Directory,
    Env,
}

#[derive(Debug)]
struct Provider {
    kind: Kind,
    /// `param.allowed.paths`: directories files must be under; empty means anywhere.
    allowed_paths: Vec<PathBuf>,
    /// `param.allowlist.pattern`: environment variable names allowed; `None` means all.
    allowlist: Option<Regex>,
}

/// `props` with every `${provider:path:key}` replaced and the `config.providers*` keys removed.
pub(crate) fn resolve(props: &Properties, path: &Path) -> Result<Properties, ConfigError> {
    let providers = declared(props, path)?;
    // Kafka's ConfigTransformer pattern: provider, optional path, key.
    let reference = Regex::new(r"\$\{([^}]*?):(?:([^}]*?):)?([^}]*?)\}")
        .expect("the reference pattern compiles");
    let mut out = props.clone();
    let mut files: HashMap<PathBuf, Properties> = HashMap::new();
    for (key, prop) in props.iter() {
        if is_provider_key(key) {
            out.remove(key);
            continue;
        }
        if !prop.value.contains("${") {
            continue;
        }
        let fail = |message: String| ConfigError {
            path: path.to_owned(),
            line: Some(prop.line),
            key: Some(key.to_owned()),
            reason: ConfigErrorReason::ConfigProvider(message),
        };
        let mut value = String::with_capacity(prop.value.len());
        let mut last = 0;
        for caps in reference.captures_iter(&prop.value) {
            let whole = caps.get(0).expect("a match has group 0");
            let name = &caps[1];
            let file = caps.get(2).map_or("", |m| m.as_str());
            let variable = &caps[3];
            let Some(provider) = providers.get(name) else {
                return Err(fail(undeclared(name, &providers)));
            };
            let resolved = match provider.kind {
                Kind::Env => env(name, provider, file, variable),
                Kind::File => from_file(name, provider, file, variable, &mut files),
                Kind::Directory => from_directory(name, provider, file, variable),
            }
            .map_err(&fail)?;
            value.push_str(&prop.value[last..whole.start()]);
            value.push_str(&resolved);
            last = whole.end();
        }
        if last > 0 {
            value.push_str(&prop.value[last..]);
            out.set_value(key, value);
        }
    }
    Ok(out)
}

fn is_provider_key(key: &str) -> bool {
    key == "config.providers" || key.starts_with("config.providers.")
}

/// The providers in force: those `config.providers` declares, else strait's built-ins.
fn declared(props: &Properties, path: &Path) -> Result<BTreeMap<String, Provider>, ConfigError> {
    let mut providers = BTreeMap::new();
    let Some(list) = props.get("config.providers") else {
        for (name, kind) in [
            ("env", Kind::Env),
            ("file", Kind::File),
            ("directory", Kind::Directory),
        ] {
            providers.insert(
                name.to_owned(),
                Provider {
                    kind,
                    allowed_paths: Vec::new(),
                    allowlist: None,
                },
            );
        }
        return Ok(providers);
    };
    let fail = |key: &str, line: usize, message: String| ConfigError {
        path: path.to_owned(),
        line: Some(line),
        key: Some(key.to_owned()),
        reason: ConfigErrorReason::ConfigProvider(message),
    };
    for name in split_list(&list.value) {
        if name.is_empty() {
            return Err(fail(
                "config.providers",
                list.line,
                "a provider name is empty (two commas in a row?)".into(),
            ));
        }
        let class_key = format!("config.providers.{name}.class");
        let Some(class) = props.get(&class_key) else {
            return Err(fail(
                "config.providers",
                list.line,
                format!(
                    "provider `{name}` is listed but `{class_key}` is not set (Kafka requires it), \
                     e.g. `{class_key} = {FILE_CLASS}`"
                ),
            ));
        };
        let kind = match java_trim(&class.value) {
            FILE_CLASS => Kind::File,
            DIRECTORY_CLASS => Kind::Directory,
            ENV_CLASS => Kind::Env,
            other => {
                return Err(ConfigError {
                    path: path.to_owned(),
                    line: Some(class.line),
                    key: Some(class_key),
                    reason: ConfigErrorReason::UnsupportedClass {
                        class: other.to_owned(),
                        supported: [FILE_CLASS, DIRECTORY_CLASS, ENV_CLASS].join(", "),
                    },
                })
            }
        };
        let allowed_key = format!("config.providers.{name}.param.allowed.paths");
        let allowed_paths = match props.get(&allowed_key) {
            Some(p) => split_list(&p.value)
                .into_iter()
                .filter(|p| !p.is_empty())
                .map(|p| normalize(Path::new(p)))
                .collect(),
            None => Vec::new(),
        };
        let pattern_key = format!("config.providers.{name}.param.allowlist.pattern");
        let allowlist = match props.get(&pattern_key) {
            Some(p) => Some(
                Regex::new(&format!("^(?:{})$", p.value))
                    .map_err(|e| fail(&pattern_key, p.line, format!("invalid regex: {e}")))?,
            ),
            None => None,
        };
        providers.insert(
            name.to_owned(),
            Provider {
                kind,
                allowed_paths,
                allowlist,
            },
        );
    }
    Ok(providers)
}

fn undeclared(name: &str, providers: &BTreeMap<String, Provider>) -> String {
    let known: Vec<&str> = providers.keys().map(String::as_str).collect();
    format!(
        "the reference `${{{name}:...}}` names config provider `{name}`, which is not declared \
         (providers: {}); Kafka would send the reference to the brokers as literal text",
        known.join(", ")
    )
}

fn env(name: &str, provider: &Provider, path: &str, variable: &str) -> Result<String, String> {
    if !path.is_empty() {
        return Err(format!(
            "`${{{name}:...}}`: the environment provider takes no path, only `${{{name}:VARIABLE}}`"
        ));
    }
    if let Some(allowlist) = &provider.allowlist {
        if !allowlist.is_match(variable) {
            return Err(format!(
                "environment variable `{variable}` is not allowed by provider `{name}`'s \
                 allowlist.pattern"
            ));
        }
    }
    std::env::var(variable).map_err(|e| match e {
        std::env::VarError::NotPresent => {
            format!("environment variable `{variable}` is not set")
        }
        std::env::VarError::NotUnicode(_) => {
            format!("environment variable `{variable}` is not valid Unicode")
        }
    })
}

fn from_file(
    name: &str,
    provider: &Provider,
    file: &str,
    key: &str,
    cache: &mut HashMap<PathBuf, Properties>,
) -> Result<String, String> {
    let file = allowed(name, provider, file)?;
    if !cache.contains_key(&file) {
        let bytes = std::fs::read(&file)
            .map_err(|e| format!("cannot read {} (provider `{name}`): {e}", file.display()))?;
        let parsed = properties::parse(&properties::decode(&bytes)).map_err(|e| {
            format!(
                "{} (provider `{name}`) is not a properties file: line {}",
                file.display(),
                e.line
            )
        })?;
        cache.insert(file.clone(), parsed);
    }
    cache
        .get(&file)
        .and_then(|p| p.get(key))
        .map(|p| p.value.clone())
        .ok_or_else(|| format!("{} (provider `{name}`) has no key `{key}`", file.display()))
}

fn from_directory(
    name: &str,
    provider: &Provider,
    dir: &str,
    file: &str,
) -> Result<String, String> {
    let dir = allowed(name, provider, dir)?;
    if file.is_empty() || file.contains('/') || file == "." || file == ".." {
        return Err(format!(
            "`{file}` is not a file name in {} (provider `{name}`)",
            dir.display()
        ));
    }
    if file.contains(['*', '?']) {
        return from_matching_files(name, &dir, file);
    }
    read_text(name, &dir.join(file))
}

/// `${directory:<dir>:<pattern>}` (strait's, for the `pattern` of Strimzi's trusted
/// certificates, `docs/strimzi.md`): the text of every file of `dir` whose name matches, in
/// name order, each starting on a line of its own. Read at every load, so a reload takes the
/// files there now. Directories (a mounted Secret's `..data`) are not files; no file
/// matching is an error, as Kafka's provider fails on a missing file.
fn from_matching_files(name: &str, dir: &Path, pattern: &str) -> Result<String, String> {
    let cannot_list =
        |e: std::io::Error| format!("cannot list {} (provider `{name}`): {e}", dir.display());
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(cannot_list)? {
        let entry = entry.map_err(cannot_list)?;
        let Ok(file) = entry.file_name().into_string() else {
            continue;
        };
        if glob_matches(pattern, &file) && entry.path().is_file() {
            files.push(file);
        }
    }
    if files.is_empty() {
        return Err(format!(
            "no file in {} matches `{pattern}` (provider `{name}`)",
            dir.display()
        ));
    }
    files.sort();
    let mut text = String::new();
    for file in files {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&read_text(name, &dir.join(file))?);
    }
    Ok(text)
}

fn read_text(name: &str, path: &Path) -> Result<String, String> {
    let bytes = std::fs::read(path)
        .map_err(|e| format!("cannot read {} (provider `{name}`): {e}", path.display()))?;
    String::from_utf8(bytes)
        .map_err(|_| format!("{} (provider `{name}`) is not UTF-8 text", path.display()))
}

/// `path`, when the provider allows it (`param.allowed.paths`, KIP-993).
fn allowed(name: &str, provider: &Provider, path: &str) -> Result<PathBuf, String> {
    if path.is_empty() {
        return Err(format!(
            "`${{{name}:...}}` needs a path: `${{{name}:/path:key}}`"
        ));
    }
    let path = normalize(Path::new(path));
    if !provider.allowed_paths.is_empty()
        && !provider.allowed_paths.iter().any(|a| path.starts_with(a))
    {
        return Err(format!(
            "{} is outside provider `{name}`'s allowed.paths",
            path.display()
        ));
    }
    Ok(path)
}

/// Whether `name` matches `pattern`, where `*` stands for any characters and `?` for one.
/// These two are all Strimzi's `pattern` needs on a Secret's file names (its examples use
/// `*.crt`; Kubernetes keys are letters, digits, `-`, `_` and `.`, and `strait config
/// from-strimzi` refuses other glob syntax), so a few lines do rather than a glob crate.
fn glob_matches(pattern: &str, name: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let name: Vec<char> = name.chars().collect();
    let (mut p, mut n) = (0, 0);
    // The last `*` seen and how far into the name it reaches: where to go back to.
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, n));
                p += 1;
            }
            Some(&c) if c == '?' || c == name[n] => {
                p += 1;
                n += 1;
            }
            _ => match star {
                // The `*` takes one more character.
                Some((at, reach)) => {
                    star = Some((at, reach + 1));
                    p = at + 1;
                    n = reach + 1;
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

/// `path` with `.` and `..` resolved lexically (as Kafka's `allowed.paths` check does).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(text: &str) -> Properties {
        properties::parse(text).unwrap()
    }

    fn run(text: &str) -> Result<Properties, ConfigError> {
        resolve(&props(text), Path::new("mm2.properties"))
    }

    fn value(p: &Properties, key: &str) -> String {
        p.get(key).unwrap().value.clone()
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("strait-providers-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn built_in_env_file_and_directory() {
        let dir = temp_dir("builtin");
        std::fs::write(
            dir.join("secrets.properties"),
            "password = s3cret\nuser=alice\n",
        )
        .unwrap();
        std::fs::write(dir.join("token"), "tok-en").unwrap();
        std::env::set_var("STRAIT_TEST_PROVIDER_VAR", "from-env");
        let d = dir.display();
        let p = run(&format!(
            "a = ${{env:STRAIT_TEST_PROVIDER_VAR}}\n\
             b = user ${{file:{d}/secrets.properties:user}} pw ${{file:{d}/secrets.properties:password}}\n\
             c = ${{directory:{d}:token}}\n\
             d = no reference\n"
        ))
        .unwrap();
        assert_eq!(value(&p, "a"), "from-env");
        assert_eq!(value(&p, "b"), "user alice pw s3cret");
        assert_eq!(value(&p, "c"), "tok-en");
        assert_eq!(value(&p, "d"), "no reference");
        assert_eq!(p.get("b").unwrap().line, 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn kafka_declarations_with_their_own_names_and_params() {
        let dir = temp_dir("declared");
        std::fs::write(dir.join("s.properties"), "k = v\n").unwrap();
        std::env::set_var("STRAIT_TEST_ALLOWED", "yes");
        let d = dir.display();
        let text = format!(
            "config.providers = secrets, vars\n\
             config.providers.secrets.class = {FILE_CLASS}\n\
             config.providers.secrets.param.allowed.paths = {d}\n\
             config.providers.vars.class = {ENV_CLASS}\n\
             config.providers.vars.param.allowlist.pattern = STRAIT_TEST_A.*\n\
             x = ${{secrets:{d}/s.properties:k}}\n\
             y = ${{vars:STRAIT_TEST_ALLOWED}}\n"
        );
        let p = run(&text).unwrap();
        assert_eq!(value(&p, "x"), "v");
        assert_eq!(value(&p, "y"), "yes");
        assert!(p.iter().all(|(k, _)| !k.starts_with("config.providers")));
        // Declared providers replace the built-ins.
        let e = run(&format!("{text}z = ${{env:HOME}}\n")).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("z"));
        assert!(
            e.to_string()
                .contains("`env`, which is not declared (providers: secrets, vars)"),
            "{e}"
        );
        // The params are enforced.
        let e = run(&format!("{text}z = ${{vars:HOME}}\n")).unwrap_err();
        assert!(e.to_string().contains("allowlist.pattern"), "{e}");
        let e = run(&format!("{text}z = ${{secrets:/etc/passwd:root}}\n")).unwrap_err();
        assert!(
            e.to_string()
                .contains("outside provider `secrets`'s allowed.paths"),
            "{e}"
        );
        let e = run(&format!("{text}z = ${{secrets:{d}/../x:root}}\n")).unwrap_err();
        assert!(e.to_string().contains("allowed.paths"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn what_cannot_be_resolved_stops_start_up() {
        let e = run("config.providers = file\n").unwrap_err();
        assert_eq!(e.line, Some(1));
        assert!(
            e.to_string()
                .contains("`config.providers.file.class` is not set"),
            "{e}"
        );
        let e = run("config.providers = x\nconfig.providers.x.class = com.example.Vault\n")
            .unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(
            e.to_string()
                .contains("unsupported class `com.example.Vault`"),
            "{e}"
        );
        let cases = [
            ("k = ${env:STRAIT_TEST_SURELY_UNSET_VAR}\n", "is not set"),
            ("k = ${env:/x:VAR}\n", "takes no path"),
            (
                "k = ${vault:secret/x:pw}\n",
                "provider `vault`, which is not declared",
            ),
            (
                "k = ${file:/nonexistent/strait.properties:pw}\n",
                "cannot read /nonexistent",
            ),
            ("k = ${file:pw}\n", "needs a path"),
            ("k = ${directory:/tmp:../etc}\n", "is not a file name"),
        ];
        for (text, says) in cases {
            let e = run(&format!("a = 1\n{text}")).unwrap_err();
            assert_eq!(e.line, Some(2), "{text}");
            assert_eq!(e.key.as_deref(), Some("k"), "{text}");
            assert!(e.to_string().contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn a_missing_key_is_named_but_values_never_are() {
        let dir = temp_dir("missing");
        std::fs::write(dir.join("s.properties"), "password = hunter2\n").unwrap();
        let e = run(&format!(
            "k = ${{file:{}/s.properties:pasword}}\n",
            dir.display()
        ))
        .unwrap_err();
        assert!(e.to_string().contains("has no key `pasword`"), "{e}");
        assert!(!e.to_string().contains("hunter2"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_pattern_reads_every_matching_file_of_the_directory() {
        // A Kubernetes Secret as mounted: the files in a `..data` directory, each key a link
        // to its file.
        let dir = temp_dir("pattern");
        let _ = std::fs::remove_dir_all(&dir);
        let data = dir.join("..data");
        std::fs::create_dir_all(&data).unwrap();
        for (key, content) in [
            ("ca.crt", &b"NEW CA\n"[..]),
            ("ca-2025.crt", b"OLD CA"),
            ("ca.p12", &[0xff, 0x00, 0xfe]),
            ("ca.password", b"not a certificate"),
        ] {
            std::fs::write(data.join(key), content).unwrap();
            std::os::unix::fs::symlink(Path::new("..data").join(key), dir.join(key)).unwrap();
        }
        let d = dir.display();
        let p = run(&format!(
            "all = ${{directory:{d}:*.crt}}\nold = ${{directory:{d}:ca-????.crt}}\n"
        ))
        .unwrap();
        // In name order, one after the other, each on its own lines.
        assert_eq!(value(&p, "all"), "OLD CA\nNEW CA\n");
        assert_eq!(value(&p, "old"), "OLD CA");
        // Read again (a reload), the pattern takes the files there now.
        std::fs::write(dir.join("ca-2026.crt"), "NEXT CA\n").unwrap();
        let p = run(&format!("all = ${{directory:{d}:*.crt}}\n")).unwrap();
        assert_eq!(value(&p, "all"), "OLD CA\nNEXT CA\nNEW CA\n");
        // `*` takes files only, not the volume's directory.
        let text = temp_dir("pattern-text");
        let _ = std::fs::remove_dir_all(text.join("..data"));
        std::fs::create_dir_all(text.join("..data")).unwrap();
        std::fs::write(text.join("only"), "one").unwrap();
        let p = run(&format!("k = ${{directory:{}:*}}\n", text.display())).unwrap();
        assert_eq!(value(&p, "k"), "one");
        std::fs::remove_dir_all(&text).unwrap();
        let e = run(&format!("a = 1\nk = ${{directory:{d}:*.pem}}\n")).unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(2), Some("k")));
        assert!(
            e.to_string()
                .contains(&format!("no file in {d} matches `*.pem`")),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn glob_star_and_question_mark() {
        for (pattern, name) in [
            ("*.crt", "ca.crt"),
            ("*.crt", ".crt"),
            ("*", "anything"),
            ("ca-?.crt", "ca-1.crt"),
            ("a*b*c", "abxbbc"),
            ("ca.crt", "ca.crt"),
        ] {
            assert!(glob_matches(pattern, name), "{pattern} {name}");
        }
        for (pattern, name) in [
            ("*.crt", "ca.crt.bak"),
            ("*.crt", "ca.pem"),
            ("ca-?.crt", "ca-12.crt"),
            ("a*b*c", "abxbbd"),
            ("?", ""),
        ] {
            assert!(!glob_matches(pattern, name), "{pattern} {name}");
        }
    }

    #[test]
    fn text_that_is_not_a_reference_stays() {
        let p = run("a = ${no colon}\nb = $ {env:X}\nc = price ${\n").unwrap();
        assert_eq!(value(&p, "a"), "${no colon}");
        assert_eq!(value(&p, "b"), "$ {env:X}");
        assert_eq!(value(&p, "c"), "price ${");
    }
}
