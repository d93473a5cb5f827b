//! A retuning sweep of the fork (docs/sweeps.md): the configurations `core::sweep::plan`
//! chooses, every distinct build configuration built (and cached) before any timing starts,
//! then each configuration timed against the shipped default in balanced pairs, one timed
//! run covering every fixture × workload of the spec, with more pairs while the verdict is
//! unsure. Each configuration's scores are compared with the default's under the parity
//! gate. The time budget stops the search between configurations; what it and the plan left
//! out goes into the one `sweep` event the stage ends with. Verdicts are the report's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use abfleet_core::cell::CellParity;
use abfleet_core::events::{JobEventPayload, Side};
use abfleet_core::paired::{self, AdaptiveBounds, AnalysisConfig, Order, Pair, StopReason};
use abfleet_core::parity::{self, Gates};
use abfleet_core::scores::Scores;
use abfleet_core::spec::{BuildRecipe, JobSpec, SweepSpec, TunableKind, VALUE_PLACEHOLDER};
use abfleet_core::sweep::{plan, Configuration, ConfigurationRun, NotTried, SweepOutcome};
use tracing::info;

use crate::build::BuiltSide;
use crate::command_line::cell_command_line;
use crate::context::{
    attempt_dir, build_fetched, check_cancel, emit, fetch, progress, quiet_for_cell, read_scores,
    JobContext, OutputLimit, Stop,
};
use crate::fixtures::PreparedFixture;
use crate::runner::{self, CommandSpec};

/// How much of a failing run's log goes into its error.
const STDERR_TAIL_BYTES: u64 = 600;

/// One configuration ready to time: its binary and how its runs differ from the default's.
struct Prepared {
    configuration: Configuration,
    built: BuiltSide,
    env: BTreeMap<String, String>,
    extra_args: Vec<String>,
}

/// Runs the sweep and emits its `sweep` event.
pub(crate) async fn run_sweep(
    ctx: &mut JobContext,
    sweep: &SweepSpec,
    prepared_fixtures: &[PreparedFixture],
) -> Result<(), Stop> {
    let spec = ctx.spec.clone();
    let plan = plan(sweep, spec.measure.seed);
    info!(
        configurations = plan.configurations.len(),
        strategy = plan.strategy.as_str(),
        "sweep planned"
    );
    let configurations = build_configurations(ctx, sweep, &plan.configurations, &spec).await?;
    let out_dir = attempt_dir(ctx, "sweep")?;
    let cells = cell_labels(&spec);
    let timer = Timer {
        spec: &spec,
        fixtures: prepared_fixtures,
        out_dir: &out_dir,
    };
    let started = Instant::now();
    let total = configurations.len() as u32;
    let default = &configurations[0];
    let mut runs = Vec::new();
    // The default: warm-ups, then one run whose scores every configuration is compared with.
    progress(
        ctx,
        "sweep",
        format!(
            "sweep: timing the default ({})",
            default.configuration.label
        ),
        0,
        Some(default.configuration.label.clone()),
    )?;
    let quiet = quiet_for_cell(ctx).await?;
    let default_scores = warm_up_and_score(ctx, &timer, default).await?;
    drop(quiet);
    let default_scores = match default_scores {
        Ok(scores) => scores,
        Err(error) => {
            runs.push(failed_run(default, true, error));
            let not_tried = configurations[1..]
                .iter()
                .map(|c| NotTried {
                    label: c.configuration.label.clone(),
                    reason:
                        "the shipped default could not be timed, so nothing is compared with it"
                            .into(),
                })
                .collect();
            return emit_outcome(ctx, &plan, cells, runs, not_tried, started);
        }
    };
    runs.push(ConfigurationRun {
        configuration: default.configuration.clone(),
        is_default: true,
        build_key: Some(default.built.record.cache_key.clone()),
        pairs: Vec::new(),
        order: Vec::new(),
        stop_reason: None,
        parity: CellParity::Ok,
        score_delta: BTreeMap::new(),
        parity_failures: Vec::new(),
        error: None,
    });
    let mut not_tried = Vec::new();
    for (index, candidate) in configurations.iter().enumerate().skip(1) {
        check_cancel(ctx)?;
        if let Some(limit) = sweep.max_seconds {
            let spent = started.elapsed().as_secs_f64();
            if spent >= limit {
                not_tried.push(NotTried {
                    label: candidate.configuration.label.clone(),
                    reason: format!(
                        "time budget: [sweep] max_seconds = {limit} reached ({spent:.1} s of timing)"
                    ),
                });
                continue;
            }
        }
        progress(
            ctx,
            "sweep",
            format!(
                "sweep: {} against the default ({index} of {})",
                candidate.configuration.label,
                total - 1
            ),
            index as u32,
            Some(candidate.configuration.label.clone()),
        )?;
        let quiet = quiet_for_cell(ctx).await?;
        let run =
            time_against_default(ctx, &timer, default, candidate, &default_scores, index).await?;
        drop(quiet);
        info!(configuration = %run.configuration.label, parity = ?run.parity, pairs = run.pairs.len(), "sweep configuration timed");
        runs.push(run);
    }
    let mut all_not_tried = not_tried;
    all_not_tried.extend(plan.not_tried.iter().cloned());
    emit_outcome(ctx, &plan, cells, runs, all_not_tried, started)
}

