//! The coordinator's check of a cell an agent sent (issue 23: a legitimate agent's
//! fabrications were believed). A cell carries its raw data — each side's timed runs and
//! per-frame scores, its seed and run order — and a summary derived from it: medians,
//! speedup, interval, p-value, verdict, pooled deltas, parity. [`rederive`] computes the
//! summary again from the raw data with the spec's own gates ([`CellResult::evaluate`], the
//! agent's function), and refuses a cell that is not one of the spec's, whose raw values are
//! out of physical range, or whose summary disagrees with its raw data. What it returns is
//! the coordinator's cell, never the agent's summary; a refused cell comes back marked
//! ([`reject`]) and counts as not measured.
//!
//! Not checkable here: raw data invented consistently (a compromised host can still lie
//! consistently, docs/security.md) and the per-frame scores a cell over the event size
//! limit left out (its pooled deltas are then checked against its pooled means and the
//! gate instead).

use crate::cell::{
    CellInput, CellParity, CellResult, NoiseFlag, SideMeasurement, SideResult, SideStatus,
};
use crate::paired;
use crate::scores::Scores;
use crate::spec::JobSpec;

/// Relative difference two re-derived numbers may have (float noise between builds).
const TOLERANCE: f64 = 1e-9;
/// The most problems a rejection lists.
const MOST_PROBLEMS: usize = 6;
/// Above this a load average is not a load average.
const MOST_LOAD: f64 = 100_000.0;
/// Noise flags the coordinator derives itself; any other flag is the host's observation.
const DERIVED_FLAGS: [&str; 3] = ["upstream_spread_high", "fork_spread_high", "load_changed"];

/// The cell as the coordinator derives it from `claimed`'s raw data, or why it was not
/// believed.
pub fn rederive(claimed: &CellResult, spec: &JobSpec) -> Result<CellResult, Vec<String>> {
    let mut problems = identity_problems(claimed, spec);
    problems.extend(range_problems(claimed, spec));
    if !problems.is_empty() {
        return Err(problems);
    }
    let frames_left_out = [&claimed.upstream, &claimed.fork]
        .into_iter()
        .any(|side| side.status == SideStatus::Ok && frames_left_out(side));
    let mut derived = CellResult::evaluate(input_of(claimed, frames_left_out), spec);
    if frames_left_out {
        take_parity_checked(&mut derived, claimed, spec, &mut problems);
    }
    compare_summaries(claimed, &derived, &mut problems);
    if !problems.is_empty() {
        problems.truncate(MOST_PROBLEMS);
        return Err(problems);
    }
    derived.generation = claimed.generation.clone();
    derived.attempt = claimed.attempt;
    derived.host_resolution = claimed.host_resolution;
    derived.measured_by = claimed.measured_by.clone();
    Ok(derived)
}

/// `claimed` marked as not believed: both sides unavailable with the reasons, no speedup,
/// verdict or parity verdict; its raw times stay for inspection.
pub fn reject(mut claimed: CellResult, problems: Vec<String>) -> CellResult {
    let who = claimed
        .measured_by
        .as_ref()
        .map(|by| match &by.certificate {
            Some(certificate) => format!(" from agent {} ({certificate})", by.agent_id),
            None => format!(" from agent {}", by.agent_id),
        })
        .unwrap_or_default();
    let reason = format!("rejected by the coordinator{who}: {}", problems.join("; "));
    for side in [&mut claimed.upstream, &mut claimed.fork] {
        side.status = SideStatus::Unavailable;
        side.error = Some(reason.clone());
    }
    claimed.speedup = None;
    claimed.speedup_ci95 = None;
    claimed.p_value = None;
    claimed.verdict = None;
    claimed.parity = CellParity::Unavailable;
    claimed.score_delta.clear();
    claimed.parity_failures.clear();
    claimed.rejected = problems;
    claimed
}

/// The cell's index, fixture and workload must be one of the spec's cells.
fn identity_problems(cell: &CellResult, spec: &JobSpec) -> Vec<String> {
    let workloads = spec.workloads.len();
    let at = |index: usize| {
        let fixture = spec.fixtures.get(index / workloads.max(1))?;
        let workload = spec.workloads.get(index % workloads.max(1))?;
        Some((fixture.name.as_str(), workload.name.as_str()))
    };
    match at(cell.index as usize) {
        Some((fixture, workload)) if (fixture, workload) == (&cell.fixture, &cell.workload) => {
            Vec::new()
        }
        Some((fixture, workload)) => vec![format!(
            "cell {} is {fixture}/{workload} in the spec, not {}/{}",
            cell.index, cell.fixture, cell.workload
        )],
        None => vec![format!(
            "cell {} ({}/{}) is not a cell of the spec ({} cells)",
            cell.index,
            cell.fixture,
            cell.workload,
            spec.fixtures.len() * workloads
        )],
    }
}

