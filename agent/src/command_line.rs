//! A cell's command line: the spec's template with its placeholders filled
//! (`{binary}`, `{reference}`, `{distorted}`, `{width}`, `{height}`, `{bitdepth}`,
//! `{pixel_format}`, `{threads}`, `{output}`), then the workload's arguments. Pure.

use std::path::Path;

use abfleet_core::spec::{FixtureSpec, JobSpec, WorkloadSpec};

use crate::fixtures::PreparedFixture;

/// The command line of one cell for `binary`: the template with its placeholders filled,
/// then the workload's arguments.
pub(crate) fn cell_command_line(
    spec: &JobSpec,
    binary: &Path,
    fixture: &FixtureSpec,
    paths: &PreparedFixture,
    workload: &WorkloadSpec,
    output: &Path,
) -> Vec<String> {
    let values = [
        ("binary", binary.display().to_string()),
        ("reference", paths.reference.display().to_string()),
        ("distorted", paths.distorted.display().to_string()),
        ("width", fixture.width.to_string()),
        ("height", fixture.height.to_string()),
        ("bitdepth", fixture.bitdepth.to_string()),
        ("pixel_format", fixture.pixel_format.as_str().to_string()),
        ("threads", spec.measure.threads.to_string()),
        ("output", output.display().to_string()),
    ];
    let mut argv: Vec<String> = spec
        .command
        .template
        .iter()
        .map(|arg| {
            values.iter().fold(arg.clone(), |text, (name, value)| {
                text.replace(&format!("{{{name}}}"), value)
            })
        })
        .collect();
    argv.extend(workload.args.iter().cloned());
    argv
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn spec() -> JobSpec {
        let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/jobs"));
        JobSpec::load(&dir.join("vmaf-upstream-ab.toml")).unwrap()
    }

    #[test]
    fn the_template_is_filled_and_the_workload_arguments_follow() {
        let spec = spec();
        let paths = PreparedFixture {
            reference: PathBuf::from("/fx/ref.yuv"),
            distorted: PathBuf::from("/fx/dist.yuv"),
        };
        let workload = &spec.workloads[1];
        let argv = cell_command_line(
            &spec,
            Path::new("/b/build/tools/vmaf"),
            &spec.fixtures[0],
            &paths,
            workload,
            Path::new("/out/fork-run0.json"),
        );
        assert_eq!(argv[0], "/b/build/tools/vmaf");
        let after = |flag: &str| {
            let at = argv.iter().position(|a| a == flag).unwrap();
            argv[at + 1].as_str()
        };
        assert_eq!(after("--reference"), "/fx/ref.yuv");
        assert_eq!(after("--distorted"), "/fx/dist.yuv");
        assert_eq!(after("--width"), "1920");
        assert_eq!(after("--height"), "1080");
        assert_eq!(after("--pixel_format"), "420");
        assert_eq!(after("--bitdepth"), "8");
        assert_eq!(after("--threads"), "1");
        assert_eq!(after("--output"), "/out/fork-run0.json");
        assert!(argv.iter().all(|a| !a.contains('{')), "{argv:?}");
        assert_eq!(argv[argv.len() - workload.args.len()..], workload.args[..]);
        assert_eq!(
            workload.args,
            ["--no_prediction", "--feature", "float_ssim"],
            "a per-feature row times the feature alone"
        );
    }
}
