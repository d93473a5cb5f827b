//! Config files for `abfleet coordinator --config FILE` and `abfleet agent --config FILE`, and
//! `abfleet config check FILE`. A file is TOML with a `[coordinator]` or an `[agent]` table (or
//! both); every key is optional and has the flag's default (`deploy/coordinator.toml` and
//! `deploy/agent.toml` list them all). Precedence, highest first: a flag on the command line,
//! its environment variable (`ABFLEET_TLS_*`), the file, the built-in default. Unknown tables
//! and keys are refused, naming the key and the file; relative paths in a file are taken from
//! the file's directory, so a file means the same from any working directory.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use abfleet_proto::transport::{check_plaintext_listen, client_endpoint, TlsFiles};
use clap::parser::ValueSource;
use clap::ArgMatches;
use serde::Deserialize;

use crate::cli::{AgentCommand, Command, CoordinatorCommand};
use crate::defaults::{
    DEFAULT_COORDINATOR_URL, DEFAULT_DATA_DIR, DEFAULT_DEBOUNCE_SECONDS, DEFAULT_HEARTBEAT_SECONDS,
    DEFAULT_LEASE_SECONDS, DEFAULT_LISTEN, DEFAULT_MAX_ATTEMPTS, DEFAULT_PERF_LABEL,
    DEFAULT_TOOLCHAIN_BOTS, DEFAULT_WORK_DIR,
};
use crate::findings::{check_tls, line, path_value, Findings};
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

/// The coordinator's settings, flag by flag.
#[derive(Debug, Clone, PartialEq)]
pub struct CoordinatorSettings {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    pub lease_seconds: f64,
    pub heartbeat_seconds: f64,
    pub max_attempts: u32,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub tls_ca: Option<PathBuf>,
    pub plaintext: bool,
    /// `/metrics` and `/healthz` over plain HTTP; off when `None`.
    pub http: Option<SocketAddr>,
    /// The web view and `/api/` (HTTPS with the fleet's certificates, or loopback plaintext);
    /// off when `None`.
    pub web: Option<SocketAddr>,
    /// The spec a trigger without one runs (docs/milestone.md).
    pub milestone_spec: Option<PathBuf>,
    /// The spec the toolchain watcher runs (default: the milestone spec).
    pub retune_spec: Option<PathBuf>,
    /// The retuning sweep a toolchain bump of the milestone spec starts too (docs/sweeps.md).
    pub sweep_spec: Option<PathBuf>,
    /// The GitHub webhook secret; `POST /hooks/github` is off when `None`.
    pub webhook_secret_file: Option<PathBuf>,
    pub debounce_seconds: f64,
    /// Seconds between polls of the milestone spec's upstream; off when `None`.
    pub watch_upstream_interval: Option<f64>,
    /// The label that makes a pull request a performance PR.
    pub perf_label: String,
    /// The dependency bots whose toolchain PRs count, comma-separated.
    pub toolchain_bots: String,
}

impl Default for CoordinatorSettings {
    fn default() -> Self {
        CoordinatorSettings {
            listen: DEFAULT_LISTEN
                .parse()
                .expect("the default listen address parses"),
            data_dir: PathBuf::from(DEFAULT_DATA_DIR),
            lease_seconds: DEFAULT_LEASE_SECONDS,
            heartbeat_seconds: DEFAULT_HEARTBEAT_SECONDS,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            tls_cert: None,
            tls_key: None,
            tls_ca: None,
            plaintext: false,
            http: None,
            web: None,
            milestone_spec: None,
            retune_spec: None,
            sweep_spec: None,
            webhook_secret_file: None,
            debounce_seconds: DEFAULT_DEBOUNCE_SECONDS,
            watch_upstream_interval: None,
            perf_label: DEFAULT_PERF_LABEL.to_string(),
            toolchain_bots: DEFAULT_TOOLCHAIN_BOTS.to_string(),
        }
    }
}

/// The agent's settings, flag by flag.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSettings {
    pub coordinator: String,
    pub work_dir: PathBuf,
    pub probes: Option<PathBuf>,
    pub policy: Option<PathBuf>,
    pub max_cache_bytes: Option<u64>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub tls_ca: Option<PathBuf>,
}

impl Default for AgentSettings {
    fn default() -> Self {
        AgentSettings {
            coordinator: DEFAULT_COORDINATOR_URL.to_string(),
            work_dir: PathBuf::from(DEFAULT_WORK_DIR),
            probes: None,
            policy: None,
            max_cache_bytes: None,
            tls_cert: None,
            tls_key: None,
            tls_ca: None,
        }
    }
}

