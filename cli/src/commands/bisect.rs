//! `abfleet bisect`: finds the fork commit that made a workload slower, through the fleet.
//! The commits come from the fork's first-parent history between the good and the bad
//! commit (a bare clone here, with the real `git`); each step is a run submitted to the
//! coordinator (the step's spec and the search are `core::bisect`), so a matching agent
//! builds and times it, its build cache keeping each commit's build. Steps are runs with the
//! trigger reason `bisect`, which no comparison or history takes as a run of the spec.
//! Bisecting a RUN pins every step to that run's hardware identity (a generation key can hold
//! several SKUs) and, once the search ends, records the result with the coordinator, so the
//! run's own report shows it. Writes `bisect.md` and `bisect.json` to `--out` (each step's
//! report under `--out/steps/RUN`) and prints the section.

use std::path::Path;
use std::process::Command;

use abfleet_core::bisect::{self, BisectRecord, Bisection, Commit, Decision, Step};
use abfleet_core::cell::CellParity;
use abfleet_core::report::history::{section_hardware, FlagKind, BISECT_TRIGGER};
use abfleet_core::spec::{JobSpec, SourceSpec};
use abfleet_core::RunId;
use abfleet_proto::control_link::{ControlLink, SpecToRun, Submission};

use super::follow::{fetch_report, follow, OnInterrupt};
use super::{control_client, link_error};
pub use crate::cli::BisectArgs;
use crate::cli::TlsArgs;
use crate::failure::{Classify, Failure};

/// What one bisect covers, once resolved.
struct Target {
    spec: JobSpec,
    good: String,
    bad: String,
    generation: Option<String>,
    workload: String,
    fixture: String,
    /// The run bisected, and the hardware identity its flagged generation ran on: every
    /// step is pinned to it.
    run: Option<RunId>,
    hardware: Option<String>,
}

pub async fn run(args: BisectArgs, coordinator: &str, tls: &TlsArgs) -> Result<i32, Failure> {
    let client = control_client(coordinator, tls).await?;
    let target = resolve(&args, &client).await?;
    let SourceSpec::Git { url, .. } = &target.spec.fork.source else {
        return Err(Failure::usage(anyhow::anyhow!(
            "the fork is a path source; a bisect walks the fork's git history, so give the spec's [fork] a git = \"URL\""
        )));
    };
    let commits = first_parent_range(url, &target.good, &target.bad)?;
    eprintln!(
        "bisecting {} commits of {url} from {} (good) to {} (bad)",
        commits.len(),
        &commits[0].id[..12],
        &commits[commits.len() - 1].id[..12]
    );
    let mut bisection = Bisection::new(commits).map_err(|e| Failure::usage(anyhow::anyhow!(e)))?;
    let good_commit = bisection.commits[0].id.clone();
    while let Some(index) = bisection.next() {
        let commit = bisection.commits[index].clone();
        let bad_ci = bisection.bad_interval();
        let steps_out = args.out.join("steps");
        let mut step = measure(
            &client,
            &target,
            &good_commit,
            &commit,
            None,
            bad_ci,
            &steps_out,
        )
        .await?;
        if step.decision == Decision::Undecidable {
            let doubled = target.spec.measure.max_runs.max(target.spec.measure.runs) * 2;
            eprintln!(
                "`{}` was unsure; again with up to {doubled} pairs",
                &commit.id[..12]
            );
            step = measure(
                &client,
                &target,
                &good_commit,
                &commit,
                Some(doubled),
                bad_ci,
                &steps_out,
            )
            .await?;
            step.retried = true;
        }
        eprintln!(
            "step {}: `{}` {} → {:?}",
            bisection.steps.len() + 1,
            &commit.id[..12],
            commit.subject,
            step.decision
        );
        bisection.record(index, step);
    }
    let what = format!(
        "`{}` on fixture `{}`{}",
        target.workload,
        target.fixture,
        target
            .generation
            .as_deref()
            .map_or(String::new(), |g| format!(", generation `{g}`"))
    );
    let section = abfleet_render::bisect::render(&bisection, &what);
    std::fs::create_dir_all(&args.out)
        .and_then(|()| std::fs::write(args.out.join("bisect.md"), &section))
        .and_then(|()| {
            std::fs::write(
                args.out.join("bisect.json"),
                serde_json::to_string_pretty(&bisection).unwrap_or_default(),
            )
        })
        .map_err(|err| {
            Failure::usage(anyhow::anyhow!(
                "cannot write bisect.md/bisect.json to {}: {err}",
                args.out.display()
            ))
        })?;
    print!("{}", crate::terminal_text::visible(&section));
    let named = bisection.first_bad().is_some();
    if let Some(run_id) = &target.run {
        let record = BisectRecord {
            what,
            recorded: String::new(),
            bisection,
        };
        // The search is done and its result written: a coordinator that cannot keep it now
        // does not undo it, it is only not shown with the run.
        let recorded = client.record_bisect(run_id, &record).await;
        match recorded {
            Ok(()) => eprintln!("recorded with run {run_id}: `abfleet report {run_id}` shows it"),
            Err(err) => eprintln!(
                "warning: the bisect is done, but recording it with run {run_id} failed ({err}); \
                 its result is in {} and {}; to show it with the run, run `abfleet bisect {run_id}` \
                 again once the coordinator answers (its builds are cached)",
                args.out.join("bisect.md").display(),
                args.out.join("bisect.json").display()
            ),
        }
    }
    Ok(if named {
        0
    } else {
        abfleet_core::exit::NOT_CARRIED_OUT
    })
}

