//! Reports the CLI's unit tests read: real report.json files under `fixtures/reports/`.

use abfleet_core::report::Report;

/// A real run of the demo whose fork fails parity on `float_ssim`
/// (`abfleet local fixtures/jobs/demo-drift.toml`).
pub fn demo_drift() -> Report {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/reports/demo-drift.json"
    );
    Report::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
}
