//! A run's report, decided once: [`build`] takes what the store holds about the run and
//! what earlier runs of its spec left ([`ReportInputs`], every input gathered by the
//! coordinator first) and returns the report, assembled from the run's events, each
//! generation compared with the previous run and with the earlier comparable runs (changes,
//! regression flags, and the ratchet, which can fail parity), its exit codes decided last and
//! once (`RunOutcome::decide`: what assembly found, with the final parity), its recorded
//! bisects attached.
//! No store, clock or I/O: the report a run finishes with, the one served later, and one a
//! test makes from recorded inputs all come out of this one function.

use std::collections::BTreeMap;

use crate::bisect::BisectRecord;

use super::assemble::{assemble_owned, JobRecord, RunRecord};
use super::earlier::{attach_previous_run, EarlierRuns};
use super::history::{self, GenerationSnapshot};
use super::model::ANY_GENERATION;
use super::Report;

/// Everything a run's report is made of.
pub struct ReportInputs {
    pub run: RunRecord,
    /// Its jobs, each with the events of its latest attempt and the cells it kept.
    pub jobs: Vec<JobRecord>,
    /// What earlier runs of the spec name left, per generation key of this run
    /// ([`ReportInputs::generation_keys`]); a key without an entry had none.
    pub earlier: BTreeMap<String, EarlierRuns>,
    /// The bisects recorded with this run (`abfleet bisect RUN`), oldest first.
    pub bisects: Vec<BisectRecord>,
}

impl ReportInputs {
    /// A report from the run's own records only: no comparison, no bisect (what a finished
    /// run leaves for later runs is this report's).
    pub fn own(run: RunRecord, jobs: Vec<JobRecord>) -> ReportInputs {
        ReportInputs {
            run,
            jobs,
            earlier: BTreeMap::new(),
            bisects: Vec::new(),
        }
    }

    /// The generation keys the report will have a section for, which are the keys whose
    /// earlier runs it compares with: each job's generation (`any` for a run without
    /// targets), in first-seen order.
    pub fn generation_keys(jobs: &[JobRecord]) -> Vec<String> {
        let mut keys: Vec<String> = Vec::new();
        for job in jobs {
            let key = job.generation.as_deref().unwrap_or(ANY_GENERATION);
            if !keys.iter().any(|k| k == key) {
                keys.push(key.to_string());
            }
        }
        keys
    }
}