/// Raw values no measurement under the spec can have.
fn range_problems(cell: &CellResult, spec: &JobSpec) -> Vec<String> {
    let measure = &spec.measure;
    // A timed run past its timeout is killed; allow the kill's own latency.
    let longest = measure.timeout_seconds * 1.5 + 1.0;
    let most_pairs = measure.runs.max(measure.max_runs) as usize;
    let mut problems = Vec::new();
    for (name, side) in [("upstream", &cell.upstream), ("fork", &cell.fork)] {
        let bad_time = |t: &f64| !(t.is_finite() && *t > 0.0 && *t <= longest);
        if let Some(t) = side
            .times
            .iter()
            .chain(&side.warmup_times)
            .find(|t| bad_time(t))
        {
            problems.push(format!(
                "{name} has a run of {} s: not a wall time (0 < t <= {longest} s, the spec's timeout)",
                shown(Some(*t))
            ));
        }
        if let Some(t) = side
            .cpu_times
            .iter()
            .find(|t| !(t.is_finite() && **t >= 0.0))
        {
            problems.push(format!("{name} has a CPU time of {t} s"));
        }
        if side.times.len() > most_pairs {
            problems.push(format!(
                "{name} has {} timed runs; the spec allows at most {most_pairs}",
                side.times.len()
            ));
        }
        if side.warmup_times.len() > measure.warmup as usize {
            problems.push(format!(
                "{name} has {} warm-up runs; the spec has {}",
                side.warmup_times.len(),
                measure.warmup
            ));
        }
        if side.status == SideStatus::Ok && (side.times.is_empty() || side.scores.is_none()) {
            problems.push(format!("{name} is `ok` without timed runs or scores"));
        }
        if let Some(load) = side
            .load_avg_1min
            .iter()
            .find(|l| !(l.is_finite() && **l >= 0.0 && **l < MOST_LOAD))
        {
            problems.push(format!("{name} has a load average of {load}"));
        }
    }
    let both_ok = cell.upstream.status == SideStatus::Ok && cell.fork.status == SideStatus::Ok;
    if both_ok && cell.upstream.times.len() != cell.fork.times.len() {
        problems.push(format!(
            "{} upstream and {} fork runs: timed runs come in pairs",
            cell.upstream.times.len(),
            cell.fork.times.len()
        ));
    }
    if both_ok && !cell.run_order.is_empty() && cell.run_order.len() != cell.upstream.times.len() {
        problems.push(format!(
            "a run order of {} pairs for {} timed pairs",
            cell.run_order.len(),
            cell.upstream.times.len()
        ));
    }
    let seed = paired::cell_seed(measure.seed, cell.index);
    if cell.seed != seed {
        problems.push(format!(
            "seed {} is not the cell's seed under the spec's seed {}",
            cell.seed, measure.seed
        ));
    }
    problems
}

/// A cell sent without its per-frame scores (over the event size limit): frames empty,
/// pooled means kept.
fn frames_left_out(side: &SideResult) -> bool {
    side.scores
        .as_ref()
        .is_some_and(|scores| scores.frames.is_empty())
        && (!side.pooled.is_empty() || side.nframes.is_some_and(|n| n > 0))
}

/// What the agent measured, read back from the cell. The host's own noise observations
/// (anything the coordinator does not derive) are carried over as they are.
fn input_of(cell: &CellResult, frames_left_out: bool) -> CellInput {
    let side = |result: &SideResult| SideMeasurement {
        status: result.status,
        times: result.times.clone(),
        cpu_times: result.cpu_times.clone(),
        warmup_times: result.warmup_times.clone(),
        scores: if frames_left_out && result.status == SideStatus::Ok {
            Some(Scores::default())
        } else {
            result.scores.clone()
        },
        returncode: result.returncode,
        error: result.error.clone(),
        stderr_tail: result.stderr_tail.clone(),
        command: result.command.clone(),
    };
    let host_flags: Vec<NoiseFlag> = cell
        .noise_flags
        .iter()
        .filter(|flag| !DERIVED_FLAGS.contains(&flag.name.as_str()))
        .cloned()
        .collect();
    CellInput {
        index: cell.index,
        fixture: cell.fixture.clone(),
        workload: cell.workload.clone(),
        upstream: side(&cell.upstream),
        fork: side(&cell.fork),
        load_avg_1min: cell.fork.load_avg_1min,
        // The host's "load above idle cores" flag is among `host_flags`: not derived again.
        idle_cores: f64::INFINITY,
        host_flags,
        seed: cell.seed,
        run_order: cell.run_order.clone(),
        stop_reason: cell.stop_reason,
        overhead_seconds: cell.overhead_seconds,
    }
}

