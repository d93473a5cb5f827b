//! One run of the fork's binary outside the A/B cells (the dispatch sweep, the GPU backend
//! cells): timed like a cell run, with the raw JSON kept, because these checks read keys
//! the scores do not carry (`backend`, `simd`, `simd_compiled`, the metric count).

use std::path::Path;
use std::time::Duration;

use abfleet_core::scores::Scores;

use crate::context::{read_scores, JobContext, Stop};
use crate::runner::{self, CommandSpec, ExitKind};

const STDERR_TAIL_BYTES: u64 = 800;

pub(crate) struct ForkRun {
    pub exit: ExitKind,
    pub wall_s: f64,
    /// The output as JSON, when the spec's output format is JSON and the file parses.
    pub json: Option<serde_json::Value>,
    pub scores: Result<Scores, String>,
    pub stderr_tail: String,
}

impl ForkRun {
    /// Scored frames and a clean exit.
    pub fn usable(&self) -> bool {
        self.exit.success() && self.scores.as_ref().is_ok_and(|s| !s.frames.is_empty())
    }

    /// Why the run is not usable, for a verdict or a skipped cell.
    pub fn failure(&self) -> String {
        if !self.exit.success() {
            let tail = self.stderr_tail.trim();
            let last = tail.lines().last().unwrap_or("");
            return format!("the fork's binary {}: {last}", self.exit.describe());
        }
        match &self.scores {
            Ok(_) => "the fork's binary exited 0 but scored no frames".to_string(),
            Err(err) => format!("the fork's output is unusable: {err}"),
        }
    }

    /// A top-level string key of the JSON output.
    pub fn key(&self, name: &str) -> Option<String> {
        self.json.as_ref()?.get(name)?.as_str().map(str::to_string)
    }

    /// The number of keys in `frames[0].metrics`.
    pub fn metric_keys(&self) -> Option<u32> {
        let metrics = self.json.as_ref()?.get("frames")?.get(0)?.get("metrics")?;
        metrics.as_object().map(|m| m.len() as u32)
    }
}

/// Runs `argv` in `cwd`, its output at `output`, stdout and stderr into `log`; the uploader
/// is quiet meanwhile.
pub(crate) async fn run_fork(
    ctx: &mut JobContext,
    argv: &[String],
    cwd: &Path,
    output: &Path,
    log: &Path,
) -> Result<ForkRun, Stop> {
    let _ = std::fs::remove_file(output);
    let _ = std::fs::remove_file(log);
    ctx.sink.set_quiet(true);
    let outcome = runner::run(
        CommandSpec {
            argv,
            cwd: Some(cwd),
            env: &Default::default(),
            log_path: log,
            timeout: Duration::from_secs_f64(ctx.spec.measure.timeout_seconds),
        },
        &mut ctx.cancel,
    )
    .await;
    ctx.sink.set_quiet(false);
    if outcome.exit == ExitKind::Cancelled {
        return Err(Stop::Cancelled);
    }
    let format = ctx.spec.command.output_format;
    let scores = if outcome.exit.success() {
        read_scores(format, output)
    } else {
        Err("not read: the run failed".to_string())
    };
    let json = (format == abfleet_core::spec::OutputFormat::Json)
        .then(|| std::fs::read_to_string(output).ok())
        .flatten()
        .and_then(|text| serde_json::from_str(&text).ok());
    Ok(ForkRun {
        exit: outcome.exit,
        wall_s: outcome.wall_s,
        json,
        scores,
        stderr_tail: runner::tail(log, STDERR_TAIL_BYTES),
    })
}

/// Median and spread (`(max - min) / median × 100`) of timed runs.
pub(crate) fn median_and_spread(times: &[f64]) -> Option<(f64, f64)> {
    Some((
        abfleet_core::stats::median(times)?,
        abfleet_core::stats::spread_pct(times)?,
    ))
}