/// What `abfleet agent` starts with once its settings check out, each file loaded once.
pub struct AgentStart {
    pub tls: Option<TlsFiles>,
    /// The `policy` named; `None` when none was (the agent then reads the default path).
    pub policy: Option<abfleet_agent::policy::AgentPolicy>,
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

/// The coordinator's settings as its command line gave them (defaults where no flag was
/// given): the start that `--config` overlays.
impl From<&CoordinatorCommand> for CoordinatorSettings {
    fn from(args: &CoordinatorCommand) -> Self {
        CoordinatorSettings {
            listen: args.listen,
            data_dir: args.data_dir.clone(),
            lease_seconds: args.lease_seconds,
            heartbeat_seconds: args.heartbeat_seconds,
            max_attempts: args.max_attempts,
            tls_cert: args.tls.tls_cert.clone(),
            tls_key: args.tls.tls_key.clone(),
            tls_ca: args.tls.tls_ca.clone(),
            plaintext: args.plaintext,
            http: args.http,
            web: args.web,
            milestone_spec: args.milestone.milestone_spec.clone(),
            retune_spec: args.milestone.retune_spec.clone(),
            sweep_spec: args.milestone.sweep_spec.clone(),
            webhook_secret_file: args.milestone.webhook_secret_file.clone(),
            debounce_seconds: args.milestone.debounce_seconds,
            watch_upstream_interval: args.milestone.watch_upstream_interval,
            perf_label: args.milestone.perf_label.clone(),
            toolchain_bots: args.milestone.toolchain_bots.clone(),
        }
    }
}

impl CoordinatorSettings {
    /// Puts the settings back into the command `abfleet coordinator` runs.
    fn write_into(self, args: &mut CoordinatorCommand) {
        args.listen = self.listen;
        args.data_dir = self.data_dir;
        args.lease_seconds = self.lease_seconds;
        args.heartbeat_seconds = self.heartbeat_seconds;
        args.max_attempts = self.max_attempts;
        args.tls.tls_cert = self.tls_cert;
        args.tls.tls_key = self.tls_key;
        args.tls.tls_ca = self.tls_ca;
        args.plaintext = self.plaintext;
        args.http = self.http;
        args.web = self.web;
        args.milestone.milestone_spec = self.milestone_spec;
        args.milestone.retune_spec = self.retune_spec;
        args.milestone.sweep_spec = self.sweep_spec;
        args.milestone.webhook_secret_file = self.webhook_secret_file;
        args.milestone.debounce_seconds = self.debounce_seconds;
        args.milestone.watch_upstream_interval = self.watch_upstream_interval;
        args.milestone.perf_label = self.perf_label;
        args.milestone.toolchain_bots = self.toolchain_bots;
    }

    /// Takes from `file` every setting whose flag `given` says was not given.
    pub fn overlay(&mut self, file: &CoordinatorFile, given: impl Fn(&str) -> bool) {
        fill(&mut self.listen, &file.listen, given("listen"));
        fill(&mut self.data_dir, &file.data_dir, given("data_dir"));
        fill(
            &mut self.lease_seconds,
            &file.lease_seconds,
            given("lease_seconds"),
        );
        fill(
            &mut self.heartbeat_seconds,
            &file.heartbeat_seconds,
            given("heartbeat_seconds"),
        );
        fill(
            &mut self.max_attempts,
            &file.max_attempts,
            given("max_attempts"),
        );
        // The three TLS files come as one: a flag or variable for any of them keeps all
        // three from the file, so a file's key never pairs with another certificate.
        if !(given("tls_cert") || given("tls_key") || given("tls_ca")) {
            fill_option(&mut self.tls_cert, &file.tls_cert, false);
            fill_option(&mut self.tls_key, &file.tls_key, false);
            fill_option(&mut self.tls_ca, &file.tls_ca, false);
        }
        fill(&mut self.plaintext, &file.plaintext, given("plaintext"));
        fill_option(&mut self.http, &file.http, given("http"));
        fill_option(&mut self.web, &file.web, given("web"));
        fill_option(
            &mut self.milestone_spec,
            &file.milestone_spec,
            given("milestone_spec"),
        );
        fill_option(&mut self.sweep_spec, &file.sweep_spec, given("sweep_spec"));
        fill_option(
            &mut self.retune_spec,
            &file.retune_spec,
            given("retune_spec"),
        );
        fill_option(
            &mut self.webhook_secret_file,
            &file.webhook_secret_file,
            given("webhook_secret_file"),
        );
        fill(
            &mut self.debounce_seconds,
            &file.debounce_seconds,
            given("debounce_seconds"),
        );
        fill_option(
            &mut self.watch_upstream_interval,
            &file.watch_upstream_interval,
            given("watch_upstream_interval"),
        );
        fill(&mut self.perf_label, &file.perf_label, given("perf_label"));
        fill(
            &mut self.toolchain_bots,
            &file.toolchain_bots,
            given("toolchain_bots"),
        );
    }

    /// Any of the three TLS files is set.
    fn any_tls(&self) -> bool {
        [&self.tls_cert, &self.tls_key, &self.tls_ca]
            .iter()
            .any(|path| path.is_some())
    }

    /// The settings that contradict each other or make no sense, whatever the files they
    /// name hold: `config check` reports them and `abfleet coordinator` refuses to start
    /// with them (one set of rules for both).
    pub fn refusals(&self) -> Vec<String> {
        let mut findings = Findings::default();
        if !(self.lease_seconds.is_finite() && self.lease_seconds > 0.0) {
            findings.problem(format!(
                "`lease_seconds` is {}; it must be a positive number of seconds",
                self.lease_seconds
            ));
        }
        if !(self.heartbeat_seconds.is_finite() && self.heartbeat_seconds > 0.0) {
            findings.problem(format!(
                "`heartbeat_seconds` is {}; it must be a positive number of seconds",
                self.heartbeat_seconds
            ));
        } else if self.heartbeat_seconds >= self.lease_seconds {
            findings.problem(format!(
                "`heartbeat_seconds` ({}) must be shorter than `lease_seconds` ({}): a lease would expire between two heartbeats",
                self.heartbeat_seconds, self.lease_seconds
            ));
        }
        if !(self.debounce_seconds.is_finite() && self.debounce_seconds >= 0.0) {
            findings.problem(format!(
                "`debounce_seconds` is {}; it must be 0 or more seconds",
                self.debounce_seconds
            ));
        }
        if let Some(seconds) = self.watch_upstream_interval {
            if !(seconds.is_finite() && seconds > 0.0) {
                findings.problem(format!(
                    "`watch_upstream_interval` is {seconds}; it must be a positive number of seconds"
                ));
            }
            if self.milestone_spec.is_none() {
                findings.problem(
                    "`watch_upstream_interval` is set but `milestone_spec` is not: the watcher polls the milestone spec's upstream"
                        .to_string(),
                );
            }
        }
        if self.perf_label.trim().is_empty() {
            findings.problem(
                "`perf_label` is empty; name the label that marks a performance PR (default `performance`)"
                    .to_string(),
            );
        }
        if self.webhook_secret_file.is_some() && self.http.is_none() {
            findings.problem(
                "`webhook_secret_file` is set but `http` is not: webhooks arrive on the HTTP listener"
                    .to_string(),
            );
        }
        if self.sweep_spec.is_some() && self.milestone_spec.is_none() {
            findings.problem(
                "`sweep_spec` is set but `milestone_spec` is not: a toolchain bump of the milestone spec starts the sweep"
                    .to_string(),
            );
        }
        if self.max_attempts == 0 {
            findings.problem("`max_attempts` is 0; a job needs at least 1 attempt".to_string());
        }
        if self.plaintext && self.any_tls() {
            findings.problem(
                "`plaintext = true` and TLS files are both set; keep one of them".to_string(),
            );
        }
        findings.problems
    }

