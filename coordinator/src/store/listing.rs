//! The run list (`abfleet runs`, `ListRuns`): runs newest (or oldest) first, a page at a time
//! after a cursor — the (created, run id) of the last run of the page before — read from the
//! `runs_by_created` index, so a page costs the same at 10 runs or 10 million. A listed run is
//! its summary columns; its spec is not read (nor parsed) for a list.

use abfleet_core::lifecycle::RunState;
use abfleet_core::RunId;
use rusqlite::{params, OptionalExtension};

use super::RunRecords;
use crate::error::CoordinatorError;

/// A run as lists show it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunListing {
    pub run_id: RunId,
    pub name: String,
    pub trigger: String,
    pub trigger_note: Option<String>,
    pub state: RunState,
    pub created_ms: i64,
    pub exit_code: Option<i32>,
}

/// Which end of the history a list starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOrder {
    NewestFirst,
    OldestFirst,
}

/// Where a page ends: the next page starts after this run, in the list's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunCursor {
    pub created_ms: i64,
    pub run_id: String,
}

impl RunCursor {
    /// The cursor after `run`.
    pub fn after(run: &RunListing) -> RunCursor {
        RunCursor {
            created_ms: run.created_ms,
            run_id: run.run_id.to_string(),
        }
    }

    /// As a page token: `CREATED_MS.RUN_ID`.
    pub fn token(&self) -> String {
        format!("{}.{}", self.created_ms, self.run_id)
    }

    /// A token [`RunCursor::token`] wrote; `None` for anything else.
    pub fn from_token(token: &str) -> Option<RunCursor> {
        let (created_ms, run_id) = token.split_once('.')?;
        let run_id: RunId = run_id.parse().ok()?;
        Some(RunCursor {
            created_ms: created_ms.parse().ok()?,
            run_id: run_id.to_string(),
        })
    }
}

impl RunRecords<'_> {
    /// Up to `limit` runs in `order`, after `cursor` (from the start without one).
    pub async fn run_listing(
        &self,
        order: RunOrder,
        cursor: Option<RunCursor>,
        limit: u32,
    ) -> Result<Vec<RunListing>, CoordinatorError> {
        self.store.read(move |conn| {
            let (direction, compare) = match order {
                RunOrder::NewestFirst => ("DESC", "<"),
                RunOrder::OldestFirst => ("ASC", ">"),
            };
            let columns =
                "SELECT run_id, name, trigger, trigger_note, state, created_ms, exit_code FROM runs";
            let order_by = format!("ORDER BY created_ms {direction}, run_id {direction} LIMIT ?1");
            let mut rows = Vec::new();
            let mut push = |row: &rusqlite::Row<'_>| -> rusqlite::Result<()> {
                rows.push(listing_row(row)?);
                Ok(())
            };
            match cursor {
                None => {
                    let mut stmt = conn.prepare(&format!("{columns} {order_by}"))?;
                    let mut query = stmt.query(params![i64::from(limit)])?;
                    while let Some(row) = query.next()? {
                        push(row)?;
                    }
                }
                Some(cursor) => {
                    let mut stmt = conn.prepare(&format!(
                        "{columns} WHERE (created_ms, run_id) {compare} (?2, ?3) {order_by}"
                    ))?;
                    let mut query =
                        stmt.query(params![i64::from(limit), cursor.created_ms, cursor.run_id])?;
                    while let Some(row) = query.next()? {
                        push(row)?;
                    }
                }
            }
            Ok(rows)
        })
        .await
    }
}

impl RunRecords<'_> {
    /// The spec JSON stored with a run (validated when it was submitted), undecoded.
    pub async fn spec_json(&self, run_id: RunId) -> Result<Option<String>, CoordinatorError> {
        self.store
            .read(move |conn| {
                Ok(conn
                    .query_row(
                        "SELECT spec_json FROM runs WHERE run_id = ?1",
                        params![run_id],
                        |row| row.get(0),
                    )
                    .optional()?)
            })
            .await
    }
}

fn listing_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<RunListing> {
    Ok(RunListing {
        run_id: row.get(0)?,
        name: row.get(1)?,
        trigger: row.get(2)?,
        trigger_note: row.get(3)?,
        state: row.get(4)?,
        created_ms: row.get(5)?,
        exit_code: row.get(6)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::NewJob;

    #[test]
    fn a_cursor_survives_its_token_and_nothing_else_is_one() {
        let run_id = RunId::new_random();
        let cursor = RunCursor {
            created_ms: 1_700_000_000_123,
            run_id: run_id.to_string(),
        };
        assert_eq!(RunCursor::from_token(&cursor.token()), Some(cursor));
        for bad in ["", "200", "12.not-a-uuid", &format!("x.{run_id}")] {
            assert_eq!(RunCursor::from_token(bad), None, "{bad}");
        }
    }

    #[tokio::test]
    async fn pages_after_a_cursor_list_every_run_once_in_either_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(dir.path()).unwrap();
        let text = include_str!("../../../fixtures/jobs/demo.toml");
        let fixtures =
            std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/jobs"));
        let spec = abfleet_core::spec::JobSpec::from_toml(
            text,
            std::path::Path::new("demo.toml"),
            fixtures,
        )
        .unwrap();
        // Seven runs, two of them submitted in the same millisecond.
        let mut submitted = Vec::new();
        for (i, created_ms) in [10, 20, 20, 30, 40, 50, 60].into_iter().enumerate() {
            let run_id = RunId::new_random();
            store
                .runs()
                .insert(
                    run_id,
                    &spec,
                    "manual",
                    &format!("{i}"),
                    vec![NewJob::any()],
                    created_ms,
                )
                .await
                .unwrap();
            submitted.push((created_ms, run_id));
        }
        submitted.sort();
        for order in [RunOrder::NewestFirst, RunOrder::OldestFirst] {
            let mut listed = Vec::new();
            let mut cursor = None;
            loop {
                let page = store
                    .runs()
                    .run_listing(order, cursor.clone(), 3)
                    .await
                    .unwrap();
                assert!(page.len() <= 3);
                let Some(last) = page.last() else { break };
                cursor = Some(RunCursor::after(last));
                listed.extend(page.iter().map(|r| (r.created_ms, r.run_id)));
            }
            let mut expected = submitted.clone();
            if order == RunOrder::NewestFirst {
                expected.reverse();
            }
            assert_eq!(listed, expected, "{order:?}");
        }
        let newest = store
            .runs()
            .run_listing(RunOrder::NewestFirst, None, 1)
            .await
            .unwrap();
        assert_eq!(newest[0].created_ms, 60);
        assert_eq!(newest[0].name, spec.name);
        assert_eq!(newest[0].state, RunState::Queued);
        assert_eq!(newest[0].exit_code, None);
    }
}
