//! The command line, as clap sees it.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

const AFTER_HELP: &str = abfleet_core::exit::HELP;

/// `abfleet --version`: the release and the commit it was built from (`build.rs`).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("ABFLEET_COMMIT"),
    ")"
);

/// Is the fork faster than upstream, and did it stay numerically exact?
#[derive(Parser)]
#[command(name = "abfleet", version = VERSION, after_help = AFTER_HELP)]
pub struct Cli {
    /// More log output on stderr (-v info, -vv debug; or set ABFLEET_LOG).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Log lines as text, or as one JSON object per line with the ids as fields.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "ABFLEET_LOG_FORMAT")]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run a job spec here: an embedded coordinator and one agent in this process, over
    /// real gRPC on loopback. Prints the per-feature table, writes report.html, report.md and
    /// report.json.
    #[command(after_help = AFTER_HELP)]
    Local(LocalCommand),
    /// A/A calibration of this host: the fork's binary timed as both sides of a spec's first
    /// fixture and workload, many times. Reports the false-positive rate and the smallest
    /// difference the host resolves; later reports from this work dir show that resolution.
    Calibrate {
        spec: PathBuf,
        /// Number of A/A trials (cells), each at the spec's adaptive bounds: `runs` to
        /// `max_runs` pairs (`max_runs` must be 6 or more for a trial to be able to err).
        #[arg(long, default_value_t = 20)]
        trials: u32,
        /// Where the calibration's report goes [default: ./abfleet-out/<run-id>/].
        #[arg(long)]
        out: Option<PathBuf>,
        #[arg(long, default_value = "abfleet-out/.coordinator")]
        data_dir: PathBuf,
        /// The agent work dir the calibration is kept in (use the bench host agent's).
        #[arg(long, default_value = "abfleet-out/.agent")]
        work_dir: PathBuf,
    },
    /// Serve the coordinator: agents and the CLI connect to it.
    Coordinator(CoordinatorCommand),
    /// Run an agent on this bench host: it dials the coordinator and takes jobs.
    Agent(AgentCommand),
    /// Submit a job spec to a coordinator.
    #[command(after_help = AFTER_HELP)]
    Submit(SubmitCommand),
    /// Start a run for a reason, with a note kept on the run (release, toolchain bump, tag, PR).
    ///
    /// The note is shown in the run's report and `abfleet runs`. Runs SPEC, or without it the coordinator's milestone spec (`abfleet coordinator
    /// --milestone-spec`). See docs/milestone.md.
    #[command(after_help = AFTER_HELP)]
    Trigger(TriggerCommand),
    /// Print the report of a run.
    ///
    /// Exits 0; with --fail-on, with the run's exit code under those gates (see below), as
    /// `submit --wait --fail-on` would.
    #[command(after_help = AFTER_HELP)]
    Report {
        /// The run's id, or a unique start of it (as `abfleet runs` shows it).
        run_id: String,
        #[arg(long, value_enum, default_value_t = ReportFormat::Md)]
        format: ReportFormat,
        #[command(flatten)]
        fail_on: FailOnArg,
        /// Compare with this earlier run instead (Markdown): what changed (commits,
        /// toolchains), each matched cell's speedup then and now, and the parity ratchet.
        #[arg(long, value_name = "RUN")]
        against: Option<String>,
        #[command(flatten)]
        source: StoreSource,
    },
    /// One workload's speedup and the fork's own median over time on a hardware generation.
    ///
    /// Every run finished as `done` on that generation key (of every spec, or of `--name`;
    /// never a bisect step), oldest first, with the regression flags against the runs before
    /// it of the same spec and hardware and what changed in between (fork commit, upstream
    /// pin, toolchain).
    History {
        #[command(flatten)]
        query: HistoryArgs,
        #[command(flatten)]
        source: StoreSource,
    },
    /// Follow a run that is already going, as `submit --wait` does: progress, then the
    /// report written and the run's exit code (Ctrl-C stops following, exit 8).
    #[command(after_help = AFTER_HELP)]
    Watch {
        /// The run's id, or a unique start of it (as `abfleet runs` shows it).
        run_id: String,
        #[command(flatten)]
        to: CoordinatorArgs,
        /// Where report.html, report.md and report.json go [default: ./abfleet-out/<run-id>/].
        #[arg(long)]
        out: Option<PathBuf>,
        #[command(flatten)]
        fail_on: FailOnArg,
    },
    /// List runs, newest first: the newest 50, or --limit N, or --all.
    Runs {
        /// How many of the newest runs to list.
        #[arg(long, default_value_t = 50, conflicts_with = "all", value_parser = clap::value_parser!(u32).range(1..))]
        limit: u32,
        /// Every run (paged through, newest first).
        #[arg(long)]
        all: bool,
        /// A table, or one JSON document (docs/operations.md, "Lists for scripts").
        #[arg(long, value_enum, default_value_t = ListFormat::Text)]
        format: ListFormat,
        #[command(flatten)]
        source: StoreSource,
    },
    /// List agents with their state (idle, busy, draining, drained, lost) and last heartbeat.
    Agents {
        #[command(flatten)]
        to: CoordinatorArgs,
        /// A table, or one JSON document (docs/operations.md, "Lists for scripts").
        #[arg(long, value_enum, default_value_t = ListFormat::Text)]
        format: ListFormat,
    },
    /// Cancel a run: queued jobs are dropped, running ones stopped.
    Cancel {
        /// The run's id, or a unique start of it (as `abfleet runs` shows it).
        run_id: String,
        #[command(flatten)]
        to: CoordinatorArgs,
    },
    /// Find the fork commit that made a workload slower, through the fleet.
    ///
    /// Bisects the fork's first-parent history between a good and a bad commit: each step
    /// runs the candidate against the good commit on a matching agent with the paired method
    /// (`slower` is bad; `unsure` is retried with twice the pairs, then reported undecidable).
    /// With RUN, the commits, generation and cell come from that run's first speed regression
    /// against its previous comparable run. Writes bisect.md and bisect.json to --out, each step's report under --out/steps/RUN.
    Bisect {
        #[command(flatten)]
        target: BisectArgs,
        #[command(flatten)]
        to: CoordinatorArgs,
    },
    /// Keep the fork's own docs current with a run's results.
    Docs {
        #[command(subcommand)]
        command: DocsCommand,
    },
    /// Config files of `coordinator --config` and `agent --config`.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Drain an agent: it finishes the job it runs and is offered no new one.
    ///
    /// For taking its host down or re-tuning it. The drain is kept in the coordinator's store
    /// (it survives restarts of either side); `--resume` lets the agent take jobs again.
    Drain {
        /// The agent's id, a unique start of it, or its host name, as `abfleet agents` lists them.
        agent_id: String,
        /// Undo the drain: the agent takes jobs again.
        #[arg(long)]
        resume: bool,
        #[command(flatten)]
        to: CoordinatorArgs,
    },
    /// The fleet's certificates: a CA and the certificates it signs for each role.
    ///
    /// Roles are agent, operator and coordinator; each certificate carries its role and name
    /// in a SAN URI `abfleet://role/ROLE/NAME` (docs/security.md). Keys are written mode 0600,
    /// certificates 0644; nothing is overwritten without --force.
    Certs {
        #[command(subcommand)]
        command: CertsCommand,
    },
    /// Print shell completions for `abfleet` on stdout, e.g.
    /// `abfleet completions bash > /usr/share/bash-completion/completions/abfleet`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write the manual pages: abfleet.1 and one per subcommand (abfleet-submit.1, …), for
    /// `man -l` or a MANPATH directory (the Debian package installs them).
    Man {
        /// The directory the pages are written to (created when missing).
        #[arg(long, default_value = ".")]
        out: PathBuf,
    },
    /// Theoretical occupancy of one kernel launch and its limiter:
    /// `--arch sm_89 --block 128 --regs 255 [--smem BYTES]`, or `--arch gfx942 --vgprs N`.
    Occupancy(OccupancyArgs),
}

