//! Client profiles: where the coordinator is and which TLS files to show it, kept in one file
//! so that client commands need no flags.
//!
//! The file is `ABFLEET_CLIENT_CONFIG`, else `$XDG_CONFIG_HOME/abfleet/client.toml`, else
//! `~/.config/abfleet/client.toml`; each `[profile.NAME]` table has the keys of
//! [`ClientProfile`]. A command takes `--profile NAME` (or `ABFLEET_PROFILE`), else the profile
//! `default` when the file has one. The precedence is the config files' (`config.rs`): a flag
//! or its variable wins over the profile, and the three TLS files go together — one of them
//! given means the profile's are not used.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::ArgMatches;

use crate::cli::{Command, CoordinatorArgs};
pub use crate::profile::ClientProfile;
use crate::profile::DEFAULT_PROFILE;

/// Where the profiles are read from, when anywhere.
pub fn file_path() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty());
    if let Some(path) = var("ABFLEET_CLIENT_CONFIG") {
        return Some(PathBuf::from(path));
    }
    let config_home = var("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|home| PathBuf::from(home).join(".config")))?;
    Some(config_home.join("abfleet").join("client.toml"))
}

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("--profile {name} was asked for, but there is no client profile file at `{}`; create it with a [profile.{name}] table (docs/operations.md, \"Client profiles\") or set ABFLEET_CLIENT_CONFIG to yours", path.display())]
    NoFile { name: String, path: PathBuf },
    #[error("--profile {name} was asked for, but no client profile file can be found: HOME is not set; set ABFLEET_CLIENT_CONFIG to the file")]
    NoHome { name: String },
    #[error("the client profile file `{}` has no [profile.{name}]; {}", path.display(), if known.is_empty() { "it has no profile".to_string() } else { format!("it has {}", known.join(", ")) })]
    NoProfile {
        name: String,
        path: PathBuf,
        known: Vec<String>,
    },
    #[error(transparent)]
    File(#[from] crate::config::ConfigError),
}

/// The profiles of a file: `Ok(None)` when there is no file.
fn load(path: &Path) -> Result<Option<BTreeMap<String, ClientProfile>>, ProfileError> {
    if !path.exists() {
        return Ok(None);
    }
    let file = crate::config::ConfigFile::load(path)?;
    Ok(Some(file.profiles.unwrap_or_default()))
}

/// The profile `name` (or the default one), from `path`: `Ok(None)` when none applies — no
/// file, or no `default` in it while no name was asked for.
pub fn find(
    name: Option<&str>,
    path: Option<&Path>,
) -> Result<Option<ClientProfile>, ProfileError> {
    let Some(path) = path else {
        return match name {
            Some(name) => Err(ProfileError::NoHome {
                name: name.to_string(),
            }),
            None => Ok(None),
        };
    };
    let profiles = match (load(path)?, name) {
        (Some(profiles), _) => profiles,
        (None, None) => return Ok(None),
        (None, Some(name)) => {
            return Err(ProfileError::NoFile {
                name: name.to_string(),
                path: path.to_path_buf(),
            })
        }
    };
    let wanted = name.unwrap_or(DEFAULT_PROFILE);
    match profiles.get(wanted) {
        Some(profile) => Ok(Some(profile.clone())),
        None if name.is_none() => Ok(None),
        None => Err(ProfileError::NoProfile {
            name: wanted.to_string(),
            path: path.to_path_buf(),
            known: profiles.keys().cloned().collect(),
        }),
    }
}

/// Fills what the command line and the environment left of a client command's coordinator
/// and TLS files from its profile. Other commands, and reading commands given `--data-dir`,
/// are left alone.
pub fn apply(command: &mut Command, matches: &ArgMatches) -> Result<(), ProfileError> {
    let Some((to, reads_a_store)) = command.coordinator_args_mut() else {
        return Ok(());
    };
    if reads_a_store {
        return Ok(());
    }
    let given = crate::config::given_in_leaf(matches);
    fill(to, &given, file_path().as_deref())
}

