//! `abfleet calibrate`: an A/A run on this host. The fork's build runs as both sides, so
//! every verdict other than `same`/`unsure` is a false positive; the intervals' half-widths
//! say how small a difference the host can resolve. Each trial is a cell at the spec's
//! adaptive bounds (`runs` to `max_runs` pairs), as a normal run takes them, so the rate is
//! that of the procedure the spec's runs use, optional stopping included.

use std::path::{Path, PathBuf};

use abfleet_core::calibration::{Calibration, FILE_NAME};
use abfleet_core::paired;
use abfleet_core::report::Report;
use abfleet_core::spec::{JobSpec, WorkloadSpec};
use abfleet_core::stats;

use super::local;
use crate::cli::Trigger;
use crate::failure::{Classify, Failure};

pub async fn run(
    spec_path: &Path,
    trials: u32,
    out: Option<PathBuf>,
    data_dir: &Path,
    work_dir: &Path,
) -> Result<i32, Failure> {
    if trials < 5 {
        return Err(Failure::usage(anyhow::anyhow!(
            "--trials {trials} is too few to estimate a false-positive rate; use 20 or more"
        )));
    }
    let spec = JobSpec::load(spec_path).usage()?;
    let needed = paired::min_pairs_for_a_verdict();
    if spec.measure.max_runs < needed {
        return Err(Failure::usage(anyhow::anyhow!(
            "[measure] max_runs = {} in {} is too few to calibrate: with fewer than {needed} pairs the signed-rank test never reaches p < 0.05, so no trial could be a false positive and the rate would be 0% by construction; raise `[measure] max_runs` to {needed} or more (the default is 20)",
            spec.measure.max_runs,
            spec_path.display()
        )));
    }
    let spec = aa_spec(spec, trials);
    let out = out.unwrap_or_else(|| {
        Path::new("abfleet-out").join(format!("calibration-{}", spec.measure.seed))
    });
    let code = local::run_spec(
        spec.clone(),
        &spec_path.display().to_string(),
        Some(out.clone()),
        data_dir,
        work_dir,
        &[],
        local::RunIntent {
            trigger: Trigger::Manual,
            fail_on: &[],
        },
    )
    .await?;
    let report_text = std::fs::read_to_string(out.join("report.json")).infra()?;
    let report = Report::from_json(&report_text).infra()?;
    let Some(calibration) = calibration(&report, &spec) else {
        return Err(Failure::infra(anyhow::anyhow!(
            "the A/A run gave no usable cells (exit {code}); see {}",
            out.join("report.md").display()
        )));
    };
    let text = serde_json::to_string_pretty(&calibration).infra()?;
    std::fs::write(work_dir.join(FILE_NAME), &text)
        .and_then(|()| std::fs::write(out.join(FILE_NAME), &text))
        .map_err(|err| anyhow::anyhow!("failed to save the calibration: {err}"))
        .infra()?;
    println!(
        "A/A calibration of {}: {} trials of {}–{} pairs (median {}), false-positive rate {:.1}% (nominal ≈5%), resolves ±{:.1}%",
        calibration.hostname,
        calibration.trials,
        calibration.pairs_min.unwrap_or_default(),
        calibration.pairs_max.unwrap_or_default(),
        calibration.pairs,
        calibration.false_positive_rate * 100.0,
        calibration.resolution * 100.0
    );
    println!(
        "saved to {} (reports from this work dir show it)",
        work_dir.join(FILE_NAME).display()
    );
    Ok(0)
}

/// The fork against itself: its first fixture, its first workload repeated as trials, at
/// the spec's own `[measure]` bounds. A sweep spec calibrates its fork as built by default
/// (its tunables play no part).
fn aa_spec(mut spec: JobSpec, trials: u32) -> JobSpec {
    spec.name = format!("{}-calibration", spec.name);
    spec.upstream = spec.fork.clone();
    spec.sweep = None;
    // A/B cells only: the retuning checks and the dispatch sweep are no part of an A/A
    // trial (and `[backends.cpu]` may name a fixture the trials leave out).
    spec.backends = Default::default();
    spec.fixtures.truncate(1);
    let workload = spec.workloads[0].clone();
    spec.workloads = (1..=trials)
        .map(|trial| WorkloadSpec {
            name: format!("{}#{trial}", workload.name),
            args: workload.args.clone(),
            expect_metrics: workload.expect_metrics.clone(),
        })
        .collect();
    spec
}

fn calibration(report: &Report, spec: &JobSpec) -> Option<Calibration> {
    let analysed: Vec<&abfleet_core::cell::CellResult> = report
        .cells
        .iter()
        .filter(|c| c.verdict.is_some())
        .collect();
    let verdicts: Vec<paired::Verdict> = analysed.iter().filter_map(|c| c.verdict).collect();
    let pairs: Vec<u32> = analysed.iter().map(|c| c.pairs).collect();
    let half_widths: Vec<f64> = report
        .cells
        .iter()
        .filter_map(|c| Some((c.speedup_ci95?, c.speedup?)))
        .map(|([lo, hi], speedup)| (hi - lo) / 2.0 / speedup)
        .collect();
    let resolution = stats::median(&half_widths)?;
    Some(Calibration {
        hostname: report
            .host
            .as_ref()
            .map_or("unknown".into(), |h| h.hostname.clone()),
        date: report.date.clone(),
        pairs: stats::median(&pairs.iter().map(|&p| f64::from(p)).collect::<Vec<_>>())?,
        pairs_min: pairs.iter().copied().min(),
        pairs_max: pairs.iter().copied().max(),
        trials: verdicts.len() as u32,
        false_positive_rate: paired::false_positive_rate(&verdicts),
        resolution,
        verdicts,
        fixture: spec.fixtures[0].name.clone(),
        workload: spec.workloads[0].name.trim_end_matches("#1").to_string(),
        seed: spec.measure.seed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aa_spec_keeps_the_specs_adaptive_bounds() {
        let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/jobs"));
        let spec = JobSpec::load(&dir.join("demo.toml")).unwrap();
        let (runs, max_runs) = (spec.measure.runs, spec.measure.max_runs);
        assert!(runs < max_runs, "demo.toml is adaptive: {runs}..{max_runs}");
        let aa = aa_spec(spec.clone(), 7);
        assert_eq!(aa.measure, spec.measure);
        assert_eq!((aa.measure.runs, aa.measure.max_runs), (runs, max_runs));
        assert_eq!(aa.upstream, aa.fork);
        assert_eq!(aa.fixtures.len(), 1);
        assert_eq!(aa.workloads.len(), 7);
        // What the coordinator checks a submitted spec with (issue 39: `[backends.cpu]` named
        // the demo's second fixture, which the trials leave out, and the run was refused).
        let json = serde_json::to_string(&aa).unwrap();
        serde_json::from_str::<JobSpec>(&json).expect("the A/A spec is a valid spec");
        assert_eq!(
            aa.workloads[6].name,
            format!("{}#7", spec.workloads[0].name)
        );
    }
}
