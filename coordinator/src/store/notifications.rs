//! Alerts per endpoint (table `notifications`, migration 15): queued with the run's finish
//! (or when an agent is lost), then sent by the coordinator's delivery task, which records
//! every attempt. One row per run, endpoint, kind and key: a finish retried or a loss seen
//! twice queues nothing new. Rows are kept after they are sent: they are the run's record of
//! who was told what.

use abfleet_core::notification::NotificationRecord;
use abfleet_core::report::format_utc;
use abfleet_core::RunId;
use rusqlite::{params, OptionalExtension, Transaction};

use super::Store;
use crate::error::CoordinatorError;

/// An alert for one endpoint, to queue.
#[derive(Debug, Clone, PartialEq)]
pub struct NewNotification {
    pub run_id: RunId,
    pub endpoint: String,
    pub kind: String,
    pub key: String,
    pub summary: String,
    pub payload_json: String,
}

/// A queued alert whose time to be tried has come.
#[derive(Debug, Clone, PartialEq)]
pub struct DueNotification {
    pub id: i64,
    pub run_id: String,
    pub endpoint: String,
    pub kind: String,
    /// What makes it one alert (with run and kind): its delivery id's source.
    pub key: String,
    pub payload_json: String,
    /// Attempts made before this one.
    pub attempts: u32,
}

/// How one attempt went.
#[derive(Debug, Clone, PartialEq)]
pub enum Attempt {
    /// The endpoint took it (a 2xx status).
    Sent { status: u16 },
    /// It did not; tried again at `retry_at_ms`, or never again when `None`.
    Failed {
        status: Option<u16>,
        error: String,
        retry_at_ms: Option<i64>,
    },
}

/// Queues `rows` in `tx`; a row already queued (same run, endpoint, kind, key) is left as is.
pub(super) fn queue(
    tx: &Transaction<'_>,
    rows: &[NewNotification],
    now_ms: i64,
) -> Result<usize, CoordinatorError> {
    let mut queued = 0;
    for row in rows {
        queued += tx.execute(
            "INSERT OR IGNORE INTO notifications (run_id, endpoint, kind, key, summary, payload_json, state, next_attempt_ms, created_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', ?7, ?7)",
            params![
                row.run_id,
                row.endpoint,
                row.kind,
                row.key,
                row.summary,
                row.payload_json,
                now_ms
            ],
        )?;
    }
    Ok(queued)
}

/// Alerts queued for delivery and what each attempt did. A view of the [`Store`]: `store.notifications()`.
#[derive(Clone, Copy)]
pub struct NotificationRecords<'s> {
    pub(super) store: &'s Store,
}

impl Store {
    pub fn notifications(&self) -> NotificationRecords<'_> {
        NotificationRecords { store: self }
    }
}

impl NotificationRecords<'_> {
    /// Queues alerts outside a run's finish (an agent lost mid-job); how many were new.
    pub async fn queue_notifications(
        &self,
        rows: Vec<NewNotification>,
        now_ms: i64,
    ) -> Result<usize, CoordinatorError> {
        self.store
            .with(move |conn| {
                let tx = conn.transaction()?;
                let queued = queue(&tx, &rows, now_ms)?;
                tx.commit()?;
                Ok(queued)
            })
            .await
    }

    /// Alerts due by `now_ms`, oldest due first, at most `limit`.
    pub async fn due_notifications(
        &self,
        now_ms: i64,
        limit: u32,
    ) -> Result<Vec<DueNotification>, CoordinatorError> {
        self.store.read(move |conn| {
            let mut stmt = conn.prepare(
                "SELECT id, run_id, endpoint, kind, key, payload_json, attempts FROM notifications
                 WHERE state = 'pending' AND next_attempt_ms <= ?1 ORDER BY next_attempt_ms, id LIMIT ?2",
            )?;
            let rows = stmt.query_map(params![now_ms, limit], |row| {
                Ok(DueNotification {
                    id: row.get(0)?,
                    run_id: row.get(1)?,
                    endpoint: row.get(2)?,
                    kind: row.get(3)?,
                    key: row.get(4)?,
                    payload_json: row.get(5)?,
                    attempts: row.get(6)?,
                })
            })?;
            Ok(rows.collect::<rusqlite::Result<_>>()?)
        })
        .await
    }

    /// When the next queued alert is due, if any is.
    pub async fn next_notification_due_ms(&self) -> Result<Option<i64>, CoordinatorError> {
        self.store
            .read(|conn| {
                Ok(conn
                    .query_row(
                        "SELECT MIN(next_attempt_ms) FROM notifications WHERE state = 'pending'",
                        [],
                        |row| row.get::<_, Option<i64>>(0),
                    )
                    .optional()?
                    .flatten())
            })
            .await
    }

    /// Records one attempt of alert `id`.
    pub async fn record_notification_attempt(
        &self,
        id: i64,
        attempt: Attempt,
        now_ms: i64,
    ) -> Result<(), CoordinatorError> {
        self.store.with(move |conn| {
            match attempt {
                Attempt::Sent { status } => conn.execute(
                    "UPDATE notifications SET state = 'sent', attempts = attempts + 1, last_status = ?2, last_error = NULL, sent_ms = ?3 WHERE id = ?1",
                    params![id, status, now_ms],
                )?,
                Attempt::Failed {
                    status,
                    error,
                    retry_at_ms,
                } => conn.execute(
                    "UPDATE notifications SET state = ?2, attempts = attempts + 1, last_status = ?3, last_error = ?4, next_attempt_ms = ?5 WHERE id = ?1",
                    params![
                        id,
                        if retry_at_ms.is_some() { "pending" } else { "given_up" },
                        status,
                        error,
                        retry_at_ms.unwrap_or(now_ms)
                    ],
                )?,
            };
            Ok(())
        })
        .await
    }

    /// Every alert of `run_id`, in the order they were queued.
    pub async fn notifications_of(
        &self,
        run_id: RunId,
    ) -> Result<Vec<NotificationRecord>, CoordinatorError> {
        self.store.read(move |conn| {
            let mut stmt = conn.prepare(
                "SELECT kind, endpoint, key, summary, state, attempts, last_status, last_error, created_ms, sent_ms
                 FROM notifications WHERE run_id = ?1 ORDER BY id",
            )?;
            let rows = stmt.query_map(params![run_id], |row| {
                Ok(NotificationRecord {
                    kind: row.get(0)?,
                    endpoint: row.get(1)?,
                    key: row.get(2)?,
                    summary: row.get(3)?,
                    state: row.get(4)?,
                    attempts: row.get(5)?,
                    last_status: row.get(6)?,
                    last_error: row.get(7)?,
                    created: format_utc(row.get(8)?),
                    sent: row.get::<_, Option<i64>>(9)?.map(format_utc),
                })
            })?;
            Ok(rows.collect::<rusqlite::Result<_>>()?)
        })
        .await
    }
}
