//! AWS credentials from the standard files, for the object tier: the
//! shared credentials file (`~/.aws/credentials`, or
//! `AWS_SHARED_CREDENTIALS_FILE`) and the config file (`~/.aws/config`, or
//! `AWS_CONFIG_FILE`), profile `AWS_PROFILE` (else `default`). The standard
//! environment variables (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_SESSION_TOKEN`) come first; `object_store` reads those itself.
//!
//! The files are INI as the AWS tools write them: `[profile]` sections (in
//! the config file `[profile name]`, and `[default]`), `key = value` lines,
//! `#` and `;` comments. Anything else is skipped, never guessed at; a file
//! larger than [`MAX_FILE_BYTES`] is refused.

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// Largest credentials or config file read.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// One set of keys.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// `aws_access_key_id`.
    pub access_key_id: String,
    /// `aws_secret_access_key`.
    pub secret_access_key: String,
    /// `aws_session_token`, for temporary credentials.
    pub session_token: Option<String>,
}

impl std::fmt::Debug for Credentials {
    /// Never shows the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

/// The credentials of `profile` in the text of an AWS credentials file
/// (`config = false`: sections are `[name]`) or config file (`config =
/// true`: `[profile name]`, and `[default]`); `None` when the profile is
/// missing or lacks a key id or a secret.
pub fn parse(text: &str, profile: &str, config: bool) -> Option<Credentials> {
    let wanted = |section: &str| {
        let section = section.trim();
        if section == profile && (!config || profile == "default") {
            return true;
        }
        config
            && section
                .strip_prefix("profile")
                .is_some_and(|rest| rest.starts_with(char::is_whitespace) && rest.trim() == profile)
    };
    let mut inside = false;
    let (mut id, mut secret, mut token) = (None, None, None);
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(section) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = wanted(section);
            continue;
        }
        if !inside {
            continue;
        }
        let Some((name, value)) = line.split_once('=') else {
            continue;
        };
        let value = value.trim().to_owned();
        match name.trim() {
            "aws_access_key_id" => id = Some(value),
            "aws_secret_access_key" => secret = Some(value),
            "aws_session_token" => token = Some(value),
            _ => {}
        }
    }
    Some(Credentials {
        access_key_id: id.filter(|v| !v.is_empty())?,
        secret_access_key: secret.filter(|v| !v.is_empty())?,
        session_token: token.filter(|v| !v.is_empty()),
    })
}

/// The text of `path`, when it exists (bounded by [`MAX_FILE_BYTES`]).
fn read(path: &Path) -> Result<Option<String>> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::Internal(format!("{}: {e}", path.display()))),
        Ok(m) if m.len() > MAX_FILE_BYTES => {
            return Err(Error::InvalidArgument(format!(
                "{} is larger than {MAX_FILE_BYTES} bytes; it is not an AWS credentials file",
                path.display()
            )));
        }
        Ok(_) => {}
    }
    std::fs::read_to_string(path)
        .map(Some)
        .map_err(|e| Error::Internal(format!("{}: {e}", path.display())))
}

/// The credentials the standard AWS files give, unless the environment
/// already names a key (then `object_store` takes it from there).
pub fn from_files() -> Result<Option<Credentials>> {
    if std::env::var_os("AWS_ACCESS_KEY_ID").is_some() {
        return Ok(None);
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let file = |var: &str, name: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".aws").join(name)))
    };
    let profile = std::env::var("AWS_PROFILE").unwrap_or_else(|_| "default".into());
    for (path, config) in [
        (file("AWS_SHARED_CREDENTIALS_FILE", "credentials"), false),
        (file("AWS_CONFIG_FILE", "config"), true),
    ] {
        let Some(path) = path else { continue };
        if let Some(text) = read(&path)?
            && let Some(found) = parse(&text, &profile, config)
        {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_are_found_in_both_files() {
        let credentials = "# keys\n[default]\naws_access_key_id = AK1\naws_secret_access_key=S1\n\n\
                           [ci]\naws_access_key_id = AK2\naws_secret_access_key = S2\n\
                           aws_session_token = T2\n";
        let found = parse(credentials, "ci", false).unwrap();
        assert_eq!(
            (found.access_key_id.as_str(), found.session_token.as_deref()),
            ("AK2", Some("T2"))
        );
        assert_eq!(
            parse(credentials, "default", false)
                .unwrap()
                .secret_access_key,
            "S1"
        );
        assert_eq!(parse(credentials, "other", false), None);
        let config = "[profile ci]\naws_access_key_id=AK3\naws_secret_access_key=S3\n[ci]\naws_access_key_id=X\n";
        assert_eq!(parse(config, "ci", true).unwrap().access_key_id, "AK3");
        assert_eq!(
            parse("[default]\naws_access_key_id=A\n", "default", false),
            None
        );
        assert!(!format!("{found:?}").contains("S2"));
    }
}
