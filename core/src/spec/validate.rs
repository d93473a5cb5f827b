//! From the TOML form to a validated [`JobSpec`], in two steps. `resolve` does what only the
//! TOML form needs: it picks each side's source and recipe, fills defaults and resolves
//! relative paths against the spec's directory. [`check`] then holds every invariant of a
//! resolved spec (counts, limits, gates, reasons, unique names, references); the JSON form
//! runs the same [`check`], so a spec read back from the store or an offer is held to exactly
//! what `abfleet submit` held its TOML to.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use super::error::SpecError;
use super::model::{
    BuildRecipe, CommandSpec, Fanout, FixtureFile, FixtureLocation, FixtureSpec, JobSpec,
    MeasureSpec, ParitySpec, SideSpec, SourceSpec, TargetSpec, TEMPLATE_PLACEHOLDERS,
};
use super::raw::{RawFixtureFile, RawRecipe, RawSide, RawSpec, RawTargets, DEFAULT_MAX_RUNS};

/// At most this many timed pairs per cell (`runs`, `max_runs`): beyond it a typo, not a plan.
pub(crate) const RUNS_LIMIT: u32 = 10_000;
/// At most this many discarded warm-up runs per side and cell.
pub(crate) const WARMUP_LIMIT: u32 = 100;
/// At most this long for one run (`timeout_seconds`) or one cell (`max_cell_seconds`): 7 days.
pub(crate) const SECONDS_LIMIT: f64 = 7.0 * 24.0 * 3600.0;

