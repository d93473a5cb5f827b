//! Why runs happen: every trigger (from `abfleet trigger`, a webhook or a watcher), with its
//! reason, its debounce key and note, and the run it started or was debounced into
//! (`triggers`, migration 8); the webhook deliveries already received (`webhook_deliveries`),
//! so a replayed delivery is ignored, across restarts too, pruned after
//! [`DELIVERY_MEMORY_MS`]; the upstream tags the watcher has seen (`upstream_tags`,
//! migration 9); and (migration 11) the release tags of the milestone spec's upstream that
//! started a run (`upstream_pins`: the pin follows the newest) and every toolchain each
//! generation key has registered with, from any agent (`generation_toolchains`: the
//! toolchain watcher's memory).

use std::collections::BTreeMap;

use abfleet_core::{AgentId, RunId};
use rusqlite::{params, OptionalExtension};

use super::Store;
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

/// Triggers, debounce, upstream pins and tags seen, toolchains seen, webhook deliveries. A view of the [`Store`]: `store.triggers()`.
#[derive(Clone, Copy)]
pub struct TriggerRecords<'s> {
    pub(super) store: &'s Store,
}

impl Store {
    pub fn triggers(&self) -> TriggerRecords<'_> {
        TriggerRecords { store: self }
    }
}

impl TriggerRecords<'_> {
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
        self.store.with(move |conn| {
            let run_id: Option<RunId> = conn
                .query_row(
                    "SELECT run_id FROM triggers WHERE reason = ?1 AND debounce_key = ?2 AND debounced = 0 AND received_ms >= ?3 ORDER BY received_ms DESC, trigger_id DESC LIMIT 1",
                    params![reason, debounce_key, since_ms],
                    |row| row.get(0),
                )
                .optional()?;
            Ok(run_id)
        })
        .await
    }

    pub async fn insert_trigger(&self, trigger: TriggerRow) -> Result<(), CoordinatorError> {
        self.store.with(move |conn| {
            conn.execute(
                "INSERT INTO triggers (reason, debounce_key, note, source, received_ms, run_id, debounced) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    trigger.reason,
                    trigger.debounce_key,
                    trigger.note,
                    trigger.source,
                    trigger.received_ms,
                    trigger.run_id,
                    trigger.debounced
                ],
            )?;
            Ok(())
        })
        .await
    }

    /// The run the latest undebounced trigger of one of `reasons` and `debounce_key`
    /// received at or after `since_ms` started, if any.
    pub async fn debounce_target_of(
        &self,
        reasons: &[&str],
        debounce_key: &str,
        since_ms: i64,
    ) -> Result<Option<RunId>, CoordinatorError> {
        for reason in reasons {
            if let Some(run_id) = self.debounce_target(reason, debounce_key, since_ms).await? {
                return Ok(Some(run_id));
            }
        }
        Ok(None)
    }

    /// Every trigger, oldest first.
    pub async fn list_triggers(&self) -> Result<Vec<TriggerRow>, CoordinatorError> {
        self.store.with(move |conn| {
            let mut stmt = conn.prepare(
                "SELECT reason, debounce_key, note, source, received_ms, run_id, debounced FROM triggers ORDER BY received_ms, trigger_id",
            )?;
            let rows = stmt.query_map([], |row| {
                let run_id: RunId = row.get(5)?;
                let reason: String = row.get(0)?;
                let debounce_key: Option<String> = row.get(1)?;
                let note: String = row.get(2)?;
                let source: String = row.get(3)?;
                let received_ms: i64 = row.get(4)?;
                let debounced: bool = row.get(6)?;
                Ok(Ok(TriggerRow {
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
        self.store.with(move |conn| {
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
        self.store
            .with(move |conn| {
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
        self.store
            .with(move |conn| {
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
        self.store.with(move |conn| {
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

    /// Forgets deliveries received before `before_ms` (GitHub redelivers only recent ones),
    /// and says how many.
    pub async fn prune_deliveries(&self, before_ms: i64) -> Result<usize, CoordinatorError> {
        self.store
            .with(move |conn| {
                Ok(conn.execute(
                    "DELETE FROM webhook_deliveries WHERE received_ms < ?1",
                    params![before_ms],
                )?)
            })
            .await
    }

    /// Records that release tag `tag` of the upstream `url` started `run_id` (`note`: its
    /// trigger's); the first run of a tag is the one kept.
    pub async fn record_upstream_pin(
        &self,
        url: &str,
        tag: &str,
        run_id: RunId,
        note: &str,
        now_ms: i64,
    ) -> Result<(), CoordinatorError> {
        let (url, tag, note) = (url.to_string(), tag.to_string(), note.to_string());
        self.store.with(move |conn| {
            conn.execute(
                "INSERT OR IGNORE INTO upstream_pins (url, tag, run_id, note, moved_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![url, tag, run_id, note, now_ms],
            )?;
            Ok(())
        })
        .await
    }

    /// The release tags of `url` that started a run, each with that run and its note.
    pub async fn upstream_pins(&self, url: &str) -> Result<Vec<UpstreamPin>, CoordinatorError> {
        let url = url.to_string();
        self.store
            .with(move |conn| {
                let mut stmt = conn.prepare(
                "SELECT tag, run_id, note FROM upstream_pins WHERE url = ?1 ORDER BY moved_ms, tag",
            )?;
                let rows = stmt.query_map(params![url], |row| {
                    let tag: String = row.get(0)?;
                    let run_id: RunId = row.get(1)?;
                    let note: String = row.get(2)?;
                    Ok((tag, run_id, note))
                })?;
                rows.map(|row| {
                    let (tag, run_id, note) = row?;
                    Ok(UpstreamPin { tag, run_id, note })
                })
                .collect()
            })
            .await
    }

    /// Records that `generation` registered with `toolchain` (from `agent_id`), and returns
    /// what the store knew of the generation before: whether this toolchain was already
    /// known, and the toolchain seen most recently other than this one.
    pub async fn record_generation_toolchain(
        &self,
        generation: &str,
        toolchain: &BTreeMap<String, String>,
        agent_id: AgentId,
        now_ms: i64,
    ) -> Result<KnownToolchains, CoordinatorError> {
        let generation = generation.to_string();
        let fingerprint = toolchain_fingerprint(toolchain);
        let toolchain_json = serde_json::to_string(toolchain)
            .map_err(|err| CoordinatorError::Internal(err.to_string()))?;
        self.store.with(move |conn| {
            let tx = conn.transaction()?;
            let known: bool = tx.query_row(
                "SELECT EXISTS (SELECT 1 FROM generation_toolchains WHERE generation = ?1 AND fingerprint = ?2)",
                params![generation, fingerprint],
                |row| row.get(0),
            )?;
            let latest_other: Option<(String, String)> = tx
                .query_row(
                    "SELECT toolchain_json, agent_id FROM generation_toolchains WHERE generation = ?1 AND fingerprint <> ?2 ORDER BY last_seen_ms DESC, first_seen_ms DESC LIMIT 1",
                    params![generation, fingerprint],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .optional()?;
            tx.execute(
                "INSERT INTO generation_toolchains (generation, fingerprint, toolchain_json, agent_id, first_seen_ms, last_seen_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?5)
                 ON CONFLICT(generation, fingerprint) DO UPDATE SET agent_id = excluded.agent_id, last_seen_ms = excluded.last_seen_ms",
                params![generation, fingerprint, toolchain_json, agent_id, now_ms],
            )?;
            tx.commit()?;
            let latest_other = match latest_other {
                Some((json, agent)) => Some((
                    serde_json::from_str(&json)
                        .map_err(|err| CoordinatorError::Internal(format!("generation_toolchains: {err}")))?,
                    agent,
                )),
                None => None,
            };
            Ok(KnownToolchains {
                known,
                latest_other,
            })
        })
        .await
    }
}

/// A release tag of the milestone spec's upstream that started a run.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamPin {
    pub tag: String,
    pub run_id: RunId,
    /// The note of the trigger that started it.
    pub note: String,
}

/// What the store knew of a generation's toolchains before a registration.
#[derive(Debug, Clone, PartialEq)]
pub struct KnownToolchains {
    /// The registered toolchain had been seen on this generation before (by any agent).
    pub known: bool,
    /// The generation's most recently seen other toolchain and the agent that had it;
    /// `None` when the store knows no other (a new generation, or a store from before
    /// migration 11).
    pub latest_other: Option<(BTreeMap<String, String>, String)>,
}

/// A toolchain as one line, `tool=version line; …` in tool order: what makes two equal.
pub fn toolchain_fingerprint(toolchain: &BTreeMap<String, String>) -> String {
    toolchain
        .iter()
        .map(|(tool, line)| format!("{tool}={line}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// How long a webhook delivery id is remembered (GitHub redelivers for days, not months).
pub const DELIVERY_MEMORY_MS: i64 = 30 * 24 * 3600 * 1000;
