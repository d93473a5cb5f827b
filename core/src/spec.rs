//! The job spec: what an A/B run compares (two sources and how to build them), on what
//! inputs (fixtures), with which workloads, and under which measurement discipline.
//!
//! Parsed from TOML with unknown keys rejected, then validated into a [`JobSpec`] whose
//! relative paths are already resolved against the spec's directory. The validated spec
//! travels to agents as JSON; its TOML form is documented in `docs/job-spec.md`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

mod backends;
pub use backends::{
    default_levels, default_toolchain, BackendsSpec, CpuDispatchSpec, DispatchLevel,
    GpuBackendSpec, KernelLaunch,
};

/// What can go wrong reading a spec. Every message names the file and says what to do.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("failed to read job spec `{path}`: {source}; check the path")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("job spec `{path}` is not valid: {message}\nhint: the keys are documented in docs/job-spec.md")]
    Syntax { path: PathBuf, message: String },
    #[error("job spec `{path}`: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// A validated job spec. Paths are absolute.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub upstream: SideSpec,
    pub fork: SideSpec,
    pub command: CommandSpec,
    pub fixtures: Vec<FixtureSpec>,
    pub workloads: Vec<WorkloadSpec>,
    pub measure: MeasureSpec,
    #[serde(default)]
    pub parity: ParitySpec,
    /// Which hosts run it; `None` means any one agent.
    #[serde(default)]
    pub targets: Option<TargetSpec>,
    /// Per-backend builds and retuning checks (`[backends.*]`, docs/retuning.md).
    #[serde(default, skip_serializing_if = "BackendsSpec::is_empty")]
    pub backends: BackendsSpec,
}

/// Which agents a run fans out to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetSpec {
    /// Backends to cover (default `["cpu"]`: the only honest A/B surface).
    pub backends: Vec<String>,
    /// Globs over generation keys, e.g. `cpu/x86-64-v4/*` (default `["*"]`).
    pub generations: Vec<String>,
    /// Globs over vendors (default `["*"]`).
    pub vendors: Vec<String>,
    pub fanout: Fanout,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fanout {
    /// One job per matching generation; the first free matching agent takes it.
    PerGeneration,
    /// One job per matching agent.
    PerAgent,
}

impl TargetSpec {
    pub fn matches(&self, generation: &crate::generation::Generation) -> bool {
        use crate::generation::glob_match;
        self.backends.iter().any(|b| b == &generation.backend)
            && self
                .generations
                .iter()
                .any(|g| glob_match(g, &generation.key))
            && self
                .vendors
                .iter()
                .any(|v| glob_match(v, &generation.vendor))
    }
}

/// One side of the comparison: where its source is and how to build it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SideSpec {
    pub source: SourceSpec,
    pub build: BuildRecipe,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum SourceSpec {
    /// A git repository (URL or local path to a repository) at a tag, branch or commit.
    Git { url: String, rev: String },
    /// A directory on the agent host, used as it is (content-hashed for the build cache).
    Path { path: PathBuf },
}

impl SourceSpec {
    /// The reference as a person asked for it: `v1.0.0`, a branch, or a path.
    pub fn requested(&self) -> String {
        match self {
            SourceSpec::Git { rev, .. } => rev.clone(),
            SourceSpec::Path { path } => path.display().to_string(),
        }
    }
}

/// How a side is built: argv lists run in order in the source tree, no shell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildRecipe {
    pub commands: Vec<Vec<String>>,
    /// The built binary, relative to the source tree.
    pub binary: PathBuf,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The command whose output fingerprints the compiler; part of the build cache key.
    pub toolchain: Vec<String>,
}

/// How one timed command is formed: a template with placeholders, and how its output reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandSpec {
    pub template: Vec<String>,
    pub output_format: OutputFormat,
    /// The exit code with which the upstream tool rejects a feature it does not have.
    pub unknown_feature_exit_code: i32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputFormat {
    Json,
    Xml,
    Csv,
}

impl OutputFormat {
    pub fn extension(self) -> &'static str {
        match self {
            OutputFormat::Json => "json",
            OutputFormat::Xml => "xml",
            OutputFormat::Csv => "csv",
        }
    }
}

/// The placeholders a command template may use.
pub const TEMPLATE_PLACEHOLDERS: &[&str] = &[
    "binary",
    "reference",
    "distorted",
    "width",
    "height",
    "bitdepth",
    "pixel_format",
    "threads",
    "output",
];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixtureSpec {
    pub name: String,
    pub width: u32,
    pub height: u32,
    pub bitdepth: u8,
    pub pixel_format: PixelFormat,
    pub frames: u32,
    pub reference: FixtureFile,
    pub distorted: FixtureFile,
}

