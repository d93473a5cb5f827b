//! A client profile (`[profile.NAME]` of the client file, client_profile.rs): where the
//! coordinator is and which TLS files to show it, with its paths taken from the file, and
//! what `config check` says of one.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::defaults::DEFAULT_COORDINATOR_URL;
use crate::findings::{check_tls, line, path_value, Findings};
use crate::relative_paths::RelativePaths;

/// The profile a command uses when it names none.
pub const DEFAULT_PROFILE: &str = "default";

/// One `[profile.NAME]` table; each key is the client flag of the same name.
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientProfile {
    pub coordinator: Option<String>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub tls_ca: Option<PathBuf>,
}

impl RelativePaths for ClientProfile {
    fn resolve_paths(&mut self, base: &Path) {
        for path in [&mut self.tls_cert, &mut self.tls_key, &mut self.tls_ca]
            .into_iter()
            .flatten()
        {
            *path = expand(path, base);
        }
    }
}

/// A path of the file: `~/x` under the home directory, a relative one beside the file.
fn expand(path: &Path, base: &Path) -> PathBuf {
    if let Ok(rest) = path.strip_prefix("~") {
        if let Some(home) = std::env::var_os("HOME") {
            return PathBuf::from(home).join(rest);
        }
    }
    if path.is_relative() {
        base.join(path)
    } else {
        path.to_path_buf()
    }
}

/// What `config check` says of one profile: problems, and the settings as TOML.
pub fn check(name: &str, profile: &ClientProfile) -> (String, Findings) {
    let mut findings = Findings::default();
    let url = profile
        .coordinator
        .clone()
        .unwrap_or_else(|| DEFAULT_COORDINATOR_URL.to_string());
    if let Some(tls) = check_tls(
        &profile.tls_cert,
        &profile.tls_key,
        &profile.tls_ca,
        &mut findings,
    ) {
        if let Err(err) = abfleet_proto::transport::client_endpoint(&url, tls.as_ref()) {
            findings.problem(format!("`coordinator`: {err}"));
        }
    }
    let mut out = format!("[profile.{name}]\n");
    let path = |p: &Option<PathBuf>| p.as_deref().map(path_value);
    line(&mut out, "coordinator", Some(url.into()));
    line(&mut out, "tls_cert", path(&profile.tls_cert));
    line(&mut out, "tls_key", path(&profile.tls_key));
    line(&mut out, "tls_ca", path(&profile.tls_ca));
    (out, findings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tilde_path_is_under_home() {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let expanded = expand(Path::new("~/certs/ca.pem"), Path::new("/etc"));
        match home {
            Some(home) => assert_eq!(expanded, home.join("certs/ca.pem")),
            None => assert_eq!(expanded, PathBuf::from("/etc/~/certs/ca.pem")),
        }
    }
}
