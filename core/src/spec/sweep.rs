//! `[sweep]`: a retuning sweep of the fork alone (docs/sweeps.md). Its tunables, each a build
//! argument, an environment variable or extra command-line arguments, with values as a list
//! or an integer range and the shipped default marked; how the space is searched; and the
//! budget (configurations and seconds). The TOML form (`RawSweep`) and the validated form
//! (`SweepSpec`, which also travels as JSON) differ only in how values are written.

use serde::{Deserialize, Serialize};

/// The placeholder a tunable's `build`/`args` templates put its value in.
pub const VALUE_PLACEHOLDER: &str = "{value}";
/// The most configurations a sweep may plan to time (`max_configurations`).
pub const CONFIGURATIONS_LIMIT: u32 = 1000;
/// `max_configurations` when the spec says nothing.
pub const DEFAULT_MAX_CONFIGURATIONS: u32 = 32;

/// A validated `[sweep]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    pub tunables: Vec<Tunable>,
    pub search: SearchStrategy,
    /// Budget: the most configurations timed, the shipped default included.
    pub max_configurations: u32,
    /// Budget: no configuration starts its timing after this many seconds of timing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_seconds: Option<f64>,
}

/// One knob of the fork.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tunable {
    pub name: String,
    pub how: TunableKind,
    /// Every value tried, the default among them, in the order written.
    pub values: Vec<String>,
    /// The value the fork ships.
    pub default: String,
}

/// How a value reaches the fork.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum TunableKind {
    /// Arguments appended to the first build command (`meson setup …`, `make …`), `{value}`
    /// filled: each distinct build configuration gets its own cached build directory.
    Build(Vec<String>),
    /// An environment variable of every timed run.
    Env(String),
    /// Arguments appended to every timed run's command line, `{value}` filled.
    Args(Vec<String>),
}

impl TunableKind {
    pub fn is_build(&self) -> bool {
        matches!(self, TunableKind::Build(_))
    }
}

/// How the configurations are chosen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SearchStrategy {
    /// The full grid when it fits `max_configurations`, else one knob at a time.
    #[default]
    Auto,
    /// Every combination, in spec order, up to the budget.
    Grid,
    /// The default, then each tunable's other values with every other tunable at its default.
    OneAtATime,
    /// The default, then combinations drawn at random (seeded by `[measure] seed`).
    Random,
}

impl SearchStrategy {
    pub fn as_str(self) -> &'static str {
        match self {
            SearchStrategy::Auto => "auto",
            SearchStrategy::Grid => "grid",
            SearchStrategy::OneAtATime => "one-at-a-time",
            SearchStrategy::Random => "random",
        }
    }
}

/// `[sweep]` as a person writes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSweep {
    pub(super) tunables: Vec<RawTunable>,
    #[serde(default)]
    pub(super) search: SearchStrategy,
    pub(super) max_configurations: Option<u32>,
    pub(super) max_seconds: Option<f64>,
}

/// `[[sweep.tunables]]`: exactly one of `build`, `env`, `args`; `values` or `range`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTunable {
    pub(super) name: String,
    pub(super) build: Option<Vec<String>>,
    pub(super) env: Option<String>,
    pub(super) args: Option<Vec<String>>,
    pub(super) values: Option<Vec<Scalar>>,
    pub(super) range: Option<RawRange>,
    pub(super) default: Scalar,
}

/// `range = { start = 1, end = 16, step = 1 }`: integers from start to end, both included.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRange {
    pub(super) start: i64,
    pub(super) end: i64,
    #[serde(default = "one")]
    pub(super) step: i64,
}

fn one() -> i64 {
    1
}

/// A value as TOML allows it to be written: `8`, `"8"`, `true`.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum Scalar {
    Int(i64),
    Bool(bool),
    Text(String),
}

impl Scalar {
    fn text(&self) -> String {
        match self {
            Scalar::Int(v) => v.to_string(),
            Scalar::Bool(v) => v.to_string(),
            Scalar::Text(v) => v.clone(),
        }
    }
}

/// The most values a range may expand to.
const RANGE_LIMIT: i64 = 1000;

impl RawSweep {
    pub(super) fn resolve(self) -> Result<SweepSpec, String> {
        let mut tunables = Vec::new();
        for raw in self.tunables {
            tunables.push(raw.resolve()?);
        }
        Ok(SweepSpec {
            tunables,
            search: self.search,
            max_configurations: self
                .max_configurations
                .unwrap_or(DEFAULT_MAX_CONFIGURATIONS),
            max_seconds: self.max_seconds,
        })
    }
}

