//! One run of the fork's binary outside the A/B cells (the dispatch sweep, the GPU backend
//! cells): timed like a cell run, with the head of the raw JSON kept (top-level keys and the
//! first frame, streamed from the file), because these checks read keys the scores do not
//! carry (`backend`, `simd`, `simd_compiled`, the metric count).

use std::path::Path;
use std::time::Duration;

use abfleet_core::scores::Scores;

use crate::context::{read_scores, JobContext, OutputLimit, Stop};
use crate::runner::{self, CommandSpec, ExitKind};

const STDERR_TAIL_BYTES: u64 = 800;

pub(crate) struct ForkRun {
    pub exit: ExitKind,
    pub wall_s: f64,
    /// The output as JSON with `frames` cut to the first frame, when the spec's output format
    /// is JSON and its scores read.
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

/// Runs `argv` in `cwd`, its output at `output`, stdout and stderr into `log`. The caller
/// keeps the agent quiet for the whole cell (`context::quiet_for_cell`).
pub(crate) async fn run_fork(
    ctx: &mut JobContext,
    argv: &[String],
    cwd: &Path,
    output: &Path,
    log: &Path,
) -> Result<ForkRun, Stop> {
    let line = ctx.run_line(argv.to_vec());
    run_line(ctx, &line, cwd, output, log).await
}

/// [`run_fork`] through another emulator wrapper than the host's (an SVE vector length of
/// the emulation's variants).
pub(crate) async fn run_fork_under(
    ctx: &mut JobContext,
    wrapper: &[String],
    argv: &[String],
    cwd: &Path,
    output: &Path,
    log: &Path,
) -> Result<ForkRun, Stop> {
    let line = crate::emulation::wrapped(wrapper, argv);
    run_line(ctx, &line, cwd, output, log).await
}

async fn run_line(
    ctx: &mut JobContext,
    argv: &[String],
    cwd: &Path,
    output: &Path,
    log: &Path,
) -> Result<ForkRun, Stop> {
    let _ = std::fs::remove_file(output);
    let _ = std::fs::remove_file(log);
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
    if outcome.exit == ExitKind::Cancelled {
        return Err(Stop::Cancelled);
    }
    let format = ctx.spec.command.output_format;
    let limit = OutputLimit::for_spec(&ctx.spec);
    let scores = if outcome.exit.success() {
        read_scores(format, output, &limit).await
    } else {
        Err("not read: the run failed".to_string())
    };
    let json = if format == abfleet_core::spec::OutputFormat::Json && scores.is_ok() {
        let output = output.to_path_buf();
        tokio::task::spawn_blocking(move || json_head(&output))
            .await
            .ok()
            .flatten()
    } else {
        None
    };
    Ok(ForkRun {
        exit: outcome.exit,
        wall_s: outcome.wall_s,
        json,
        scores,
        stderr_tail: runner::tail(log, STDERR_TAIL_BYTES),
    })
}

/// The JSON output with `frames` cut to its first frame, streamed from the file: the checks
/// read top-level keys and the first frame's metrics, and a million frames as a value tree
/// would cost gigabytes.
fn json_head(path: &Path) -> Option<serde_json::Value> {
    use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

    struct Head;
    struct FirstFrame;

    impl<'de> Visitor<'de> for Head {
        type Value = serde_json::Map<String, serde_json::Value>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut head = serde_json::Map::new();
            while let Some(key) = map.next_key::<String>()? {
                let value = if key == "frames" {
                    map.next_value_seed(FirstFrame)?
                } else {
                    map.next_value()?
                };
                head.insert(key, value);
            }
            Ok(head)
        }
    }

    impl<'de> DeserializeSeed<'de> for FirstFrame {
        type Value = serde_json::Value;

        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for FirstFrame {
        type Value = serde_json::Value;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a list of frames")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let first: Option<serde_json::Value> = seq.next_element()?;
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(serde_json::Value::Array(first.into_iter().collect()))
        }
    }

    let file = std::fs::File::open(path).ok()?;
    let mut deserializer = serde_json::Deserializer::from_reader(std::io::BufReader::new(file));
    let head = deserializer.deserialize_map(Head).ok()?;
    Some(serde_json::Value::Object(head))
}

