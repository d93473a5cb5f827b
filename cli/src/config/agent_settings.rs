//! The agent's settings: their defaults, what its flags and an `[agent]` table set, their
//! checks, and what the agent starts with once they check out.

use std::path::PathBuf;

use abfleet_proto::transport::{client_endpoint, TlsFiles};

use super::{fill, fill_option, AgentFile};
use crate::cli::AgentCommand;
use crate::defaults::{DEFAULT_COORDINATOR_URL, DEFAULT_WORK_DIR};
use crate::findings::{check_tls, line, path_value, Findings};

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
    pub(super) fn write_into(self, args: &mut AgentCommand) {
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