/// The report of a run, from its inputs.
pub fn build(inputs: ReportInputs) -> Report {
    let ReportInputs {
        run,
        jobs,
        mut earlier,
        bisects,
    } = inputs;
    let (mut report, outcome) = assemble_owned(&run, jobs);
    for section in &mut report.generations {
        if let Some(previous) = earlier
            .get_mut(&section.key)
            .and_then(|e| e.previous.take())
        {
            attach_previous_run(section, previous);
        }
    }
    for index in 0..report.generations.len() {
        let section = &report.generations[index];
        // A section that built nothing has nothing to compare.
        if section.toolchain.is_empty() {
            continue;
        }
        let now = GenerationSnapshot::of(&report, section);
        let comparable = earlier
            .get_mut(&section.key)
            .map(|e| e.take_comparable_on(now.hardware()))
            .unwrap_or_default();
        report.generations[index].since_previous = history::since_previous(&now, &comparable);
    }
    history::apply_ratchet(&mut report);
    report.cross_parity = super::cross_parity::cross_parity(&report);
    outcome.decide(&mut report);
    report.bisects.extend(bisects);
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::CellParity;
    use crate::report::earlier::{results_for_later_runs, PreviousResult};
    use crate::report::history::FlagKind;
    use crate::report::samples::sample_records;

    const FIRST: &str = "00000000-0000-0000-0000-000000000001";
    const SECOND: &str = "00000000-0000-0000-0000-000000000002";

    /// What the first run left, as the store would hand it to the second: the previous
    /// result and one comparable snapshot tagged with `hardware`.
    fn earlier_than_second(
        first: &Report,
        hardware: Option<String>,
    ) -> BTreeMap<String, EarlierRuns> {
        let result = results_for_later_runs(first).remove(0);
        let snapshot = result
            .snapshot
            .clone()
            .expect("a finished run leaves its snapshot");
        [(
            result.generation.clone(),
            EarlierRuns {
                previous: Some(PreviousResult {
                    run_id: FIRST.parse().unwrap(),
                    result,
                }),
                comparable: vec![(hardware, snapshot)],
            },
        )]
        .into()
    }

    #[test]
    fn a_report_is_built_from_recorded_inputs_alone_and_the_ratchet_decides_its_exit_code() {
        let (run, jobs) = sample_records(FIRST, 1_000, 0.900001);
        let first = build(ReportInputs::own(run, jobs));
        assert_eq!(first.exit_code, crate::exit::OK);
        let hardware = results_for_later_runs(&first)[0]
            .snapshot
            .as_ref()
            .and_then(|s| s.hardware().map(str::to_string));

        // The second run's float_ssim delta grew from 1e-6 to 3e-6: inside the spec's gate,
        // past the ratchet (the accepted delta plus half a printed unit).
        let (run, jobs) = sample_records(SECOND, 2_000, 0.900003);
        let second = build(ReportInputs {
            run,
            jobs,
            earlier: earlier_than_second(&first, hardware.clone()),
            bisects: Vec::new(),
        });
        let section = &second.generations[0];
        assert_eq!(section.previous_run.as_deref(), Some(FIRST));
        assert_eq!(section.previous_toolchain, first.generations[0].toolchain);
        let since = section
            .since_previous
            .as_ref()
            .expect("compared with the first run");
        assert_eq!(since.run_id, FIRST);
        assert!(
            since
                .flags
                .iter()
                .any(|f| f.kind == FlagKind::ParityGrowth && f.workload == "float_ssim"),
            "{:?}",
            since.flags
        );
        let ssim = second
            .cells
            .iter()
            .find(|c| c.workload == "float_ssim")
            .unwrap();
        assert_eq!(ssim.parity, CellParity::Fail);
        assert_eq!(second.exit_code, crate::exit::PARITY_FAILED);
        assert_eq!(
            second.generations[0].exit_code,
            crate::exit::PARITY_FAILED,
            "the section's exit code is decided after the ratchet too"
        );

        // The same records alone: nothing to compare, nothing failed.
        let (run, jobs) = sample_records(SECOND, 2_000, 0.900003);
        let alone = build(ReportInputs::own(run, jobs));
        assert_eq!(alone.exit_code, crate::exit::OK);
        assert!(alone.generations[0].since_previous.is_none());

        // A comparable run on other hardware is no baseline; the previous run's toolchain
        // and findings still are.
        let (run, jobs) = sample_records(SECOND, 2_000, 0.900003);
        let other = build(ReportInputs {
            run,
            jobs,
            earlier: earlier_than_second(&first, Some("another-sku".into())),
            bisects: Vec::new(),
        });
        assert_eq!(other.exit_code, crate::exit::OK);
        assert!(other.generations[0].since_previous.is_none());
        assert_eq!(other.generations[0].previous_run.as_deref(), Some(FIRST));
    }

    #[test]
    fn the_generation_keys_are_the_jobs_in_first_seen_order_any_for_none() {
        let (_, jobs) = sample_records(FIRST, 1_000, 0.9);
        let job = |generation: Option<&str>| JobRecord {
            generation: generation.map(str::to_string),
            ..jobs[0].clone()
        };
        let keys = ReportInputs::generation_keys(&[
            job(Some("gpu/cuda/sm_90")),
            job(None),
            job(Some("gpu/cuda/sm_90")),
            job(Some("cpu/x86-64-v4/zen4")),
        ]);
        assert_eq!(keys, ["gpu/cuda/sm_90", "any", "cpu/x86-64-v4/zen4"]);
    }

    /// An emulated generation's cells keep their scores and parity and lose every timing,
    /// decided from the key alone: no speedup, verdict, interval, median or geomean, so
    /// `--fail-on slower` and the regression flags have nothing to trip on. The same
    /// records on a real key are timed (the control).
    #[test]
    fn an_emulated_generation_is_never_timed_whatever_its_cells_say() {
        use crate::fail_on::FailOn;
        let key = "cpu/arm/neoverse-v2/emulated";
        let (run, mut jobs) = sample_records(FIRST, 1_000, 0.9);
        for job in &mut jobs {
            job.generation = Some(key.to_string());
        }
        let emulated = build(ReportInputs::own(run, jobs));
        let (run, mut jobs) = sample_records(FIRST, 1_000, 0.9);
        for job in &mut jobs {
            job.generation = Some("cpu/arm/neoverse-v2".to_string());
        }
        let real = build(ReportInputs::own(run, jobs));
        assert!(real
            .cells
            .iter()
            .any(|c| c.verdict.is_some() && c.speedup.is_some()));
        assert!(real.geomean_speedup.is_some());

        assert_eq!(emulated.cells.len(), real.cells.len());
        for (cell, timed) in emulated.cells.iter().zip(&real.cells) {
            assert_eq!(cell.parity, timed.parity, "{}", cell.workload);
            assert_eq!(cell.score_delta, timed.score_delta, "{}", cell.workload);
            assert_eq!(cell.speedup, None, "{}", cell.workload);
            assert_eq!(cell.verdict, None, "{}", cell.workload);
            assert_eq!(cell.speedup_ci95, None, "{}", cell.workload);
            assert_eq!(cell.fork.median_time, None, "{}", cell.workload);
            assert!(!cell.startup_dominated, "{}", cell.workload);
            assert_eq!(
                cell.not_timed.as_deref(),
                Some(crate::generation::EMULATED_NOT_TIMED)
            );
            // The raw times stay for inspection.
            assert_eq!(cell.fork.times, timed.fork.times, "{}", cell.workload);
        }
        let section = &emulated.generations[0];
        assert_eq!(section.key, key);
        assert!(section.emulator.is_some());
        assert_eq!(section.geomean_speedup, None);
        assert!(!section.startup_bound);
        assert!(FailOn::Slower.findings(&emulated).is_empty());
        assert!(FailOn::Regression.findings(&emulated).is_empty());
        assert_eq!(emulated.exit_code, real.exit_code);
    }
}