impl RawTunable {
    fn resolve(self) -> Result<Tunable, String> {
        let name = self.name;
        let how = match (self.build, self.env, self.args) {
            (Some(build), None, None) => TunableKind::Build(build),
            (None, Some(env), None) => TunableKind::Env(env),
            (None, None, Some(args)) => TunableKind::Args(args),
            _ => {
                return Err(format!(
                    "[[sweep.tunables]] `{name}` needs exactly one of `build` (arguments of the first build command, e.g. [\"-D{name}={{value}}\"]), `env` (a variable name) or `args` (run arguments with {{value}})"
                ))
            }
        };
        let values = match (self.values, self.range) {
            (Some(values), None) => values.iter().map(Scalar::text).collect(),
            (None, Some(range)) => {
                if range.step <= 0 || range.end < range.start {
                    return Err(format!(
                        "[[sweep.tunables]] `{name}`: range needs start <= end and a step above 0, got {}..={} step {}",
                        range.start, range.end, range.step
                    ));
                }
                if (range.end - range.start) / range.step >= RANGE_LIMIT {
                    return Err(format!(
                        "[[sweep.tunables]] `{name}`: the range has more than {RANGE_LIMIT} values; raise `step`"
                    ));
                }
                (range.start..=range.end)
                    .step_by(range.step as usize)
                    .map(|v| v.to_string())
                    .collect()
            }
            _ => {
                return Err(format!(
                    "[[sweep.tunables]] `{name}` needs exactly one of `values = [...]` or `range = {{ start, end, step }}`"
                ))
            }
        };
        Ok(Tunable {
            name,
            how,
            values,
            default: self.default.text(),
        })
    }
}

