//! `abfleet history`: one workload's results over time on a generation, read from the
//! snapshots finished runs leave in the store (`generation_results`), never by
//! re-assembling their reports; runs that finished before the store kept snapshots are
//! recorded once, the first time a history or a later report needs them.

pub use abfleet_core::report::history::HistoryQuery;
use abfleet_core::report::history::{history_points, HistoryPoint};

use super::{FleetError, Reports};

/// The default and the largest number of runs one history covers.
pub const HISTORY_LIMIT: (u32, u32) = (200, 5000);

impl Reports {
    pub async fn history(&self, query: HistoryQuery) -> Result<Vec<HistoryPoint>, FleetError> {
        for earlier in self
            .ground
            .store()
            .reports()
            .unrecorded_runs_of(query.name.as_deref())
            .await?
        {
            self.record_results_of(earlier).await?;
        }
        let limit = match query.limit {
            0 => HISTORY_LIMIT.0,
            n => n.min(HISTORY_LIMIT.1),
        };
        let snapshots = self
            .ground
            .store()
            .reports()
            .generation_history(&query.generation, query.name.as_deref(), limit)
            .await?;
        Ok(history_points(
            &snapshots,
            &query.workload,
            query.fixture.as_deref(),
        ))
    }
}