    /// What would stop this coordinator from starting ([`CoordinatorSettings::refusals`],
    /// then the files it names: secrets, specs, TLS files), and notes on what it will need.
    pub fn check(&self) -> Findings {
        let mut findings = Findings {
            problems: self.refusals(),
            notes: Vec::new(),
        };
        if let Some(path) = &self.webhook_secret_file {
            if let Err(err) = abfleet_coordinator::webhook::WebhookConfig::load(path) {
                findings.problem(format!("`webhook_secret_file`: {err}"));
            }
        }
        if let Some(path) = &self.milestone_spec {
            if let Err(err) = abfleet_core::spec::JobSpec::load(path) {
                findings.problem(format!("`milestone_spec`: {err:#}"));
            }
        }
        if let Some(path) = &self.retune_spec {
            if let Err(err) = abfleet_core::spec::JobSpec::load(path) {
                findings.problem(format!("`retune_spec`: {err:#}"));
            }
        }
        if let Some(path) = &self.sweep_spec {
            match abfleet_core::spec::JobSpec::load(path) {
                Err(err) => findings.problem(format!("`sweep_spec`: {err:#}")),
                Ok(spec) if !spec.is_sweep() => findings.problem(
                    "`sweep_spec` has no [sweep] table; point it at a retuning sweep (docs/sweeps.md)"
                        .to_string(),
                ),
                Ok(_) => {}
            }
        }
        if self.plaintext && !self.any_tls() {
            if let Err(err) = check_plaintext_listen(self.listen) {
                findings.problem(format!("`plaintext = true`: {err}"));
            }
            if let Some(web) = self.web {
                if check_plaintext_listen(web).is_err() {
                    findings.problem(format!(
                        "`web = \"{web}\"` with `plaintext = true`: a plaintext web view is loopback only (it has no authentication); bind it to 127.0.0.1 or give the coordinator TLS files"
                    ));
                }
            }
        }
        check_tls(&self.tls_cert, &self.tls_key, &self.tls_ca, &mut findings);
        if !self.plaintext && !self.any_tls() {
            findings.note(
                "no TLS files and `plaintext` is off: the coordinator refuses to start unless --tls-cert, --tls-key and --tls-ca come from its command line or ABFLEET_TLS_* (as deploy/abfleet-coordinator.service passes them)"
                    .to_string(),
            );
        }
        findings
    }

    /// The settings as a `[coordinator]` table.
    pub fn to_toml(&self) -> String {
        let mut out = String::from("[coordinator]\n");
        line(&mut out, "listen", Some(self.listen.to_string().into()));
        line(&mut out, "data_dir", Some(path_value(&self.data_dir)));
        line(&mut out, "lease_seconds", Some(self.lease_seconds.into()));
        line(
            &mut out,
            "heartbeat_seconds",
            Some(self.heartbeat_seconds.into()),
        );
        line(
            &mut out,
            "max_attempts",
            Some(i64::from(self.max_attempts).into()),
        );
        line(
            &mut out,
            "tls_cert",
            self.tls_cert.as_deref().map(path_value),
        );
        line(&mut out, "tls_key", self.tls_key.as_deref().map(path_value));
        line(&mut out, "tls_ca", self.tls_ca.as_deref().map(path_value));
        line(&mut out, "plaintext", Some(self.plaintext.into()));
        line(
            &mut out,
            "http",
            self.http.map(|addr| addr.to_string().into()),
        );
        line(
            &mut out,
            "web",
            self.web.map(|addr| addr.to_string().into()),
        );
        line(
            &mut out,
            "milestone_spec",
            self.milestone_spec.as_deref().map(path_value),
        );
        line(
            &mut out,
            "retune_spec",
            self.retune_spec.as_deref().map(path_value),
        );
        line(
            &mut out,
            "sweep_spec",
            self.sweep_spec.as_deref().map(path_value),
        );
        line(
            &mut out,
            "webhook_secret_file",
            self.webhook_secret_file.as_deref().map(path_value),
        );
        line(
            &mut out,
            "debounce_seconds",
            Some(self.debounce_seconds.into()),
        );
        line(
            &mut out,
            "watch_upstream_interval",
            self.watch_upstream_interval.map(Into::into),
        );
        line(&mut out, "perf_label", Some(self.perf_label.clone().into()));
        line(
            &mut out,
            "toolchain_bots",
            Some(self.toolchain_bots.clone().into()),
        );
        out
    }
}

/// The agent's settings as its command line gave them (defaults where no flag was given):
/// the start that `--config` overlays, and what `abfleet agent` runs with. `--gpu-probes`
/// is not a setting: recorded GPUs stand in for hardware in tests and demos, not in a bench
/// host's configuration.
impl From<&AgentCommand> for AgentSettings {
    fn from(args: &AgentCommand) -> Self {
        AgentSettings {
            coordinator: args.coordinator.clone(),
            work_dir: args.work_dir.clone(),
            probes: args.probes.clone(),
            policy: args.policy.clone(),
            max_cache_bytes: args.max_cache_bytes,
            tls_cert: args.tls.tls_cert.clone(),
            tls_key: args.tls.tls_key.clone(),
            tls_ca: args.tls.tls_ca.clone(),
        }
    }
}

impl AgentSettings {
    /// Back into the command line's arguments, once the file is overlaid.
    fn write_into(self, args: &mut AgentCommand) {
        args.coordinator = self.coordinator;
        args.work_dir = self.work_dir;
        args.probes = self.probes;
        args.policy = self.policy;
        args.max_cache_bytes = self.max_cache_bytes;
        args.tls.tls_cert = self.tls_cert;
        args.tls.tls_key = self.tls_key;
        args.tls.tls_ca = self.tls_ca;
    }

