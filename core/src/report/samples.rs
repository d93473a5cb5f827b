//! Fixed runs for the tests of whatever renders or compares reports (here and in
//! `abfleet-render`): a run's records written out as an agent sends them and the report
//! assembled from them, and the snapshots the comparison with earlier runs reads. Compiled
//! for core's tests, and with feature `samples` for other crates' tests only (their
//! dev-dependency); no product build has it.

use std::collections::BTreeMap;

use crate::bisect::{Bisection, Commit, Decision, Step};
use crate::cell::{CellInput, CellParity, CellResult, SideMeasurement, SideStatus};
use crate::events::{BuildRecord, JobEventPayload, JobOutcome, Side};
use crate::inventory::Inventory;
use crate::lifecycle::{JobState, RunState};
use crate::paired::Verdict;
use crate::report::history::{CellSummary, GenerationSnapshot};
use crate::report::{JobRecord, Report, RunRecord};
use crate::scores::{FrameScores, Scores};
use crate::spec::{JobSpec, SourceSpec};

/// The report `build` makes of copies of `run` and `jobs`, with no earlier run to compare.
pub fn assembled(run: &RunRecord, jobs: &[JobRecord]) -> Report {
    crate::report::build(crate::report::ReportInputs::own(run.clone(), jobs.to_vec()))
}

/// Run `run_id` of `spec`, started by `trigger` at `created_ms`, done.
pub fn done_run(run_id: &str, trigger: &str, created_ms: i64, spec: JobSpec) -> RunRecord {
    RunRecord {
        run_id: run_id.into(),
        trigger: trigger.into(),
        trigger_note: None,
        created_ms,
        state: RunState::Done,
        spec,
        error: None,
    }
}

/// Job `job_id` (for `generation`, `None`: any), done on its first attempt by agent `a`,
/// which sent `events`.
pub fn done_job(job_id: &str, generation: Option<&str>, events: Vec<JobEventPayload>) -> JobRecord {
    JobRecord {
        job_id: job_id.into(),
        generation: generation.map(str::to_string),
        state: JobState::Done,
        attempt: 1,
        agent_id: Some("a".into()),
        error: None,
        events,
        attempts: Vec::new(),
        kept_cells: Vec::new(),
    }
}

fn side(times: &[f64], metrics: &[(&str, f64)]) -> SideMeasurement {
    SideMeasurement {
        status: SideStatus::Ok,
        times: times.to_vec(),
        cpu_times: times.to_vec(),
        warmup_times: vec![times[0]],
        scores: Some(Scores {
            frames: (0..2)
                .map(|i| FrameScores {
                    frame_num: i,
                    metrics: metrics
                        .iter()
                        .map(|(k, v)| (k.to_string(), *v + i as f64))
                        .collect(),
                })
                .collect(),
            ..Scores::default()
        }),
        returncode: Some(0),
        error: None,
        stderr_tail: None,
        command: None,
    }
}

fn build(side: Side) -> JobEventPayload {
    JobEventPayload::Build(BuildRecord {
        side,
        status: crate::events::BuildStatus::Built,
        cache_key: "k".into(),
        toolchain: "cc (Debian 12.2.0-14) 12.2.0".into(),
        seconds: 1.5,
        log_path: "/w/build.log".into(),
        log_tail: None,
        error: None,
    })
}

/// A fixed run of four cells (one fork-only), as the renderers' tests use it.
pub fn sample_report() -> Report {
    let (run, jobs) = sample_records(
        "00000000-0000-0000-0000-000000000001",
        1_788_365_205_000,
        0.900001,
    );
    assembled(&run, &jobs)
}

/// The host the sample runs ran on: `bench-1`, a two-core AMD EPYC under Debian 12.
pub fn bench_host() -> Inventory {
    Inventory {
        hostname: "bench-1".into(),
        os: "Debian GNU/Linux 12".into(),
        kernel: "6.1.0".into(),
        arch: "x86_64".into(),
        cpu_model: "AMD EPYC 9R14".into(),
        physical_cores: 2,
        logical_cores: 2,
        memory_bytes: 24 << 30,
        generations: Vec::new(),
        hardware: None,
    }
}

