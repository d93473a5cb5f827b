//! The JSON form of a validated spec: what `abfleet submit` sends, the coordinator stores
//! and offers, and an agent reads. It has the shape [`JobSpec`] serializes to (so every spec
//! stored before this form existed still reads), and reading it runs the same invariant
//! checks as the TOML form (`validate::check`): a hand-made or stale document with
//! `runs = 0` or a duplicate workload is refused with a message naming the key, instead of
//! becoming a `JobSpec` that no validation saw. Only the TOML form's own work (choosing
//! sources, filling recipe defaults, resolving relative paths) is not repeated.

use serde::Deserialize;

use super::backends::BackendsSpec;
use super::error::SpecError;
use super::model::{
    CommandSpec, Fanout, FixtureSpec, JobSpec, MeasureSpec, ParitySpec, SideSpec, TargetSpec,
    WorkloadSpec,
};
use super::validate::check;

/// [`JobSpec`]'s fields as they arrive, before the checks; `JobSpec`'s `Deserialize` goes
/// through this (`#[serde(try_from)]`). The defaults are those older specs relied on.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct JobSpecJson {
    name: String,
    #[serde(default)]
    description: String,
    upstream: SideSpec,
    fork: SideSpec,
    command: CommandSpec,
    fixtures: Vec<FixtureSpec>,
    workloads: Vec<WorkloadSpec>,
    measure: MeasureSpec,
    #[serde(default)]
    parity: ParitySpec,
    #[serde(default)]
    targets: Option<TargetSpec>,
    #[serde(default)]
    backends: BackendsSpec,
    #[serde(default)]
    sweep: Option<super::sweep::SweepSpec>,
}

impl TryFrom<JobSpecJson> for JobSpec {
    type Error = SpecError;

    fn try_from(json: JobSpecJson) -> Result<JobSpec, SpecError> {
        // Destructured, so a field added to `JobSpec` cannot be forgotten here.
        let JobSpecJson {
            name,
            description,
            upstream,
            fork,
            command,
            fixtures,
            workloads,
            measure,
            parity,
            targets,
            backends,
            sweep,
        } = json;
        check(JobSpec {
            name,
            description,
            upstream,
            fork,
            command,
            fixtures,
            workloads,
            measure,
            parity,
            targets,
            backends,
            sweep,
        })
        .map_err(|message| SpecError::Json { message })
    }
}

/// A validated spec's JSON form, carried as text where nobody needs it decoded: the
/// coordinator offers a run's spec as the store kept it (validated when the run was
/// submitted) instead of parsing and serialising it again per offer; the agent reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecJson(String);

impl SpecJson {
    /// Text the coordinator's store kept for a run: written by [`JobSpec::to_json`] of a spec
    /// validation saw when the run was submitted.
    pub fn stored(text: String) -> SpecJson {
        SpecJson(text)
    }

    pub fn into_string(self) -> String {
        self.0
    }

    /// The spec again, read through the same checks as any JSON form.
    pub fn decode(&self) -> Result<JobSpec, serde_json::Error> {
        JobSpec::from_json(&self.0)
    }
}

impl From<&JobSpec> for SpecJson {
    fn from(spec: &JobSpec) -> SpecJson {
        SpecJson(spec.to_json())
    }
}

impl JobSpec {
    /// Reads the JSON form an agent or the coordinator receives, checking it as the TOML form
    /// was checked; the error names the broken key.
    pub fn from_json(text: &str) -> Result<JobSpec, serde_json::Error> {
        serde_json::from_str(text)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a job spec always serialises")
    }

