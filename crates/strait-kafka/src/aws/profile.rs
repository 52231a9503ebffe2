//! The AWS shared config and credentials files (`~/.aws/config`, `~/.aws/credentials`, or
//! `AWS_CONFIG_FILE`, `AWS_SHARED_CREDENTIALS_FILE`): INI sections of `key = value` lines, a
//! profile being `[name]` in the credentials file and `[profile name]` (or `[default]`) in the
//! config file; the credentials file wins where both set a key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::sts::Sts;
use super::{Credentials, Env};
use crate::secret::Secret;

/// The profiles of both files, merged.
#[derive(Debug, Default)]
pub struct Profiles {
    profiles: BTreeMap<String, BTreeMap<String, String>>,
    /// The files read, for messages.
    files: Vec<PathBuf>,
}

impl Profiles {
    /// Reads both files; a missing file is no error, an unreadable one is.
    pub fn load(env: &Env) -> Result<Profiles, String> {
        let home = env.home();
        let at = |var: &str, default: &str| -> Option<PathBuf> {
            env.var(var)
                .map(PathBuf::from)
                .or_else(|| home.as_ref().map(|h| h.join(".aws").join(default)))
        };
        let mut profiles = Profiles::default();
        if let Some(path) = at("AWS_CONFIG_FILE", "config") {
            profiles.read(&path, true)?;
        }
        if let Some(path) = at("AWS_SHARED_CREDENTIALS_FILE", "credentials") {
            profiles.read(&path, false)?;
        }
        Ok(profiles)
    }

    fn read(&mut self, path: &Path, config_file: bool) -> Result<(), String> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        self.files.push(path.to_owned());
        for (name, props) in parse(&text, config_file) {
            let profile = self.profiles.entry(name).or_default();
            profile.extend(props);
        }
        Ok(())
    }

    /// The profile `name`'s keys.
    pub fn get(&self, name: &str) -> Option<&BTreeMap<String, String>> {
        self.profiles.get(name)
    }

    fn describe_files(&self) -> String {
        if self.files.is_empty() {
            "no ~/.aws/config or ~/.aws/credentials".to_owned()
        } else {
            let files: Vec<String> = self.files.iter().map(|f| f.display().to_string()).collect();
            files.join(" and ")
        }
    }
}

/// The profiles of one file, in order. Sub-properties (indented lines after `key =`) and
/// sections that are not profiles (`[sso-session x]`, `[services x]`) are skipped.
fn parse(text: &str, config_file: bool) -> Vec<(String, BTreeMap<String, String>)> {
    let mut out: Vec<(String, BTreeMap<String, String>)> = Vec::new();
    let mut current: Option<usize> = None;
    for line in text.lines() {
        let indented = line.starts_with([' ', '\t']);
        let line = line.trim();
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        if let Some(section) = line.strip_prefix('[') {
            let Some(end) = section.find(']') else {
                current = None;
                continue;
            };
            let section = section[..end].trim();
            let name = if config_file {
                match section.strip_prefix("profile ") {
                    Some(name) => Some(name.trim()),
                    None if section == "default" => Some("default"),
                    None => None,
                }
            } else {
                Some(section)
            };
            current = name.map(|name| match out.iter().position(|(n, _)| n == name) {
                Some(i) => i,
                None => {
                    out.push((name.to_owned(), BTreeMap::new()));
                    out.len() - 1
                }
            });
            continue;
        }
        if indented {
            continue;
        }
        let (Some(i), Some((key, value))) = (current, line.split_once('=')) else {
            continue;
        };
        // A comment after a value needs a space before it.
        let value = value
            .split(" #")
            .next()
            .unwrap_or_default()
            .split(" ;")
            .next()
            .unwrap_or_default();
        out[i]
            .1
            .insert(key.trim().to_ascii_lowercase(), value.trim().to_owned());
    }
    out
}

/// The credentials of profile `name`: static keys, or a role assumed with the keys of
/// `source_profile` or with `web_identity_token_file`.
pub(super) async fn credentials(env: &Env, name: &str, sts: &Sts) -> Result<Credentials, String> {
    let profiles = Profiles::load(env)?;
    resolve(&profiles, name, sts, 0).await
}

async fn resolve(
    profiles: &Profiles,
    name: &str,
    sts: &Sts,
    depth: usize,
) -> Result<Credentials, String> {
    let Some(profile) = profiles.get(name) else {
        return Err(format!(
            "no profile `{name}` in {}",
            profiles.describe_files()
        ));
    };
    let get = |key: &str| {
        profile
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    };
    if let Some(role_arn) = get("role_arn") {
        let session = get("role_session_name")
            .map(str::to_owned)
            .unwrap_or_else(super::default_session_name);
        let sts = sts.clone().with_region(get("region").map(str::to_owned));
        if let Some(file) = get("web_identity_token_file") {
            return sts
                .assume_role_with_web_identity(role_arn, &session, Path::new(file))
                .await
                .map_err(|e| format!("profile `{name}` (web_identity_token_file): {e}"));
        }
        let Some(source) = get("source_profile") else {
            return Err(format!(
                "profile `{name}` has role_arn but neither source_profile nor \
                 web_identity_token_file (credential_source is not supported)"
            ));
        };
        if depth > 4 {
            return Err(format!("profile `{name}`: source_profile chain too long"));
        }
        let base = if source == name {
            static_keys(name, get)?
        } else {
            Box::pin(resolve(profiles, source, &sts, depth + 1)).await?
        };
        let role = super::AssumeRole {
            role_arn: role_arn.to_owned(),
            session_name: session,
            external_id: get("external_id").map(str::to_owned),
            access_key_id: None,
            secret_access_key: None,
            session_token: None,
        };
        return sts
            .assume_role(&role, &base)
            .await
            .map_err(|e| format!("profile `{name}` (role_arn): {e}"));
    }
    if get("credential_process").is_some() {
        return Err(format!(
            "profile `{name}` uses credential_process, which strait does not run"
        ));
    }
    if get("sso_session").is_some() || get("sso_start_url").is_some() {
        return Err(format!(
            "profile `{name}` uses AWS SSO, which strait does not support"
        ));
    }
    static_keys(name, get)
}

fn static_keys<'a>(
    name: &str,
    get: impl Fn(&str) -> Option<&'a str>,
) -> Result<Credentials, String> {
    match (get("aws_access_key_id"), get("aws_secret_access_key")) {
        (Some(id), Some(secret)) => Ok(Credentials {
            access_key_id: id.to_owned(),
            secret_access_key: Secret::new(secret),
            session_token: get("aws_session_token").map(Secret::new),
            expires: None,
            source: format!("profile `{name}`"),
        }),
        _ => Err(format!(
            "profile `{name}` has no aws_access_key_id and aws_secret_access_key"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_of_both_files() {
        let config = "[default]\nregion = eu-west-1\n[profile msk]\nregion=us-east-2 # east\n\
                      s3 =\n  max_concurrent_requests = 20\n[sso-session x]\nsso_region = x\n";
        let parsed = parse(config, true);
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed[0].1["region"], "eu-west-1");
        assert_eq!(parsed[1].0, "msk");
        assert_eq!(parsed[1].1["region"], "us-east-2");
        assert!(!parsed[1].1.contains_key("max_concurrent_requests"));
        let creds = "# c\n[msk]\naws_access_key_id = AKID\naws_secret_access_key = s/k+1\n";
        let parsed = parse(creds, false);
        assert_eq!(parsed[0].0, "msk");
        assert_eq!(parsed[0].1["aws_secret_access_key"], "s/k+1");
    }
}