impl JobSpec {
    /// Reads, parses, validates and resolves a spec file.
    pub fn load(path: &Path) -> Result<JobSpec, SpecError> {
        let text = std::fs::read_to_string(path).map_err(|cause| SpecError::Read {
            path: path.to_path_buf(),
            cause,
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
        let raw: RawSpec = toml::from_str(text).map_err(|err| SpecError::Syntax {
            path: origin.to_path_buf(),
            message: super::error::explained(err.to_string().trim_end()),
        })?;
        raw.resolve(base_dir)
            .and_then(check)
            .map_err(|message| SpecError::Invalid {
                path: origin.to_path_buf(),
                message,
            })
    }
}

/// Every invariant of a resolved spec, in the order a person reads the spec; the first broken
/// one is the error, naming its key. Returns the spec with the `[backends.cpu]` sweep's
/// fixture and workload defaulted to the first of each.
pub(super) fn check(mut spec: JobSpec) -> Result<JobSpec, String> {
    if spec.name.trim().is_empty() {
        return Err("`name` is empty; give the run a short name".into());
    }
    check_side("upstream", &spec.upstream)?;
    check_side("fork", &spec.fork)?;
    check_command(&spec.command)?;
    if spec.fixtures.is_empty() {
        return Err("no [[fixtures]]; add at least one reference/distorted pair".into());
    }
    if spec.workloads.is_empty() {
        return Err("no [[workloads]]; add one per feature, e.g. name = \"float_ssim\", args = [\"--feature\", \"float_ssim\"]".into());
    }
    let mut fixture_names = BTreeSet::new();
    for fixture in &spec.fixtures {
        if !fixture_names.insert(fixture.name.as_str()) {
            return Err(format!(
                "fixture `{}` is defined twice; fixture names must be unique",
                fixture.name
            ));
        }
        check_fixture(fixture)?;
    }
    let mut workload_names = BTreeSet::new();
    for workload in &spec.workloads {
        if !workload_names.insert(workload.name.as_str()) {
            return Err(format!(
                "workload `{}` is defined twice; workload names must be unique",
                workload.name
            ));
        }
    }
    check_measure(&spec.measure)?;
    check_parity(&spec.parity)?;
    let fixture_names: Vec<String> = spec.fixtures.iter().map(|f| f.name.clone()).collect();
    let workload_names: Vec<String> = spec.workloads.iter().map(|w| w.name.clone()).collect();
    spec.backends = std::mem::take(&mut spec.backends).validate(&fixture_names, &workload_names)?;
    if let Some(targets) = &spec.targets {
        check_targets(targets)?;
    }
    if let Some(sweep) = &spec.sweep {
        sweep.check()?;
        if !spec.backends.is_empty() {
            return Err("a [sweep] spec cannot have [backends.*]: the retuning checks run with an A/B spec; move them there".into());
        }
        if spec.upstream != spec.fork {
            return Err(
                "a [sweep] spec times the fork alone: its upstream must mirror its fork".into(),
            );
        }
    }
    Ok(spec)
}

fn check_side(side: &str, spec: &SideSpec) -> Result<(), String> {
    let recipe = &spec.build;
    if recipe.commands.iter().any(|argv| argv.is_empty()) {
        return Err(format!(
            "[{side}] build has an empty command; every command is a non-empty argv list"
        ));
    }
    if recipe.binary.is_absolute() {
        return Err(format!(
            "[{side}] binary `{}` must be relative to the source tree",
            recipe.binary.display()
        ));
    }
    if recipe.toolchain.is_empty() {
        return Err(format!(
            "[{side}] toolchain is empty; use [\"cc\", \"--version\"]"
        ));
    }
    Ok(())
}

fn check_command(command: &CommandSpec) -> Result<(), String> {
    let template = &command.template;
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

fn check_fixture(fixture: &FixtureSpec) -> Result<(), String> {
    let name = &fixture.name;
    if fixture.width == 0 || fixture.height == 0 || fixture.frames == 0 {
        return Err(format!(
            "fixture `{name}` needs non-zero width, height and frames"
        ));
    }
    if ![8u8, 10, 12, 16].contains(&fixture.bitdepth) {
        return Err(format!(
            "fixture `{name}` bitdepth {} is not one of 8, 10, 12, 16",
            fixture.bitdepth
        ));
    }
    check_fixture_file(&format!("fixture `{name}` reference"), &fixture.reference)?;
    check_fixture_file(&format!("fixture `{name}` distorted"), &fixture.distorted)
}

fn check_fixture_file(what: &str, file: &FixtureFile) -> Result<(), String> {
    match &file.sha256 {
        // Resolution lower-cases it, so upper-case hex can only come from a hand-made JSON.
        Some(hex)
            if hex.len() != 64
                || !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) =>
        {
            Err(format!(
                "{what} sha256 `{hex}` is not 64 hex digits; compute it with `sha256sum FILE`"
            ))
        }
        None if !matches!(file.location, FixtureLocation::Generate { .. }) => Err(format!(
            "{what} has no sha256; add sha256 = \"…\" (from `sha256sum FILE`) so every agent checks it"
        )),
        _ => Ok(()),
    }
}

fn check_measure(m: &MeasureSpec) -> Result<(), String> {
    if m.max_output_bytes == 0 {
        return Err(format!(
            "[measure] max_output_bytes must be at least 1 byte (the default is {}, 512 MiB); it caps the output file of one run",
            super::model::DEFAULT_MAX_OUTPUT_BYTES
        ));
    }
    if m.warmup < 1 {
        return Err("[measure] warmup must be at least 1: the first run of a binary warms caches and is discarded".into());
    }
    if m.warmup > WARMUP_LIMIT {
        return Err(format!(
            "[measure] warmup = {} is above the limit of {WARMUP_LIMIT} discarded runs; one or two warm the caches",
            m.warmup
        ));
    }
    if m.runs < 3 {
        return Err(format!(
            "[measure] runs = {} is too few; a median needs at least 3 timed runs",
            m.runs
        ));
    }
    if m.runs > RUNS_LIMIT {
        return Err(format!(
            "[measure] runs = {} is above the limit of {RUNS_LIMIT} timed pairs; lower it, adaptive runs add pairs up to max_runs",
            m.runs
        ));
    }
    if m.threads == 0 {
        return Err("[measure] threads must be at least 1".into());
    }
    if !(m.max_score_delta.is_finite() && m.max_score_delta >= 0.0) {
        return Err("[measure] max_score_delta must be a non-negative number such as 1e-5".into());
    }
    if let Some(gate) = m.max_frame_delta {
        if !(gate.is_finite() && gate >= 0.0) {
            return Err(
                "[measure] max_frame_delta must be a non-negative number such as 5e-5 (or leave it out: per-frame deltas are then reported, not gated)".into(),
            );
        }
    }
    if !(m.timeout_seconds.is_finite() && m.timeout_seconds > 0.0) {
        return Err("[measure] timeout_seconds must be a positive number of seconds".into());
    }
    if m.timeout_seconds > SECONDS_LIMIT {
        return Err(format!(
            "[measure] timeout_seconds = {} is above the limit of {SECONDS_LIMIT} seconds (7 days) for one run; lower it",
            m.timeout_seconds
        ));
    }
    if !(m.min_useful_seconds.is_finite() && m.min_useful_seconds >= 0.0) {
        return Err("[measure] min_useful_seconds must be a non-negative number of seconds".into());
    }
    if m.max_runs < m.runs {
        return Err(format!(
            "[measure] max_runs = {} is below runs = {}; adaptive runs only add pairs",
            m.max_runs, m.runs
        ));
    }
    if m.max_runs > RUNS_LIMIT {
        return Err(format!(
            "[measure] max_runs = {} is above the limit of {RUNS_LIMIT} timed pairs; lower it",
            m.max_runs
        ));
    }
    if !(m.practical_threshold.is_finite()
        && m.practical_threshold > 0.0
        && m.practical_threshold < 1.0)
    {
        return Err("[measure] practical_threshold must be a fraction such as 0.02 (±2%)".into());
    }
    if !(m.max_cell_seconds.is_finite() && m.max_cell_seconds > 0.0) {
        return Err("[measure] max_cell_seconds must be a positive number of seconds".into());
    }
    if m.max_cell_seconds > SECONDS_LIMIT {
        return Err(format!(
            "[measure] max_cell_seconds = {} is above the limit of {SECONDS_LIMIT} seconds (7 days) for one cell; lower it",
            m.max_cell_seconds
        ));
    }
    Ok(())
}

fn check_parity(parity: &ParitySpec) -> Result<(), String> {
    for (metric, allowance) in &parity.allow {
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
    for missing in &parity.allow_missing {
        if missing.reason.trim().is_empty() {
            return Err(format!(
                "[parity] allow_missing `{}` needs a reason: say why the fork no longer writes it",
                missing.metric
            ));
        }
    }
    Ok(())
}

fn check_targets(targets: &TargetSpec) -> Result<(), String> {
    for backend in &targets.backends {
        if !["cpu", "cuda", "hip", "sycl", "vulkan"].contains(&backend.as_str()) {
            return Err(format!(
                "[targets] backend `{backend}` is not one of cpu, cuda, hip, sycl, vulkan"
            ));
        }
    }
    if targets.backends.is_empty() {
        return Err("[targets] backends is empty; name at least one, e.g. [\"cpu\"]".into());
    }
    Ok(())
}

impl RawSpec {
    /// The TOML form's own work: sources and recipes chosen, defaults filled, paths resolved.
    /// Only what the JSON form cannot get wrong (it has no alternatives to choose between)
    /// fails here; everything else is [`check`]'s.
    fn resolve(self, base_dir: &Path) -> Result<JobSpec, String> {
        let fork = self.fork.resolve("fork", &self.build, base_dir)?;
        let sweep = self
            .sweep
            .map(super::sweep::RawSweep::resolve)
            .transpose()?;
        let upstream = match (self.upstream, &sweep) {
            (Some(upstream), None) => upstream.resolve("upstream", &self.build, base_dir)?,
            (None, Some(_)) => fork.clone(),
            (Some(_), Some(_)) => {
                return Err("a [sweep] spec times the fork alone against its own shipped default; remove [upstream]".into())
            }
            (None, None) => {
                return Err("no [upstream]; an A/B spec needs both sides (or a [sweep] table to time the fork alone, docs/sweeps.md)".into())
            }
        };
        let mut fixtures = Vec::new();
        for raw in self.fixtures {
            let name = raw.name;
            fixtures.push(FixtureSpec {
                reference: raw
                    .reference
                    .resolve(&format!("fixture `{name}` reference"), base_dir)?,
                distorted: raw
                    .distorted
                    .resolve(&format!("fixture `{name}` distorted"), base_dir)?,
                name,
                width: raw.width,
                height: raw.height,
                bitdepth: raw.bitdepth,
                pixel_format: raw.pixel_format,
                frames: raw.frames,
            });
        }
        let m = self.measure;
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
                max_runs: m.max_runs.unwrap_or(m.runs.max(DEFAULT_MAX_RUNS)),
                max_cell_seconds: m.max_cell_seconds,
                practical_threshold: m.practical_threshold,
                max_output_bytes: m.max_output_bytes,
            },
            parity: ParitySpec {
                renames: self.parity.renames,
                allow: self.parity.allow,
                allow_missing: self.parity.allow_missing,
            },
            targets: self.targets.map(RawTargets::resolve),
            backends: self.backends,
            sweep,
        })
    }
}