/// The records `sample_report` is assembled from: run `run_id` created at `created_ms`,
/// its fork's `float_ssim` score `fork_ssim` (upstream's is 0.9). Long on purpose: a
/// fixture, its events written out as an agent sends them.
pub fn sample_records(
    run_id: &str,
    created_ms: i64,
    fork_ssim: f64,
) -> (RunRecord, Vec<JobRecord>) {
    let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/jobs"));
    let mut spec = JobSpec::load(&dir.join("demo.toml")).unwrap();
    spec.upstream.source = SourceSpec::Git {
        url: "https://example.invalid/upstream.git".into(),
        rev: "v1.0.0".into(),
    };
    spec.fork.source = SourceSpec::Git {
        url: "https://example.invalid/fork.git".into(),
        rev: "perf".into(),
    };
    spec.fixtures.truncate(1);
    let cell = |index: u32, workload: &str, upstream: SideMeasurement, fork: SideMeasurement| {
        JobEventPayload::Cell(Box::new(CellResult::evaluate(
            CellInput {
                index,
                fixture: "pattern_320x180".into(),
                workload: workload.into(),
                upstream,
                fork,
                load_avg_1min: [0.25, 0.5],
                idle_cores: 1.0,
                host_flags: Vec::new(),
                seed: 7 + u64::from(index),
                run_order: Vec::new(),
                stop_reason: crate::paired::StopReason::NotAdaptive,
                overhead_seconds: None,
            },
            &spec,
        )))
    };
    let absent = SideMeasurement {
        status: SideStatus::Absent,
        returncode: Some(255),
        ..SideMeasurement::unavailable("rejected")
    };
    let events = vec![
        JobEventPayload::Started {
            calibration: None,
            host: bench_host(),
        },
        JobEventPayload::SourceResolved {
            side: Side::Upstream,
            source: spec.upstream.source.clone(),
            resolved: "1111111111111111111111111111111111111111".into(),
        },
        JobEventPayload::SourceResolved {
            side: Side::Fork,
            source: spec.fork.source.clone(),
            resolved: "257ac1ec4aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".into(),
        },
        build(Side::Upstream),
        build(Side::Fork),
        cell(
            0,
            "psnr",
            side(&[0.010, 0.011, 0.012], &[("psnr_y", 30.0)]),
            side(&[0.010, 0.010, 0.011], &[("psnr_y", 30.0)]),
        ),
        cell(
            1,
            "float_ssim",
            side(&[2.4, 2.5, 2.6], &[("float_ssim", 0.9)]),
            side(&[0.6, 0.62, 0.64], &[("float_ssim", fork_ssim)]),
        ),
        cell(
            2,
            "motion",
            side(
                &[0.02, 0.02, 0.02],
                &[("VMAF_integer_feature_motion_sad_score", 2.0)],
            ),
            side(&[0.02, 0.02, 0.02], &[("integer_motion", 2.0)]),
        ),
        cell(
            3,
            "motion_v2",
            absent,
            side(&[0.01, 0.01, 0.01], &[("motion_v2_sad", 3.0)]),
        ),
        JobEventPayload::Done {
            outcome: JobOutcome::Completed,
            error: None,
        },
    ];
    (
        done_run(run_id, "release", created_ms, spec),
        vec![done_job("j", None, events)],
    )
}

/// A cell of a stored snapshot: `speedup` with interval `ci`, the fork's min, median and
/// max times `fork`, and `psnr_y`'s pooled delta `delta`; parity ok.
pub fn cell_summary(
    workload: &str,
    speedup: f64,
    ci: [f64; 2],
    fork: [f64; 3],
    delta: f64,
) -> CellSummary {
    CellSummary {
        fixture: "tiny".into(),
        workload: workload.into(),
        backend: None,
        speedup: Some(speedup),
        speedup_ci95: Some(ci),
        verdict: Some(Verdict::Faster),
        parity: CellParity::Ok,
        fork_median: Some(fork[1]),
        fork_min: Some(fork[0]),
        fork_max: Some(fork[2]),
        upstream_median: Some(fork[1] * speedup),
        score_delta: [("psnr_y".to_string(), delta)].into(),
        printed_decimals: Some(6),
    }
}

/// A cell as steady as `cell`'s defaults, with only its delta and parity set.
pub fn steady_cell(workload: &str, delta: f64, parity: CellParity) -> CellSummary {
    CellSummary {
        parity,
        ..cell_summary(workload, 2.0, [1.9, 2.1], [1.0, 1.01, 1.02], delta)
    }
}

/// What run `run` left on generation `cpu/x86-64-v4/zen4`: silicon (and hardware) id
/// `silicon`, fork commit `fork`, its `cells`.
pub fn snapshot(
    run: &str,
    silicon: &str,
    fork: &str,
    cells: Vec<CellSummary>,
) -> GenerationSnapshot {
    GenerationSnapshot {
        run_id: run.into(),
        date: "2026-12-04".into(),
        trigger: "manual".into(),
        trigger_note: None,
        generation: "cpu/x86-64-v4/zen4".into(),
        spec_sha256: String::new(),
        comparable_spec_sha256: String::new(),
        silicon_id: Some(silicon.into()),
        hardware_id: Some(silicon.into()),
        fork_requested: "main".into(),
        fork_commit: Some(fork.into()),
        upstream_requested: "v3.2.0".into(),
        upstream_commit: Some("u".into()),
        toolchain: [("fork".to_string(), "gcc 12".to_string())].into(),
        host_toolchain: BTreeMap::new(),
        practical_threshold: 0.02,
        cells,
    }
}

