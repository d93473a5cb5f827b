//! The console's last word on a followed run (`local`, `submit --wait`, `watch`): the exit
//! code the process returns — after `--fail-on`, never the run's own code when a gate moved
//! it — what it means, and why: the cells that failed parity, the checks that failed, what
//! could not be carried out, what tripped a gate (issue 39: "status done; exit code 0" above
//! an exit 6, an exit 4 with no word on the finding).

use std::fmt::Write as _;

use abfleet_core::cell::CellParity;
use abfleet_core::exit;
use abfleet_core::finding::Severity;
use abfleet_core::report::Report;

/// Reasons listed at most; the report has the rest.
const MAX_REASONS: usize = 10;

/// `exit CODE: MEANING`, then the reasons, indented; `gated` are the lines of the `--fail-on`
/// gate that set `code`, if one did.
pub fn render(report: &Report, code: i32, gated: &[String]) -> String {
    let meaning = match code {
        exit::OK => "every cell passed the parity gate",
        exit::PARITY_FAILED => "the parity gate failed: a score moved beyond what the spec allows",
        exit::NOT_CARRIED_OUT => "the run could not be carried out",
        exit::TUNING_FAILED => "a retuning check failed",
        exit::SLOWER => "--fail-on slower: the fork is significantly slower on a cell",
        exit::REGRESSION => {
            "--fail-on regression: a cell regressed against the previous comparable run"
        }
        exit::STALE => "--fail-on stale: a sweep's default is beaten by another configuration",
        exit::CANCELLED => "the run was cancelled",
        _ => "see the report",
    };
    let reasons: Vec<String> = match code {
        exit::PARITY_FAILED => report
            .cells
            .iter()
            .filter(|cell| cell.parity == CellParity::Fail)
            .map(|cell| {
                let why = cell
                    .parity_failures
                    .first()
                    .map_or("parity failed", |failure| failure.message.as_str());
                format!("{}/{}: {why}", cell.fixture, cell.workload)
            })
            .collect(),
        exit::NOT_CARRIED_OUT | exit::CANCELLED => report.errors.clone(),
        exit::TUNING_FAILED => report
            .generations
            .iter()
            .flat_map(|generation| {
                generation
                    .findings
                    .iter()
                    .filter(|finding| finding.severity == Severity::Fail)
                    .map(move |finding| {
                        format!(
                            "{} {} {}: {}",
                            generation.key, finding.check, finding.subject, finding.verdict
                        )
                    })
            })
            .collect(),
        exit::SLOWER | exit::REGRESSION | exit::STALE => gated.to_vec(),
        _ => Vec::new(),
    };
    let mut out = format!("exit {code}: {meaning}\n");
    for reason in reasons.iter().take(MAX_REASONS) {
        let _ = writeln!(out, "  {reason}");
    }
    if reasons.len() > MAX_REASONS {
        let _ = writeln!(
            out,
            "  … and {} more (the report lists them all)",
            reasons.len() - MAX_REASONS
        );
    }
    crate::terminal_text::visible(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_reports::demo_drift as drift_report;

    #[test]
    fn the_last_word_states_the_gated_code_and_its_reasons() {
        let report = drift_report();
        let parity = render(&report, exit::PARITY_FAILED, &[]);
        assert!(
            parity.starts_with("exit 1: the parity gate failed"),
            "{parity}"
        );
        assert!(
            parity.contains("\n  pattern_320x180/float_ssim: "),
            "the failing cell is named: {parity}"
        );
        let gated = render(
            &report,
            exit::REGRESSION,
            &["tiny/psnr: the speedup shrank".to_string()],
        );
        assert_eq!(
            gated,
            "exit 6: --fail-on regression: a cell regressed against the previous comparable run\n  tiny/psnr: the speedup shrank\n"
        );
        assert_eq!(
            render(&report, exit::OK, &[]),
            "exit 0: every cell passed the parity gate\n"
        );
        // Exit 4 names the failing check, never a passing one.
        let mut retune = report.clone();
        retune.generations[0].findings = vec![
            abfleet_core::finding::Finding::new(
                "hip",
                "wave_size",
                "adm_dwt2@gfx1100",
                Severity::Fail,
                "runs wave32; the kernels are written for 64 lanes",
                "llvm-readelf",
            ),
            abfleet_core::finding::Finding::new(
                "hip",
                "registers",
                "psnr@gfx90a",
                Severity::Ok,
                "fine",
                "x",
            ),
        ];
        assert_eq!(
            render(&retune, exit::TUNING_FAILED, &[]),
            "exit 4: a retuning check failed\n  any wave_size adm_dwt2@gfx1100: runs wave32; the kernels are written for 64 lanes\n"
        );
    }
}