/// Every configuration built before any timing starts: one fetch, so all are built from
/// the same revision, then every distinct build once, so compiling never runs next to a
/// timed run.
async fn build_configurations(
    ctx: &mut JobContext,
    sweep: &SweepSpec,
    planned: &[Configuration],
    spec: &JobSpec,
) -> Result<Vec<Prepared>, Stop> {
    let source = fetch(ctx, Side::Fork).await?;
    let mut builds: BTreeMap<String, BuiltSide> = BTreeMap::new();
    let mut configurations = Vec::new();
    for configuration in planned {
        check_cancel(ctx)?;
        let recipe = recipe_for(&spec.fork.build, sweep, configuration);
        let key = serde_json::to_string(&recipe).expect("a recipe serialises");
        let built = match (builds.get(&key), &source) {
            (Some(built), _) => built.clone(),
            (None, Err(not_fetched)) => not_fetched.clone(),
            (None, Ok(resolved)) => {
                let built = build_fetched(ctx, Side::Fork, resolved, &recipe).await?;
                builds.insert(key, built.clone());
                built
            }
        };
        let (env, extra_args) = run_settings(sweep, configuration);
        configurations.push(Prepared {
            configuration: configuration.clone(),
            built,
            env,
            extra_args,
        });
    }
    Ok(configurations)
}

/// `fixture/workload` of every cell one timed run covers.
fn cell_labels(spec: &JobSpec) -> Vec<String> {
    spec.fixtures
        .iter()
        .flat_map(|f| {
            spec.workloads
                .iter()
                .map(move |w| format!("{}/{}", f.name, w.name))
        })
        .collect()
}

fn emit_outcome(
    ctx: &mut JobContext,
    plan: &abfleet_core::sweep::SweepPlan,
    cells: Vec<String>,
    runs: Vec<ConfigurationRun>,
    not_tried: Vec<NotTried>,
    started: Instant,
) -> Result<(), Stop> {
    let skipped_by_time = not_tried.len() as u64 - plan.not_tried.len() as u64;
    let outcome = SweepOutcome {
        strategy: plan.strategy.as_str().to_string(),
        grid_size: plan.grid_size,
        cells,
        configurations: runs,
        not_tried,
        not_tried_count: plan.not_tried_count + skipped_by_time,
        seed: ctx.spec.measure.seed,
        timing_seconds: started.elapsed().as_secs_f64(),
    };
    let summary = format!(
        "sweep: {} configuration(s) timed, {} not tried",
        outcome.configurations.len(),
        outcome.not_tried_count
    );
    let timed = outcome.configurations.len() as u32;
    emit(ctx, JobEventPayload::Sweep(Box::new(outcome)))?;
    progress(ctx, "done", summary, timed, None)
}

/// The fork's recipe with each build tunable's arguments appended to its first command.
pub(crate) fn recipe_for(
    base: &BuildRecipe,
    sweep: &SweepSpec,
    configuration: &Configuration,
) -> BuildRecipe {
    let mut recipe = base.clone();
    for tunable in &sweep.tunables {
        let TunableKind::Build(args) = &tunable.how else {
            continue;
        };
        let value = &configuration.values[&tunable.name];
        if let Some(first) = recipe.commands.first_mut() {
            first.extend(args.iter().map(|a| a.replace(VALUE_PLACEHOLDER, value)));
        }
    }
    recipe
}