impl RawTargets {
    fn resolve(self) -> TargetSpec {
        TargetSpec {
            backends: self.backends.unwrap_or_else(|| vec!["cpu".into()]),
            generations: self.generations.unwrap_or_else(|| vec!["*".into()]),
            vendors: self.vendors.unwrap_or_else(|| vec!["*".into()]),
            fanout: self.fanout.unwrap_or(Fanout::PerGeneration),
        }
    }
}

impl RawSide {
    fn resolve(self, side: &str, shared: &RawRecipe, base_dir: &Path) -> Result<SideSpec, String> {
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
        let recipe = self.build;
        let commands = recipe
            .commands
            .or_else(|| shared.commands.clone())
            .ok_or_else(|| {
                format!("[{side}] has no build commands; set [build] commands = [[\"make\"]] or [{side}.build] commands")
            })?;
        let binary = recipe
            .binary
            .or_else(|| shared.binary.clone())
            .ok_or_else(|| {
                format!("[{side}] has no built binary; set [build] binary = \"build/tools/vmaf\"")
            })?;
        let mut env = shared.env.clone().unwrap_or_default();
        env.extend(recipe.env.unwrap_or_default());
        let toolchain = recipe
            .toolchain
            .or_else(|| shared.toolchain.clone())
            .unwrap_or_else(|| vec!["cc".to_string(), "--version".to_string()]);
        Ok(SideSpec {
            source,
            build: BuildRecipe {
                commands,
                binary,
                env,
                toolchain,
                link: Vec::new(),
            },
        })
    }
}

