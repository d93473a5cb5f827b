//! The pull request hears the answer (`[github]`): a run started for a pull request (a
//! labelled performance PR, a toolchain bot's PR, `abfleet trigger --pr`) gets a commit
//! status on the PR's head — `pending` with its progress while it is queued and measured,
//! then the verdict — and one comment with the per-feature table, updated by later runs of
//! the same spec instead of added again. One task posts (`server`), woken by progress; a
//! failed post is retried with a doubling backoff and never holds up the run.

use abfleet_core::RunId;
use abfleet_render::pull_request::{comment_marker, pr_verdict, render_pr_comment};
use tracing::{error, info, warn};

use super::state::Ground;
use super::FleetError;
use super::Reports;
use super::Stopping;
use crate::outbound::github::{GitHubReporting, Repo};
use crate::store::{Posted, PullRequestReport};

/// A pending status is updated at most this often while cells come in.
const PENDING_EVERY_MS: i64 = 10_000;
/// The longest wait between two tries.
const MAX_BACKOFF_MS: i64 = 600_000;

/// A pull request a trigger is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequestRef {
    /// `owner/name`.
    pub repo: String,
    pub number: u64,
    /// Its head commit; `None`: asked of GitHub when the run is started.
    pub head_sha: Option<String>,
}

impl PullRequestRef {
    /// `owner/name#number`, as `abfleet trigger --pr` takes it.
    pub fn parse(text: &str) -> Result<PullRequestRef, String> {
        let (repo, number) = text
            .rsplit_once('#')
            .ok_or_else(|| format!("`{text}` is not `owner/name#number`"))?;
        let repo = Repo::parse(repo)?.full_name();
        let number = number
            .parse::<u64>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("`{text}`: `{number}` is not a pull request number"))?;
        Ok(PullRequestRef {
            repo,
            number,
            head_sha: None,
        })
    }
}

/// Pull requests hearing their runs' answers: the heads asked for, the statuses and
/// comments posted. Reads reports through `reports`.
#[derive(Clone)]
pub struct PullRequests {
    pub(super) ground: Ground,
    pub(super) reports: Reports,
}

impl PullRequests {
    pub(super) fn new(ground: Ground, reports: Reports) -> PullRequests {
        PullRequests { ground, reports }
    }

    fn reporting(&self) -> Result<&GitHubReporting, FleetError> {
        self.ground.config().github.as_ref().ok_or_else(|| {
            FleetError::PullRequest(
                "this coordinator has no [github] settings: it cannot answer a pull request (docs/milestone.md, \"The pull request hears the answer\")".into(),
            )
        })
    }

    /// The head commit a run for `pull_request` measures: the one it names, or GitHub's.
    pub(super) async fn pull_request_head(
        &self,
        pull_request: &PullRequestRef,
    ) -> Result<String, FleetError> {
        if let Some(sha) = &pull_request.head_sha {
            return Ok(sha.clone());
        }
        let reporting = self.reporting()?;
        let repo = Repo::parse(&pull_request.repo).map_err(FleetError::PullRequest)?;
        reporting
            .client
            .pull_request_head(&repo, pull_request.number)
            .await
            .map_err(|err| {
                FleetError::PullRequest(format!(
                    "the head commit of {}#{}: {err}",
                    pull_request.repo, pull_request.number
                ))
            })
    }

    /// Records that `run_id` answers `pull_request` at `head_sha`, when the coordinator
    /// answers pull requests at all.
    pub(super) async fn record_pull_request(
        &self,
        run_id: RunId,
        pull_request: &PullRequestRef,
        head_sha: &str,
    ) -> Result<(), FleetError> {
        if self.ground.config().github.is_none() {
            return Ok(());
        }
        self.ground
            .store()
            .pull_requests()
            .record_pull_request_report(
                run_id,
                pull_request.repo.clone(),
                pull_request.number,
                head_sha.to_string(),
                self.ground.now_ms(),
            )
            .await?;
        Ok(())
    }

    /// One pass: every pull request whose answer is not out gets what is due — a pending
    /// status with its progress, or, once its run finished, the verdict and the comment.
    pub async fn post_pull_request_reports(&self) -> Result<(), FleetError> {
        self.post_pull_request_reports_until(&Stopping::never())
            .await
    }

