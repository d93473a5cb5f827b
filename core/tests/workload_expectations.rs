//! A side that exits 0 but did not run the requested feature has failed: checked on real
//! outputs of the fork's `vmaf` (fixtures/vmaf-samples).

use abfleet_core::output;
use abfleet_core::spec::{OutputFormat, WorkloadSpec};

fn sample(name: &str) -> abfleet_core::scores::Scores {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/vmaf-samples/");
    let text = std::fs::read_to_string(format!("{path}{name}")).unwrap();
    output::parse(OutputFormat::Json, &text).unwrap()
}

fn workload(args: &[&str], expect: &[&str]) -> WorkloadSpec {
    WorkloadSpec {
        name: "w".into(),
        args: args.iter().map(|a| a.to_string()).collect(),
        expect_metrics: expect.iter().map(|a| a.to_string()).collect(),
    }
}

#[test]
fn a_feature_row_whose_output_holds_its_metrics_ran() {
    let ssim = workload(&["--no_prediction", "--feature", "float_ssim"], &[]);
    assert_eq!(ssim.expected_features(), ["float_ssim"]);
    assert_eq!(
        ssim.missing_expected(&sample("fork_feature_float_ssim_1080p.json")),
        None
    );
    let hvs = workload(&["--feature=psnr_hvs:enable_chroma=true"], &[]);
    assert_eq!(hvs.expected_features(), ["psnr_hvs"]);
    assert_eq!(
        hvs.missing_expected(&sample("fork_feature_psnr_hvs_1080p.json")),
        None
    );
}

/// The real trap: `--feature lpips` without its model and without `--no_prediction` exits 0
/// and still writes frames, of the default model's metrics only.
#[test]
fn frames_of_the_model_alone_do_not_count_as_the_feature() {
    let lpips = workload(&["--feature", "lpips"], &[]);
    let model_only = sample("fork_model_psnr_576x324.json");
    let reason = lpips
        .missing_expected(&model_only)
        .expect("a side without lpips metrics failed");
    assert!(reason.contains("no metric of feature `lpips`"), "{reason}");
    assert!(
        reason.contains("integer_adm2"),
        "it lists what was written: {reason}"
    );
    assert!(
        reason.contains("expect_metrics"),
        "it says what to do: {reason}"
    );
}

#[test]
fn declared_expectations_replace_the_name_rule_and_a_model_row_is_not_checked() {
    let renamed = workload(&["--feature", "float_ssim"], &["ssim_score"]);
    assert!(renamed
        .missing_expected(&sample("fork_feature_float_ssim_1080p.json"))
        .is_some());
    let model = workload(&["--model", "version=vmaf_v0.6.1"], &[]);
    assert_eq!(
        model.missing_expected(&sample("fork_model_psnr_576x324.json")),
        None
    );
}