impl FixtureSpec {
    /// Bytes of one frame of raw planar YUV in this geometry.
    pub fn frame_bytes(&self) -> u64 {
        let luma = u64::from(self.width) * u64::from(self.height);
        let (cw, ch) = self.pixel_format.chroma_divisors();
        let chroma_w = u64::from(self.width).div_ceil(cw);
        let chroma_h = u64::from(self.height).div_ceil(ch);
        let samples = luma + 2 * chroma_w * chroma_h;
        let bytes_per_sample = if self.bitdepth > 8 { 2 } else { 1 };
        samples * bytes_per_sample
    }

    pub fn file_bytes(&self) -> u64 {
        self.frame_bytes() * u64::from(self.frames)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PixelFormat {
    #[serde(rename = "420")]
    Yuv420,
    #[serde(rename = "422")]
    Yuv422,
    #[serde(rename = "444")]
    Yuv444,
}

impl PixelFormat {
    /// Horizontal and vertical chroma subsampling divisors.
    pub fn chroma_divisors(self) -> (u64, u64) {
        match self {
            PixelFormat::Yuv420 => (2, 2),
            PixelFormat::Yuv422 => (2, 1),
            PixelFormat::Yuv444 => (1, 1),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PixelFormat::Yuv420 => "420",
            PixelFormat::Yuv422 => "422",
            PixelFormat::Yuv444 => "444",
        }
    }
}

/// Where an agent finds one fixture file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixtureFile {
    pub location: FixtureLocation,
    /// Expected sha256 (hex). Required for paths and URLs; for a generator it pins the output.
    pub sha256: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum FixtureLocation {
    /// A file on the agent host.
    Path(PathBuf),
    /// Fetched once into the agent's cache, keyed by sha256.
    Url(String),
    /// Made by a deterministic generator built into the agent.
    Generate { generator: Generator, seed: u64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Generator {
    /// A moving test pattern (gradients, a checkerboard and a travelling square).
    MovingPattern,
    /// The moving pattern after a deterministic distortion (blur, noise, quantisation).
    MovingPatternDistorted,
}

impl Generator {
    pub fn name(self) -> &'static str {
        match self {
            Generator::MovingPattern => "moving-pattern",
            Generator::MovingPatternDistorted => "moving-pattern-distorted",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    pub name: String,
    pub args: Vec<String>,
    /// Metrics a side's output must hold for the workload to count as run: a side that
    /// exits 0 with none of them failed (a feature that could not load its model still
    /// writes frames of other metrics). Empty: derived from the `--feature NAME` arguments
    /// (a metric whose name contains `NAME`); see [`WorkloadSpec::expected_features`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expect_metrics: Vec<String>,
}

impl WorkloadSpec {
    /// The feature names this workload asks for with `--feature NAME[=opts]` (or
    /// `--feature=NAME`), in order.
    pub fn expected_features(&self) -> Vec<String> {
        let mut features = Vec::new();
        let mut args = self.args.iter();
        while let Some(arg) = args.next() {
            let value = if arg == "--feature" {
                args.next().map(String::as_str)
            } else {
                arg.strip_prefix("--feature=")
            };
            if let Some(value) = value {
                let name = value.split(['=', ':']).next().unwrap_or(value);
                if !name.is_empty() {
                    features.push(name.to_string());
                }
            }
        }
        features
    }

    /// Why `scores` does not hold what this workload asks for, when it does not: none of
    /// `expect_metrics`, or, without those, no metric named after one of the requested
    /// features. `None` when it does (or when the workload names no feature: a model row).
    pub fn missing_expected(&self, scores: &crate::scores::Scores) -> Option<String> {
        let names = scores.metric_names();
        let wrote = || {
            let mut list: Vec<&str> = names.iter().map(String::as_str).take(8).collect();
            if names.len() > 8 {
                list.push("…");
            }
            if list.is_empty() {
                "nothing".to_string()
            } else {
                list.join(", ")
            }
        };
        if !self.expect_metrics.is_empty() {
            if self.expect_metrics.iter().any(|m| names.contains(m)) {
                return None;
            }
            return Some(format!(
                "its output has none of the metrics workload `{}` expects ({}); it wrote: {}",
                self.name,
                self.expect_metrics.join(", "),
                wrote()
            ));
        }
        let missing: Vec<String> = self
            .expected_features()
            .into_iter()
            .filter(|feature| {
                let feature = feature.to_ascii_lowercase();
                !names
                    .iter()
                    .any(|name| name.to_ascii_lowercase().contains(&feature))
            })
            .collect();
        if missing.is_empty() {
            return None;
        }
        Some(format!(
            "its output has no metric of feature `{}` (it wrote: {}): the feature did not run (one that cannot load its model does this); if the feature's metrics are named otherwise, list them in the workload's `expect_metrics`",
            missing.join("`, `"),
            wrote()
        ))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeasureSpec {
    pub warmup: u32,
    /// Timed pairs per cell (one upstream run and one fork run each).
    pub runs: u32,
    pub threads: u32,
    pub min_useful_seconds: f64,
    /// The parity gate on every shared metric's pooled-mean delta (ADR-1228 §2).
    pub max_score_delta: f64,
    /// An optional, stricter gate on every single frame's delta; `None`: per-frame deltas
    /// are reported, not gated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_frame_delta: Option<f64>,
    pub timeout_seconds: f64,
    /// Seeds the run order and the bootstrap; recorded in the report to replay a run.
    pub seed: u64,
    /// Adaptive runs: while a cell's verdict is `unsure`, more pairs up to this many.
    pub max_runs: u32,
    /// Adaptive runs stop once a cell has taken this long.
    pub max_cell_seconds: f64,
    /// A speedup inside 1 ± this is `same`.
    pub practical_threshold: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParitySpec {
    /// Same metric, different name: upstream name → fork name.
    #[serde(default)]
    pub renames: BTreeMap<String, String>,
    /// Per-metric allowances that replace `max_score_delta` (and `max_frame_delta`), each
    /// with its reason.
    #[serde(default)]
    pub allow: BTreeMap<String, Allowance>,
    /// Upstream metrics the fork may stop writing, each with its reason. Any other metric
    /// only upstream writes fails the cell.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_missing: Vec<AllowedMissing>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Allowance {
    /// Gate on this metric's pooled-mean delta; `None` keeps `max_score_delta`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_delta: Option<f64>,
    /// Gate on this metric's per-frame deltas; `None` keeps `[measure] max_frame_delta`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_frame_delta: Option<f64>,
    pub reason: String,
}

/// An upstream metric the fork no longer writes, declared with why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllowedMissing {
    pub metric: String,
    pub reason: String,
}

impl ParitySpec {
    /// The pooled-mean gate of a metric (fork name first, then upstream name).
    pub fn pooled_gate(&self, names: [&str; 2], default: f64) -> f64 {
        names
            .iter()
            .find_map(|n| self.allow.get(*n).and_then(|a| a.max_delta))
            .unwrap_or(default)
    }

    /// The per-frame gate of a metric, when one is set for it or spec-wide.
    pub fn frame_gate(&self, names: [&str; 2], default: Option<f64>) -> Option<f64> {
        names
            .iter()
            .find_map(|n| self.allow.get(*n).and_then(|a| a.max_frame_delta))
            .or(default)
    }

    /// Why `metric` (an upstream name) may be missing from the fork, when declared.
    pub fn missing_reason(&self, metric: &str) -> Option<&str> {
        self.allow_missing
            .iter()
            .find(|m| m.metric == metric)
            .map(|m| m.reason.as_str())
    }
}

impl JobSpec {
    /// Reads, parses, validates and resolves a spec file.
    pub fn load(path: &Path) -> Result<JobSpec, SpecError> {
        let text = std::fs::read_to_string(path).map_err(|source| SpecError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let base_dir = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let base_dir = std::fs::canonicalize(&base_dir).unwrap_or(base_dir);
        JobSpec::from_toml(&text, path, &base_dir)
    }

    /// Parses TOML text; `origin` names the file in errors, `base_dir` resolves relative paths.
    pub fn from_toml(text: &str, origin: &Path, base_dir: &Path) -> Result<JobSpec, SpecError> {
        let raw: toml_form::RawSpec = toml::from_str(text).map_err(|err| SpecError::Syntax {
            path: origin.to_path_buf(),
            message: err.to_string().trim_end().to_string(),
        })?;
        raw.validate(base_dir)
            .map_err(|message| SpecError::Invalid {
                path: origin.to_path_buf(),
                message,
            })
    }

    /// Reads the JSON form an agent or the coordinator receives.
    pub fn from_json(text: &str) -> Result<JobSpec, serde_json::Error> {
        serde_json::from_str(text)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a job spec always serialises")
    }

    /// Number of (fixture, workload) cells.
    pub fn cell_count(&self) -> usize {
        self.fixtures.len() * self.workloads.len()
    }
}

/// The TOML surface: optional keys and defaults, shared recipe, per-side overrides.
mod toml_form {
    use super::*;

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct RawSpec {
        name: String,
        #[serde(default)]
        description: String,
        upstream: RawSide,
        fork: RawSide,
        #[serde(default)]
        build: RawRecipe,
        command: RawCommand,
        #[serde(default)]
        fixtures: Vec<RawFixture>,
        #[serde(default)]
        workloads: Vec<WorkloadSpec>,
        #[serde(default)]
        measure: RawMeasure,
        #[serde(default)]
        parity: RawParity,
        targets: Option<RawTargets>,
        #[serde(default)]
        backends: BackendsSpec,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct RawTargets {
        backends: Option<Vec<String>>,
        generations: Option<Vec<String>>,
        vendors: Option<Vec<String>>,
        fanout: Option<Fanout>,
    }

    impl RawTargets {
        fn validate(self) -> Result<TargetSpec, String> {
            let backends = self.backends.unwrap_or_else(|| vec!["cpu".into()]);
            for backend in &backends {
                if !["cpu", "cuda", "hip", "sycl"].contains(&backend.as_str()) {
                    return Err(format!(
                        "[targets] backend `{backend}` is not one of cpu, cuda, hip, sycl"
                    ));
                }
            }
            if backends.is_empty() {
                return Err(
                    "[targets] backends is empty; name at least one, e.g. [\"cpu\"]".into(),
                );
            }
            Ok(TargetSpec {
                backends,
                generations: self.generations.unwrap_or_else(|| vec!["*".into()]),
                vendors: self.vendors.unwrap_or_else(|| vec!["*".into()]),
                fanout: self.fanout.unwrap_or(Fanout::PerGeneration),
            })
        }
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct RawSide {
        git: Option<String>,
        rev: Option<String>,
        path: Option<PathBuf>,
        #[serde(default)]
        build: RawRecipe,
    }

    #[derive(Deserialize, Default, Clone)]
    #[serde(deny_unknown_fields)]
    struct RawRecipe {
        commands: Option<Vec<Vec<String>>>,
        binary: Option<PathBuf>,
        env: Option<BTreeMap<String, String>>,
        toolchain: Option<Vec<String>>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct RawCommand {
        template: Vec<String>,
        #[serde(default = "default_output_format")]
        output_format: OutputFormat,
        #[serde(default = "default_unknown_feature_exit_code")]
        unknown_feature_exit_code: i32,
    }

    fn default_output_format() -> OutputFormat {
        OutputFormat::Json
    }

    fn default_unknown_feature_exit_code() -> i32 {
        255
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct RawFixture {
        name: String,
        width: u32,
        height: u32,
        bitdepth: u8,
        pixel_format: PixelFormat,
        frames: u32,
        reference: RawFixtureFile,
        distorted: RawFixtureFile,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct RawFixtureFile {
        path: Option<PathBuf>,
        url: Option<String>,
        generate: Option<Generator>,
        seed: Option<u64>,
        sha256: Option<String>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct RawMeasure {
        #[serde(default = "default_warmup")]
        warmup: u32,
        #[serde(default = "default_runs")]
        runs: u32,
        #[serde(default = "default_threads")]
        threads: u32,
        #[serde(default = "default_min_useful_seconds")]
        min_useful_seconds: f64,
        #[serde(default = "default_max_score_delta")]
        max_score_delta: f64,
        max_frame_delta: Option<f64>,
        #[serde(default = "default_timeout_seconds")]
        timeout_seconds: f64,
        seed: Option<u64>,
        max_runs: Option<u32>,
        #[serde(default = "default_max_cell_seconds")]
        max_cell_seconds: f64,
        #[serde(default = "default_practical_threshold")]
        practical_threshold: f64,
    }

    impl Default for RawMeasure {
        fn default() -> Self {
            RawMeasure {
                warmup: default_warmup(),
                runs: default_runs(),
                threads: default_threads(),
                min_useful_seconds: default_min_useful_seconds(),
                max_score_delta: default_max_score_delta(),
                max_frame_delta: None,
                timeout_seconds: default_timeout_seconds(),
                seed: None,
                max_runs: None,
                max_cell_seconds: default_max_cell_seconds(),
                practical_threshold: default_practical_threshold(),
            }
        }
    }

    fn default_warmup() -> u32 {
        1
    }
    fn default_runs() -> u32 {
        5
    }
    fn default_threads() -> u32 {
        1
    }
    fn default_min_useful_seconds() -> f64 {
        2.0
    }
    fn default_max_score_delta() -> f64 {
        1e-5
    }
    fn default_timeout_seconds() -> f64 {
        600.0
    }
    /// Adaptive by default: five pairs cannot show a difference with a signed-rank test
    /// (its smallest two-sided p is 1/16), so an unsure cell takes up to this many.
    const DEFAULT_MAX_RUNS: u32 = 20;

    fn default_max_cell_seconds() -> f64 {
        600.0
    }
    fn default_practical_threshold() -> f64 {
        0.02
    }

    /// A seed for a spec that names none: different every submission, recorded in the report.
    fn fresh_seed() -> u64 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        nanos ^ u64::from(std::process::id()).rotate_left(32)
    }

    #[derive(Deserialize, Default)]
    #[serde(deny_unknown_fields)]
    struct RawParity {
        #[serde(default)]
        renames: BTreeMap<String, String>,
        #[serde(default)]
        allow: BTreeMap<String, Allowance>,
        #[serde(default)]
        allow_missing: Vec<AllowedMissing>,
    }

    /// `path` against `base_dir`, with `.` and `..` resolved lexically (the path need not
    /// exist here: it names a place on the agent host).
    fn absolute(base_dir: &Path, path: &Path) -> PathBuf {
        let joined = if path.is_absolute() {
            path.to_path_buf()
        } else {
            base_dir.join(path)
        };
        let mut clean = PathBuf::new();
        for component in joined.components() {
            match component {
                std::path::Component::CurDir => {}
                std::path::Component::ParentDir => {
                    clean.pop();
                }
                other => clean.push(other),
            }
        }
        clean
    }

    impl RawSide {
        fn validate(
            self,
            side: &str,
            shared: &RawRecipe,
            base_dir: &Path,
        ) -> Result<SideSpec, String> {
            let source = match (self.git, self.rev, self.path) {
                (Some(url), Some(rev), None) => {
                    // A local repository path is resolved like any other path; URLs stay as given.
                    let url = if url.contains("://") || url.contains('@') {
                        url
                    } else {
                        absolute(base_dir, Path::new(&url)).display().to_string()
                    };
                    SourceSpec::Git { url, rev }
                }
                (Some(_), None, None) => {
                    return Err(format!(
                        "[{side}] has `git` but no `rev`; pin it: rev = \"v3.2.0\" (a tag, branch or commit)"
                    ))
                }
                (None, None, Some(path)) => SourceSpec::Path {
                    path: absolute(base_dir, &path),
                },
                (None, Some(_), Some(_)) => {
                    return Err(format!(
                        "[{side}] has `rev` with a `path`; a directory is used as it is: drop `rev`, or use git = \"{{repository}}\" with rev"
                    ))
                }
                (None, Some(_), None) => {
                    return Err(format!("[{side}] has `rev` but no `git` URL; add git = \"…\""))
                }
                (Some(_), _, Some(_)) => {
                    return Err(format!(
                        "[{side}] has both `git` and `path`; keep one of them"
                    ))
                }
                (None, None, None) => {
                    return Err(format!(
                        "[{side}] needs a source: git = \"URL\" with rev = \"TAG\", or path = \"DIR\""
                    ))
                }
            };
            let recipe = &self.build;
            let commands = recipe
                .commands
                .clone()
                .or_else(|| shared.commands.clone())
                .ok_or_else(|| {
                    format!("[{side}] has no build commands; set [build] commands = [[\"make\"]] or [{side}.build] commands")
                })?;
            if commands.iter().any(|argv| argv.is_empty()) {
                return Err(format!(
                    "[{side}] build has an empty command; every command is a non-empty argv list"
                ));
            }
            let binary = recipe
                .binary
                .clone()
                .or_else(|| shared.binary.clone())
                .ok_or_else(|| {
                    format!(
                        "[{side}] has no built binary; set [build] binary = \"build/tools/vmaf\""
                    )
                })?;
            if binary.is_absolute() {
                return Err(format!(
                    "[{side}] binary `{}` must be relative to the source tree",
                    binary.display()
                ));
            }
            let mut env = shared.env.clone().unwrap_or_default();
            env.extend(recipe.env.clone().unwrap_or_default());
            let toolchain = recipe
                .toolchain
                .clone()
                .or_else(|| shared.toolchain.clone())
                .unwrap_or_else(|| vec!["cc".to_string(), "--version".to_string()]);
            if toolchain.is_empty() {
                return Err(format!(
                    "[{side}] toolchain is empty; use [\"cc\", \"--version\"]"
                ));
            }
            Ok(SideSpec {
                source,
                build: BuildRecipe {
                    commands,
                    binary,
                    env,
                    toolchain,
                },
            })
        }
    }

    impl RawFixtureFile {
        fn validate(self, what: &str, base_dir: &Path) -> Result<FixtureFile, String> {
            let location = match (self.path, self.url, self.generate) {
                (Some(path), None, None) => FixtureLocation::Path(absolute(base_dir, &path)),
                (None, Some(url), None) => FixtureLocation::Url(url),
                (None, None, Some(generator)) => FixtureLocation::Generate {
                    generator,
                    seed: self.seed.unwrap_or(1),
                },
                _ => {
                    return Err(format!(
                        "{what} needs exactly one of path = \"FILE\", url = \"URL\" or generate = \"moving-pattern\""
                    ))
                }
            };
            if self.seed.is_some() && !matches!(location, FixtureLocation::Generate { .. }) {
                return Err(format!("{what} has `seed`, which only a generator takes"));
            }
            let sha256 = match self.sha256 {
                Some(hex) => {
                    let hex = hex.to_ascii_lowercase();
                    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                        return Err(format!(
                            "{what} sha256 `{hex}` is not 64 hex digits; compute it with `sha256sum FILE`"
                        ));
                    }
                    Some(hex)
                }
                None if !matches!(location, FixtureLocation::Generate { .. }) => {
                    return Err(format!(
                        "{what} has no sha256; add sha256 = \"…\" (from `sha256sum FILE`) so every agent checks it"
                    ))
                }
                None => None,
            };
            Ok(FixtureFile { location, sha256 })
        }
    }

    fn validate_template(template: &[String]) -> Result<(), String> {
        if template.is_empty() {
            return Err("[command] template is empty; start it with \"{binary}\"".into());
        }
        let mut seen_output = false;
        for arg in template {
            let mut rest = arg.as_str();
            while let Some(open) = rest.find('{') {
                let after = &rest[open + 1..];
                let close = after.find('}').ok_or_else(|| {
                    format!("[command] template argument `{arg}` has an unclosed `{{`")
                })?;
                let name = &after[..close];
                if !TEMPLATE_PLACEHOLDERS.contains(&name) {
                    return Err(format!(
                        "[command] template uses unknown placeholder `{{{name}}}`; known: {}",
                        TEMPLATE_PLACEHOLDERS
                            .iter()
                            .map(|p| format!("{{{p}}}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
                seen_output |= name == "output";
                rest = &after[close + 1..];
            }
        }
        if !seen_output {
            return Err(
                "[command] template never uses {output}; the scores are read from that file".into(),
            );
        }
        Ok(())
    }

    impl RawSpec {
        pub(super) fn validate(self, base_dir: &Path) -> Result<JobSpec, String> {
            if self.name.trim().is_empty() {
                return Err("`name` is empty; give the run a short name".into());
            }
            let upstream = self.upstream.validate("upstream", &self.build, base_dir)?;
            let fork = self.fork.validate("fork", &self.build, base_dir)?;
            validate_template(&self.command.template)?;
            if self.fixtures.is_empty() {
                return Err("no [[fixtures]]; add at least one reference/distorted pair".into());
            }
            if self.workloads.is_empty() {
                return Err("no [[workloads]]; add one per feature, e.g. name = \"float_ssim\", args = [\"--feature\", \"float_ssim\"]".into());
            }
            let mut fixtures = Vec::new();
            for raw in self.fixtures {
                let name = raw.name.clone();
                if fixtures.iter().any(|f: &FixtureSpec| f.name == name) {
                    return Err(format!(
                        "fixture `{name}` is defined twice; fixture names must be unique"
                    ));
                }
                if raw.width == 0 || raw.height == 0 || raw.frames == 0 {
                    return Err(format!(
                        "fixture `{name}` needs non-zero width, height and frames"
                    ));
                }
                if ![8u8, 10, 12, 16].contains(&raw.bitdepth) {
                    return Err(format!(
                        "fixture `{name}` bitdepth {} is not one of 8, 10, 12, 16",
                        raw.bitdepth
                    ));
                }
                fixtures.push(FixtureSpec {
                    reference: raw
                        .reference
                        .validate(&format!("fixture `{name}` reference"), base_dir)?,
                    distorted: raw
                        .distorted
                        .validate(&format!("fixture `{name}` distorted"), base_dir)?,
                    name,
                    width: raw.width,
                    height: raw.height,
                    bitdepth: raw.bitdepth,
                    pixel_format: raw.pixel_format,
                    frames: raw.frames,
                });
            }
            let mut names = std::collections::BTreeSet::new();
            for workload in &self.workloads {
                if !names.insert(workload.name.as_str()) {
                    return Err(format!(
                        "workload `{}` is defined twice; workload names must be unique",
                        workload.name
                    ));
                }
            }
            let m = self.measure;
            if m.warmup < 1 {
                return Err("[measure] warmup must be at least 1: the first run of a binary warms caches and is discarded".into());
            }
            if m.runs < 3 {
                return Err(format!(
                    "[measure] runs = {} is too few; a median needs at least 3 timed runs",
                    m.runs
                ));
            }
            if m.threads == 0 {
                return Err("[measure] threads must be at least 1".into());
            }
            if !(m.max_score_delta.is_finite() && m.max_score_delta >= 0.0) {
                return Err(
                    "[measure] max_score_delta must be a non-negative number such as 1e-5".into(),
                );
            }
            if let Some(gate) = m.max_frame_delta {
                if !(gate.is_finite() && gate >= 0.0) {
                    return Err(
                        "[measure] max_frame_delta must be a non-negative number such as 5e-5 (or leave it out: per-frame deltas are then reported, not gated)".into(),
                    );
                }
            }
            if !(m.timeout_seconds.is_finite() && m.timeout_seconds > 0.0) {
                return Err(
                    "[measure] timeout_seconds must be a positive number of seconds".into(),
                );
            }
            if !(m.min_useful_seconds.is_finite() && m.min_useful_seconds >= 0.0) {
                return Err(
                    "[measure] min_useful_seconds must be a non-negative number of seconds".into(),
                );
            }
            let max_runs = m.max_runs.unwrap_or(m.runs.max(DEFAULT_MAX_RUNS));
            if max_runs < m.runs {
                return Err(format!("[measure] max_runs = {max_runs} is below runs = {}; adaptive runs only add pairs", m.runs));
            }
            if !(m.practical_threshold.is_finite()
                && m.practical_threshold > 0.0
                && m.practical_threshold < 1.0)
            {
                return Err(
                    "[measure] practical_threshold must be a fraction such as 0.02 (±2%)".into(),
                );
            }
            if !(m.max_cell_seconds.is_finite() && m.max_cell_seconds > 0.0) {
                return Err(
                    "[measure] max_cell_seconds must be a positive number of seconds".into(),
                );
            }
            for (metric, allowance) in &self.parity.allow {
                if allowance.reason.trim().is_empty() {
                    return Err(format!("[parity.allow.{metric}] needs a reason: say why this metric may move (a tracked bug id)"));
                }
                if allowance.max_delta.is_none() && allowance.max_frame_delta.is_none() {
                    return Err(format!("[parity.allow.{metric}] sets no gate: give max_delta (pooled mean) and/or max_frame_delta (per frame)"));
                }
                for (key, gate) in [
                    ("max_delta", allowance.max_delta),
                    ("max_frame_delta", allowance.max_frame_delta),
                ] {
                    if gate.is_some_and(|g| !(g.is_finite() && g >= 0.0)) {
                        return Err(format!(
                            "[parity.allow.{metric}] {key} must be a non-negative number"
                        ));
                    }
                }
            }
            for missing in &self.parity.allow_missing {
                if missing.reason.trim().is_empty() {
                    return Err(format!("[parity] allow_missing `{}` needs a reason: say why the fork no longer writes it", missing.metric));
                }
            }
            let fixture_names: Vec<String> = fixtures.iter().map(|f| f.name.clone()).collect();
            let workload_names: Vec<String> =
                self.workloads.iter().map(|w| w.name.clone()).collect();
            let backends = self.backends.validate(&fixture_names, &workload_names)?;
            Ok(JobSpec {
                name: self.name,
                description: self.description,
                upstream,
                fork,
                command: CommandSpec {
                    template: self.command.template,
                    output_format: self.command.output_format,
                    unknown_feature_exit_code: self.command.unknown_feature_exit_code,
                },
                fixtures,
                workloads: self.workloads,
                measure: MeasureSpec {
                    warmup: m.warmup,
                    runs: m.runs,
                    threads: m.threads,
                    min_useful_seconds: m.min_useful_seconds,
                    max_score_delta: m.max_score_delta,
                    max_frame_delta: m.max_frame_delta,
                    timeout_seconds: m.timeout_seconds,
                    seed: m.seed.unwrap_or_else(fresh_seed),
                    max_runs,
                    max_cell_seconds: m.max_cell_seconds,
                    practical_threshold: m.practical_threshold,
                },
                parity: ParitySpec {
                    renames: self.parity.renames,
                    allow: self.parity.allow,
                    allow_missing: self.parity.allow_missing,
                },
                targets: self.targets.map(RawTargets::validate).transpose()?,
                backends,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
name = "t"
[upstream]
git = "repos/upstream"
rev = "v1.0.0"
[fork]
path = "../fork"
[fork.build]
commands = [["make", "VARIANT=fork"]]
[build]
commands = [["make"]]
binary = "build/vmaf"
[command]
template = ["{binary}", "-r", "{reference}", "-d", "{distorted}", "-o", "{output}", "--json"]
[[fixtures]]
name = "small"
width = 64
height = 48
bitdepth = 8
pixel_format = "420"
frames = 4
reference = { generate = "moving-pattern" }
distorted = { path = "dist.yuv", sha256 = "0000000000000000000000000000000000000000000000000000000000000000" }
[[workloads]]
name = "psnr"
args = ["--feature", "psnr"]
"#;

    fn parse(text: &str) -> Result<JobSpec, SpecError> {
        JobSpec::from_toml(text, Path::new("spec.toml"), Path::new("/base"))
    }

    #[test]
    fn defaults_are_the_forks_discipline_and_paths_resolve_against_the_spec_dir() {
        let spec = parse(MINIMAL).unwrap();
        assert_eq!(spec.measure.warmup, 1);
        assert_eq!(spec.measure.runs, 5);
        assert_eq!(spec.measure.threads, 1);
        assert_eq!(spec.measure.min_useful_seconds, 2.0);
        assert_eq!(spec.measure.max_score_delta, 1e-5);
        assert_eq!(spec.measure.max_runs, 20, "adaptive up to 20 pairs");
        assert_eq!(spec.measure.practical_threshold, 0.02);
        assert_eq!(
            spec.upstream.source,
            SourceSpec::Git {
                url: "/base/repos/upstream".into(),
                rev: "v1.0.0".into()
            }
        );
        assert_eq!(
            spec.fork.source,
            SourceSpec::Path {
                path: "/fork".into()
            }
        );
        assert_eq!(spec.fork.build.commands, vec![vec!["make", "VARIANT=fork"]]);
        assert_eq!(spec.upstream.build.commands, vec![vec!["make"]]);
        assert_eq!(spec.fork.build.binary, PathBuf::from("build/vmaf"));
        assert_eq!(
            spec.fixtures[0].distorted.location,
            FixtureLocation::Path("/base/dist.yuv".into())
        );
        assert_eq!(spec.fixtures[0].frame_bytes(), 64 * 48 * 3 / 2);
        let back = JobSpec::from_json(&spec.to_json()).unwrap();
        assert_eq!(back, spec);
    }

    #[test]
    fn an_unknown_key_names_the_key_the_line_and_the_docs() {
        let text = MINIMAL
            .replace("[measure]", "")
            .replace("name = \"t\"", "name = \"t\"\n[measure]\nrunz = 3");
        let err = parse(&text).unwrap_err().to_string();
        assert!(err.contains("unknown field `runz`"), "{err}");
        assert!(err.contains("line 4"), "{err}");
        assert!(err.contains("docs/job-spec.md"), "{err}");
    }

    #[test]
    fn semantic_mistakes_say_what_to_do() {
        let cases = [
            (MINIMAL.replace("rev = \"v1.0.0\"\n", ""), "no `rev`"),
            (MINIMAL.replace("\"-o\", \"{output}\", ", ""), "never uses {output}"),
            (MINIMAL.replace("{distorted}", "{distort}"), "unknown placeholder `{distort}`"),
            (
                MINIMAL.replace("sha256 = \"0000000000000000000000000000000000000000000000000000000000000000\"", "sha256 = \"abc\""),
                "not 64 hex digits",
            ),
            (
                MINIMAL.replace(", sha256 = \"0000000000000000000000000000000000000000000000000000000000000000\"", ""),
                "has no sha256",
            ),
            (format!("{MINIMAL}[measure]\nruns = 2\n"), "at least 3 timed runs"),
            (MINIMAL.replace("path = \"../fork\"", "path = \"../fork\"\nrev = \"v1\""), "`rev` with a `path`"),
            (
                format!("{MINIMAL}[parity.allow.vmaf]\nmax_delta = 1e-4\nreason = \"\"\n"),
                "needs a reason",
            ),
        ];
        for (text, expected) in cases {
            let err = parse(&text).unwrap_err().to_string();
            assert!(err.contains(expected), "expected `{expected}` in: {err}");
        }
    }
}

#[cfg(test)]
mod shipped_specs {
    use super::*;

    #[test]
    fn every_spec_under_fixtures_jobs_is_valid() {
        let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/jobs"));
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                JobSpec::load(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
                seen += 1;
            }
        }
        assert!(
            seen >= 3,
            "demo, demo-drift and vmaf-upstream-ab are expected"
        );
    }

    #[test]
    fn the_production_job_pins_a_tag_and_builds_cpu_only() {
        let path = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fixtures/jobs/vmaf-upstream-ab.toml"
        ));
        let spec = JobSpec::load(path).unwrap();
        assert!(matches!(&spec.upstream.source, SourceSpec::Git { rev, .. } if rev == "v3.2.0"));
        assert!(spec.workloads.iter().any(|w| w.name == "vmaf_v0.6.1"));
        let fork_setup = &spec.fork.build.commands[0];
        assert!(fork_setup.iter().any(|a| a == "-Denable_cuda=false"));
    }
}
