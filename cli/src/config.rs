//! Config files for `abfleet coordinator --config FILE` and `abfleet agent --config FILE`, and
//! `abfleet config check FILE`. A file is TOML with a `[coordinator]` or an `[agent]` table (or
//! both); every key is optional and has the flag's default (`deploy/coordinator.toml` and
//! `deploy/agent.toml` list them all). Precedence, highest first: a flag on the command line,
//! its environment variable (`ABFLEET_TLS_*`), the file, the built-in default. Unknown tables
//! and keys are refused, naming the key and the file; relative paths in a file are taken from
//! the file's directory, so a file means the same from any working directory.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::ArgMatches;
use serde::Deserialize;

use crate::cli::{AgentCommand, Command};
use crate::relative_paths::RelativePaths;

/// A config file as read: the tables it has.
#[derive(Debug)]
pub struct ConfigFile {
    pub coordinator: Option<CoordinatorFile>,
    pub agent: Option<AgentFile>,
    /// Where the coordinator's alerts go (`crate::notify_config`).
    pub notify: Option<crate::notify_config::NotifyFile>,
    /// How the coordinator answers pull requests (`crate::github_config`).
    pub github: Option<crate::github_config::GitHubFile>,
    /// Client profiles, `[profile.NAME]` (`crate::client_profile`).
    pub profiles: Option<std::collections::BTreeMap<String, crate::profile::ClientProfile>>,
}

/// The `[coordinator]` table; each key is the flag of the same name.
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoordinatorFile {
    pub listen: Option<SocketAddr>,
    pub data_dir: Option<PathBuf>,
    pub lease_seconds: Option<f64>,
    pub heartbeat_seconds: Option<f64>,
    pub max_attempts: Option<u32>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub tls_ca: Option<PathBuf>,
    pub plaintext: Option<bool>,
    pub http: Option<SocketAddr>,
    pub web: Option<SocketAddr>,
    pub milestone_spec: Option<PathBuf>,
    pub retune_spec: Option<PathBuf>,
    pub sweep_spec: Option<PathBuf>,
    pub webhook_secret_file: Option<PathBuf>,
    pub debounce_seconds: Option<f64>,
    pub watch_upstream_interval: Option<f64>,
    pub perf_label: Option<String>,
    pub toolchain_bots: Option<String>,
}

/// The `[agent]` table; each key is the flag of the same name.
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentFile {
    pub coordinator: Option<String>,
    pub work_dir: Option<PathBuf>,
    pub probes: Option<PathBuf>,
    pub policy: Option<PathBuf>,
    pub max_cache_bytes: Option<CacheBytes>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub tls_ca: Option<PathBuf>,
}

/// `max_cache_bytes` as a file writes it: an integer of bytes, or a string with K, M, G or T
/// (`"20G"`), read like the flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "CacheBytesText")]
pub struct CacheBytes(pub u64);

#[derive(Deserialize)]
#[serde(untagged)]
enum CacheBytesText {
    Bytes(u64),
    Text(String),
}

impl TryFrom<CacheBytesText> for CacheBytes {
    type Error = String;