/// The spec, the two commits and the cell: from the flags, or from the run's first
/// speed regression against its previous comparable run.
async fn resolve(args: &BisectArgs, client: &ControlLink) -> Result<Target, Failure> {
    let Some(run_id) = &args.run_id else {
        let missing: Vec<&str> = [
            ("SPEC (--spec)", args.spec.is_none()),
            ("--good", args.good.is_none()),
            ("--bad", args.bad.is_none()),
            ("--workload", args.workload.is_none()),
            ("--fixture", args.fixture.is_none()),
        ]
        .into_iter()
        .filter_map(|(name, missing)| missing.then_some(name))
        .collect();
        if !missing.is_empty() {
            return Err(Failure::usage(anyhow::anyhow!(
                "without a RUN, a bisect needs {}",
                missing.join(", ")
            )));
        }
        let spec_path = args.spec.as_ref().expect("checked");
        return Ok(Target {
            spec: JobSpec::load(spec_path).usage()?,
            good: args.good.clone().expect("checked"),
            bad: args.bad.clone().expect("checked"),
            generation: args.generation.clone(),
            workload: args.workload.clone().expect("checked"),
            fixture: args.fixture.clone().expect("checked"),
            run: None,
            hardware: None,
        });
    };
    let run_id: RunId = run_id.parse().usage()?;
    let abfleet_proto::control_link::StoredRun { report, spec } = client
        .run(&run_id)
        .await
        .map_err(|err| link_error("failed to get the run", err))?;
    let flagged = report
        .generations
        .iter()
        .filter(|s| args.generation.as_ref().is_none_or(|g| g == &s.key))
        .filter_map(|s| s.since_previous.as_ref().map(|since| (s, since)))
        .find_map(|(section, since)| {
            since
                .flags
                .iter()
                .find(|f| {
                    matches!(f.kind, FlagKind::SpeedupShrank | FlagKind::ForkSlower)
                        && args.workload.as_ref().is_none_or(|w| w == &f.workload)
                        && args.fixture.as_ref().is_none_or(|x| x == &f.fixture)
                })
                .map(|flag| (section, since, flag))
        });
    let Some((section, since, flag)) = flagged else {
        return Err(Failure::usage(anyhow::anyhow!(
            "run {run_id} has no speed regression against its previous comparable run{}; name the commits with --spec, --good, --bad, --workload and --fixture",
            if args.workload.is_some() || args.fixture.is_some() || args.generation.is_some() { " matching the given cell" } else { "" }
        )));
    };
    let (Some(good), Some(bad)) = (since.fork_commit_of(flag), since.fork_commit_now.as_deref())
    else {
        return Err(Failure::usage(anyhow::anyhow!(
            "run {run_id}'s comparison does not name both fork commits; give --good and --bad"
        )));
    };
    if good == bad {
        return Err(Failure::usage(anyhow::anyhow!(
            "the fork did not change between run {} and run {run_id} (both `{}`): what changed is {}; nothing in the fork's history to bisect",
            flag.then_run.as_deref().unwrap_or(&since.run_id),
            &good[..good.len().min(12)],
            if since.changes.is_empty() { "not recorded".to_string() } else { since.changes.join("; ") }
        )));
    }
    Ok(Target {
        spec,
        good: args.good.clone().unwrap_or_else(|| good.to_string()),
        bad: args.bad.clone().unwrap_or_else(|| bad.to_string()),
        generation: Some(section.key.clone()).filter(|k| k != "any"),
        workload: flag.workload.clone(),
        fixture: flag.fixture.clone(),
        run: Some(run_id),
        // A run without targets ran on any one agent: nothing to pin to.
        hardware: section_hardware(section).filter(|_| section.key != "any"),
    })
}