// What `abfleet coordinator` asks on its command line (`config::apply` fills in the
// rest from `--config`; no doc comment: the subcommand's own says it).
#[derive(clap::Args)]
pub struct CoordinatorCommand {
    /// Read settings from this TOML file's `[coordinator]` table (deploy/coordinator.toml
    /// lists every key); a flag given here overrides the file.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[arg(long, default_value = crate::defaults::DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    #[arg(long, default_value = crate::defaults::DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
    /// How long a job stays leased without a heartbeat.
    #[arg(long, default_value_t = crate::defaults::DEFAULT_LEASE_SECONDS)]
    pub lease_seconds: f64,
    /// How often agents heartbeat.
    #[arg(long, default_value_t = crate::defaults::DEFAULT_HEARTBEAT_SECONDS)]
    pub heartbeat_seconds: f64,
    /// Attempts a job gets before it fails as "agent lost" (1 or more).
    #[arg(long, default_value_t = crate::defaults::DEFAULT_MAX_ATTEMPTS)]
    pub max_attempts: u32,
    /// The coordinator's certificate (`abfleet certs issue --role coordinator`), its key
    /// and the fleet CA: mutual TLS, every caller needs a certificate the CA signed.
    #[command(flatten)]
    pub tls: TlsArgs,
    /// Also serve plain HTTP here: `/metrics` (Prometheus) and `/healthz`, counts and
    /// states only; off by default. With --plaintext on loopback, also the web view.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// Serve the read-only web view and its JSON API (`/api/`) here. With TLS: HTTPS,
    /// readable only with an operator or viewer certificate of the fleet CA. With
    /// --plaintext: plain HTTP, loopback only (a loopback --http serves it too).
    #[arg(long, value_name = "ADDR")]
    pub web: Option<SocketAddr>,
    #[command(flatten)]
    pub milestone: MilestoneArgs,
    /// Serve without TLS. Allowed on a loopback --listen only: every local process may
    /// then submit jobs and act as an agent.
    #[arg(long, conflicts_with_all = ["tls_cert", "tls_key", "tls_ca"])]
    pub plaintext: bool,
}