impl SweepSpec {
    /// The invariants of a sweep (the JSON form is held to them too).
    pub(super) fn check(&self) -> Result<(), String> {
        if self.tunables.is_empty() {
            return Err("[sweep] has no [[sweep.tunables]]; add at least one knob to sweep".into());
        }
        let mut names = std::collections::BTreeSet::new();
        for tunable in &self.tunables {
            let name = &tunable.name;
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(format!(
                    "[[sweep.tunables]] name `{name}` must be letters, digits, `_` or `-`"
                ));
            }
            if !names.insert(name.as_str()) {
                return Err(format!(
                    "[[sweep.tunables]] `{name}` is defined twice; tunable names must be unique"
                ));
            }
            match &tunable.how {
                TunableKind::Build(args) | TunableKind::Args(args) => {
                    if !args.iter().any(|a| a.contains(VALUE_PLACEHOLDER)) {
                        return Err(format!(
                            "[[sweep.tunables]] `{name}`: no argument contains {VALUE_PLACEHOLDER}; write e.g. [\"-D{name}={VALUE_PLACEHOLDER}\"]"
                        ));
                    }
                }
                TunableKind::Env(var) => {
                    if var.is_empty() || var.contains('=') || var.contains('\0') {
                        return Err(format!(
                            "[[sweep.tunables]] `{name}`: env `{var}` is not a variable name"
                        ));
                    }
                }
            }
            if tunable.values.len() < 2 {
                return Err(format!(
                    "[[sweep.tunables]] `{name}` has {} value(s); a sweep needs the default and at least one other",
                    tunable.values.len()
                ));
            }
            let mut seen = std::collections::BTreeSet::new();
            if let Some(dup) = tunable.values.iter().find(|v| !seen.insert(v.as_str())) {
                return Err(format!(
                    "[[sweep.tunables]] `{name}`: value `{dup}` is listed twice"
                ));
            }
            if !tunable.values.contains(&tunable.default) {
                return Err(format!(
                    "[[sweep.tunables]] `{name}`: the default `{}` is not among its values ({}); add it, it is what every configuration is timed against",
                    tunable.default,
                    tunable.values.join(", ")
                ));
            }
        }
        if self.max_configurations < 2 || self.max_configurations > CONFIGURATIONS_LIMIT {
            return Err(format!(
                "[sweep] max_configurations = {} must be 2..={CONFIGURATIONS_LIMIT} (the default and at least one other)",
                self.max_configurations
            ));
        }
        if let Some(seconds) = self.max_seconds {
            if !(seconds.is_finite() && seconds > 0.0) {
                return Err(format!(
                    "[sweep] max_seconds = {seconds} must be a positive number of seconds"
                ));
            }
        }
        Ok(())
    }

    /// How many configurations the full grid has (saturating).
    pub fn grid_size(&self) -> u64 {
        self.tunables
            .iter()
            .fold(1u64, |n, t| n.saturating_mul(t.values.len() as u64))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::spec::JobSpec;

    const FORK_ONLY: &str = r#"
name = "s"
[fork]
path = "../fork"
[fork.build]
commands = [["make", "VARIANT=fork"]]
binary = "build/vmaf"
[command]
template = ["{binary}", "-r", "{reference}", "-d", "{distorted}", "-o", "{output}", "--json"]
[[fixtures]]
name = "f"
width = 64
height = 48
bitdepth = 8
pixel_format = "420"
frames = 2
reference = { generate = "moving-pattern", seed = 1 }
distorted = { generate = "moving-pattern-distorted", seed = 1 }
[[workloads]]
name = "float_ssim"
args = ["--feature", "float_ssim"]
"#;

    fn parse(sweep: &str) -> Result<JobSpec, String> {
        JobSpec::from_toml(
            &format!("{FORK_ONLY}{sweep}"),
            Path::new("s.toml"),
            Path::new("/specs"),
        )
        .map_err(|e| e.to_string())
    }

    const CHUNK: &str =
        "[sweep]\n[[sweep.tunables]]\nname = \"chunk\"\nbuild = [\"SSIM_CHUNK={value}\"]\n";

    #[test]
    fn a_sweep_spec_has_no_upstream_ranges_expand_and_it_survives_json() {
        let spec = parse(&format!(
            "{CHUNK}range = {{ start = 2, end = 8, step = 2 }}\ndefault = 4\n\n[[sweep.tunables]]\nname = \"stride\"\nenv = \"S\"\nvalues = [\"1\", 2]\ndefault = \"1\"\n"
        ))
        .unwrap();
        assert!(spec.is_sweep());
        assert_eq!(spec.upstream, spec.fork, "upstream mirrors the fork");
        let sweep = spec.sweep.as_ref().unwrap();
        assert_eq!(sweep.tunables[0].values, ["2", "4", "6", "8"]);
        assert_eq!(sweep.tunables[1].values, ["1", "2"]);
        assert_eq!(sweep.max_configurations, super::DEFAULT_MAX_CONFIGURATIONS);
        assert_eq!(
            spec.cell_count(),
            8,
            "progress counts the planned configurations"
        );
        assert_eq!(JobSpec::from_json(&spec.to_json()).unwrap(), spec);
    }

    #[test]
    fn sweep_mistakes_say_what_to_do() {
        let cases = [
            (format!("{CHUNK}values = [1, 8]\ndefault = 4\n"), "the default `4` is not among its values"),
            (format!("{CHUNK}values = [8]\ndefault = 8\n"), "needs the default and at least one other"),
            (format!("{CHUNK}values = [8, 8]\ndefault = 8\n"), "listed twice"),
            (format!("{CHUNK}values = [1, 8]\nrange = {{ start = 1, end = 2 }}\ndefault = 8\n"), "exactly one of `values"),
            (format!("{CHUNK}range = {{ start = 5, end = 1 }}\ndefault = 1\n"), "start <= end"),
            ("[sweep]\n[[sweep.tunables]]\nname = \"c\"\nbuild = [\"SSIM_CHUNK=8\"]\nvalues = [1, 8]\ndefault = 8\n".into(), "no argument contains {value}"),
            ("[sweep]\n[[sweep.tunables]]\nname = \"c\"\nenv = \"A\"\nargs = [\"{value}\"]\nvalues = [1, 8]\ndefault = 8\n".into(), "exactly one of `build`"),
            ("[sweep]\ntunables = []\n".into(), "has no [[sweep.tunables]]"),
            (format!("{CHUNK}values = [1, 8]\ndefault = 8\n[sweep.extra]\n"), "unknown field"),
            ("[sweep]\nmax_configurations = 1\n[[sweep.tunables]]\nname = \"c\"\nenv = \"C\"\nvalues = [1, 8]\ndefault = 8\n".to_string(), "max_configurations = 1 must be"),
            ("[sweep]\nmax_seconds = -1.0\n[[sweep.tunables]]\nname = \"c\"\nenv = \"C\"\nvalues = [1, 8]\ndefault = 8\n".to_string(), "max_seconds = -1 must be"),
        ];
        for (sweep, needle) in cases {
            let err = parse(&sweep).unwrap_err();
            assert!(err.contains(needle), "{needle:?} not in {err:?}");
        }
        let no_upstream = JobSpec::from_toml(FORK_ONLY, Path::new("s.toml"), Path::new("/"))
            .unwrap_err()
            .to_string();
        assert!(
            no_upstream.contains("no [upstream]") && no_upstream.contains("[sweep]"),
            "{no_upstream}"
        );
        let both = JobSpec::from_toml(
            &format!(
                "{FORK_ONLY}[upstream]\npath = \"../up\"\n{CHUNK}values = [1, 8]\ndefault = 8\n"
            ),
            Path::new("s.toml"),
            Path::new("/"),
        )
        .unwrap_err()
        .to_string();
        assert!(both.contains("remove [upstream]"), "{both}");
    }
}
