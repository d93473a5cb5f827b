//! The points of `abfleet history`: one workload on one generation over time, each compared
//! with the point before it of the same spec and hardware.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::since::since_previous_in;
use super::snapshot::{CellSummary, GenerationSnapshot};
use super::{RegressionFlag, BISECT_TRIGGER};

/// What `abfleet history` asks for: one workload on one generation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistoryQuery {
    /// The generation key, exactly (`cpu/x86-64-v4/zen4`).
    pub generation: String,
    pub workload: String,
    /// Only this fixture; `None`: every fixture.
    pub fixture: Option<String>,
    /// Only runs of this spec name; `None`: every name.
    pub name: Option<String>,
    /// The newest this many runs (0: the coordinator's default).
    pub limit: u32,
}

/// One run in `abfleet history`: a generation's cell (fixture, workload) in that run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryPoint {
    pub run_id: String,
    pub name: String,
    pub date: String,
    pub trigger: String,
    pub trigger_note: Option<String>,
    pub generation: String,
    pub silicon_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware_id: Option<String>,
    pub fork_commit: Option<String>,
    pub upstream_requested: String,
    pub toolchain: BTreeMap<String, String>,
    pub cell: CellSummary,
    /// Flags against the points before it in this history (same spec name and hardware).
    pub flags: Vec<RegressionFlag>,
    /// What changed since the point before it.
    pub changes: Vec<String>,
}

/// The history of one workload on a generation, from snapshots oldest first: one point per
/// snapshot that has the cell (every fixture unless one is named; bisect steps never), each
/// compared, like a report, with the points before it of the same spec name, hardware and
/// cell.
pub fn history_points(
    snapshots: &[(String, GenerationSnapshot)],
    workload: &str,
    fixture: Option<&str>,
) -> Vec<HistoryPoint> {
    type SeriesKey = (String, Option<String>, String, Option<String>);
    let mut points: Vec<HistoryPoint> = Vec::new();
    let mut series: BTreeMap<SeriesKey, Vec<GenerationSnapshot>> = BTreeMap::new();
    for (name, snapshot) in snapshots {
        if snapshot.trigger == BISECT_TRIGGER {
            continue;
        }
        for cell in &snapshot.cells {
            if cell.workload != workload
                || fixture.is_some_and(|f| f != cell.fixture)
                || !cell.is_present()
            {
                continue;
            }
            let key = (
                name.clone(),
                snapshot.hardware().map(str::to_string),
                cell.fixture.clone(),
                cell.backend.clone(),
            );
            let mut one = snapshot.clone();
            one.cells = vec![cell.clone()];
            let before = series.entry(key).or_default();
            let since = since_previous_in(&one, before.iter().rev());
            let (flags, changes) = since.map_or((Vec::new(), Vec::new()), |s| (s.flags, s.changes));
            points.push(HistoryPoint {
                run_id: snapshot.run_id.clone(),
                name: name.clone(),
                date: snapshot.date.clone(),
                trigger: snapshot.trigger.clone(),
                trigger_note: snapshot.trigger_note.clone(),
                generation: snapshot.generation.clone(),
                silicon_id: snapshot.silicon_id.clone(),
                hardware_id: snapshot.hardware().map(str::to_string),
                fork_commit: snapshot.fork_commit.clone(),
                upstream_requested: snapshot.upstream_requested.clone(),
                toolchain: snapshot.toolchain.clone(),
                cell: cell.clone(),
                flags,
                changes,
            });
            before.push(one);
        }
    }
    points
}