/// The environment and extra arguments of a configuration's timed runs.
pub(crate) fn run_settings(
    sweep: &SweepSpec,
    configuration: &Configuration,
) -> (BTreeMap<String, String>, Vec<String>) {
    let mut env = BTreeMap::new();
    let mut args = Vec::new();
    for tunable in &sweep.tunables {
        let value = &configuration.values[&tunable.name];
        match &tunable.how {
            TunableKind::Build(_) => {}
            TunableKind::Env(var) => {
                env.insert(var.clone(), value.clone());
            }
            TunableKind::Args(template) => {
                args.extend(template.iter().map(|a| a.replace(VALUE_PLACEHOLDER, value)))
            }
        }
    }
    (env, args)
}

fn failed_run(prepared: &Prepared, is_default: bool, error: String) -> ConfigurationRun {
    ConfigurationRun {
        configuration: prepared.configuration.clone(),
        is_default,
        build_key: Some(prepared.built.record.cache_key.clone()),
        pairs: Vec::new(),
        order: Vec::new(),
        stop_reason: None,
        parity: CellParity::Unavailable,
        score_delta: BTreeMap::new(),
        parity_failures: Vec::new(),
        error: Some(error),
    }
}

/// What every timed run of the sweep shares.
struct Timer<'a> {
    spec: &'a JobSpec,
    fixtures: &'a [PreparedFixture],
    out_dir: &'a Path,
}

/// One timed pass of a configuration over every cell: its summed wall seconds and each
/// cell's scores, or why it failed.
type Pass = Result<(f64, Vec<Scores>), String>;

async fn one_pass(
    ctx: &mut JobContext,
    timer: &Timer<'_>,
    configuration: &Prepared,
    label: &str,
) -> Result<Pass, Stop> {
    let Some(binary) = configuration.built.binary.clone() else {
        return Ok(Err(format!(
            "its build failed: {}",
            configuration
                .built
                .record
                .error
                .as_deref()
                .unwrap_or("see the build log")
        )));
    };
    let spec = timer.spec;
    let format = spec.command.output_format;
    let mut wall_s = 0.0;
    let mut scores = Vec::new();
    let slug = slug(&configuration.configuration.label);
    for (fixture, paths) in spec.fixtures.iter().zip(timer.fixtures) {
        for workload in &spec.workloads {
            let stem = format!("{slug}-{}-{}-{label}", fixture.name, workload.name);
            let output: PathBuf = timer.out_dir.join(format!("{stem}.{}", format.extension()));
            let log = timer.out_dir.join(format!("{stem}.log"));
            let _ = std::fs::remove_file(&output);
            let _ = std::fs::remove_file(&log);
            let mut argv = cell_command_line(spec, &binary, fixture, paths, workload, &output);
            argv.extend(configuration.extra_args.iter().cloned());
            let outcome = runner::run(
                CommandSpec {
                    argv: &argv,
                    cwd: Some(&configuration.built.tree),
                    env: &configuration.env,
                    log_path: &log,
                    timeout: Duration::from_secs_f64(spec.measure.timeout_seconds),
                },
                &mut ctx.cancel,
            )
            .await;
            if outcome.exit == runner::ExitKind::Cancelled {
                return Err(Stop::Cancelled);
            }
            let cell = format!("{}/{}", fixture.name, workload.name);
            if !outcome.exit.success() {
                let tail = runner::tail(&log, STDERR_TAIL_BYTES);
                let last = tail.trim().lines().last().unwrap_or("").to_string();
                return Ok(Err(format!(
                    "{cell}: the binary {}: {last}",
                    outcome.exit.describe()
                )));
            }
            let limit = OutputLimit::for_fixture(spec.measure.max_output_bytes, fixture);
            match read_scores(format, &output, &limit).await {
                Ok(s) if s.frames.is_empty() => {
                    return Ok(Err(format!(
                        "{cell}: the binary exited 0 but scored no frames"
                    )))
                }
                Ok(s) => {
                    if let Some(missing) = workload.missing_expected(&s) {
                        return Ok(Err(format!("{cell}: the binary exited 0 but {missing}")));
                    }
                    scores.push(s)
                }
                Err(err) => return Ok(Err(format!("{cell}: its output is unusable: {err}"))),
            }
            wall_s += outcome.wall_s;
        }
    }
    Ok(Ok((wall_s, scores)))
}

