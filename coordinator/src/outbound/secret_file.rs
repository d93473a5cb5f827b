//! Secrets read from files (a GitHub token, a webhook URL, an HMAC key): never from a
//! command line or a spec. A file its group or others may read is refused, as SSH refuses
//! such a key; a systemd credential (`LoadCredential=`) is private by construction.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The file's bytes, trailing whitespace trimmed; an error that says what to do.
pub fn read_private_file(path: &Path) -> Result<Vec<u8>, String> {
    let meta = std::fs::metadata(path).map_err(|err| format!("{}: {err}", path.display()))?;
    let mode = meta.permissions().mode();
    if mode & 0o077 != 0 {
        return Err(format!(
            "{} may be read by others (mode {:o}); `chmod 600` it (or use a systemd credential)",
            path.display(),
            mode & 0o777
        ));
    }
    let mut bytes = std::fs::read(path).map_err(|err| format!("{}: {err}", path.display()))?;
    while bytes.last().is_some_and(u8::is_ascii_whitespace) {
        bytes.pop();
    }
    if bytes.is_empty() {
        return Err(format!("{} is empty", path.display()));
    }
    Ok(bytes)
}