/// For a cell without its per-frame scores: its parity fields as sent, once its deltas
/// agree with its pooled means and a claimed `ok` is within the gate.
fn take_parity_checked(
    derived: &mut CellResult,
    claimed: &CellResult,
    spec: &JobSpec,
    problems: &mut Vec<String>,
) {
    let half_unit = claimed
        .printed_decimals
        .map_or(0.0, |d| 0.5 * 10f64.powi(-(d.min(17) as i32)));
    for (metric, delta) in &claimed.score_delta {
        let fork_metric = claimed
            .renamed_metrics
            .get(metric)
            .map_or(metric.as_str(), String::as_str);
        match (
            claimed.upstream.pooled.get(metric),
            claimed.fork.pooled.get(fork_metric),
        ) {
            (Some(up), Some(fk)) if !same(*delta, fk - up) && delta.is_finite() => problems.push(
                format!("`{metric}`: a pooled delta of {delta} that its pooled means do not give"),
            ),
            (Some(_), Some(_)) => {}
            _ => problems.push(format!("`{metric}`: a delta without pooled means")),
        }
        if claimed.parity == CellParity::Ok
            // NaN is over the gate too.
            && delta
                .abs()
                .partial_cmp(&(spec.measure.max_score_delta + half_unit))
                .is_none_or(|order| order.is_gt())
        {
            problems.push(format!(
                "parity `ok` with a pooled `{metric}` delta of {delta}, over the spec's gate {}",
                spec.measure.max_score_delta
            ));
        }
    }
    for (derived_side, claimed_side) in [
        (&mut derived.upstream, &claimed.upstream),
        (&mut derived.fork, &claimed.fork),
    ] {
        derived_side.pooled = claimed_side.pooled.clone();
        derived_side.nframes = claimed_side.nframes;
        derived_side.median_fps = match (derived_side.median_time, claimed_side.nframes) {
            (Some(t), Some(n)) if t > 0.0 => Some(n as f64 / t),
            _ => None,
        };
        derived_side.scores = claimed_side.scores.clone();
    }
    derived.parity = claimed.parity;
    derived.score_delta = claimed.score_delta.clone();
    derived.max_frame_delta = claimed.max_frame_delta.clone();
    derived.max_frame_delta_at = claimed.max_frame_delta_at.clone();
    derived.frames_over_gate = claimed.frames_over_gate.clone();
    derived.frame_delta_p95 = claimed.frame_delta_p95.clone();
    derived.parity_failures = claimed.parity_failures.clone();
    derived.renamed_metrics = claimed.renamed_metrics.clone();
    derived.only_upstream_metrics = claimed.only_upstream_metrics.clone();
    derived.only_fork_metrics = claimed.only_fork_metrics.clone();
    derived.printed_decimals = claimed.printed_decimals;
}

/// Where the cell's summary says something its raw data does not.
fn compare_summaries(claimed: &CellResult, derived: &CellResult, problems: &mut Vec<String>) {
    let mut number = |what: &str, claimed: Option<f64>, derived: Option<f64>| {
        let agrees = match (claimed, derived) {
            (Some(a), Some(b)) => same(a, b),
            (None, None) => true,
            _ => false,
        };
        if !agrees {
            problems.push(format!(
                "{what} {} sent, which its own data does not give",
                shown(claimed)
            ));
        }
    };
    number("speedup", claimed.speedup, derived.speedup);
    number(
        "upstream median",
        claimed.upstream.median_time,
        derived.upstream.median_time,
    );
    number(
        "fork median",
        claimed.fork.median_time,
        derived.fork.median_time,
    );
    for (i, bound) in ["interval low", "interval high"].into_iter().enumerate() {
        number(
            bound,
            claimed.speedup_ci95.map(|ci| ci[i]),
            derived.speedup_ci95.map(|ci| ci[i]),
        );
    }
    number("p-value", claimed.p_value, derived.p_value);
    if claimed.verdict != derived.verdict {
        problems.push(format!(
            "verdict {:?} sent, which its own times do not give",
            claimed.verdict
        ));
    }
    if claimed.pairs != derived.pairs {
        problems.push(format!(
            "{} pairs sent, {} timed",
            claimed.pairs, derived.pairs
        ));
    }
    if claimed.parity != derived.parity {
        problems.push(format!(
            "parity `{}` sent, which its own scores against the spec's gates do not give",
            claimed.parity.as_str()
        ));
    }
    let metrics: std::collections::BTreeSet<&String> = claimed
        .score_delta
        .keys()
        .chain(derived.score_delta.keys())
        .collect();
    for metric in metrics {
        let (sent, own) = (
            claimed.score_delta.get(metric).copied(),
            derived.score_delta.get(metric).copied(),
        );
        if !matches!((sent, own), (Some(a), Some(b)) if same(a, b)) {
            problems.push(format!(
                "pooled `{metric}` delta {} sent, which its own scores do not give",
                shown(sent)
            ));
        }
    }
    if claimed.startup_dominated != derived.startup_dominated {
        problems.push(format!(
            "start-up dominated {} sent, which the fork's median does not give",
            claimed.startup_dominated
        ));
    }
}

/// Equal up to float noise; two non-finite values are equal when identical (`null` scores
/// are held as +inf).
fn same(a: f64, b: f64) -> bool {
    if !(a.is_finite() && b.is_finite()) {
        return a == b || (a.is_nan() && b.is_nan());
    }
    (a - b).abs() <= TOLERANCE * a.abs().max(b.abs()).max(1.0)
}

fn shown(value: Option<f64>) -> String {
    match value {
        None => "none".to_string(),
        Some(v) if v.is_finite() && v != 0.0 && !(1e-4..1e6).contains(&v.abs()) => format!("{v:e}"),
        Some(v) => format!("{v}"),
    }
}

#[cfg(test)]
mod tests;
