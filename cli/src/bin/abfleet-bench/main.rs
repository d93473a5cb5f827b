//! `abfleet-bench`: abfleet's own cost, measured (docs/performance.md). A developer's tool,
//! kept out of the product binary: it measures the `abfleet` beside it (or the one a flag
//! names), through real processes and real gRPC. Each benchmark prints a small table and one
//! JSON line (`{"bench": NAME, …}`) and exits 0 whether or not a target is met: figures are
//! read and recorded, never asserted on.
#![forbid(unsafe_code)]

mod agent_cpu;
mod enormous;
// The product binary's exit-code error, shared as a file: the two binaries have no library
// between them, and this is all the bench needs of the product's CLI.
#[path = "../../failure.rs"]
#[allow(dead_code)] // the bench's failures are all the infrastructure's: `usage` goes unused
mod failure;
mod fleet;
mod parse;
mod report;
mod rerun;
mod runner;
mod store;
mod summary;
mod synthetic;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::failure::{Classify, Failure};

/// How much of a dead child's log a bench's error shows.
const LOG_TAIL_BYTES: u64 = 4096;

/// abfleet's own cost, measured: what the agent's runner adds to a timed run, how fast an
/// output is parsed, what a fleet of simulated agents costs the coordinator. Prints a table
/// and one JSON line; figures go in docs/performance.md.
#[derive(Parser)]
#[command(name = "abfleet-bench", version)]
struct BenchCli {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Subcommand)]
enum BenchCommand {
    /// The same commands timed through the agent's runner and by a bare spawn and wait,
    /// interleaved: a short one (`sh -c :`) and a long one (`sleep --long-seconds`, or a busy
    /// loop calibrated to it); the agent's own CPU time while the long one runs.
    Runner {
        /// Few runs of short commands, in seconds (CI): checks the benchmark works, not the figures.
        #[arg(long)]
        smoke: bool,
        /// Pairs (direct, runner) of the short command [default: 200; 10 with --smoke].
        #[arg(long)]
        short_pairs: Option<u32>,
        /// Pairs (direct, runner) of the long command [default: 10; 2 with --smoke].
        #[arg(long)]
        long_pairs: Option<u32>,
        /// How long the long command takes [default: 1.0; 0.05 with --smoke].
        #[arg(long)]
        long_seconds: Option<f64>,
        /// A shell busy loop calibrated to --long-seconds as the long command, instead of
        /// `sleep`: CPU-bound like a benchmark, so it competes with the host's other load.
        #[arg(long)]
        busy_loop: bool,
    },
    /// The CPU a real `abfleet agent` process (session, heartbeats, uploader) uses while its
    /// job's timed runs are in flight: a job of `sleep` runs, the agent's /proc/PID/stat read
    /// at each run's start and end; and the cost of the agent's host sample (every
    /// /proc/PID/stat).
    AgentCpu {
        /// Three pairs of 50 ms runs, in seconds (CI): checks the benchmark works.
        #[arg(long)]
        smoke: bool,
        /// Timed pairs of the job's one cell (a warm-up of each side first; at least 3) [default: 10; 3
        /// with --smoke].
        #[arg(long)]
        pairs: Option<u32>,
        /// How long each run sleeps [default: 1.0; 0.05 with --smoke].
        #[arg(long)]
        run_seconds: Option<f64>,
        /// The abfleet binary whose `agent` runs the job [default: the `abfleet` beside this binary]; another
        /// build's, to compare two builds in one sitting.
        #[arg(long)]
        agent_binary: Option<PathBuf>,
    },
    /// A spec with git sources pinned to full commits, run twice through `abfleet local` on
    /// one work dir: what the rerun starts (git, make and the compiler wrapped on PATH and
    /// counted; timed runs from its report), that it builds and fetches nothing, and its
    /// wall time against the sum of its timed runs.
    Rerun {
        /// One small cell, in seconds (CI); still checks no build and no fetch.
        #[arg(long)]
        smoke: bool,
        /// The demo subject's directory [default: fixtures/subject of this checkout].
        #[arg(long)]
        subject: Option<PathBuf>,
        /// The abfleet binary whose `local` runs the spec [default: the `abfleet` beside this binary]; another
        /// build's, to compare two builds in one sitting.
        #[arg(long)]
        local_binary: Option<PathBuf>,
    },
    /// A fork binary that writes an enormous valid output (a million frames for a 6-frame
    /// input): the peak memory and wall time of `abfleet local` and of an `abfleet agent`
    /// process that run it (issue 38).
    EnormousOutput {
        /// 20,000 frames, in seconds (CI): checks the benchmark works, not the figures.
        #[arg(long)]
        smoke: bool,
        /// Frames the fork's binary writes [default: 1000000; 20000 with --smoke].
        #[arg(long)]
        frames: Option<u64>,
        /// The demo subject's directory [default: fixtures/subject of this checkout].
        #[arg(long)]
        subject: Option<PathBuf>,
        /// The abfleet binary measured [default: the `abfleet` beside this binary]; another
        /// build's, to compare two builds in one sitting.
        #[arg(long)]
        local_binary: Option<PathBuf>,
    },
    /// A vmaf JSON output of a 4K 10-minute clip (14,400 frames × 30 metrics) written to a
    /// temporary file and parsed as the agent parses one (streamed), a few times.
    Parse {
        /// A small output (240 frames), in seconds (CI).
        #[arg(long)]
        smoke: bool,
        /// Frames in the generated output [default: 14400; 240 with --smoke].
        #[arg(long)]
        frames: Option<u32>,
        /// Times it is parsed [default: 5; 2 with --smoke].
        #[arg(long)]
        runs: Option<u32>,
    },
    /// A real coordinator process and N simulated agents over loopback gRPC: registrations
    /// per second, the coordinator's RSS with N idle agents, dispatch latency, event ingest
    /// rate, done → report, store size.
    Fleet {
        /// 20 agents, 4 jobs of 40 events, in seconds (CI).
        #[arg(long)]
        smoke: bool,
        /// Simulated agents [default: 1000; 20 with --smoke].
        #[arg(long)]
        agents: Option<usize>,
        /// Jobs pushed at once in the ingest phase [default: 50; 4 with --smoke].
        #[arg(long)]
        jobs: Option<usize>,
        /// Cell events each job pushes [default: 1000; 40 with --smoke].
        #[arg(long)]
        events_per_job: Option<u32>,
        /// Events per PushEvents call [default: 100].
        #[arg(long)]
        batch: Option<u32>,
        /// The abfleet binary whose coordinator (and `abfleet report`) is measured [default:
        /// the `abfleet` beside this binary]: the same simulated fleet against another build, for a before/after.
        #[arg(long, value_name = "PATH")]
        coordinator_bin: Option<PathBuf>,
    },
    /// A store with many finished runs (filled through a real coordinator by simulated
    /// agents), then list runs, fetch reports and submit, each timed.
    Store {
        /// 40 runs, in seconds (CI).
        #[arg(long)]
        smoke: bool,
        /// Finished runs in the store [default: 10000; 40 with --smoke].
        #[arg(long)]
        runs: Option<usize>,
        /// The abfleet binary whose coordinator and commands are measured [default: the `abfleet` beside this binary].
        #[arg(long, value_name = "PATH")]
        coordinator_bin: Option<PathBuf>,
    },
    /// The report of a run with many cells assembled from its events, then written as
    /// report.json and report.md, a few times.
    Report {
        /// 200 cells, in seconds (CI).
        #[arg(long)]
        smoke: bool,
        /// Cells in the run [default: 10000; 200 with --smoke].
        #[arg(long)]
        cells: Option<u32>,
        /// Generations the cells are spread over [default: 5].
        #[arg(long)]
        generations: Option<u32>,
        /// Times it is assembled [default: 5; 2 with --smoke].
        #[arg(long)]
        runs: Option<u32>,
    },
}