/// Median and spread (`(max - min) / median × 100`) of timed runs.
pub(crate) fn median_and_spread(times: &[f64]) -> Option<(f64, f64)> {
    Some((
        abfleet_core::stats::median(times)?,
        abfleet_core::stats::spread_pct(times)?,
    ))
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use abfleet_core::spec::OutputFormat;

    use super::*;
    use crate::context::read_scores_blocking;

    /// A vmaf-like JSON output of `frames` frames, written straight to `path`.
    fn write_output(path: &Path, frames: u64) {
        let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
        writeln!(
            out,
            "{{\n  \"version\": \"3.2.0\",\n  \"simd\": \"avx2\",\n  \"frames\": ["
        )
        .unwrap();
        for n in 0..frames {
            let comma = if n + 1 < frames { "," } else { "" };
            writeln!(
                out,
                "    {{\"frameNum\": {n}, \"metrics\": {{\"integer_motion\": {:.6}, \"vmaf\": {:.6}}}}}{comma}",
                (n % 7) as f64 / 8.0,
                70.0 + (n % 1000) as f64 / 1000.0
            )
            .unwrap();
        }
        writeln!(out, "  ]\n}}").unwrap();
        out.flush().unwrap();
    }

    /// The child half of the memory test below: parses the output named by the
    /// environment and prints its peak resident set. Run only by that test.
    #[test]
    #[ignore = "run by a_million_frame_output_parses_in_bounded_memory in its own process"]
    fn parse_child_reports_its_peak_memory() {
        let Some(path) = std::env::var_os("ABFLEET_PARSE_CHILD") else {
            return;
        };
        let scores = read_scores_blocking(
            OutputFormat::Json,
            Path::new(&path),
            &OutputLimit::bytes(abfleet_core::spec::DEFAULT_MAX_OUTPUT_BYTES),
        )
        .unwrap();
        assert_eq!(scores.frames.len(), 1_000_000);
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let peak = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .unwrap()
            .trim()
            .to_string();
        println!("PEAK {peak}");
    }

    /// Issue 11's target: a one-million-frame output parses with the agent "under a few
    /// hundred MB". The parse runs in a process of its own (this test binary, re-run on the
    /// ignored child test) so other tests cannot inflate its peak; it held ~470 MB with a
    /// `BTreeMap` per frame, ~110 MB with `MetricValues`.
    #[test]
    fn a_million_frame_output_parses_in_bounded_memory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.json");
        write_output(&path, 1_000_000);
        let output = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "fork_run::tests::parse_child_reports_its_peak_memory",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("ABFLEET_PARSE_CHILD", &path)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let peak_kb: u64 = stdout
            .lines()
            .find_map(|l| l.split_once("PEAK ").map(|(_, v)| v))
            .and_then(|v| v.trim_end_matches(" kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no PEAK line in:\n{stdout}"));
        assert!(
            peak_kb < 300 * 1024,
            "parsing 1,000,000 frames peaked at {} MB, over 300 MB",
            peak_kb / 1024
        );
    }

    /// Issue 11: a one-million-frame output (about 80 MB) drove the agent to 1.8 GB: read
    /// whole, parsed, and parsed again into a value tree. Now a limit refuses it unread, and
    /// under the limit it streams.
    #[test]
    fn a_million_frame_output_is_refused_over_the_limit_and_streams_under_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.json");
        write_output(&path, 1_000_000);
        let bytes = std::fs::metadata(&path).unwrap().len();
        let limit = 1024 * 1024;
        let err = read_scores_blocking(OutputFormat::Json, &path, &OutputLimit::bytes(limit))
            .unwrap_err();
        assert_eq!(
            err,
            format!(
                "output too large: {bytes} bytes > limit of {limit} (`{}`; set [measure] max_output_bytes)",
                path.display()
            )
        );
        let scores = read_scores_blocking(
            OutputFormat::Json,
            &path,
            &OutputLimit::bytes(abfleet_core::spec::DEFAULT_MAX_OUTPUT_BYTES),
        )
        .unwrap();
        assert_eq!(scores.frames.len(), 1_000_000);
        assert_eq!(scores.frames[999_999].frame_num, 999_999);
        assert_eq!(scores.frames[999_999].metrics["vmaf"], 70.999);
        // The checks' view: top-level keys and the first frame only.
        let head = json_head(&path).unwrap();
        assert_eq!(head["simd"], "avx2");
        assert_eq!(head["frames"].as_array().unwrap().len(), 1);
        assert_eq!(head["frames"][0]["metrics"].as_object().unwrap().len(), 2);
    }

    #[test]
    fn a_malformed_output_is_explained_as_the_text_parser_does() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.json");
        let text = "{\n  \"frames\": [\n    {\n      \"frameNum\": 0,\n      \"metrics\": {\n        \"vmaf\": nan\n      }\n    }\n  ]\n}\n";
        std::fs::write(&path, text).unwrap();
        let err = read_scores_blocking(OutputFormat::Json, &path, &OutputLimit::bytes(1 << 20))
            .unwrap_err();
        assert_eq!(
            err,
            abfleet_core::output::parse(OutputFormat::Json, text)
                .unwrap_err()
                .to_string()
        );
        assert!(err.contains("vmaf"), "{err}");
    }
}