/// A side that took `seconds` on every run.
pub fn steady_side(seconds: f64) -> SideMeasurement {
    SideMeasurement {
        status: SideStatus::Ok,
        times: vec![seconds; 3],
        cpu_times: vec![seconds; 3],
        warmup_times: vec![seconds],
        scores: Some(Scores {
            frames: vec![FrameScores {
                frame_num: 0,
                metrics: [("psnr_y".to_string(), 30.0)].into(),
            }],
            ..Scores::default()
        }),
        returncode: Some(0),
        error: None,
        stderr_tail: None,
        command: None,
    }
}

/// A run over two generations, each measuring cells 0 and 1; the fork's time tells
/// the cells apart (generation g, cell i: `g + i / 10` seconds).
pub fn two_generation_report() -> Report {
    let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/jobs"));
    let spec = JobSpec::load(&dir.join("demo.toml")).unwrap();
    let job = |generation: u32, key: &str| {
        let mut events: Vec<JobEventPayload> = (0..2u32)
            .map(|index| {
                JobEventPayload::Cell(Box::new(CellResult::evaluate(
                    CellInput {
                        index,
                        fixture: spec.fixtures[0].name.clone(),
                        workload: spec.workloads[index as usize].name.clone(),
                        upstream: steady_side(10.0),
                        fork: steady_side(f64::from(generation) + f64::from(index) / 10.0),
                        load_avg_1min: [0.0, 0.0],
                        idle_cores: 1.0,
                        host_flags: Vec::new(),
                        seed: 1,
                        run_order: Vec::new(),
                        stop_reason: crate::paired::StopReason::NotAdaptive,
                        overhead_seconds: None,
                    },
                    &spec,
                )))
            })
            .collect();
        events.push(JobEventPayload::Done {
            outcome: JobOutcome::Completed,
            error: None,
        });
        done_job(&format!("job-{generation}"), Some(key), events)
    };
    assembled(
        &done_run(
            "00000000-0000-0000-0000-000000000002",
            "manual",
            0,
            spec.clone(),
        ),
        &[job(1, "cpu/x86-64-v3"), job(2, "cpu/x86-64-v4")],
    )
}

/// `n` first-parent commits, ids `000…0` to `000…n-1`.
pub fn bisect_commits(n: usize) -> Vec<Commit> {
    (0..n)
        .map(|i| Commit {
            id: format!("{i:040}"),
            subject: format!("commit {i}"),
        })
        .collect()
}

/// The step that measured commit `index` of `bisection` and decided `decision`.
pub fn bisect_step(bisection: &Bisection, index: usize, decision: Decision) -> Step {
    Step {
        commit: bisection.commits[index].clone(),
        run_id: format!("run-{index}"),
        speedup: None,
        speedup_ci95: None,
        verdict: None,
        pairs: 5,
        decision,
        retried: false,
        parity_note: None,
        good_build: None,
        candidate_build: None,
    }
}

/// The search run against `n` commits whose commits from `first_bad` on are slow.
pub fn bisection(n: usize, first_bad: usize) -> Bisection {
    let mut bisection = Bisection::new(bisect_commits(n)).unwrap();
    while let Some(index) = bisection.next() {
        let decision = if index >= first_bad {
            Decision::Bad
        } else {
            Decision::Good
        };
        let s = bisect_step(&bisection, index, decision);
        bisection.record(index, s);
    }
    bisection
}

/// Two reports of the sample run for `compare_reports`: the later one's `float_ssim` slower
/// (its interval below the earlier one's), its `psnr` delta grown to 3e-6, and the earlier
/// one's `motion` delta 4e-6 (so the later one's shrank). `(now, earlier)`.
pub fn compared_reports() -> (Report, Report) {
    let earlier = sample_report();
    let mut now = earlier.clone();
    now.run_id = "00000000-0000-0000-0000-000000000002".into();
    now.fork.resolved = Some("2222222222222222222222222222222222222222".into());
    // float_ssim: the fork got slower (the new interval is below the old one).
    let ssim = now
        .cells
        .iter_mut()
        .find(|c| c.workload == "float_ssim")
        .unwrap();
    ssim.speedup = Some(2.0);
    ssim.speedup_ci95 = Some([1.8, 2.2]);
    // psnr: its delta grew (under any gate); motion: its delta shrank.
    let psnr = now.cells.iter_mut().find(|c| c.workload == "psnr").unwrap();
    psnr.score_delta.insert("psnr_y".into(), 3e-6);
    let mut earlier = earlier;
    earlier
        .cells
        .iter_mut()
        .find(|c| c.workload == "motion")
        .unwrap()
        .score_delta
        .insert("integer_motion".into(), 4e-6);
    (now, earlier)
}
