//! Where the pinned npm packages' files are found (`tools/npm/package.json`): under the
//! workspace's `tools/npm/node_modules`, or under `$ABFLEET_NPM_DIR` when set. A missing file
//! panics with the command that installs it: a test never skips for want of it.

use std::path::{Path, PathBuf};

/// The environment variable naming another `node_modules`' parent (a folder holding
/// `node_modules/@octokit/...`), instead of the workspace's `tools/npm`.
pub const NPM_DIR_ENV: &str = "ABFLEET_NPM_DIR";

/// GitHub's REST API description, from `@octokit/openapi` (with `$ref`s).
pub(crate) const OPENAPI_DESCRIPTION: &str =
    "node_modules/@octokit/openapi/generated/api.github.com.json";

/// GitHub's recorded webhook payloads, from `@octokit/webhooks-examples`.
pub(crate) const WEBHOOK_EXAMPLES: &str =
    "node_modules/@octokit/webhooks-examples/api.github.com/index.json";

/// The folder holding `node_modules`: `$ABFLEET_NPM_DIR`, else `<workspace>/tools/npm`.
pub fn npm_dir() -> PathBuf {
    match std::env::var_os(NPM_DIR_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => workspace_root().join("tools").join("npm"),
    }
}

/// Reads one of the npm files, panicking with what to run when it is not there.
pub(crate) fn read_npm_file(relative_path: &str) -> Vec<u8> {
    let path = npm_dir().join(relative_path);
    match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(error) => panic!("{}", missing_file_message(&path, &error)),
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the testkit crate lives one folder below the workspace root")
        .to_path_buf()
}

fn missing_file_message(path: &Path, error: &std::io::Error) -> String {
    format!(
        "failed to read {} ({error}): the pinned npm packages of tools/npm/package.json are not \
         installed; install them with `npm ci --prefix tools/npm` (or `scripts/test \
         --install-only`, which also installs node and npm when missing), or point \
         {NPM_DIR_ENV} at a folder that holds their node_modules",
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_missing_file_message_says_what_to_run() {
        let error = std::io::Error::from(std::io::ErrorKind::NotFound);
        let message = missing_file_message(Path::new("/nowhere/x.json"), &error);
        assert!(message.contains("/nowhere/x.json"), "{message}");
        assert!(message.contains("`npm ci --prefix tools/npm`"), "{message}");
        assert!(
            message.contains("`scripts/test --install-only`"),
            "{message}"
        );
        assert!(message.contains(NPM_DIR_ENV), "{message}");
    }

    #[test]
    fn the_default_npm_dir_is_the_workspaces_tools_npm() {
        if std::env::var_os(NPM_DIR_ENV).is_none() {
            assert!(
                npm_dir().join("package.json").is_file(),
                "{}",
                npm_dir().display()
            );
        }
    }
}