    /// Takes from `file` every setting whose flag `given` says was not given.
    pub fn overlay(&mut self, file: &AgentFile, given: impl Fn(&str) -> bool) {
        fill(
            &mut self.coordinator,
            &file.coordinator,
            given("coordinator"),
        );
        fill(&mut self.work_dir, &file.work_dir, given("work_dir"));
        fill_option(&mut self.probes, &file.probes, given("probes"));
        fill_option(&mut self.policy, &file.policy, given("policy"));
        fill_option(
            &mut self.max_cache_bytes,
            &file.max_cache_bytes.map(|b| b.0),
            given("max_cache_bytes"),
        );
        if !(given("tls_cert") || given("tls_key") || given("tls_ca")) {
            fill_option(&mut self.tls_cert, &file.tls_cert, false);
            fill_option(&mut self.tls_key, &file.tls_key, false);
            fill_option(&mut self.tls_ca, &file.tls_ca, false);
        }
    }

    /// What would stop this agent from starting, and notes: `config check` reports them.
    pub fn check(&self) -> Findings {
        self.checked().0
    }

    /// [`AgentSettings::check`]'s findings, and, when none is a problem, the files it loaded
    /// on the way: `abfleet agent` starts with those (one set of rules, each file read once).
    pub fn checked(&self) -> (Findings, Option<AgentStart>) {
        let mut findings = Findings::default();
        let tls = check_tls(&self.tls_cert, &self.tls_key, &self.tls_ca, &mut findings);
        if let Some(tls) = &tls {
            if let Err(err) = client_endpoint(&self.coordinator, tls.as_ref()) {
                findings.problem(format!("`coordinator`: {err}"));
            }
        }
        if let Some(dir) = &self.probes {
            if !dir.is_dir() {
                findings.problem(format!(
                    "`probes` `{}` is not a directory; record the probes there or drop the key",
                    dir.display()
                ));
            }
        }
        let policy = match &self.policy {
            Some(path) => match abfleet_agent::policy::AgentPolicy::load(path) {
                Ok(policy) => Some(policy),
                Err(err) => {
                    findings.problem(format!("`policy`: {err}"));
                    None
                }
            },
            None => {
                findings.note(format!(
                    "no `policy`: the agent reads {} when it exists, else trusts the coordinator fully (docs/security.md)",
                    abfleet_agent::policy::DEFAULT_POLICY_PATH
                ));
                None
            }
        };
        match self.max_cache_bytes {
            Some(bytes) => findings.note(format!(
                "`max_cache_bytes` {}: the least recently used builds, git mirrors and fixtures are evicted down to it at start and after each job; keep it above one job's needs",
                abfleet_agent::cache::show_bytes(bytes)
            )),
            None => findings.note(
                "no `max_cache_bytes`: the agent's builds, git mirrors and fixtures are never evicted (docs/operations.md, \"Disk use\")".into(),
            ),
        }
        let start = match tls {
            Some(tls) if findings.problems.is_empty() => Some(AgentStart { tls, policy }),
            _ => None,
        };
        (findings, start)
    }

