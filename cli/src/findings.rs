//! What `config check` (and a service starting) finds in a table of settings — problems that
//! stop the service, notes — and how it shows a setting: one `key = value` line, or the key
//! said to be unset. Also the TLS files' check every table with `tls_*` keys shares.

use std::path::{Path, PathBuf};

use abfleet_proto::transport::TlsFiles;

/// The TLS keys: all three or none, each file readable, the key private. `Some(files)` when
/// they are fine (`Some(None)`: none set), `None` after a problem.
pub(crate) fn check_tls(
    cert: &Option<PathBuf>,
    key: &Option<PathBuf>,
    ca: &Option<PathBuf>,
    findings: &mut Findings,
) -> Option<Option<TlsFiles>> {
    let slots = [("tls_cert", cert), ("tls_key", key), ("tls_ca", ca)];
    let set: Vec<&str> = slots
        .iter()
        .filter(|(_, path)| path.is_some())
        .map(|(name, _)| *name)
        .collect();
    if !set.is_empty() && set.len() < 3 {
        let missing: Vec<String> = slots
            .iter()
            .filter(|(_, path)| path.is_none())
            .map(|(name, _)| format!("`{name}`"))
            .collect();
        findings.problem(format!(
            "`tls_cert`, `tls_key` and `tls_ca` go together; {} missing",
            missing.join(" and ")
        ));
        return None;
    }
    match TlsFiles::from_paths(cert.as_deref(), key.as_deref(), ca.as_deref()) {
        Ok(files) => Some(files),
        Err(err) => {
            findings.problem(err.to_string());
            None
        }
    }
}

/// What a check found: problems (the service would not start) and notes.
#[derive(Debug, Default)]
pub struct Findings {
    pub problems: Vec<String>,
    pub notes: Vec<String>,
}

impl Findings {
    pub(crate) fn problem(&mut self, text: String) {
        self.problems.push(text);
    }

    pub(crate) fn note(&mut self, text: String) {
        self.notes.push(text);
    }
}

pub(crate) fn path_value(path: &Path) -> toml::Value {
    path.display().to_string().into()
}

pub(crate) fn line(out: &mut String, key: &str, value: Option<toml::Value>) {
    match value {
        Some(value) => out.push_str(&format!("{key} = {value}\n")),
        None => out.push_str(&format!("# {key}: not set\n")),
    }
}