    /// This spec run on exactly one generation key of one backend (its fan-out kept), read
    /// back through validation: a run a trigger narrows to the generation that asked.
    pub fn narrowed_to(self, key: &str, backend: &str) -> Result<JobSpec, String> {
        let mut narrowed = self;
        let fanout = narrowed
            .targets
            .as_ref()
            .map_or(Fanout::PerGeneration, |t| t.fanout);
        narrowed.targets = Some(TargetSpec {
            backends: vec![backend.to_string()],
            generations: vec![key.to_string()],
            vendors: vec!["*".to_string()],
            fanout,
        });
        JobSpec::from_json(&narrowed.to_json()).map_err(|err| format!("narrowed to `{key}`: {err}"))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::{json, Value};

    use super::*;

    #[test]
    fn a_spec_is_narrowed_to_one_generation_and_read_back_through_validation() {
        let spec = JobSpec::from_toml(
            concat!(
            "name = \"m\"\n[upstream]\npath = \"/u\"\n[fork]\npath = \"/f\"\n",
            "[build]\ncommands = [[\"make\"]]\nbinary = \"build/vmaf\"\n",
            "[command]\ntemplate = [\"{binary}\", \"-o\", \"{output}\"]\n",
            "[[fixtures]]\nname = \"t\"\nwidth = 16\nheight = 16\nbitdepth = 8\npixel_format = \"420\"\nframes = 1\n",
            "reference = { generate = \"moving-pattern\", seed = 1 }\ndistorted = { generate = \"moving-pattern-distorted\", seed = 1 }\n",
            "[[workloads]]\nname = \"psnr\"\nargs = [\"--feature\", \"psnr\"]\n",
            "[targets]\nbackends = [\"cpu\", \"cuda\"]\ngenerations = [\"*\"]\nfanout = \"per-agent\"\n",
            ),
            std::path::Path::new("m.toml"),
            std::path::Path::new("/"),
        )
        .unwrap();
        let narrowed = spec.narrowed_to("cuda/sm_90", "cuda").unwrap();
        let targets = narrowed.targets.unwrap();
        assert_eq!(targets.generations, ["cuda/sm_90"]);
        assert_eq!(targets.backends, ["cuda"]);
        assert_eq!(
            targets.fanout,
            Fanout::PerAgent,
            "the spec's fan-out is kept"
        );
    }

    fn shipped(name: &str) -> JobSpec {
        let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/jobs"));
        JobSpec::load(&dir.join(name)).unwrap()
    }

    /// The demo spec's JSON with one change, read back as a `JobSpec`.
    fn read_changed(change: impl FnOnce(&mut Value)) -> Result<JobSpec, serde_json::Error> {
        let mut value: Value = serde_json::from_str(&shipped("demo.toml").to_json()).unwrap();
        change(&mut value);
        serde_json::from_str::<JobSpec>(&value.to_string())
    }

    #[test]
    fn a_json_spec_that_breaks_an_invariant_is_refused_naming_the_key() {
        // (what the error says, the JSON pointers changed and their new values)
        let cases: Vec<(&str, Vec<(&str, Value)>)> =
            vec![
            ("[measure] runs = 0 is too few", vec![("/measure/runs", json!(0))]),
            (
                "[measure] max_runs = 0 is below runs = 5",
                vec![("/measure/max_runs", json!(0))],
            ),
            (
                "[measure] timeout_seconds must be a positive number",
                vec![("/measure/timeout_seconds", json!(-1.0))],
            ),
            (
                "[measure] max_score_delta must be a non-negative number",
                vec![("/measure/max_score_delta", json!(-1e-5))],
            ),
            (
                "[measure] warmup must be at least 1",
                vec![("/measure/warmup", json!(0))],
            ),
            (
                "workload `psnr` is defined twice",
                vec![("/workloads/1/name", json!("psnr"))],
            ),
            (
                "[measure] runs = 10001 is above the limit of 10000",
                vec![
                    ("/measure/runs", json!(10_001)),
                    ("/measure/max_runs", json!(10_001)),
                ],
            ),
            (
                "[measure] max_runs = 10001 is above the limit of 10000",
                vec![("/measure/max_runs", json!(10_001))],
            ),
            (
                "[measure] warmup = 101 is above the limit of 100",
                vec![("/measure/warmup", json!(101))],
            ),
            (
                "[measure] timeout_seconds = 691200 is above the limit of 604800 seconds (7 days)",
                vec![("/measure/timeout_seconds", json!(8.0 * 24.0 * 3600.0))],
            ),
            (
                "[parity.allow.vmaf] needs a reason",
                vec![(
                    "/parity/allow",
                    json!({ "vmaf": { "max_delta": 1e-4, "reason": " " } }),
                )],
            ),
            ("no [[fixtures]]", vec![("/fixtures", json!([]))]),
            (
                "[backends.cpu] fixture `gone` is not a [[fixtures]] name",
                vec![("/backends/cpu/fixture", json!("gone"))],
            ),
            (
                "[upstream] build has an empty command",
                vec![("/upstream/build/commands", json!([[]]))],
            ),
            (
                "sha256 `ABC` is not 64 hex digits",
                vec![("/fixtures/0/reference/sha256", json!("ABC"))],
            ),
        ];
        for (expected, changes) in cases {
            let err = read_changed(|v| {
                for (pointer, value) in changes {
                    *v.pointer_mut(pointer)
                        .unwrap_or_else(|| panic!("{pointer}")) = value;
                }
            })
            .unwrap_err()
            .to_string();
            assert!(err.contains(expected), "expected `{expected}` in: {err}");
        }
        // `from_json` is the same reader.
        let mut value: Value = serde_json::from_str(&shipped("demo.toml").to_json()).unwrap();
        value["measure"]["runs"] = json!(0);
        let err = JobSpec::from_json(&value.to_string()).unwrap_err();
        assert!(err.to_string().contains("[measure] runs = 0"), "{err}");
    }

    #[test]
    fn the_json_form_still_refuses_unknown_keys_and_a_nan_gate() {
        let err = read_changed(|v| v["measure"]["runz"] = json!(3)).unwrap_err();
        assert!(err.to_string().contains("unknown field `runz`"), "{err}");
        let err = read_changed(|v| v["colour"] = json!("blue")).unwrap_err();
        assert!(err.to_string().contains("unknown field `colour`"), "{err}");
        // JSON has no NaN: serde_json writes one as `null`, which is not a number.
        let err = read_changed(|v| v["measure"]["max_score_delta"] = Value::Null).unwrap_err();
        assert!(err.to_string().contains("expected f64"), "{err}");
    }

    #[test]
    fn a_valid_spec_round_trips_toml_to_json_and_back_unchanged() {
        for name in ["demo.toml", "demo-drift.toml", "vmaf-upstream-ab.toml"] {
            let spec = shipped(name);
            let json = spec.to_json();
            let back: JobSpec = serde_json::from_str(&json).unwrap();
            assert_eq!(back, spec, "{name}");
            assert_eq!(back.to_json(), json, "{name}: the JSON shape is stable");
        }
    }

    #[test]
    fn the_serialized_shape_is_the_one_stored_specs_have() {
        let value: Value = serde_json::from_str(&shipped("demo.toml").to_json()).unwrap();
        let keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut expected = [
            "name",
            "description",
            "upstream",
            "fork",
            "command",
            "fixtures",
            "workloads",
            "measure",
            "parity",
            "targets",
            "backends",
        ];
        expected.sort_unstable();
        let mut keys = keys;
        keys.sort_unstable();
        assert_eq!(keys, expected);
        // A spec stored before `description`, `parity`, `targets` and `backends` were
        // written still reads, with their defaults.
        let spec = read_changed(|v| {
            let object = v.as_object_mut().unwrap();
            for key in ["description", "parity", "targets", "backends"] {
                object.remove(key);
            }
        })
        .unwrap();
        assert!(spec.description.is_empty() && spec.targets.is_none());
        assert!(spec.backends.is_empty() && spec.parity == ParitySpec::default());
        // Without `[backends]` the key is left out, as before.
        let value: Value = serde_json::from_str(&shipped("demo-drift.toml").to_json()).unwrap();
        assert!(value.get("backends").is_none());
    }
}