    fn try_from(text: CacheBytesText) -> Result<CacheBytes, String> {
        match text {
            CacheBytesText::Bytes(bytes) => Ok(CacheBytes(bytes)),
            CacheBytesText::Text(text) => abfleet_agent::cache::parse_bytes(&text).map(CacheBytes),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("failed to read the config file `{path}`: {source}; fix the path given to --config")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the config file `{path}` is not valid TOML: {message}")]
    Syntax { path: PathBuf, message: String },
    #[error("the config file `{path}` is not valid: {}; deploy/coordinator.toml and deploy/agent.toml list every key", problems.join("; "))]
    Invalid {
        path: PathBuf,
        problems: Vec<String>,
    },
    #[error("the config file `{path}` has no [{table}] table; `abfleet {table} --config` reads that table (`abfleet config check {path}` says what the file holds)")]
    NoTable { path: PathBuf, table: &'static str },
}

impl ConfigFile {
    pub fn load(path: &Path) -> Result<ConfigFile, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        ConfigFile::parse(&text, path)
    }

    /// Parses a file's text; every unknown key and wrong type is named, not only the first.
    pub fn parse(text: &str, path: &Path) -> Result<ConfigFile, ConfigError> {
        let table: toml::Table =
            text.parse()
                .map_err(|err: toml::de::Error| ConfigError::Syntax {
                    path: path.to_path_buf(),
                    message: err.to_string().trim().replace('\n', " "),
                })?;
        let base = path.parent().unwrap_or(Path::new(""));
        let mut problems = Vec::new();
        let mut file = ConfigFile {
            coordinator: None,
            agent: None,
            notify: None,
            github: None,
            profiles: None,
        };
        for (key, value) in &table {
            match key.as_str() {
                "coordinator" => {
                    file.coordinator = section::<CoordinatorFile>(key, value, &mut problems).map(
                        |mut section| {
                            for slot in [
                                &mut section.data_dir,
                                &mut section.tls_cert,
                                &mut section.tls_key,
                                &mut section.tls_ca,
                                &mut section.milestone_spec,
                                &mut section.retune_spec,
                                &mut section.sweep_spec,
                                &mut section.webhook_secret_file,
                            ] {
                                resolve(base, slot);
                            }
                            section
                        },
                    )
                }
                "agent" => {
                    file.agent =
                        section::<AgentFile>(key, value, &mut problems).map(|mut section| {
                            for slot in [
                                &mut section.work_dir,
                                &mut section.probes,
                                &mut section.policy,
                                &mut section.tls_cert,
                                &mut section.tls_key,
                                &mut section.tls_ca,
                            ] {
                                resolve(base, slot);
                            }
                            section
                        })
                }
                "notify" => file.notify = file_table(key, value, base, &mut problems),
                "github" => file.github = file_table(key, value, base, &mut problems),
                "profile" => file.profiles = profiles(value, base, &mut problems),
                _ => problems.push(format!(
                    "unknown key `{key}` at the top level (a config file has a [coordinator] or an [agent] table, and [notify] and [github] for the coordinator; a client profile file has [profile.NAME] tables)"
                )),
            }
        }
        if problems.is_empty()
            && file.coordinator.is_none()
            && file.agent.is_none()
            && file.profiles.is_none()
        {
            problems.push(
                "it has neither a [coordinator] nor an [agent] table, nor a [profile.NAME]"
                    .to_string(),
            );
        }
        if problems.is_empty() {
            Ok(file)
        } else {
            Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                problems,
            })
        }
    }
}

/// One table, each key tried on its own so that every bad key is reported.
fn section<T: serde::de::DeserializeOwned>(
    name: &str,
    value: &toml::Value,
    problems: &mut Vec<String>,
) -> Option<T> {
    let Some(table) = value.as_table() else {
        problems.push(format!(
            "`{name}` must be a table ([{name}]), not a {}",
            value.type_str()
        ));
        return None;
    };
    let before = problems.len();
    for (key, value) in table {
        let one = toml::Table::from_iter([(key.clone(), value.clone())]);
        if let Err(err) = one.try_into::<T>() {
            let message = err.to_string().trim().replace('\n', " ");
            // toml's message names the key ("… in `max_attempts`", "unknown field `x`").
            problems.push(if message.contains(&format!("`{key}`")) {
                format!("[{name}] {message}")
            } else {
                format!("[{name}] `{key}`: {message}")
            });
        }
    }
    if problems.len() > before {
        return None;
    }
    match table.clone().try_into::<T>() {
        Ok(section) => Some(section),
        Err(err) => {
            problems.push(format!("[{name}]: {}", err.to_string().trim()));
            None
        }
    }
}

/// The `[profile.NAME]` tables of a client profile file, each checked like a table.
fn profiles(
    value: &toml::Value,
    base: &Path,
    problems: &mut Vec<String>,
) -> Option<std::collections::BTreeMap<String, crate::profile::ClientProfile>> {
    let Some(table) = value.as_table() else {
        problems.push(format!(
            "`profile` must hold tables ([profile.NAME]), not a {}",
            value.type_str()
        ));
        return None;
    };
    let before = problems.len();
    let found = table
        .iter()
        .filter_map(|(name, value)| {
            file_table(&format!("profile.{name}"), value, base, problems)
                .map(|profile| (name.clone(), profile))
        })
        .collect();
    (problems.len() == before).then_some(found)
}

/// [`section`], its paths taken from `base`.
fn file_table<T: serde::de::DeserializeOwned + RelativePaths>(
    name: &str,
    value: &toml::Value,
    base: &Path,
    problems: &mut Vec<String>,
) -> Option<T> {
    section::<T>(name, value, problems).map(|mut table| {
        table.resolve_paths(base);
        table
    })
}

fn resolve(base: &Path, slot: &mut Option<PathBuf>) {
    if let Some(path) = slot {
        if path.is_relative() {
            *path = base.join(&*path);
        }
    }
}

/// Sets `slot` from the file unless the flag was given.
fn fill<T: Clone>(slot: &mut T, from_file: &Option<T>, given: bool) {
    if let (Some(value), false) = (from_file, given) {
        *slot = value.clone();
    }
}

fn fill_option<T: Clone>(slot: &mut Option<T>, from_file: &Option<T>, given: bool) {
    if !given && from_file.is_some() {
        *slot = from_file.clone();
    }
}