// What `abfleet agent` asks on its command line (`config::apply` fills in the rest from
// `--config`).
#[derive(clap::Args)]
pub struct AgentCommand {
    /// Read settings from this TOML file's `[agent]` table (deploy/agent.toml lists every
    /// key); a flag given here overrides the file.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[arg(
        long,
        default_value = crate::defaults::DEFAULT_COORDINATOR_URL,
        env = "ABFLEET_COORDINATOR"
    )]
    pub coordinator: String,
    #[arg(long, default_value = crate::defaults::DEFAULT_WORK_DIR)]
    pub work_dir: PathBuf,
    /// Report the hardware recorded in DIR (cpuinfo.txt, nvidia-smi-q-x.xml, rocminfo.txt,
    /// sycl-ls.txt, clinfo.txt, <tool>-version.txt such as nvcc-version.txt) instead of probing this host: one machine
    /// stands in for a host of another kind. Timed CPU cells still run on the real CPU.
    #[arg(long, value_name = "DIR")]
    pub probes: Option<PathBuf>,
    /// Keep this host's live CPU and compilers and add the GPUs recorded in DIR
    /// (repeatable): the fork's GPU builds run with the real toolchains here and are
    /// checked for those GPUs (never timed).
    #[arg(long, value_name = "DIR", conflicts_with = "probes")]
    pub gpu_probes: Vec<PathBuf>,
    /// Serve another architecture under an emulator, as an emulation file says
    /// (deploy/emulate-aarch64.toml: the recorded CPU it stands for, the emulator, the cross
    /// arguments that replace `{cross}` in build commands). Its generation key ends in
    /// `/emulated`; its cells gate parity and run the ISA checks, and are never timed.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["probes", "gpu_probes"])]
    pub emulate: Option<PathBuf>,
    /// The agent's own policy (TOML: `allowed_sources`, `allowed_build_programs`): a job
    /// whose sources or programs it does not allow is refused before anything is fetched
    /// or run [default: /etc/abfleet/agent-policy.toml when it exists]. Without a policy
    /// the agent trusts the coordinator fully: whoever can submit a job can run programs
    /// on this host. See docs/security.md.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// The budget of the work dir's cache (builds, git mirrors, fixtures): bytes, or with
    /// K, M, G or T (powers of 1024, e.g. `20G`). At start and after each job the least
    /// recently used entries the running job does not use are evicted down to it
    /// [default: no budget]. docs/operations.md, "Disk use".
    #[arg(long, value_name = "BYTES", value_parser = parse_cache_bytes)]
    pub max_cache_bytes: Option<u64>,
    #[command(flatten)]
    pub tls: TlsArgs,
    /// `abfleet agent gc`: the agent's cache eviction, run by hand.
    #[command(subcommand)]
    pub action: Option<AgentAction>,
}

