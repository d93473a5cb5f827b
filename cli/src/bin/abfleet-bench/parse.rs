//! `abfleet-bench parse`: how long the agent takes to read a big output. A vmaf JSON output
//! of a 4K 10-minute clip at 24 fps (14,400 frames × 30 metrics, in the shape and `%.6f`
//! precision vmaf writes; `abfleet_core::output::synthetic`) is generated into a temporary file, then parsed as the agent parses
//! every timed run's output (`abfleet_core::output::parse_reader` over a `BufReader` of the
//! file, streamed), a few times. Also the peak resident set's growth over the first parse
//! (`VmHWM`): the cost of the parsed scores, since the text is never held.

use std::time::Instant;

use abfleet_core::output::synthetic::{
    write_output, METRICS, TEN_MINUTES_AT_24_FPS as FULL_FRAMES,
};
use abfleet_core::output::{parse_reader, OutputFormat};
use serde::Serialize;

use super::summary::{peak_rss_kib, Summary};
use crate::failure::{Classify, Failure};

/// The target: a 10-minute 4K output parsed in under 100 ms.
pub const PARSE_MS_TARGET: f64 = 100.0;

pub struct ParseArgs {
    pub smoke: bool,
    pub frames: u32,
    pub runs: u32,
}

impl ParseArgs {
    /// The flags' values, their defaults depending on `--smoke`.
    pub fn new(smoke: bool, frames: Option<u32>, runs: Option<u32>) -> ParseArgs {
        ParseArgs {
            smoke,
            frames: frames
                .unwrap_or(if smoke { 240 } else { FULL_FRAMES })
                .max(1),
            runs: runs.unwrap_or(if smoke { 2 } else { 5 }).max(1),
        }
    }
}

#[derive(Serialize)]
struct ParseReport {
    bench: &'static str,
    smoke: bool,
    frames: u32,
    metrics: usize,
    file_bytes: u64,
    parse: Summary,
    frames_per_s: f64,
    mib_per_s: f64,
    /// Growth of the peak resident set over the first parse, KiB; `null` without /proc.
    peak_rss_delta_kib: Option<u64>,
    target_ms_max: f64,
    /// Whether the median met the target (judged on a full-size run only: `null` otherwise).
    target_met: Option<bool>,
}

pub fn run(args: ParseArgs) -> Result<i32, Failure> {
    let dir = tempfile::tempdir()
        .map_err(|err| anyhow::anyhow!("failed to create a temporary directory: {err}"))
        .infra()?;
    let path = dir.path().join("vmaf.json");
    std::fs::File::create(&path)
        .and_then(|file| write_output(OutputFormat::Json, args.frames, file))
        .map_err(|err| anyhow::anyhow!("failed to write `{}`: {err}", path.display()))
        .infra()?;
    let file_bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let rss_before = peak_rss_kib();
    let mut times = Vec::new();
    let mut rss_after = None;
    for _ in 0..args.runs {
        let file = std::fs::File::open(&path)
            .map_err(|err| anyhow::anyhow!("failed to open `{}`: {err}", path.display()))
            .infra()?;
        let started = Instant::now();
        let scores = parse_reader(OutputFormat::Json, std::io::BufReader::new(file))
            .map_err(|err| anyhow::anyhow!("failed to parse the generated output: {err}"))
            .infra()?;
        times.push(started.elapsed().as_secs_f64());
        if rss_after.is_none() {
            rss_after = peak_rss_kib();
        }
        let metrics = scores.frames.first().map_or(0, |f| f.metrics.len());
        if scores.frames.len() != args.frames as usize || metrics != METRICS.len() {
            return Err(Failure::infra(anyhow::anyhow!(
                "the generated output parsed to {} frames of {metrics} metrics, not {} of {}",
                scores.frames.len(),
                args.frames,
                METRICS.len()
            )));
        }
        drop(scores);
    }
    let parse = Summary::of(&times).expect("at least one run");
    let full = args.frames >= FULL_FRAMES;
    let report = ParseReport {
        bench: "parse",
        smoke: args.smoke,
        frames: args.frames,
        metrics: METRICS.len(),
        file_bytes,
        frames_per_s: f64::from(args.frames) / parse.median_s,
        mib_per_s: file_bytes as f64 / (1024.0 * 1024.0) / parse.median_s,
        parse,
        peak_rss_delta_kib: rss_before
            .zip(rss_after)
            .map(|(before, after)| after.saturating_sub(before)),
        target_ms_max: PARSE_MS_TARGET,
        target_met: full.then_some(parse.median_s * 1e3 < PARSE_MS_TARGET),
    };
    println!(
        "{:<40} {:>6} {:>11} {:>11} {:>11}",
        "what", "runs", "median", "min", "max"
    );
    println!(
        "{:<40} {:>6} {:>9.2}ms {:>9.2}ms {:>9.2}ms",
        format!(
            "parse {} frames × {} metrics ({:.1} MiB)",
            report.frames,
            report.metrics,
            file_bytes as f64 / (1024.0 * 1024.0)
        ),
        parse.n,
        parse.median_s * 1e3,
        parse.min_s * 1e3,
        parse.max_s * 1e3
    );
    let verdict = match report.target_met {
        Some(true) => "met",
        Some(false) => "NOT met",
        None => "not judged: fewer frames than a 10-minute clip",
    };
    println!(
        "{:.0} frames/s, {:.1} MiB/s; peak RSS +{} KiB (target median < {PARSE_MS_TARGET} ms: {verdict})",
        report.frames_per_s,
        report.mib_per_s,
        report
            .peak_rss_delta_kib
            .map_or("?".to_string(), |kib| kib.to_string()),
    );
    super::summary::print_json_line(&report)
}
