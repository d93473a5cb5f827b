//! The pull request a run answers (table `pull_request_reports`, migration 16; `answered`
//! is 0 while open, 1 once the answer is out, 2 when it was given up) and what was posted
//! on it: the status's last description and when, the comment, whether the final
//! answer is out, and the failures in a row with when to try again. Kept after the answer:
//! it is the run's record of where its result went.

use abfleet_core::RunId;
use rusqlite::params;

use super::Store;
use crate::error::CoordinatorError;

/// One run's pull request and what was posted on it.
#[derive(Debug, Clone, PartialEq)]
pub struct PullRequestReport {
    pub run_id: RunId,
    /// `owner/name`.
    pub repo: String,
    pub number: u64,
    pub head_sha: String,
    /// The status description last posted.
    pub posted: Option<String>,
    pub posted_ms: Option<i64>,
    pub comment_id: Option<u64>,
    pub comment_url: Option<String>,
    /// The final status and the comment are posted.
    pub answered: bool,
    /// The answer could not be posted and is not tried any more.
    pub given_up: bool,
    /// Failed attempts in a row.
    pub attempts: u32,
    pub next_attempt_ms: i64,
    pub last_error: Option<String>,
}

/// What one pass posted.
#[derive(Debug, Clone, PartialEq)]
pub enum Posted {
    /// A pending status with this description.
    Pending { description: String },
    /// The final status and the comment: the answer is out.
    Answer {
        description: String,
        comment_id: u64,
        comment_url: String,
    },
    /// Nothing went through; try again at `retry_at_ms`, or never when `None`.
    Failed {
        error: String,
        retry_at_ms: Option<i64>,
    },
}

/// `answered`: the answer is not out yet.
const OPEN: i64 = 0;
/// `answered`: the final status and the comment are posted.
const ANSWERED: i64 = 1;
/// `answered`: the answer could not be posted and is not tried any more.
const GIVEN_UP: i64 = 2;

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<PullRequestReport> {
    Ok(PullRequestReport {
        run_id: r.get(0)?,
        repo: r.get(1)?,
        number: r.get::<_, i64>(2)? as u64,
        head_sha: r.get(3)?,
        posted: r.get(4)?,
        posted_ms: r.get(5)?,
        comment_id: r.get::<_, Option<i64>>(6)?.map(|id| id as u64),
        comment_url: r.get(7)?,
        answered: r.get::<_, i64>(8)? == ANSWERED,
        given_up: r.get::<_, i64>(8)? == GIVEN_UP,
        attempts: r.get(9)?,
        next_attempt_ms: r.get(10)?,
        last_error: r.get(11)?,
    })
}

const COLUMNS: &str = "run_id, repo, number, head_sha, posted, posted_ms, comment_id, comment_url, answered, attempts, next_attempt_ms, last_error";

/// The pull requests waiting for their runs' answers, and what was posted. A view of the [`Store`]: `store.pull_requests()`.
#[derive(Clone, Copy)]
pub struct PullRequestRecords<'s> {
    pub(super) store: &'s Store,
}

impl Store {
    pub fn pull_requests(&self) -> PullRequestRecords<'_> {
        PullRequestRecords { store: self }
    }
}

impl PullRequestRecords<'_> {
    /// Records that `run_id` answers pull request `number` of `repo` at `head_sha`.
    pub async fn record_pull_request_report(
        &self,
        run_id: RunId,
        repo: String,
        number: u64,
        head_sha: String,
        now_ms: i64,
    ) -> Result<(), CoordinatorError> {
        self.store.with(move |conn| {
            conn.execute(
                "INSERT OR IGNORE INTO pull_request_reports (run_id, repo, number, head_sha, next_attempt_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![run_id, repo, number as i64, head_sha, now_ms],
            )?;
            Ok(())
        })
        .await
    }

    /// The pull requests whose answer is not out yet and whose next try is due.
    pub async fn due_pull_request_reports(
        &self,
        now_ms: i64,
    ) -> Result<Vec<PullRequestReport>, CoordinatorError> {
        let rows = self.store.read(move |conn| {
                let mut stmt = conn.prepare(&format!(
                    "SELECT {COLUMNS} FROM pull_request_reports WHERE answered = ?2 AND next_attempt_ms <= ?1 ORDER BY next_attempt_ms"
                ))?;
                let rows = stmt.query_map(params![now_ms, OPEN], row)?;
                Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
            })
            .await?;
        Ok(rows)
    }

    /// Records what one pass posted for `run_id`.
    pub async fn record_pull_request_post(
        &self,
        run_id: RunId,
        posted: Posted,
        now_ms: i64,
    ) -> Result<(), CoordinatorError> {
        self.store.with(move |conn| {
            match posted {
                Posted::Pending { description } => conn.execute(
                    "UPDATE pull_request_reports SET posted = ?2, posted_ms = ?3, attempts = 0, last_error = NULL WHERE run_id = ?1",
                    params![run_id, description, now_ms],
                )?,
                Posted::Answer {
                    description,
                    comment_id,
                    comment_url,
                } => conn.execute(
                    "UPDATE pull_request_reports SET posted = ?2, posted_ms = ?3, comment_id = ?4, comment_url = ?5, answered = ?6, attempts = 0, last_error = NULL WHERE run_id = ?1",
                    params![run_id, description, now_ms, comment_id as i64, comment_url, ANSWERED],
                )?,
                Posted::Failed { error, retry_at_ms } => conn.execute(
                    "UPDATE pull_request_reports SET attempts = attempts + 1, last_error = ?2, next_attempt_ms = ?3, answered = ?4 WHERE run_id = ?1",
                    params![
                        run_id,
                        error,
                        retry_at_ms.unwrap_or(now_ms),
                        if retry_at_ms.is_some() { OPEN } else { GIVEN_UP }
                    ],
                )?,
            };
            Ok(())
        })
        .await
    }
}