// What `abfleet local` asks.
#[derive(clap::Args)]
pub struct LocalCommand {
    /// The job spec (TOML; see docs/job-spec.md).
    pub spec: PathBuf,
    /// Where report.html, report.md and report.json go [default: ./abfleet-out/<run-id>/].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The embedded coordinator's store.
    #[arg(long, default_value = "abfleet-out/.coordinator")]
    pub data_dir: PathBuf,
    /// The embedded agent's work dir (git caches, builds, fixtures); kept between runs.
    #[arg(long, default_value = "abfleet-out/.agent")]
    pub work_dir: PathBuf,
    /// Add the GPUs recorded in DIR (nvidia-smi, rocminfo or sycl-ls output; repeatable)
    /// to this host: the GPU backends are built here with the real compilers and checked
    /// for those GPUs' architectures (never timed). E.g. fixtures/probes/l40s-thamada.
    #[arg(long, value_name = "DIR")]
    pub gpu_probes: Vec<PathBuf>,
    #[command(flatten)]
    pub trigger: TriggerArg,
    #[command(flatten)]
    pub fail_on: FailOnArg,
}

// What `abfleet submit` asks.
#[derive(clap::Args)]
pub struct SubmitCommand {
    pub spec: PathBuf,
    #[command(flatten)]
    pub to: CoordinatorArgs,
    /// Wait for the run to end, show progress, write the report and exit with its code.
    #[arg(long)]
    pub wait: bool,
    /// With --wait: where report.html, report.md and report.json go [default: ./abfleet-out/<run-id>/].
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub trigger: TriggerArg,
    #[command(flatten)]
    pub fail_on: FailOnArg,
}

// What `abfleet trigger` asks.
#[derive(clap::Args)]
pub struct TriggerCommand {
    /// Why this run happens.
    #[arg(long, value_enum)]
    pub reason: Trigger,
    /// What it is about: the tag, the release, the PR (`v3.1.0`, `PR #412: AVX-512 VIF`).
    #[arg(long)]
    pub note: String,
    /// The pull request the run answers, `owner/name#number`: the coordinator (with
    /// `[github]` in its config) runs the PR's head commit as the fork and posts a
    /// status and one comment on the PR (docs/milestone.md).
    #[arg(long, value_name = "OWNER/NAME#N")]
    pub pr: Option<String>,
    /// The job spec [default: the coordinator's milestone spec].
    pub spec: Option<PathBuf>,
    #[command(flatten)]
    pub to: CoordinatorArgs,
    /// Wait for the run to end, show progress, write the report and exit with its code.
    #[arg(long)]
    pub wait: bool,
    /// With --wait: where report.html, report.md and report.json go [default: ./abfleet-out/<run-id>/].
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub fail_on: FailOnArg,
}

// What `abfleet occupancy` asks (no doc comment: the subcommand's own says it).
#[derive(clap::Args)]
pub struct OccupancyArgs {
    /// `sm_XY` (CUDA) or `gfxNNN` (AMD).
    #[arg(long)]
    pub arch: String,
    /// Threads per block (work-items per workgroup).
    #[arg(long, default_value_t = 128)]
    pub block: u32,
    /// CUDA: registers per thread.
    #[arg(long)]
    pub regs: Option<u32>,
    /// AMD: VGPRs per work-item.
    #[arg(long)]
    pub vgprs: Option<u32>,
    /// AMD: SGPRs per wave.
    #[arg(long, default_value_t = 0)]
    pub sgprs: u32,
    /// Static shared memory (LDS) per block, bytes.
    #[arg(long, default_value_t = 0)]
    pub smem: u32,
    /// Text, or one JSON document (docs/operations.md, "Lists for scripts").
    #[arg(long, value_enum, default_value_t = ListFormat::Text)]
    pub format: ListFormat,
}

// What `abfleet bisect` asks, besides where the coordinator is.
#[derive(clap::Args)]
pub struct BisectArgs {
    /// A run flagged with a regression; or give --spec, --good, --bad, --workload, --fixture.
    pub run_id: Option<String>,
    /// The job spec whose fork (a git source) to bisect.
    #[arg(long, value_name = "SPEC")]
    pub spec: Option<PathBuf>,
    #[arg(long, value_name = "COMMIT")]
    pub good: Option<String>,
    #[arg(long, value_name = "COMMIT")]
    pub bad: Option<String>,
    /// Run every step on this generation key.
    #[arg(long, value_name = "KEY")]
    pub generation: Option<String>,
    #[arg(long, value_name = "W")]
    pub workload: Option<String>,
    #[arg(long, value_name = "F")]
    pub fixture: Option<String>,
    #[arg(long, default_value = "abfleet-out")]
    pub out: PathBuf,
}