    /// [`Self::post_pull_request_reports`], starting no post once `stopping` says so.
    async fn post_pull_request_reports_until(&self, stopping: &Stopping) -> Result<(), FleetError> {
        let Some(reporting) = self.ground.config().github.clone() else {
            return Ok(());
        };
        for row in self
            .ground
            .store()
            .pull_requests()
            .due_pull_request_reports(self.ground.now_ms())
            .await?
        {
            if stopping.is_set() {
                break;
            }
            let posted = match self.post_one(&reporting, &row).await {
                Ok(Some(posted)) => posted,
                Ok(None) => continue,
                Err(err) => {
                    let tries = row.attempts + 1;
                    let retry_at_ms = (tries < reporting.max_attempts).then(|| {
                        let base = reporting.retry_after.as_millis() as i64;
                        self.ground.now_ms()
                            + base
                                .saturating_mul(1 << (tries - 1).min(20))
                                .min(MAX_BACKOFF_MS)
                    });
                    match retry_at_ms {
                        Some(_) => {
                            warn!(run_id = %row.run_id, pull_request = %format!("{}#{}", row.repo, row.number), attempt = tries, error = %err, "posting to the pull request failed; retrying")
                        }
                        None => {
                            error!(run_id = %row.run_id, pull_request = %format!("{}#{}", row.repo, row.number), attempts = tries, error = %err, "posting to the pull request failed; given up")
                        }
                    }
                    Posted::Failed {
                        error: err.to_string(),
                        retry_at_ms,
                    }
                }
            };
            self.ground
                .store()
                .pull_requests()
                .record_pull_request_post(row.run_id, posted, self.ground.now_ms())
                .await?;
        }
        Ok(())
    }

    /// What `row` needs now, posted; `None` when nothing is due (a pending status already
    /// says this progress, or said something within the last seconds).
    async fn post_one(
        &self,
        reporting: &GitHubReporting,
        row: &PullRequestReport,
    ) -> Result<Option<Posted>, FleetError> {
        let repo = Repo::parse(&row.repo).map_err(FleetError::PullRequest)?;
        let link = abfleet_render::pull_request::report_link_text(
            reporting.report_url.as_deref(),
            &row.run_id.to_string(),
        );
        let github =
            |err: crate::outbound::github::GitHubError| FleetError::GitHub(err.to_string());
        let run = self.ground.run_row(row.run_id).await?;
        if !run.state.is_finished() {
            // Counting the run's cells is the costly part: only when a new pending status
            // may be posted at all.
            let recent = row
                .posted_ms
                .is_some_and(|at| self.ground.now_ms() - at < PENDING_EVERY_MS);
            if recent {
                return Ok(None);
            }
            let snapshot = self.reports.snapshot_of(&run).await?;
            let description = if snapshot.cells_done == 0 {
                format!("queued: {} cells to measure", snapshot.cells_total)
            } else {
                format!(
                    "measuring: {}/{} cells",
                    snapshot.cells_done, snapshot.cells_total
                )
            };
            if row.posted.as_deref() == Some(description.as_str()) {
                return Ok(None);
            }
            reporting
                .client
                .set_commit_status(
                    &repo,
                    &row.head_sha,
                    "pending",
                    &description,
                    &reporting.context,
                    link.as_deref(),
                    &format!("{}/status/pending/{}", row.run_id, snapshot.cells_done),
                )
                .await
                .map_err(github)?;
            return Ok(Some(Posted::Pending { description }));
        }
        let report = self.reports.report(row.run_id).await?;
        let (state, description) = pr_verdict(&report);
        // The comment first: a status saying "see the comment" must not come before it. A
        // comment that cannot be posted does not hold the status back: the verdict goes out,
        // and the comment (then the status again) is retried.
        let comment = reporting
            .client
            .upsert_comment(
                &repo,
                row.number,
                &comment_marker(&report.name),
                &render_pr_comment(&report, reporting.report_url.as_deref()),
                row.comment_id,
                &format!("{}/comment", row.run_id),
            )
            .await;
        let comment_url = comment.as_ref().ok().map(|c| c.html_url.as_str());
        reporting
            .client
            .set_commit_status(
                &repo,
                &row.head_sha,
                state.status_state(),
                &description,
                &reporting.context,
                link.as_deref().or(comment_url).filter(|u| !u.is_empty()),
                &format!("{}/status/{}", row.run_id, state.status_state()),
            )
            .await
            .map_err(github)?;
        let comment = comment.map_err(|err| {
            FleetError::GitHub(format!(
                "the verdict's status is posted, the comment is not: {err}"
            ))
        })?;
        info!(run_id = %row.run_id, pull_request = %format!("{}#{}", row.repo, row.number), state = state.as_str(), "the pull request has its answer");
        Ok(Some(Posted::Answer {
            description,
            comment_id: comment.id,
            comment_url: comment.html_url,
        }))
    }

    /// Posts to pull requests until the process ends: after progress (of any run: a burst
    /// of cell updates is one pass, at most one a second) and every few seconds (a retry
    /// that came due).
    pub async fn run_pull_request_reports(&self, mut stopping: Stopping) {
        if self.ground.config().github.is_none() {
            return;
        }
        let mut progress = self.ground.subscribe();
        loop {
            if stopping.is_set() {
                return;
            }
            if let Err(err) = self.post_pull_request_reports_until(&stopping).await {
                error!(error = %err, "posting to pull requests failed; trying again shortly");
            }
            tokio::select! {
                () = stopping.wait() => return,
                _ = progress.recv() => {
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    progress = progress.resubscribe();
                }
                () = tokio::time::sleep(std::time::Duration::from_secs(2)) => {}
            }
        }
    }
}