/// A file-name-safe form of a configuration's label.
fn slug(label: &str) -> String {
    label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// The default's warm-ups and its reference scores.
async fn warm_up_and_score(
    ctx: &mut JobContext,
    timer: &Timer<'_>,
    default: &Prepared,
) -> Result<Result<Vec<Scores>, String>, Stop> {
    for warmup in 0..timer.spec.measure.warmup {
        if let Err(error) = one_pass(ctx, timer, default, &format!("warmup{warmup}")).await? {
            return Ok(Err(error));
        }
    }
    Ok(one_pass(ctx, timer, default, "reference")
        .await?
        .map(|(_, scores)| scores))
}

/// A candidate's warm-ups, its parity against the default, then balanced pairs.
async fn time_against_default(
    ctx: &mut JobContext,
    timer: &Timer<'_>,
    default: &Prepared,
    candidate: &Prepared,
    default_scores: &[Scores],
    index: usize,
) -> Result<ConfigurationRun, Stop> {
    let measure = timer.spec.measure.clone();
    let mut run = failed_run(candidate, false, String::new());
    run.error = None;
    for warmup in 0..measure.warmup {
        if let Err(error) = one_pass(ctx, timer, candidate, &format!("warmup{warmup}")).await? {
            run.error = Some(error);
            return Ok(run);
        }
    }
    // Each configuration's own seed: the spec's seed and its index, mixed as a cell's is.
    let seed = paired::derived_seed(measure.seed, index as u64);
    let mut order = paired::run_order(seed, measure.runs as usize);
    let bounds = AdaptiveBounds {
        min_pairs: measure.runs,
        max_pairs: measure.max_runs,
        max_seconds: measure.max_cell_seconds,
    };
    let config = AnalysisConfig {
        practical_threshold: measure.practical_threshold,
        seed,
        ..AnalysisConfig::default()
    };
    let started = Instant::now();
    let mut candidate_scores: Option<Vec<Scores>> = None;
    let mut done = 0usize;
    let stop_reason = loop {
        while done < order.len() {
            let sequence = match order[done] {
                Order::UpstreamFirst => [default, candidate],
                Order::ForkFirst => [candidate, default],
            };
            let mut pair = Pair {
                upstream_s: 0.0,
                fork_s: 0.0,
            };
            for side in sequence {
                let label = format!("run{done}-{}", slug(&candidate.configuration.label));
                match one_pass(ctx, timer, side, &label).await? {
                    Ok((wall_s, scores)) => {
                        if std::ptr::eq(side, default) {
                            pair.upstream_s = wall_s;
                        } else {
                            pair.fork_s = wall_s;
                            candidate_scores.get_or_insert(scores);
                        }
                    }
                    Err(error) => {
                        run.error = Some(error);
                        run.pairs.clear();
                        run.order.clear();
                        return Ok(run);
                    }
                }
            }
            run.pairs.push(pair);
            done += 1;
        }
        // Parity first: a configuration that moved a score is rejected, not timed further.
        if run.parity == CellParity::Unavailable {
            if let Some(scores) = &candidate_scores {
                judge_parity(&mut run, timer.spec, default_scores, scores);
            }
            if run.parity == CellParity::Fail {
                break StopReason::Decided;
            }
        }
        if measure.max_runs <= measure.runs {
            break StopReason::NotAdaptive;
        }
        let analysis = paired::analyse(&run.pairs, &config);
        let elapsed_s = started.elapsed().as_secs_f64();
        if let Some(stop) = paired::next_step(analysis.as_ref(), done as u32, elapsed_s, &bounds) {
            break stop;
        }
        let room = (measure.max_runs as usize).saturating_sub(order.len());
        if room == 0 {
            break StopReason::MaxPairs;
        }
        order.extend(
            paired::run_order(seed.wrapping_add(done as u64), 2)
                .into_iter()
                .take(room),
        );
    };
    run.order = order[..run.pairs.len()].to_vec();
    run.stop_reason = Some(stop_reason);
    Ok(run)
}

/// The candidate's scores against the default's, cell by cell, under the spec's gates.
fn judge_parity(
    run: &mut ConfigurationRun,
    spec: &JobSpec,
    default_scores: &[Scores],
    scores: &[Scores],
) {
    let gates = Gates {
        max_score_delta: spec.measure.max_score_delta,
        max_frame_delta: spec.measure.max_frame_delta,
    };
    // Same tree, same metric names: no renames; the spec's per-metric allowances still hold.
    let parity_spec = abfleet_core::spec::ParitySpec {
        renames: BTreeMap::new(),
        allow: spec.parity.allow.clone(),
        allow_missing: Vec::new(),
    };
    let cells = spec.fixtures.iter().flat_map(|f| {
        spec.workloads
            .iter()
            .map(move |w| format!("{}/{}", f.name, w.name))
    });
    let mut passed = true;
    for ((cell, before), after) in cells.zip(default_scores).zip(scores) {
        let outcome = parity::compare(before, after, &parity_spec, gates);
        for (metric, delta) in &outcome.score_delta {
            if *delta != 0.0 {
                run.score_delta.insert(format!("{cell}: {metric}"), *delta);
            }
        }
        for failure in &outcome.failures {
            // The gate's words are upstream's and the fork's; here they are the default's
            // and this configuration's.
            let message = failure
                .message
                .replace("(upstream ", "(default ")
                .replace(", fork ", ", this configuration ");
            run.parity_failures.push(format!("{cell}: {message}"));
        }
        passed &= outcome.passed();
    }
    run.parity = if passed {
        CellParity::Ok
    } else {
        CellParity::Fail
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use abfleet_core::spec::{SearchStrategy, Tunable};

    fn sweep() -> SweepSpec {
        SweepSpec {
            tunables: vec![
                Tunable {
                    name: "ssim_band".into(),
                    how: TunableKind::Build(vec!["SSIM_BAND={value}".into()]),
                    values: vec!["8".into(), "64".into()],
                    default: "8".into(),
                },
                Tunable {
                    name: "row_stride".into(),
                    how: TunableKind::Env("SUBJECT_SSIM_ROW_STRIDE".into()),
                    values: vec!["1".into(), "2".into()],
                    default: "1".into(),
                },
                Tunable {
                    name: "threads".into(),
                    how: TunableKind::Args(vec!["--threads".into(), "{value}".into()]),
                    values: vec!["1".into(), "2".into()],
                    default: "1".into(),
                },
            ],
            search: SearchStrategy::Grid,
            max_configurations: 8,
            max_seconds: None,
        }
    }

    #[test]
    fn each_kind_of_tunable_reaches_its_place() {
        let sweep = sweep();
        let plan = plan(&sweep, 1);
        let last = plan.configurations.last().unwrap();
        assert_eq!(last.label, "ssim_band=64 row_stride=2 threads=2");
        let base = BuildRecipe {
            commands: vec![vec!["make".into(), "-s".into()], vec!["true".into()]],
            binary: "build/vmaf".into(),
            env: BTreeMap::new(),
            toolchain: vec!["cc".into(), "--version".into()],
            link: Vec::new(),
        };
        let recipe = recipe_for(&base, &sweep, last);
        assert_eq!(recipe.commands[0], ["make", "-s", "SSIM_BAND=64"]);
        assert_eq!(recipe.commands[1], ["true"], "only the first command");
        let (env, args) = run_settings(&sweep, last);
        assert_eq!(env["SUBJECT_SSIM_ROW_STRIDE"], "2");
        assert_eq!(args, ["--threads", "2"]);
        // Configurations that differ only in run settings share one build.
        let default = &plan.configurations[0];
        let env_only = plan
            .configurations
            .iter()
            .find(|c| c.label == "ssim_band=8 row_stride=2 threads=1")
            .unwrap();
        assert_eq!(
            recipe_for(&base, &sweep, default),
            recipe_for(&base, &sweep, env_only)
        );
        assert_ne!(recipe_for(&base, &sweep, default), recipe);
    }
}