// What `abfleet history` asks, besides where the runs are.
#[derive(clap::Args)]
pub struct HistoryArgs {
    /// The generation key, exactly as `abfleet agents` shows it (`cpu/x86-64-v4/zen4`).
    #[arg(long, value_name = "KEY")]
    pub generation: String,
    #[arg(long, value_name = "W")]
    pub workload: String,
    /// Only this fixture (default: every fixture of the workload).
    #[arg(long, value_name = "F")]
    pub fixture: Option<String>,
    /// Only runs of this spec name.
    #[arg(long)]
    pub name: Option<String>,
    /// The newest this many runs (at most 5000).
    #[arg(long, default_value_t = 200)]
    pub limit: u32,
    #[arg(long, value_enum, default_value_t = HistoryFormat::Md)]
    pub format: HistoryFormat,
}

/// The run a docs command writes up: a run of the coordinator (or data dir), or a
/// report.json on disk.
#[derive(clap::Args)]
pub struct RunOrReport {
    /// The run; or `--report FILE` (a report.json) instead.
    #[arg(required_unless_present = "report")]
    pub run_id: Option<String>,
    /// A report.json written by `abfleet local`, `submit --wait` or `report --format json`.
    #[arg(long, value_name = "FILE", conflicts_with = "run_id")]
    pub report: Option<PathBuf>,
}

// What `abfleet docs update` asks, besides where the run is.
#[derive(clap::Args)]
pub struct DocsUpdate {
    #[command(flatten)]
    pub run: RunOrReport,
    /// The fork's docs/benchmarks.md (made if it does not exist).
    #[arg(long, value_name = "PATH")]
    pub benchmarks: Option<PathBuf>,
    /// The fork's docs/state.md (made if it does not exist).
    #[arg(long, value_name = "PATH")]
    pub state: Option<PathBuf>,
}

#[derive(Subcommand)]
pub enum ConfigCommand {
    /// Validate a config file: print the settings it gives (defaults filled in) and exit 0,
    /// or name each problem (unknown key, wrong type, heartbeat not shorter than the lease,
    /// plaintext off loopback, TLS files incomplete, unreadable or with a key others can
    /// read) and exit 2. A client profile file (`[profile.NAME]`) is checked the same way.
    Check {
        file: PathBuf,
        /// The settings as text (problems on stderr), or one JSON document on stdout
        /// (docs/operations.md, "Lists for scripts").
        #[arg(long, value_enum, default_value_t = ListFormat::Text)]
        format: ListFormat,
    },
}

#[derive(Subcommand)]
pub enum DocsCommand {
    /// Write a run into the fork's docs: its dated section in `--benchmarks` (the page's
    /// table style, per generation, newest first) and a row in `--state` for each
    /// unexplained delta (a regression against the previous comparable run, a parity
    /// failure). Idempotent: running it again changes nothing.
    Update {
        #[command(flatten)]
        update: DocsUpdate,
        #[command(flatten)]
        source: StoreSource,
    },
    /// Land a run's docs as a pull request on the fork: docs/benchmarks.md and
    /// docs/state.md updated on a branch (`abfleet/docs-SPEC`) of a fresh clone of
    /// `--remote`, pushed there, and one pull request into `--base` opened (or updated) and
    /// labelled. Idempotent: a run already on the branch changes nothing and opens no second
    /// pull request; a newer run adds its section to the open one. For release,
    /// upstream-tag and manual runs (docs/milestone.md).
    PullRequest(DocsPullRequestArgs),
}

