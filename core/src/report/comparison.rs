//! What a generation's comparison with the earlier comparable runs says, as data
//! (`SincePrevious`: what changed, the regression flags, the parity shrinks and the runs
//! compared with); `history` computes it, the report model carries it, the renderings read
//! it.

use serde::{Deserialize, Serialize};

/// What a regression flag says went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlagKind {
    SpeedupShrank,
    ForkSlower,
    ParityGrowth,
}

impl FlagKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FlagKind::SpeedupShrank => "speedup_shrank",
            FlagKind::ForkSlower => "fork_slower",
            FlagKind::ParityGrowth => "parity_growth",
        }
    }
}

/// One regression of a cell against an earlier comparable run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegressionFlag {
    pub fixture: String,
    pub workload: String,
    /// The GPU backend of a backend cell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    pub kind: FlagKind,
    /// The metric, for `parity_growth`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    /// The value then and now: speedup, the fork's median seconds, or |delta|.
    pub then: f64,
    pub now: f64,
    /// The run `then` comes from: the latest earlier comparable run with the cell, or for
    /// `parity_growth` the latest whose cell passed parity (the accepted delta).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub then_run: Option<String>,
    /// For `parity_growth`: what the delta was allowed, `then` plus half a printed unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed: Option<f64>,
    /// For people: `speedup 1.84x [1.80, 1.88] → 1.41x [1.38, 1.44]`.
    pub detail: String,
}

/// A metric's pooled |delta| that shrank against the accepted one: the allowance can be
/// ratcheted down to `now`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParityShrink {
    pub fixture: String,
    pub workload: String,
    pub metric: String,
    /// The accepted |delta| and the run it was accepted in.
    pub then: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub then_run: Option<String>,
    pub now: f64,
}

impl ParityShrink {
    pub fn cell(&self) -> String {
        format!("{}/{}", self.fixture, self.workload)
    }
}

/// Reads a shrink as written now, or as `[cell, metric, then, now]` (reports before the
/// ratchet named its run).
impl<'de> Deserialize<'de> for ParityShrink {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Now {
            fixture: String,
            workload: String,
            metric: String,
            then: f64,
            #[serde(default)]
            then_run: Option<String>,
            now: f64,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            Now(Now),
            Before(String, String, f64, f64),
        }
        Ok(match Form::deserialize(deserializer)? {
            Form::Now(n) => ParityShrink {
                fixture: n.fixture,
                workload: n.workload,
                metric: n.metric,
                then: n.then,
                then_run: n.then_run,
                now: n.now,
            },
            Form::Before(cell, metric, then, now) => {
                let (fixture, workload) = cell.split_once('/').unwrap_or((&cell, ""));
                ParityShrink {
                    fixture: fixture.to_string(),
                    workload: workload.to_string(),
                    metric,
                    then,
                    then_run: None,
                    now,
                }
            }
        })
    }
}

/// The upstream pin moved between the earlier run and this one: speedups are against
/// another baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineMove {
    pub from: String,
    pub from_commit: Option<String>,
    pub to: String,
    pub to_commit: Option<String>,
}

impl BaselineMove {
    /// `upstream v3.2.0 → v3.3.0` (with the commits when the names are the same).
    pub fn line(&self) -> String {
        if self.from == self.to {
            format!(
                "upstream `{}` ({} → {})",
                self.to,
                short(&self.from_commit),
                short(&self.to_commit)
            )
        } else {
            format!("upstream `{}` → `{}`", self.from, self.to)
        }
    }
}

/// An earlier run some cells were compared with because a later comparable run did not have
/// them (it was partial).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EarlierRun {
    pub run_id: String,
    pub date: String,
    /// Its fork commit (what `abfleet bisect RUN` bisects from for a flag against it).
    #[serde(default)]
    pub fork_commit: Option<String>,
    /// The cells compared with it (`fixture/workload`).
    pub cells: Vec<String>,
    /// What changed between it and this run.
    pub changes: Vec<String>,
}

/// A generation's comparison with the earlier comparable runs (same spec name, generation
/// key and hardware id; finished; no bisect steps).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SincePrevious {
    /// The previous comparable run: the latest with any of this run's cells.
    pub run_id: String,
    pub date: String,
    /// What changed in between: fork commit, upstream pin, spec, toolchains, silicon; empty
    /// when nothing did.
    pub changes: Vec<String>,
    /// The upstream pin moved since that run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_moved: Option<BaselineMove>,
    /// The fork commits of the previous run and of this one (what `abfleet bisect RUN`
    /// bisects between).
    #[serde(default)]
    pub fork_commit_then: Option<String>,
    #[serde(default)]
    pub fork_commit_now: Option<String>,
    /// Cells matched on fixture and workload, with any earlier comparable run.
    pub matched_cells: u32,
    /// Runs before the previous one that cells were compared with, because the later runs
    /// did not have them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier_runs: Vec<EarlierRun>,
    pub flags: Vec<RegressionFlag>,
    /// Metrics whose delta shrank against the accepted one: the allowance can be ratcheted
    /// down.
    #[serde(default)]
    pub parity_shrink: Vec<ParityShrink>,
}

impl SincePrevious {
    /// The fork commit of the run a flag compares with: the previous run's, or that of the
    /// earlier run the flag's cell was compared with.
    pub fn fork_commit_of(&self, flag: &RegressionFlag) -> Option<&str> {
        match &flag.then_run {
            Some(run) if *run != self.run_id => self
                .earlier_runs
                .iter()
                .find(|e| e.run_id == *run)
                .and_then(|e| e.fork_commit.as_deref()),
            _ => self.fork_commit_then.as_deref(),
        }
    }
}

/// A commit as the comparisons show it: its first 12 characters, `-` when unknown.
pub(super) fn short(commit: &Option<String>) -> String {
    commit
        .as_deref()
        .map_or_else(|| "-".to_string(), |c| c.chars().take(12).collect())
}