    /// The settings as an `[agent]` table.
    pub fn to_toml(&self) -> String {
        let mut out = String::from("[agent]\n");
        line(
            &mut out,
            "coordinator",
            Some(self.coordinator.clone().into()),
        );
        line(&mut out, "work_dir", Some(path_value(&self.work_dir)));
        line(&mut out, "probes", self.probes.as_deref().map(path_value));
        line(&mut out, "policy", self.policy.as_deref().map(path_value));
        line(
            &mut out,
            "max_cache_bytes",
            self.max_cache_bytes
                .map(|bytes| toml::Value::Integer(i64::try_from(bytes).unwrap_or(i64::MAX))),
        );
        line(
            &mut out,
            "tls_cert",
            self.tls_cert.as_deref().map(path_value),
        );
        line(&mut out, "tls_key", self.tls_key.as_deref().map(path_value));
        line(&mut out, "tls_ca", self.tls_ca.as_deref().map(path_value));
        out
    }
}

/// `abfleet config check FILE`: the effective settings of each table on stdout, or each
/// problem on stderr (`--format json`: one document on stdout either way, docs/operations.md
/// "Lists for scripts"). Returns the exit code.
pub fn check_file(path: &Path, format: crate::cli::ListFormat) -> i32 {
    let checked = match ConfigFile::load(path) {
        Ok(file) => Ok(checked_tables(&file)),
        Err(ConfigError::Invalid { problems, .. }) => Err(problems),
        Err(err) => Err(vec![err.to_string()]),
    };
    let problems: Vec<String> = match &checked {
        Err(problems) => problems.clone(),
        Ok(tables) => tables
            .iter()
            .flat_map(|table| {
                table
                    .findings
                    .problems
                    .iter()
                    .map(move |problem| format!("[{}] {problem}", table.name))
            })
            .collect(),
    };
    let code = if problems.is_empty() {
        abfleet_core::exit::OK
    } else {
        abfleet_core::exit::USAGE
    };
    if format == crate::cli::ListFormat::Json {
        let tables = checked.as_deref().unwrap_or_default();
        println!("{}", check_json(path, &problems, tables));
        return code;
    }
    if !problems.is_empty() {
        for problem in problems {
            eprintln!("error: `{}`: {problem}", path.display());
        }
        return code;
    }
    println!(
        "# `{}` is valid: the settings `abfleet coordinator|agent --config` and client\n# profiles take from it, defaults filled in (flags and their variables override them)",
        path.display()
    );
    for table in checked.unwrap_or_default() {
        println!();
        print!("{}", table.text);
        for note in &table.findings.notes {
            eprintln!("note: [{}] {note}", table.name);
        }
    }
    code
}

/// One table of a checked file: its effective settings as TOML and what the check found.
struct CheckedTable {
    name: String,
    text: String,
    findings: Findings,
}

/// Each table of a valid file, checked as the service reading it would.
fn checked_tables(file: &ConfigFile) -> Vec<CheckedTable> {
    let mut tables = Vec::new();
    let mut push = |name: String, text: String, findings: Findings| {
        tables.push(CheckedTable {
            name,
            text,
            findings,
        })
    };
    let problems_only = |problems| Findings {
        problems,
        notes: Vec::new(),
    };
    if let Some(section) = &file.coordinator {
        let mut settings = CoordinatorSettings::default();
        settings.overlay(section, |_| false);
        push("coordinator".into(), settings.to_toml(), settings.check());
    }
    if let Some(section) = &file.agent {
        let mut settings = AgentSettings::default();
        settings.overlay(section, |_| false);
        push("agent".into(), settings.to_toml(), settings.check());
    }
    if let Some(section) = &file.github {
        let milestone = file
            .coordinator
            .as_ref()
            .and_then(|c| c.milestone_spec.clone());
        let (text, problems) = match section.load(milestone.as_deref()) {
            Ok(reporting) => (
                format!(
                    "[github]\n# answers pull requests with the status `{}`{}\n",
                    reporting.context,
                    reporting
                        .report_url
                        .as_ref()
                        .map_or(String::new(), |url| format!(", linking {url}/runs/RUN"))
                ),
                Vec::new(),
            ),
            Err(problems) => (String::new(), problems),
        };
        push("github".into(), text, problems_only(problems));
    }
    if let Some(section) = &file.notify {
        let (text, problems) = match section.load() {
            Ok(config) => (notify_summary(&config), Vec::new()),
            Err(problems) => (String::new(), problems),
        };
        push("notify".into(), text, problems_only(problems));
    }
    for (name, profile) in file.profiles.iter().flatten() {
        let (text, findings) = crate::profile::check(name, profile);
        push(format!("profile.{name}"), text, findings);
    }
    tables
}

/// `config check --format json`: the file, whether it is valid, every problem, and per
/// table its effective settings (the keys that are set) and notes.
fn check_json(path: &Path, problems: &[String], tables: &[CheckedTable]) -> serde_json::Value {
    let tables: Vec<serde_json::Value> = tables
        .iter()
        .map(|table| {
            // The table's own keys: `[profile.lab]` is nested in its TOML as profile → lab.
            let parsed = toml::Value::Table(table.text.parse().unwrap_or_default());
            let settings = table
                .name
                .split('.')
                .try_fold(&parsed, |value, key| value.get(key))
                .cloned()
                .unwrap_or(toml::Value::Table(Default::default()));
            serde_json::json!({
                "table": table.name,
                "settings": settings,
                "problems": table.findings.problems,
                "notes": table.findings.notes,
            })
        })
        .collect();
    serde_json::json!({
        "file": path.display().to_string(),
        "valid": problems.is_empty(),
        "problems": problems,
        "tables": tables,
    })
}

/// The alert settings as `config check` shows them: each endpoint's name, format, where
/// it points (scheme and host only: the rest of a webhook URL is a secret) and its alerts.
fn notify_summary(config: &abfleet_coordinator::outbound::notify::NotifyConfig) -> String {
    use abfleet_coordinator::outbound::http_client::url_origin;
    let mut out = String::from("[notify]\n");
    line(
        &mut out,
        "report_url",
        config.report_url.clone().map(Into::into),
    );
    out.push_str(&format!(
        "retry_after_seconds = {}\nmax_attempts = {}\ntimeout_seconds = {}\n",
        config.retry_after.as_secs_f64(),
        config.max_attempts,
        config.timeout.as_secs_f64()
    ));
    for endpoint in &config.endpoints {
        let events: Vec<&str> = endpoint.events.iter().map(|k| k.as_str()).collect();
        out.push_str(&format!(
            "# endpoint `{}`: {:?} to {}, {}{}\n",
            endpoint.name,
            endpoint.format,
            url_origin(&endpoint.url),
            if events.is_empty() {
                "every alert".to_string()
            } else {
                events.join(", ")
            },
            if endpoint.secret.is_some() {
                ", signed"
            } else {
                ""
            }
        ));
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use clap::{CommandFactory, FromArgMatches};

    fn parse_args(args: &[&str]) -> (Command, ArgMatches) {
        let matches = Cli::command().try_get_matches_from(args).unwrap();
        let cli = Cli::from_arg_matches(&matches).unwrap();
        (cli.command, matches)
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn problems(text: &str) -> Vec<String> {
        match ConfigFile::parse(text, Path::new("/etc/abfleet/x.toml")) {
            Err(ConfigError::Invalid { problems, .. }) => problems,
            other => panic!("expected problems, got {other:?}"),
        }
    }

    #[test]
    fn defaults_match_the_flags() {
        // TLS flags read ABFLEET_TLS_*; only the settings with a default are compared.
        let (command, _) = parse_args(&["abfleet", "coordinator"]);
        let Command::Coordinator(CoordinatorCommand {
            listen,
            data_dir,
            lease_seconds,
            heartbeat_seconds,
            max_attempts,
            plaintext,
            milestone,
            ..
        }) = command
        else {
            unreachable!()
        };
        let defaults = CoordinatorSettings::default();
        assert_eq!(listen, defaults.listen);
        assert_eq!(data_dir, defaults.data_dir);
        assert_eq!(lease_seconds, defaults.lease_seconds);
        assert_eq!(heartbeat_seconds, defaults.heartbeat_seconds);
        assert_eq!(max_attempts, defaults.max_attempts);
        assert_eq!(plaintext, defaults.plaintext);
        assert_eq!(milestone.debounce_seconds, defaults.debounce_seconds);
        assert_eq!(milestone.perf_label, defaults.perf_label);
        assert_eq!(milestone.toolchain_bots, defaults.toolchain_bots);
        let (command, _) = parse_args(&["abfleet", "agent"]);
        let Command::Agent(AgentCommand {
            coordinator,
            work_dir,
            probes,
            policy,
            ..
        }) = command
        else {
            unreachable!()
        };
        let defaults = AgentSettings::default();
        assert_eq!(coordinator, defaults.coordinator);
        assert_eq!(work_dir, defaults.work_dir);
        assert_eq!(probes, defaults.probes);
        assert_eq!(policy, defaults.policy);
    }

    #[test]
    fn every_unknown_key_and_wrong_type_is_named() {
        let found = problems(
            "[coordinator]\nlease = 3\nmax_attempts = \"three\"\nlisten = \"nowhere\"\n[agnet]\n",
        );
        assert_eq!(found.len(), 4, "{found:#?}");
        assert!(
            found.iter().any(|p| p.contains("unknown field `lease`")),
            "{found:#?}"
        );
        assert!(
            found
                .iter()
                .any(|p| p.contains("`max_attempts`") && p.contains("string")),
            "{found:#?}"
        );
        assert!(found.iter().any(|p| p.contains("`listen`")), "{found:#?}");
        assert!(found.iter().any(|p| p.contains("`agnet`")), "{found:#?}");
        let err = ConfigFile::parse("[agent]\nwork_dri = \"x\"\n", Path::new("a.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`a.toml`") && err.contains("work_dri"),
            "{err}"
        );
    }

    #[test]
    fn syntax_errors_and_empty_files_are_refused() {
        assert!(matches!(
            ConfigFile::parse("[coordinator\n", Path::new("x.toml")),
            Err(ConfigError::Syntax { .. })
        ));
        assert_eq!(
            problems("# nothing\n"),
            ["it has neither a [coordinator] nor an [agent] table, nor a [profile.NAME]"]
        );
        assert!(problems("coordinator = 1\n")[0].contains("must be a table"));
    }

    #[test]
    fn relative_paths_are_taken_from_the_file_directory() {
        let file = ConfigFile::parse(
            "[agent]\nwork_dir = \"work\"\npolicy = \"/abs/policy.toml\"\n",
            Path::new("/etc/abfleet/agent.toml"),
        )
        .unwrap();
        let agent = file.agent.unwrap();
        assert_eq!(agent.work_dir.unwrap(), Path::new("/etc/abfleet/work"));
        assert_eq!(agent.policy.unwrap(), Path::new("/abs/policy.toml"));
    }

    /// Issue 25: the cache budget, as bytes or with a suffix, in the file and by flag, for
    /// the agent and for `abfleet agent gc`.
    #[test]
    fn the_cache_budget_reads_as_bytes_or_with_a_suffix_and_the_flag_wins() {
        let tmp = tempfile::tempdir().unwrap();
        let path = write(
            tmp.path(),
            "a.toml",
            "[agent]\nwork_dir = \"w\"\nmax_cache_bytes = \"20G\"\n",
        );
        let config = path.to_str().unwrap();
        let (mut command, matches) = parse_args(&["abfleet", "agent", "--config", config]);
        apply(&mut command, &matches).unwrap();
        let Command::Agent(AgentCommand {
            max_cache_bytes, ..
        }) = command
        else {
            unreachable!()
        };
        assert_eq!(max_cache_bytes, Some(20 << 30));
        let (mut command, matches) = parse_args(&[
            "abfleet",
            "agent",
            "--config",
            config,
            "--max-cache-bytes",
            "500M",
        ]);
        apply(&mut command, &matches).unwrap();
        let Command::Agent(AgentCommand {
            max_cache_bytes, ..
        }) = command
        else {
            unreachable!()
        };
        assert_eq!(max_cache_bytes, Some(500 << 20), "the flag wins");

        let (mut command, matches) =
            parse_args(&["abfleet", "agent", "gc", "--config", config, "--dry-run"]);
        apply(&mut command, &matches).unwrap();
        let Command::Agent(AgentCommand {
            action:
                Some(crate::cli::AgentAction::Gc {
                    work_dir,
                    max_cache_bytes,
                    dry_run,
                    ..
                }),
            ..
        }) = command
        else {
            unreachable!()
        };
        assert_eq!(work_dir, tmp.path().join("w"), "gc reads the agent's file");
        assert_eq!(max_cache_bytes, Some(20 << 30));
        assert!(dry_run);

        let file = ConfigFile::parse("[agent]\nmax_cache_bytes = 1000\n", &path).unwrap();
        assert_eq!(file.agent.unwrap().max_cache_bytes, Some(CacheBytes(1000)));
        let found = problems("[agent]\nmax_cache_bytes = \"lots\"\n");
        assert!(
            found
                .iter()
                .any(|p| p.contains("`lots`") && p.contains("`20G`")),
            "{found:#?}"
        );
        let settings = AgentSettings {
            max_cache_bytes: Some(1000),
            ..AgentSettings::default()
        };
        assert!(settings.to_toml().contains("max_cache_bytes = 1000\n"));
    }

    #[test]
    fn flags_override_the_file_and_the_file_overrides_defaults() {
        let tmp = tempfile::tempdir().unwrap();
        let path = write(
            tmp.path(),
            "c.toml",
            "[coordinator]\nlisten = \"127.0.0.1:7811\"\nlease_seconds = 60\nmax_attempts = 5\nplaintext = true\n",
        );
        let config = path.to_str().unwrap();
        let (mut command, matches) = parse_args(&[
            "abfleet",
            "coordinator",
            "--config",
            config,
            "--lease-seconds",
            "45",
        ]);
        apply(&mut command, &matches).unwrap();
        let Command::Coordinator(CoordinatorCommand {
            listen,
            data_dir,
            lease_seconds,
            heartbeat_seconds,
            max_attempts,
            plaintext,
            ..
        }) = command
        else {
            unreachable!()
        };
        assert_eq!(listen, "127.0.0.1:7811".parse().unwrap(), "from the file");
        assert_eq!(lease_seconds, 45.0, "the flag wins over the file");
        assert_eq!(max_attempts, 5);
        assert!(plaintext);
        assert_eq!(heartbeat_seconds, DEFAULT_HEARTBEAT_SECONDS, "default");
        assert_eq!(data_dir, Path::new(DEFAULT_DATA_DIR), "default");

        // A flag given with its default's value still wins.
        let (mut command, matches) = parse_args(&[
            "abfleet",
            "coordinator",
            "--config",
            config,
            "--listen",
            DEFAULT_LISTEN,
        ]);
        apply(&mut command, &matches).unwrap();
        let Command::Coordinator(CoordinatorCommand { listen, .. }) = command else {
            unreachable!()
        };
        assert_eq!(listen, DEFAULT_LISTEN.parse().unwrap());
    }

    #[test]
    fn a_file_without_the_table_is_refused_for_that_service() {
        let tmp = tempfile::tempdir().unwrap();
        let path = write(tmp.path(), "a.toml", "[agent]\nwork_dir = \"w\"\n");
        let (mut command, matches) =
            parse_args(&["abfleet", "coordinator", "--config", path.to_str().unwrap()]);
        let err = apply(&mut command, &matches).unwrap_err().to_string();
        assert!(err.contains("no [coordinator] table"), "{err}");
        let (mut command, matches) =
            parse_args(&["abfleet", "agent", "--config", path.to_str().unwrap()]);
        apply(&mut command, &matches).unwrap();
        let Command::Agent(AgentCommand { work_dir, .. }) = command else {
            unreachable!()
        };
        assert_eq!(work_dir, tmp.path().join("w"));
    }

    #[test]
    fn tls_files_come_as_one_from_flags_or_from_the_file() {
        let file = AgentFile {
            tls_cert: Some("/f/agent.pem".into()),
            tls_key: Some("/f/agent.key".into()),
            tls_ca: Some("/f/ca.pem".into()),
            ..AgentFile::default()
        };
        let mut settings = AgentSettings {
            tls_cert: Some("/flag/agent.pem".into()),
            ..AgentSettings::default()
        };
        settings.overlay(&file, |id| id == "tls_cert");
        assert_eq!(settings.tls_cert, Some("/flag/agent.pem".into()));
        assert_eq!(
            settings.tls_key, None,
            "never the file's key with a flag's cert"
        );
        let mut settings = AgentSettings::default();
        settings.overlay(&file, |_| false);
        assert_eq!(settings.tls_key, Some("/f/agent.key".into()));
    }

    #[test]
    fn coordinator_checks_name_each_problem() {
        let settings = CoordinatorSettings {
            listen: "0.0.0.0:7700".parse().unwrap(),
            heartbeat_seconds: 30.0,
            lease_seconds: 30.0,
            max_attempts: 0,
            plaintext: true,
            ..CoordinatorSettings::default()
        };
        let found = settings.check().problems;
        assert_eq!(found.len(), 3, "{found:#?}");
        assert!(
            found[0].contains("shorter than `lease_seconds`"),
            "{found:#?}"
        );
        assert!(found[1].contains("at least 1"), "{found:#?}");
        assert!(found[2].contains("loopback only"), "{found:#?}");

        let tmp = tempfile::tempdir().unwrap();
        let settings = CoordinatorSettings {
            tls_cert: Some(tmp.path().join("missing.pem")),
            tls_key: Some(tmp.path().join("missing.key")),
            ..CoordinatorSettings::default()
        };
        let found = settings.check().problems;
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(found[0].contains("`tls_ca` missing"), "{found:#?}");

        let settings = CoordinatorSettings {
            tls_ca: Some(tmp.path().join("missing-ca.pem")),
            ..settings
        };
        let found = settings.check().problems;
        assert!(found[0].contains("missing.key"), "{found:#?}");

        let key = write(tmp.path(), "open.key", "-----BEGIN PRIVATE KEY-----\n");
        std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .unwrap();
        let settings = CoordinatorSettings {
            tls_key: Some(key),
            ..settings
        };
        let found = settings.check().problems;
        assert!(found[0].contains("chmod 600"), "{found:#?}");

        let notes = CoordinatorSettings::default().check();
        assert!(notes.problems.is_empty());
        assert!(notes.notes[0].contains("--tls-cert"), "{:?}", notes.notes);
    }

    #[test]
    fn a_plaintext_web_view_off_loopback_is_a_problem() {
        let settings = CoordinatorSettings {
            plaintext: true,
            web: Some("0.0.0.0:7703".parse().unwrap()),
            ..CoordinatorSettings::default()
        };
        let found = settings.check().problems;
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(
            found[0].contains("`web = \"0.0.0.0:7703\"`") && found[0].contains("TLS files"),
            "{found:#?}"
        );
        let loopback = CoordinatorSettings {
            web: Some("127.0.0.1:7703".parse().unwrap()),
            ..settings
        };
        assert!(loopback.check().problems.is_empty());
        assert!(loopback.to_toml().contains("web = \"127.0.0.1:7703\""));
    }

    #[test]
    fn agent_checks_name_each_problem() {
        let tmp = tempfile::tempdir().unwrap();
        let settings = AgentSettings {
            coordinator: "http://coord.example:7700".to_string(),
            probes: Some(tmp.path().join("no-probes")),
            policy: Some(tmp.path().join("no-policy.toml")),
            ..AgentSettings::default()
        };
        let found = settings.check().problems;
        assert_eq!(found.len(), 3, "{found:#?}");
        assert!(found[0].contains("not loopback"), "{found:#?}");
        assert!(found[1].contains("no-probes"), "{found:#?}");
        assert!(found[2].contains("no-policy.toml"), "{found:#?}");
        assert!(AgentSettings::default().check().problems.is_empty());
    }

    #[test]
    fn effective_settings_print_as_the_file_format() {
        // A file in the working directory: its relative paths mean what the defaults mean.
        let text = CoordinatorSettings::default().to_toml();
        let file = ConfigFile::parse(&text, Path::new("x.toml")).unwrap();
        let mut settings = CoordinatorSettings::default();
        settings.overlay(file.coordinator.as_ref().unwrap(), |_| false);
        assert_eq!(settings, CoordinatorSettings::default());
        assert!(text.contains("# tls_cert: not set"), "{text}");
        let text = AgentSettings::default().to_toml();
        let file = ConfigFile::parse(&text, Path::new("/x.toml")).unwrap();
        assert_eq!(
            file.agent.unwrap().coordinator.unwrap(),
            DEFAULT_COORDINATOR_URL
        );
    }

    /// One set of rules: what the coordinator refuses to start with is what `config check`
    /// calls a problem, whether the settings came from flags or a file.
    #[test]
    fn the_coordinator_refuses_what_config_check_calls_a_problem() {
        let (command, _) = parse_args(&["abfleet", "coordinator", "--plaintext"]);
        let Command::Coordinator(args) = command else {
            unreachable!()
        };
        let given = CoordinatorSettings::from(&args);
        assert_eq!(
            given,
            CoordinatorSettings {
                plaintext: true,
                ..CoordinatorSettings::default()
            }
        );
        assert!(given.refusals().is_empty());
        let cases: Vec<(CoordinatorSettings, &str)> = vec![
            (
                CoordinatorSettings {
                    max_attempts: 0,
                    ..given.clone()
                },
                "a job needs at least 1 attempt",
            ),
            (
                CoordinatorSettings {
                    heartbeat_seconds: 30.0,
                    ..given.clone()
                },
                "must be shorter than `lease_seconds`",
            ),
            (
                CoordinatorSettings {
                    lease_seconds: f64::INFINITY,
                    ..given.clone()
                },
                "`lease_seconds` is inf",
            ),
            (
                CoordinatorSettings {
                    debounce_seconds: -1.0,
                    ..given.clone()
                },
                "`debounce_seconds` is -1",
            ),
            (
                CoordinatorSettings {
                    watch_upstream_interval: Some(60.0),
                    ..given.clone()
                },
                "the watcher polls the milestone spec's upstream",
            ),
            (
                CoordinatorSettings {
                    perf_label: " ".into(),
                    ..given.clone()
                },
                "`perf_label` is empty",
            ),
            (
                CoordinatorSettings {
                    webhook_secret_file: Some("secret".into()),
                    ..given.clone()
                },
                "webhooks arrive on the HTTP listener",
            ),
            (
                CoordinatorSettings {
                    sweep_spec: Some("sweep.toml".into()),
                    ..given.clone()
                },
                "a toolchain bump of the milestone spec starts the sweep",
            ),
            (
                CoordinatorSettings {
                    tls_ca: Some("ca.pem".into()),
                    ..given.clone()
                },
                "TLS files are both set",
            ),
        ];
        for (settings, why) in cases {
            let refusals = settings.refusals();
            assert!(
                refusals.iter().any(|r| r.contains(why)),
                "{why}: {refusals:?}"
            );
            let problems = settings.check().problems;
            for refusal in &refusals {
                assert!(problems.contains(refusal), "{refusal} not in {problems:?}");
            }
        }
    }
}