#[derive(Subcommand)]
pub enum CertsCommand {
    /// Make the fleet CA: DIR/ca.pem and DIR/ca.key. Keep ca.key off the bench hosts.
    Init {
        #[command(flatten)]
        dir: CertsDir,
        /// Replace an existing CA (every certificate it signed stops being trusted).
        #[arg(long)]
        force: bool,
    },
    /// Issue a certificate signed by the fleet CA: DIR/ROLE-NAME.pem and DIR/ROLE-NAME.key.
    /// The role and name travel in the SAN URI `abfleet://role/ROLE/NAME`.
    Issue {
        #[arg(long, value_enum)]
        role: CertRole,
        /// The holder: a host name for agents and the coordinator, a person or CI job for
        /// operators (letters, digits and `._-`).
        #[arg(long)]
        name: String,
        /// A DNS name or IP address agents dial the coordinator by (coordinator only;
        /// repeatable) [default: localhost, 127.0.0.1].
        #[arg(long)]
        san: Vec<String>,
        #[command(flatten)]
        dir: CertsDir,
        /// Replace an existing certificate and key of this role and name.
        #[arg(long)]
        force: bool,
    },
    /// Verify a certificate against DIR/ca.pem and print its role, name, serial,
    /// fingerprint and expiry.
    Show {
        cert: PathBuf,
        #[command(flatten)]
        dir: CertsDir,
        /// Text, or one JSON document (docs/operations.md, "Lists for scripts").
        #[arg(long, value_enum, default_value_t = ListFormat::Text)]
        format: ListFormat,
    },
    /// Revoke a certificate on a running coordinator: refused from its next call, its
    /// agents' open sessions ended and their jobs requeued, kept across restarts. Name it by
    /// file (`--cert`) or by serial or SHA-256 fingerprint (`certs show`, `certs list`).
    /// docs/security.md: what to do when a key is lost.
    Revoke {
        /// The serial or fingerprint (hex, `:` allowed) of the certificate to revoke.
        #[arg(required_unless_present = "cert", conflicts_with = "cert")]
        serial_or_fingerprint: Option<String>,
        /// The certificate file to revoke (its serial, fingerprint, role and name are kept).
        #[arg(long, value_name = "PEM")]
        cert: Option<PathBuf>,
        /// Why: kept with the entry and told to whoever presents the certificate.
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        to: CoordinatorArgs,
    },
    /// The coordinator's deny list, and the certificate each agent id registered with.
    List {
        #[command(flatten)]
        to: CoordinatorArgs,
        /// A table, or one JSON document (docs/operations.md, "Lists for scripts").
        #[arg(long, value_enum, default_value_t = ListFormat::Text)]
        format: ListFormat,
    },
}

