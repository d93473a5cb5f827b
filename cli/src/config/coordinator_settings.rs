//! The coordinator's settings: their defaults, what its flags and a `[coordinator]` table set,
//! and their checks (the same for `abfleet coordinator` and `abfleet config check`).

use std::net::SocketAddr;
use std::path::PathBuf;

use abfleet_proto::transport::check_plaintext_listen;

use super::{fill, fill_option, CoordinatorFile};
use crate::cli::CoordinatorCommand;
use crate::defaults::{
    DEFAULT_DATA_DIR, DEFAULT_DEBOUNCE_SECONDS, DEFAULT_HEARTBEAT_SECONDS, DEFAULT_LEASE_SECONDS,
    DEFAULT_LISTEN, DEFAULT_MAX_ATTEMPTS, DEFAULT_PERF_LABEL, DEFAULT_TOOLCHAIN_BOTS,
};
use crate::findings::{check_tls, line, path_value, Findings};

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
    pub(super) fn write_into(self, args: &mut CoordinatorCommand) {
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