/// The `abfleet` measured when no flag names one: the one installed beside this binary
/// (`target/release/abfleet` beside `target/release/abfleet-bench`).
fn abfleet_beside() -> Result<PathBuf, Failure> {
    let beside = std::env::current_exe().infra()?.with_file_name("abfleet");
    if beside.is_file() {
        Ok(beside)
    } else {
        Err(Failure::usage(anyhow::anyhow!(
            "no `abfleet` beside this binary at `{}`; build both (`cargo build --release -p abfleet`) or name one with the benchmark's binary flag",
            beside.display()
        )))
    }
}

fn main() -> ExitCode {
    let cli = BenchCli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: failed to start the async runtime: {err}");
            return ExitCode::from(abfleet_core::exit::NOT_CARRIED_OUT as u8);
        }
    };
    let code = match runtime.block_on(run(cli.command)) {
        Ok(code) => code,
        Err(failure) => {
            eprintln!("error: {:#}", failure.error);
            failure.code
        }
    };
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    ExitCode::from(code.clamp(0, 255) as u8)
}

async fn run(command: BenchCommand) -> Result<i32, Failure> {
    match command {
        BenchCommand::Runner {
            smoke,
            short_pairs,
            long_pairs,
            long_seconds,
            busy_loop,
        } => {
            runner::run(runner::RunnerArgs::new(
                smoke,
                short_pairs,
                long_pairs,
                long_seconds,
                busy_loop,
            ))
            .await
        }
        BenchCommand::AgentCpu {
            smoke,
            pairs,
            run_seconds,
            agent_binary,
        } => {
            agent_cpu::run(agent_cpu::AgentCpuArgs::new(
                smoke,
                pairs,
                run_seconds,
                agent_binary,
            ))
            .await
        }
        BenchCommand::Rerun {
            smoke,
            subject,
            local_binary,
        } => rerun::run(rerun::RerunArgs::new(smoke, subject, local_binary)).await,
        BenchCommand::EnormousOutput {
            smoke,
            frames,
            subject,
            local_binary,
        } => {
            enormous::run(enormous::EnormousArgs::new(
                smoke,
                frames,
                subject,
                local_binary,
            ))
            .await
        }
        BenchCommand::Parse {
            smoke,
            frames,
            runs,
        } => parse::run(parse::ParseArgs::new(smoke, frames, runs)),
        BenchCommand::Fleet {
            smoke,
            agents,
            jobs,
            events_per_job,
            batch,
            coordinator_bin,
        } => {
            let mut args = fleet::FleetArgs::new(smoke, agents, jobs, events_per_job, batch);
            args.coordinator_bin = coordinator_bin;
            fleet::run(args).await
        }
        BenchCommand::Store {
            smoke,
            runs,
            coordinator_bin,
        } => {
            let mut args = store::StoreArgs::new(smoke, runs);
            args.coordinator_bin = coordinator_bin;
            store::run(args).await
        }
        BenchCommand::Report {
            smoke,
            cells,
            generations,
            runs,
        } => report::run(report::ReportArgs::new(smoke, cells, generations, runs)),
    }
}
