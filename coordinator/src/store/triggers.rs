//! Why runs happen: every trigger (from `abfleet trigger` or a webhook), with its reason, its
//! debounce key and note, and the run it started or was debounced into (`triggers`,
//! migration 8); and the webhook deliveries already received (`webhook_deliveries`), so a
//! replayed delivery is ignored, across restarts too; and the upstream tags the watcher has
//! seen (`upstream_tags`, migration 9).

use abfleet_core::RunId;
use rusqlite::{params, OptionalExtension};

use super::{parse_stored_id, Store};
use crate::error::CoordinatorError;

/// One trigger as the store keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct TriggerRow {
    pub reason: String,
    /// What makes two triggers "the same thing" (a tag name, a PR number); `None` is never
    /// debounced.
    pub debounce_key: Option<String>,
    pub note: String,
    /// `cli` or `webhook`.
    pub source: String,
    pub received_ms: i64,
    pub run_id: RunId,
    /// It started no run of its own: `run_id` is the run it was debounced into.
    pub debounced: bool,
}

impl Store {
    /// The run the latest undebounced trigger of `reason` and `debounce_key` received at or
    /// after `since_ms` started, if any.
    pub async fn debounce_target(
        &self,
        reason: &str,
        debounce_key: &str,
        since_ms: i64,
    ) -> Result<Option<RunId>, CoordinatorError> {
        let reason = reason.to_string();
        let debounce_key = debounce_key.to_string();
        self.with(move |conn| {
            let run_id: Option<String> = conn
                .query_row(
                    "SELECT run_id FROM triggers WHERE reason = ?1 AND debounce_key = ?2 AND debounced = 0 AND received_ms >= ?3 ORDER BY received_ms DESC, trigger_id DESC LIMIT 1",
                    params![reason, debounce_key, since_ms],
                    |row| row.get(0),
                )
                .optional()?;
            run_id.as_deref().map(parse_stored_id).transpose()
        })
        .await
    }

    pub async fn insert_trigger(&self, trigger: TriggerRow) -> Result<(), CoordinatorError> {
        self.with(move |conn| {
            conn.execute(
                "INSERT INTO triggers (reason, debounce_key, note, source, received_ms, run_id, debounced) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    trigger.reason,
                    trigger.debounce_key,
                    trigger.note,
                    trigger.source,
                    trigger.received_ms,
                    trigger.run_id.to_string(),
                    trigger.debounced
                ],
            )?;
            Ok(())
        })
        .await
    }

    /// Every trigger, oldest first.
    pub async fn list_triggers(&self) -> Result<Vec<TriggerRow>, CoordinatorError> {
        self.with(move |conn| {
            let mut stmt = conn.prepare(
                "SELECT reason, debounce_key, note, source, received_ms, run_id, debounced FROM triggers ORDER BY received_ms, trigger_id",
            )?;
            let rows = stmt.query_map([], |row| {
                let run_id: String = row.get(5)?;
                let reason: String = row.get(0)?;
                let debounce_key: Option<String> = row.get(1)?;
                let note: String = row.get(2)?;
                let source: String = row.get(3)?;
                let received_ms: i64 = row.get(4)?;
                let debounced: bool = row.get(6)?;
                Ok(parse_stored_id(&run_id).map(|run_id| TriggerRow {
                    reason,
                    debounce_key,
                    note,
                    source,
                    received_ms,
                    run_id,
                    debounced,
                }))
            })?;
            rows.map(|row| row?)
            .collect()
        })
        .await
    }

    /// Remembers a webhook delivery id; `false` when it was already received (a replay).
    pub async fn remember_delivery(
        &self,
        delivery_id: &str,
        event: &str,
        now_ms: i64,
    ) -> Result<bool, CoordinatorError> {
        let delivery_id = delivery_id.to_string();
        let event = event.to_string();
        self.with(move |conn| {
            let inserted = conn.execute(
                "INSERT OR IGNORE INTO webhook_deliveries (delivery_id, event, received_ms) VALUES (?1, ?2, ?3)",
                params![delivery_id, event, now_ms],
            )?;
            Ok(inserted == 1)
        })
        .await
    }

    /// Forgets a delivery that was not handled (the milestone spec was missing, the store
    /// failed), so GitHub's redelivery of it is handled rather than ignored as a replay.
    pub async fn forget_delivery(&self, delivery_id: &str) -> Result<(), CoordinatorError> {
        let delivery_id = delivery_id.to_string();
        self.with(move |conn| {
            conn.execute(
                "DELETE FROM webhook_deliveries WHERE delivery_id = ?1",
                params![delivery_id],
            )?;
            Ok(())
        })
        .await
    }

    /// The tags of `url` the upstream watcher has seen.
    pub async fn known_upstream_tags(
        &self,
        url: &str,
    ) -> Result<std::collections::BTreeSet<String>, CoordinatorError> {
        let url = url.to_string();
        self.with(move |conn| {
            let mut stmt = conn.prepare("SELECT tag FROM upstream_tags WHERE url = ?1")?;
            let tags = stmt.query_map(params![url], |row| row.get::<_, String>(0))?;
            Ok(tags.collect::<rusqlite::Result<_>>()?)
        })
        .await
    }

    /// Records tags (name, commit) of `url` as seen.
    pub async fn record_upstream_tags(
        &self,
        url: &str,
        tags: Vec<(String, String)>,
        now_ms: i64,
    ) -> Result<(), CoordinatorError> {
        let url = url.to_string();
        self.with(move |conn| {
            let tx = conn.transaction()?;
            for (tag, sha) in tags {
                tx.execute(
                    "INSERT OR IGNORE INTO upstream_tags (url, tag, sha, seen_ms) VALUES (?1, ?2, ?3, ?4)",
                    params![url, tag, sha, now_ms],
                )?;
            }
            tx.commit()?;
            Ok(())
        })
        .await
    }
}