/// The `[notify]` table of the coordinator's `--config` file, loaded (its secret files
/// read); no table: no alerts.
pub fn notify_of(
    path: Option<&Path>,
) -> Result<abfleet_coordinator::outbound::notify::NotifyConfig, ConfigError> {
    let Some(path) = path else {
        return Ok(Default::default());
    };
    let file = ConfigFile::load(path)?;
    match file.notify {
        None => Ok(Default::default()),
        Some(section) => section.load().map_err(|problems| ConfigError::Invalid {
            path: path.to_path_buf(),
            problems,
        }),
    }
}

/// The `[github]` table of the coordinator's `--config` file, loaded (its token read), with
/// `milestone_spec`'s repositories allowed; no table: pull requests hear nothing.
pub fn github_of(
    path: Option<&Path>,
    milestone_spec: Option<&Path>,
) -> Result<Option<abfleet_coordinator::outbound::github::GitHubReporting>, ConfigError> {
    let Some(path) = path else {
        return Ok(None);
    };
    let file = ConfigFile::load(path)?;
    match file.github {
        None => Ok(None),
        Some(section) => {
            section
                .load(milestone_spec)
                .map(Some)
                .map_err(|problems| ConfigError::Invalid {
                    path: path.to_path_buf(),
                    problems,
                })
        }
    }
}

/// Fills the settings of `command` that were not given as flags (or by their environment
/// variables) from its `--config` file. Other commands are left alone.
pub fn apply(command: &mut Command, matches: &ArgMatches) -> Result<(), ConfigError> {
    match command {
        Command::Coordinator(args) => {
            let Some(path) = args.config.clone() else {
                return Ok(());
            };
            let section = table_of(&path, "coordinator", |file| file.coordinator)?;
            let mut settings = CoordinatorSettings::from(&*args);
            settings.overlay(&section, given_in_leaf(matches));
            settings.write_into(args);
        }
        Command::Agent(AgentCommand {
            action:
                Some(crate::cli::AgentAction::Gc {
                    config: Some(path),
                    work_dir,
                    max_cache_bytes,
                    dry_run: _,
                }),
            ..
        }) => {
            let section = table_of(path, "agent", |file| file.agent)?;
            let given = given_in_leaf(matches);
            fill(work_dir, &section.work_dir, given("work_dir"));
            fill_option(
                max_cache_bytes,
                &section.max_cache_bytes.map(|b| b.0),
                given("max_cache_bytes"),
            );
        }
        Command::Agent(args @ AgentCommand { action: None, .. }) => {
            let Some(path) = args.config.clone() else {
                return Ok(());
            };
            let section = table_of(&path, "agent", |file| file.agent)?;
            let mut settings = AgentSettings::from(&*args);
            settings.overlay(&section, given_in_leaf(matches));
            settings.write_into(args);
        }
        _ => {}
    }
    Ok(())
}

/// `--coordinator` and `--data-dir` both on the command line of a reading command: say so
/// (ABFLEET_COORDINATOR beside `--data-dir` is fine: the data dir is read).
pub fn coordinator_and_data_dir_both_given(matches: &ArgMatches) -> Option<String> {
    let (name, sub) = matches.subcommand()?;
    let on_command_line = |id: &str| {
        sub.try_get_raw(id).is_ok_and(|raw| raw.is_some())
            && sub.value_source(id) == Some(ValueSource::CommandLine)
    };
    (on_command_line("coordinator") && on_command_line("data_dir")).then(|| {
        format!(
            "`abfleet {name}` takes --coordinator URL or --data-dir DIR, not both: --data-dir reads the store directly"
        )
    })
}

/// Whether an argument of the innermost subcommand (`coordinator`, `agent`, `agent gc`,
/// `runs`, …) was given, on the command line or by its variable: a value clap filled in from
/// a default does not count, and the config file or the client profile fills it instead.
pub(crate) fn given_in_leaf(matches: &ArgMatches) -> impl Fn(&str) -> bool + '_ {
    let mut leaf = matches;
    while let Some((_, sub)) = leaf.subcommand() {
        leaf = sub;
    }
    move |id| {
        leaf.try_get_raw(id).is_ok_and(|raw| raw.is_some())
            && matches!(
                leaf.value_source(id),
                Some(ValueSource::CommandLine | ValueSource::EnvVariable)
            )
    }
}

/// The `[table]` the command's `--config FILE` must have (`pick` takes it from the file).
fn table_of<T>(
    path: &Path,
    table: &'static str,
    pick: impl FnOnce(ConfigFile) -> Option<T>,
) -> Result<T, ConfigError> {
    pick(ConfigFile::load(path)?).ok_or_else(|| ConfigError::NoTable {
        path: path.to_path_buf(),
        table,
    })
}

mod agent_settings;
mod check;
mod coordinator_settings;
#[cfg(test)]
mod tests;

pub use agent_settings::AgentSettings;
pub use check::check_file;
pub use coordinator_settings::CoordinatorSettings;