impl RawFixtureFile {
    fn resolve(self, what: &str, base_dir: &Path) -> Result<FixtureFile, String> {
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
        Ok(FixtureFile {
            location,
            sha256: self.sha256.map(|hex| hex.to_ascii_lowercase()),
        })
    }
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
            Component::CurDir => {}
            Component::ParentDir => {
                clean.pop();
            }
            other => clean.push(other),
        }
    }
    clean
}

/// A seed for a spec that names none: different every submission, recorded in the report.
fn fresh_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ u64::from(std::process::id()).rotate_left(32)
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

    #[test]
    fn max_output_bytes_defaults_to_512_mib_is_settable_and_not_zero() {
        let spec = parse(MINIMAL).unwrap();
        assert_eq!(spec.measure.max_output_bytes, 512 * 1024 * 1024);
        let spec = parse(&format!("{MINIMAL}[measure]\nmax_output_bytes = 4096\n")).unwrap();
        assert_eq!(spec.measure.max_output_bytes, 4096);
        // Through the JSON form the agent reads, with and without the key.
        let back = JobSpec::from_json(&spec.to_json()).unwrap();
        assert_eq!(back.measure.max_output_bytes, 4096);
        let default = parse(MINIMAL).unwrap();
        assert!(!default.to_json().contains("max_output_bytes"));
        assert_eq!(
            JobSpec::from_json(&default.to_json())
                .unwrap()
                .measure
                .max_output_bytes,
            512 * 1024 * 1024
        );
        let err = parse(&format!("{MINIMAL}[measure]\nmax_output_bytes = 0\n"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("max_output_bytes must be at least 1 byte"),
            "{err}"
        );
    }

    #[test]
    fn absurd_counts_and_durations_are_refused_with_the_limit() {
        let cases = [
            (
                "runs = 10001\nmax_runs = 10001",
                "runs = 10001 is above the limit of 10000",
            ),
            (
                "runs = 5\nmax_runs = 10001",
                "max_runs = 10001 is above the limit of 10000",
            ),
            ("warmup = 101", "warmup = 101 is above the limit of 100"),
            (
                "timeout_seconds = 604801",
                "timeout_seconds = 604801 is above the limit of 604800 seconds (7 days)",
            ),
            (
                "max_cell_seconds = 1e9",
                "max_cell_seconds = 1000000000 is above the limit of 604800 seconds",
            ),
        ];
        for (measure, expected) in cases {
            let err = parse(&format!("{MINIMAL}[measure]\n{measure}\n"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(expected), "expected `{expected}` in: {err}");
        }
        // The limits themselves are allowed.
        let at_limits = "warmup = 100\nruns = 10000\nmax_runs = 10000\ntimeout_seconds = 604800\nmax_cell_seconds = 604800";
        let spec = parse(&format!("{MINIMAL}[measure]\n{at_limits}\n")).unwrap();
        assert_eq!((spec.measure.runs, spec.measure.max_runs), (10_000, 10_000));
        // runs beyond the default adaptive ceiling lift max_runs with them, as before.
        let spec = parse(&format!("{MINIMAL}[measure]\nruns = 30\n")).unwrap();
        assert_eq!(spec.measure.max_runs, 30);
    }

    #[test]
    fn a_max_runs_below_six_is_valid_but_warned_about_since_no_verdict_is_possible() {
        assert_eq!(
            parse(MINIMAL).unwrap().measure.verdict_limit_warning(),
            None
        );
        let spec = parse(&format!("{MINIMAL}[measure]\nruns = 3\nmax_runs = 6\n")).unwrap();
        assert_eq!(spec.measure.verdict_limit_warning(), None);
        let spec = parse(&format!("{MINIMAL}[measure]\nruns = 5\nmax_runs = 5\n")).unwrap();
        let warning = spec.measure.verdict_limit_warning().unwrap();
        assert!(
            warning.contains("max_runs = 5") && warning.contains("raise `max_runs` to 6"),
            "{warning}"
        );
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