/// What `abfleet agent` does instead of running the agent.
#[derive(Subcommand)]
pub enum AgentAction {
    /// Evict the least recently used builds, git mirrors and fixtures of an agent's work dir
    /// down to its budget, as the agent does after each job; prints what it removes and the
    /// sizes before and after. Takes the work dir's lock: stop the agent on it first.
    Gc {
        /// Read `work_dir` and `max_cache_bytes` from this TOML file's `[agent]` table (the
        /// agent's own config file); a flag given here overrides the file.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        #[arg(long, default_value = crate::defaults::DEFAULT_WORK_DIR)]
        work_dir: PathBuf,
        /// The budget: bytes, or with K, M, G or T (`20G`).
        #[arg(long, value_name = "BYTES", value_parser = parse_cache_bytes)]
        max_cache_bytes: Option<u64>,
        /// Print what would be removed; remove nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// `--max-cache-bytes`: bytes, or a number with K, M, G or T.
fn parse_cache_bytes(text: &str) -> Result<u64, String> {
    abfleet_agent::cache::parse_bytes(text)
}

#[derive(clap::Args)]
pub struct CertsDir {
    /// Where the CA and the certificates are.
    #[arg(long, default_value = "abfleet-certs")]
    pub dir: PathBuf,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum CertRole {
    Agent,
    Operator,
    Coordinator,
    /// Reads the coordinator's web view (`--web`) and nothing else.
    Viewer,
}

/// Opt-in exit codes for what a run found without failing on it (exit codes 5-7).
#[derive(clap::Args, Default)]
pub struct FailOnArg {
    /// Exit non-zero also when the run found this (comma-separated, or repeated): `slower`
    /// (exit 5: the fork significantly slower on a cell), `regression` (exit 6: a cell
    /// regressed against the previous comparable run), `stale` (exit 7: a sweep's default is
    /// beaten). Only a run that would exit 0 is affected.
    #[arg(long, value_name = "GATES", value_delimiter = ',')]
    pub fail_on: Vec<abfleet_core::fail_on::FailOn>,
}

#[derive(clap::Args)]
pub struct TriggerArg {
    /// Why this run happens.
    #[arg(long, value_enum, default_value_t = Trigger::Manual)]
    pub trigger: Trigger,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Trigger {
    Manual,
    Release,
    ToolchainBump,
    UpstreamTag,
    #[value(alias = "perf-pr")]
    PerformancePr,
}

/// The coordinator's triggers (docs/milestone.md).
#[derive(clap::Args, Clone, Default)]
pub struct MilestoneArgs {
    /// The job spec a trigger without one runs (`abfleet trigger` with no SPEC, webhooks),
    /// read when the trigger comes.
    #[arg(long, value_name = "PATH")]
    pub milestone_spec: Option<PathBuf>,
    /// The job spec the toolchain watcher runs, narrowed to the one generation whose
    /// toolchain changed on an agent (default: the milestone spec; with neither, no watcher).
    #[arg(long, value_name = "PATH")]
    pub retune_spec: Option<PathBuf>,
    /// A retuning sweep spec (`[sweep]`, docs/sweeps.md) that a `toolchain-bump` trigger of
    /// the milestone spec starts too, read when the trigger comes.
    #[arg(long, value_name = "PATH")]
    pub sweep_spec: Option<PathBuf>,
    /// Serve `POST /hooks/github` on --http: GitHub webhooks signed with the secret in this
    /// file (release, tag push, performance PR, toolchain bump) start milestone runs.
    #[arg(long, value_name = "PATH")]
    pub webhook_secret_file: Option<PathBuf>,
    /// Triggers of one reason for one thing (a tag, a PR) within this many seconds of the
    /// first start one run; later ones are recorded as debounced into it.
    #[arg(long, default_value_t = crate::defaults::DEFAULT_DEBOUNCE_SECONDS)]
    pub debounce_seconds: f64,
    /// Poll the milestone spec's upstream (`git ls-remote --tags`) this often; each new
    /// release tag (`v3.1.0`, not `v3.1.0-rc1`) starts a run with the upstream pin moved to
    /// it [default: off].
    #[arg(long, value_name = "SECONDS")]
    pub watch_upstream_interval: Option<f64>,
    /// The pull request label that makes a webhook's `labeled` event a `performance-pr`
    /// trigger.
    #[arg(long, value_name = "LABEL", default_value = crate::defaults::DEFAULT_PERF_LABEL)]
    pub perf_label: String,
    /// The dependency bots (comma-separated logins, GitHub `user.type` "Bot") whose pull
    /// requests naming a toolchain (`cuda`, `rocm`, `oneapi` as a word) start a
    /// `toolchain-bump` run.
    #[arg(long, value_name = "LOGINS", default_value = crate::defaults::DEFAULT_TOOLCHAIN_BOTS)]
    pub toolchain_bots: String,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Manual => "manual",
            Trigger::Release => "release",
            Trigger::ToolchainBump => "toolchain-bump",
            Trigger::UpstreamTag => "upstream-tag",
            Trigger::PerformancePr => "performance-pr",
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// How `abfleet history` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HistoryFormat {
    /// A Markdown table, one row per run.
    Md,
    /// The points as JSON (docs/milestone.md).
    Json,
}

/// Where a read-only command finds runs: a coordinator, or a data dir read directly.
#[derive(clap::Args)]
pub struct StoreSource {
    #[command(flatten)]
    pub to: CoordinatorArgs,
    /// Read the store in this data dir instead of asking a coordinator.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
}

/// The certificate, key and fleet CA this process presents: to the coordinator (agents and
/// the CLI, which then dial `https://`), or to callers (the coordinator). All three or none;
/// without them only `http://` to loopback works. See docs/security.md.
#[derive(clap::Args, Clone, Default)]
pub struct TlsArgs {
    /// This process's certificate (PEM, from `abfleet certs issue`).
    #[arg(long, env = "ABFLEET_TLS_CERT", value_name = "PEM")]
    pub tls_cert: Option<PathBuf>,
    /// Its private key (PEM, mode 0600).
    #[arg(long, env = "ABFLEET_TLS_KEY", value_name = "PEM")]
    pub tls_key: Option<PathBuf>,
    /// The fleet CA certificate (`ca.pem`): the only issuer trusted.
    #[arg(long, env = "ABFLEET_TLS_CA", value_name = "PEM")]
    pub tls_ca: Option<PathBuf>,
}

impl TlsArgs {
    /// The files, read and checked; `None` when no flag was given.
    pub fn load(
        &self,
    ) -> Result<Option<abfleet_proto::transport::TlsFiles>, abfleet_proto::transport::TransportError>
    {
        abfleet_proto::transport::TlsFiles::from_paths(
            self.tls_cert.as_deref(),
            self.tls_key.as_deref(),
            self.tls_ca.as_deref(),
        )
    }
}

/// How a list is printed.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ListFormat {
    /// A table for people.
    Text,
    /// One JSON document with a stable shape, for scripts and dashboards.
    Json,
}

/// The coordinator a client command talks to: its URL (`--coordinator`, or
/// `ABFLEET_COORDINATOR`) and the certificate, key and CA to show it. What neither a flag
/// nor a variable gives comes from a client profile (`--profile`, `client_profile.rs`).
#[derive(clap::Args, Clone)]
pub struct CoordinatorArgs {
    /// The coordinator's URL: `https://HOST:7700` under mutual TLS (with the three TLS
    /// files), `http://127.0.0.1:7700` to a plaintext one on loopback.
    #[arg(
        long,
        default_value = crate::defaults::DEFAULT_COORDINATOR_URL,
        env = "ABFLEET_COORDINATOR"
    )]
    pub coordinator: String,
    /// The client profile giving the coordinator's URL and the TLS files
    /// (`[profile.NAME]` of ~/.config/abfleet/client.toml, or of ABFLEET_CLIENT_CONFIG)
    /// [default: `default` when the file has it]. Flags and variables win over it.
    #[arg(long, value_name = "NAME", env = "ABFLEET_PROFILE")]
    pub profile: Option<String>,
    #[command(flatten)]
    pub tls: TlsArgs,
}

/// What `abfleet docs pull-request` takes (`commands/docs_pull_request.rs`).
#[derive(clap::Args)]
pub struct DocsPullRequestArgs {
    #[command(flatten)]
    pub run: RunOrReport,
    /// The fork's git remote, as `git clone` takes it (your credentials for it apply).
    #[arg(long, value_name = "URL")]
    pub remote: String,
    /// The fork on GitHub, `owner/name`: where the pull request is opened.
    #[arg(long, value_name = "OWNER/NAME")]
    pub github: String,
    /// The branch the pull request goes into.
    #[arg(long, default_value = "main")]
    pub base: String,
    /// The branch the docs are pushed to [default: abfleet/docs-SPEC].
    #[arg(long)]
    pub branch: Option<String>,
    /// Labels of the pull request (repeatable).
    #[arg(long = "label", value_name = "LABEL", default_values_t = ["benchmarks".to_string()])]
    pub labels: Vec<String>,
    /// The pages, relative to the repository's root.
    #[arg(long, default_value = "docs/benchmarks.md")]
    pub benchmarks_path: PathBuf,
    #[arg(long, default_value = "docs/state.md")]
    pub state_path: PathBuf,
    /// A file holding a GitHub token allowed to open pull requests on the fork (mode
    /// 0600; never the token itself on the command line).
    #[arg(long, value_name = "FILE", env = "ABFLEET_GITHUB_TOKEN_FILE")]
    pub github_token_file: PathBuf,
    /// GitHub's REST API (GitHub Enterprise: `https://HOST/api/v3`).
    #[arg(long, default_value = "https://api.github.com")]
    pub api_url: String,
    #[command(flatten)]
    pub source: StoreSource,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ReportFormat {
    Md,
    Json,
    /// JUnit XML: a case per cell, a parity failure as a failure (for release pipelines).
    Junit,
    /// report.html: the charts and tables in one self-contained page.
    Html,
    /// Bencher Metric Format (JSON): per cell the fork's latency with its interval, upstream's,
    /// the speedup and the score deltas (docs/report-format.md).
    Bmf,
}

impl Command {
    /// The coordinator a client command talks to, and whether it reads a store directly
    /// instead (`--data-dir`); `None` for commands that talk to no coordinator.
    pub fn coordinator_args_mut(&mut self) -> Option<(&mut CoordinatorArgs, bool)> {
        fn from_store(source: &mut StoreSource) -> Option<(&mut CoordinatorArgs, bool)> {
            let reads_a_store = source.data_dir.is_some();
            Some((&mut source.to, reads_a_store))
        }
        match self {
            Command::Submit(SubmitCommand { to, .. })
            | Command::Trigger(TriggerCommand { to, .. })
            | Command::Watch { to, .. }
            | Command::Agents { to, .. }
            | Command::Cancel { to, .. }
            | Command::Bisect { to, .. }
            | Command::Drain { to, .. }
            | Command::Certs {
                command: CertsCommand::Revoke { to, .. } | CertsCommand::List { to, .. },
            } => Some((to, false)),
            Command::Report { source, .. }
            | Command::History { source, .. }
            | Command::Runs { source, .. }
            | Command::Docs {
                command:
                    DocsCommand::Update { source, .. }
                    | DocsCommand::PullRequest(DocsPullRequestArgs { source, .. }),
            } => from_store(source),
            Command::Local(_)
            | Command::Calibrate { .. }
            | Command::Coordinator(_)
            | Command::Agent(_)
            | Command::Config { .. }
            | Command::Certs { .. }
            | Command::Completions { .. }
            | Command::Man { .. }
            | Command::Occupancy(_) => None,
        }
    }
}
