//! `--fail-on`: opt-in exit codes for what a run found without failing on it by itself — a
//! cell where the fork is significantly slower than upstream, a regression against the
//! previous comparable run, a sweep default another configuration beats. A run that
//! already exits non-zero (parity, not carried out, a tuning check, cancelled) keeps its
//! code: these gates only turn a 0 into their own code, so a CI job can tell them apart.

use std::fmt;
use std::str::FromStr;

use crate::exit;
use crate::paired::Verdict;
use crate::report::history::FlagKind;
use crate::report::Report;
use crate::sweep::DefaultVerdict;

/// One gate of `--fail-on`, in the order they are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FailOn {
    /// A measured cell whose verdict is `slower`: the fork is significantly slower than
    /// upstream on it (exit 5).
    Slower,
    /// A regression flag against the previous comparable run: the speedup shrank, the fork's
    /// own median grew, or a parity delta grew (exit 6).
    Regression,
    /// A sweep whose default configuration is beaten by one that kept parity (exit 7).
    Stale,
}

impl FailOn {
    pub const ALL: [FailOn; 3] = [FailOn::Slower, FailOn::Regression, FailOn::Stale];

    pub fn as_str(self) -> &'static str {
        match self {
            FailOn::Slower => "slower",
            FailOn::Regression => "regression",
            FailOn::Stale => "stale",
        }
    }

    pub fn exit_code(self) -> i32 {
        match self {
            FailOn::Slower => exit::SLOWER,
            FailOn::Regression => exit::REGRESSION,
            FailOn::Stale => exit::STALE,
        }
    }

    /// What in `report` trips this gate, one line each; empty when nothing does.
    pub fn findings(self, report: &Report) -> Vec<String> {
        match self {
            FailOn::Slower => report
                .cells
                .iter()
                .filter(|cell| cell.rejected.is_empty() && cell.verdict == Some(Verdict::Slower))
                .map(|cell| {
                    let interval = cell
                        .speedup_ci95
                        .map_or(String::new(), |[lo, hi]| format!(" [{lo:.2}, {hi:.2}]"));
                    format!(
                        "{}{}/{}: the fork is slower, {:.2}x{interval}",
                        generation_prefix(cell.generation.as_deref()),
                        cell.fixture,
                        cell.workload,
                        cell.speedup.unwrap_or(f64::NAN),
                    )
                })
                .collect(),
            FailOn::Regression => report
                .generations
                .iter()
                .filter_map(|g| g.since_previous.as_ref().map(|since| (g, since)))
                .flat_map(|(g, since)| {
                    since.flags.iter().map(move |flag| {
                        let what = match flag.kind {
                            FlagKind::SpeedupShrank => "speedup shrank",
                            FlagKind::ForkSlower => "the fork's own time grew",
                            FlagKind::ParityGrowth => "parity delta grew",
                        };
                        format!(
                            "{}{}/{}: {what} since run {}: {}",
                            generation_prefix(Some(&g.key)),
                            flag.fixture,
                            flag.workload,
                            flag.then_run.as_deref().unwrap_or(&since.run_id),
                            flag.detail
                        )
                    })
                })
                .collect(),
            FailOn::Stale => report
                .generations
                .iter()
                .filter_map(|g| g.sweep.as_ref().map(|sweep| (g, sweep)))
                .filter(|(_, sweep)| sweep.default_verdict == Some(DefaultVerdict::Stale))
                .map(|(g, sweep)| {
                    format!(
                        "{}the sweep's default is stale: {}",
                        generation_prefix(Some(&g.key)),
                        sweep.verdict_line
                    )
                })
                .collect(),
        }
    }
}

fn generation_prefix(generation: Option<&str>) -> String {
    match generation {
        Some(key) if key != "any" => format!("{key}: "),
        _ => String::new(),
    }
}

impl fmt::Display for FailOn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for FailOn {
    type Err = String;

    fn from_str(text: &str) -> Result<FailOn, String> {
        FailOn::ALL
            .into_iter()
            .find(|gate| gate.as_str() == text)
            .ok_or_else(|| {
                format!("`{text}` is not a --fail-on gate; use slower, regression or stale (comma-separated for several)")
            })
    }
}

/// The exit code of `report` under `gates`, and why: the report's own code when it is not
/// 0; else the first gate (slower, regression, stale) something trips, with what tripped it.
pub fn gated_exit_code(report: &Report, gates: &[FailOn]) -> (i32, Vec<String>) {
    if report.exit_code != exit::OK {
        return (report.exit_code, Vec::new());
    }
    let mut gates = gates.to_vec();
    gates.sort_unstable();
    gates.dedup();
    for gate in gates {
        let found = gate.findings(report);
        if !found.is_empty() {
            return (gate.exit_code(), found);
        }
    }
    (exit::OK, Vec::new())
}

#[cfg(test)]
mod tests;