/// One step: a run of the candidate against the good commit, followed to its end.
async fn measure(
    client: &ControlLink,
    target: &Target,
    good: &str,
    commit: &Commit,
    max_runs: Option<u32>,
    bad_ci: Option<[f64; 2]>,
    steps_out: &Path,
) -> Result<Step, Failure> {
    let spec = bisect::step_spec(
        &target.spec,
        good,
        &commit.id,
        target.generation.as_deref(),
        &target.fixture,
        &target.workload,
        max_runs,
    )
    .map_err(|e| Failure::usage(anyhow::anyhow!(e)))?;
    let run_id = client
        .submit(Submission {
            trigger_note: Some(format!(
                "bisect: {} against {}",
                &commit.id[..12],
                &good[..good.len().min(12)]
            )),
            hardware_id: target.hardware.clone(),
            ..Submission::new(
                SpecToRun::Json(spec.to_json()),
                BISECT_TRIGGER,
                "abfleet bisect",
            )
        })
        .await
        .map_err(|err| link_error("failed to submit a bisect step", err))?;
    follow(
        client,
        &run_id,
        Some(steps_out.join(run_id.to_string())),
        OnInterrupt::CancelRun,
        &[],
    )
    .await?;
    let report = fetch_report(client, &run_id).await?;
    let cell = report.cells.first();
    let verdict = cell.and_then(|c| c.verdict);
    let decision = match cell {
        Some(c) if c.speedup.is_some() => {
            Decision::of(verdict, c.speedup_ci95, bad_ci).unwrap_or(Decision::Undecidable)
        }
        _ => Decision::Failed,
    };
    Ok(Step {
        commit: commit.clone(),
        run_id: run_id.to_string(),
        speedup: cell.and_then(|c| c.speedup),
        speedup_ci95: cell.and_then(|c| c.speedup_ci95),
        verdict,
        pairs: cell.map_or(0, |c| c.pairs),
        decision,
        retried: false,
        good_build: report.upstream.build.as_ref().map(|b| b.status),
        candidate_build: report.fork.build.as_ref().map(|b| b.status),
        parity_note: cell.filter(|c| c.parity == CellParity::Fail).map(|c| {
            format!(
                "scores moved against the good commit: {}",
                c.parity_failures
                    .iter()
                    .map(|f| f.message.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        }),
    })
}

/// `good`, then the first-parent commits after it up to `bad`, oldest first, with their
/// subjects: read from a bare clone of `url` in a temporary directory.
fn first_parent_range(url: &str, good: &str, bad: &str) -> Result<Vec<Commit>, Failure> {
    let dir = tempfile::tempdir().infra()?;
    let mirror = dir.path().join("fork.git");
    git(
        None,
        &["clone", "--quiet", "--bare", "--", url, &path_str(&mirror)?],
    )
    .map_err(|err| Failure::usage(anyhow::anyhow!("cannot clone the fork {url}: {err}")))?;
    let resolve = |rev: &str| {
        git(
            Some(&mirror),
            &[
                "rev-parse",
                "--verify",
                "--end-of-options",
                &format!("{rev}^{{commit}}"),
            ],
        )
        .map_err(|err| Failure::usage(anyhow::anyhow!("`{rev}` is not a commit of {url}: {err}")))
    };
    let (good, bad) = (resolve(good)?, resolve(bad)?);
    git(Some(&mirror), &["merge-base", "--is-ancestor", &good, &bad]).map_err(|_| {
        Failure::usage(anyhow::anyhow!(
            "the good commit {} is not an ancestor of the bad one {}; give --good an older commit of the same history",
            &good[..12],
            &bad[..12]
        ))
    })?;
    let listed = git(
        Some(&mirror),
        &[
            "log",
            "--first-parent",
            "--reverse",
            "--format=%H %s",
            &format!("{good}..{bad}"),
        ],
    )
    .map_err(|e| Failure::infra(anyhow::anyhow!(e)))?;
    let subject =
        |id: &str| git(Some(&mirror), &["log", "-1", "--format=%s", id]).unwrap_or_default();
    let mut commits = vec![Commit {
        subject: subject(&good),
        id: good,
    }];
    for line in listed.lines() {
        let (id, subject) = line.split_once(' ').unwrap_or((line, ""));
        commits.push(Commit {
            id: id.to_string(),
            subject: subject.to_string(),
        });
    }
    if commits.len() < 2 {
        return Err(Failure::usage(anyhow::anyhow!(
            "no commits between the good and the bad commit: nothing to bisect"
        )));
    }
    Ok(commits)
}

fn path_str(path: &Path) -> Result<String, Failure> {
    path.to_str()
        .map(str::to_string)
        .ok_or_else(|| Failure::infra(anyhow::anyhow!("a temporary path is not UTF-8")))
}

fn git(dir: Option<&Path>, args: &[&str]) -> Result<String, String> {
    let mut command = Command::new("git");
    if let Some(dir) = dir {
        command.arg("-C").arg(dir);
    }
    let output = command
        .args(args)
        .output()
        .map_err(|err| format!("cannot run git: {err}; is git installed?"))?;
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).trim().to_string());
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}