/// [`apply`] for one command's arguments, `given` saying which were set by flag or variable.
fn fill(
    to: &mut CoordinatorArgs,
    given: &dyn Fn(&str) -> bool,
    path: Option<&Path>,
) -> Result<(), ProfileError> {
    let tls_given = given("tls_cert") || given("tls_key") || given("tls_ca");
    if given("coordinator") && tls_given {
        return Ok(());
    }
    let Some(profile) = find(to.profile.as_deref(), path)? else {
        return Ok(());
    };
    if !given("coordinator") {
        if let Some(url) = profile.coordinator {
            to.coordinator = url;
        }
    }
    if !tls_given {
        to.tls.tls_cert = profile.tls_cert;
        to.tls.tls_key = profile.tls_key;
        to.tls.tls_ca = profile.tls_ca;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, text: &str) -> PathBuf {
        let path = dir.join("client.toml");
        std::fs::write(&path, text).unwrap();
        path
    }

    fn args(profile: Option<&str>) -> CoordinatorArgs {
        CoordinatorArgs {
            coordinator: crate::defaults::DEFAULT_COORDINATOR_URL.to_string(),
            profile: profile.map(str::to_string),
            tls: Default::default(),
        }
    }

    const TWO: &str = r#"
[profile.default]
coordinator = "https://lab.example:7700"
tls_cert = "certs/alice.pem"
tls_key = "/keys/alice.key"
tls_ca = "certs/ca.pem"

[profile.staging]
coordinator = "http://127.0.0.1:7800"
"#;

    #[test]
    fn the_default_profile_fills_what_no_flag_gave_with_paths_beside_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let path = write(tmp.path(), TWO);
        let mut to = args(None);
        fill(&mut to, &|_| false, Some(&path)).unwrap();
        assert_eq!(to.coordinator, "https://lab.example:7700");
        assert_eq!(to.tls.tls_cert, Some(tmp.path().join("certs/alice.pem")));
        assert_eq!(to.tls.tls_key, Some(PathBuf::from("/keys/alice.key")));
    }

    #[test]
    fn a_flag_wins_and_one_tls_flag_keeps_the_profiles_three_files_out() {
        let tmp = tempfile::tempdir().unwrap();
        let path = write(tmp.path(), TWO);
        let mut to = args(None);
        to.coordinator = "https://other:7700".into();
        to.tls.tls_cert = Some("mine.pem".into());
        fill(
            &mut to,
            &|id| id == "coordinator" || id == "tls_cert",
            Some(&path),
        )
        .unwrap();
        assert_eq!(to.coordinator, "https://other:7700");
        assert_eq!(to.tls.tls_cert, Some(PathBuf::from("mine.pem")));
        assert_eq!(to.tls.tls_key, None, "the profile's key is not mixed in");
    }

    #[test]
    fn a_named_profile_is_used_and_a_missing_one_names_those_there_are() {
        let tmp = tempfile::tempdir().unwrap();
        let path = write(tmp.path(), TWO);
        let mut to = args(Some("staging"));
        fill(&mut to, &|_| false, Some(&path)).unwrap();
        assert_eq!(to.coordinator, "http://127.0.0.1:7800");
        assert_eq!(to.tls.tls_cert, None);

        let err = fill(&mut args(Some("prod")), &|_| false, Some(&path))
            .unwrap_err()
            .to_string();
        assert!(err.contains("no [profile.prod]"), "{err}");
        assert!(err.contains("it has default, staging"), "{err}");
    }

    #[test]
    fn no_file_is_no_profile_unless_one_was_asked_for() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("absent.toml");
        let mut to = args(None);
        fill(&mut to, &|_| false, Some(&path)).unwrap();
        assert_eq!(to.coordinator, crate::defaults::DEFAULT_COORDINATOR_URL);
        let err = fill(&mut args(Some("lab")), &|_| false, Some(&path))
            .unwrap_err()
            .to_string();
        assert!(err.contains("no client profile file at"), "{err}");
        assert!(err.contains("[profile.lab]"), "{err}");
    }

    #[test]
    fn a_file_without_a_default_profile_leaves_an_unnamed_command_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let path = write(
            tmp.path(),
            "[profile.staging]\ncoordinator = \"http://127.0.0.1:1\"\n",
        );
        let mut to = args(None);
        fill(&mut to, &|_| false, Some(&path)).unwrap();
        assert_eq!(to.coordinator, crate::defaults::DEFAULT_COORDINATOR_URL);
    }

    #[test]
    fn a_broken_file_is_an_error_naming_each_bad_key() {
        let tmp = tempfile::tempdir().unwrap();
        let path = write(
            tmp.path(),
            "[profile.default]\ncoordinatr = \"x\"\ntls_ca = 3\n",
        );
        let err = fill(&mut args(None), &|_| false, Some(&path))
            .unwrap_err()
            .to_string();
        assert!(err.contains("coordinatr"), "{err}");
        assert!(err.contains("tls_ca"), "{err}");
    }
}
