//! Triggers: a reason (release, toolchain bump, upstream tag, performance PR) and a note start
//! a run of a given spec or of the coordinator's milestone spec, with its upstream pin moved
//! to a tag or its fork pin to a PR's head when the trigger is about one. Triggers of one
//! reason and key (a tag name, a PR number) within `trigger_debounce` of the first start one
//! run (a tag's release, push and watcher poll share the key and count as one reason, and a
//! tag is run once); the later ones are recorded as debounced into it. Every trigger is kept
//! in the store.
//!
//! The milestone spec's upstream pin follows releases: once a release tag of its upstream
//! started a run, later runs of the milestone spec use the newest such tag while it is newer
//! than the file's pin (the file stays the operator's: a newer pin written there wins), and
//! their note says so.

use abfleet_core::spec::{JobSpec, SourceSpec};
use abfleet_core::RunId;
use tracing::info;

use std::sync::Arc;

use super::state::Ground;
use super::{FleetError, PullRequests, Runs};
use crate::git_url::same_repository_url;
use crate::store::{TriggerRow, UpstreamPin};
use crate::watcher::release_version;

/// The reasons a run is triggered for, as stored in `runs.trigger`.
pub const TRIGGER_REASONS: [&str; 5] = [
    "manual",
    "release",
    "toolchain-bump",
    "upstream-tag",
    "performance-pr",
];

/// The reason whose milestone runs also start the sweep spec.
pub const TOOLCHAIN_BUMP: &str = "toolchain-bump";

/// One trigger, as `abfleet trigger` or a webhook gives it.
#[derive(Debug, Clone)]
pub struct TriggerRequest {
    /// One of [`TRIGGER_REASONS`].
    pub reason: String,
    /// What makes two triggers the same thing; `None`: never debounced.
    pub debounce_key: Option<String>,
    pub note: String,
    /// `cli` or `webhook`, for the record.
    pub source: &'static str,
    /// The spec and where it came from; `None`: the milestone spec.
    pub spec: Option<(JobSpec, String)>,
    /// Move the spec's upstream pin (`[upstream] rev`) here: the tag a run is about.
    pub upstream_rev: Option<String>,
    /// Move the spec's fork pin (`[fork] rev`) here: a pull request's head commit, a fork
    /// release's tag.
    pub fork_rev: Option<String>,
    /// Debounce against every earlier trigger of this reason and key, not only those within
    /// the window: the toolchain watcher starts one run per new toolchain of a generation.
    pub once: bool,
    /// The pull request the run answers (`[github]`): its head is the fork's rev, and it
    /// gets a status and a comment (`pull_request_reports`).
    pub pull_request: Option<super::PullRequestRef>,
}

/// What a trigger did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TriggerOutcome {
    Started(RunId),
    /// An earlier trigger of the same reason and key within the window started this run.
    Debounced(RunId),
}

impl TriggerOutcome {
    pub fn run_id(self) -> RunId {
        match self {
            TriggerOutcome::Started(run_id) | TriggerOutcome::Debounced(run_id) => run_id,
        }
    }
}

/// Triggers: reasons to run (release, tag, toolchain bump, pull request), the milestone
/// spec, debounce, and the toolchain watch. Starts runs through `runs`, asks pull requests'
/// heads through `pull_requests`.
#[derive(Clone)]
pub struct Triggers {
    pub(super) ground: Ground,
    pub(super) runs: Runs,
    pub(super) pull_requests: PullRequests,
    /// Held from a trigger's debounce check to its record, so two deliveries for one tag
    /// never both start a run.
    one_at_a_time: Arc<tokio::sync::Mutex<()>>,
}

impl Triggers {
    pub(super) fn new(ground: Ground, runs: Runs, pull_requests: PullRequests) -> Triggers {
        Triggers {
            ground,
            runs,
            pull_requests,
            one_at_a_time: Default::default(),
        }
    }

    /// Starts a run for `request`, or records it as debounced into the run an earlier
    /// trigger of its reason and key started within the window.
    pub async fn trigger(&self, mut request: TriggerRequest) -> Result<TriggerOutcome, FleetError> {
        // A webhook's note carries a PR's title: bounded where it is stored.
        abfleet_core::stored_text::clip(
            &mut request.note,
            abfleet_core::stored_text::MAX_REASON_CHARS,
        );
        let _one_at_a_time = self.one_at_a_time.lock().await;
        let now_ms = self.ground.now_ms();
        if let Some(key) = &request.debounce_key {
            let window_ms = self.ground.config().trigger_debounce.as_millis() as i64;
            let since_ms = if request.once {
                i64::MIN
            } else {
                now_ms - window_ms
            };
            if let Some(run_id) = self
                .ground
                .store()
                .triggers()
                .debounce_target_of(&debounce_reasons(&request.reason), key, since_ms)
                .await?
            {
                info!(run_id = %run_id, reason = %request.reason, key = %key, "trigger debounced");
                self.record(&request, now_ms, run_id, true).await?;
                return Ok(TriggerOutcome::Debounced(run_id));
            }
        }
        let of_milestone = request.spec.is_none();
        let (mut spec, origin, followed) = match request.spec.clone() {
            Some((spec, origin)) => (spec, origin, None),
            None => {
                let milestone = self.milestone_run_spec().await?;
                (milestone.spec, milestone.origin, milestone.followed)
            }
        };
        let upstream_url = git_url(&spec.upstream.source);
        let fork_url = git_url(&spec.fork.source);
        let mut note = request.note.clone();
        if let Some(rev) = &request.upstream_rev {
            let from = spec.upstream.source.requested();
            spec = moved_pin(spec, Pin::Upstream, rev).map_err(|reason| {
                FleetError::MilestoneSpec {
                    path: origin.clone(),
                    reason,
                }
            })?;
            if from != *rev {
                note.push_str(&format!("; upstream pin {from} → {rev}"));
            }
        } else if let Some(followed) = &followed {
            note.push_str(&followed.note());
        }
        let pull_request_head = match &request.pull_request {
            Some(pull_request) => Some(self.pull_requests.pull_request_head(pull_request).await?),
            None => None,
        };
        if let Some(rev) = request.fork_rev.as_ref().or(pull_request_head.as_ref()) {
            spec = moved_pin(spec, Pin::Fork, rev).map_err(|reason| FleetError::MilestoneSpec {
                path: origin.clone(),
                reason,
            })?;
        }
        let run_id = self
            .runs
            .submit_noted(spec, &request.reason, Some(&note), &origin)
            .await?;
        if let (Some(pull_request), Some(head)) = (&request.pull_request, &pull_request_head) {
            self.pull_requests
                .record_pull_request(run_id, pull_request, head)
                .await?;
        }
        let started = TriggerRequest {
            note,
            ..request.clone()
        };
        self.record(&started, now_ms, run_id, false).await?;
        if of_milestone {
            if let (Some(tag), Some(url)) = (&request.upstream_rev, &upstream_url) {
                if release_version(tag).is_some() {
                    // The pin moves deliberately: later milestone runs follow this tag.
                    self.ground
                        .store()
                        .triggers()
                        .record_upstream_pin(url, tag, run_id, &request.note, now_ms)
                        .await?;
                }
            }
        }
        if of_milestone && request.reason == TOOLCHAIN_BUMP {
            let fork = request.fork_rev.as_deref().zip(fork_url.as_deref());
            self.start_sweep(&started, now_ms, None, fork).await?;
        }
        Ok(TriggerOutcome::Started(run_id))
    }

    /// A toolchain bump of the milestone spec starts the sweep spec too, when there is one:
    /// the winners of the fork's tunables may have moved with the compiler (docs/sweeps.md).
    /// Its run is recorded under the same trigger; a sweep spec that does not load fails the
    /// trigger with the reason, after the milestone run started. The toolchain watcher
    /// narrows it to the generation whose toolchain moved (`narrowed`: key and backend). A
    /// bot's PR (`fork`: its head commit and the milestone spec's fork URL) moves the sweep's
    /// fork pin too when the sweep's fork is that repository.
    pub(super) async fn start_sweep(
        &self,
        request: &TriggerRequest,
        now_ms: i64,
        narrowed: Option<(&str, &str)>,
        fork: Option<(&str, &str)>,
    ) -> Result<(), FleetError> {
        let Some(path) = self.ground.config().sweep_spec.clone() else {
            return Ok(());
        };
        let shown = path.display().to_string();
        let loaded = tokio::task::spawn_blocking(move || JobSpec::load(&path))
            .await
            .map_err(|err| FleetError::MilestoneSpec {
                path: shown.clone(),
                reason: err.to_string(),
            })?;
        let spec = loaded.map_err(|err| FleetError::MilestoneSpec {
            path: shown.clone(),
            reason: format!("{err:#}"),
        })?;
        if !spec.is_sweep() {
            return Err(FleetError::MilestoneSpec {
                path: shown,
                reason: "the sweep spec has no [sweep] table; point --sweep-spec at a retuning sweep (docs/sweeps.md)".into(),
            });
        }
        let spec = match narrowed {
            Some((key, backend)) => {
                spec.narrowed_to(key, backend)
                    .map_err(|reason| FleetError::MilestoneSpec {
                        path: shown.clone(),
                        reason,
                    })?
            }
            None => spec,
        };
        let spec = match fork {
            Some((rev, url))
                if git_url(&spec.fork.source).is_some_and(|own| same_repository_url(&own, url)) =>
            {
                moved_pin(spec, Pin::Fork, rev).map_err(|reason| FleetError::MilestoneSpec {
                    path: shown.clone(),
                    reason,
                })?
            }
            _ => spec,
        };
        let run_id = self
            .runs
            .submit_noted(spec, &request.reason, Some(&request.note), &shown)
            .await?;
        info!(run_id = %run_id, reason = %request.reason, "toolchain bump: sweep started");
        self.record(request, now_ms, run_id, false).await
    }

    /// The milestone spec as a trigger runs it (its upstream pin following releases), and
    /// its path.
    pub async fn milestone_spec(&self) -> Result<(JobSpec, String), FleetError> {
        let milestone = self.milestone_run_spec().await?;
        Ok((milestone.spec, milestone.origin))
    }

    /// The milestone spec read from its file now, with its upstream pin moved to the newest
    /// release tag of its upstream that started a run, when that is newer than the file's
    /// pin. A file pin that is not a release tag (a commit, a branch) is never moved.
    pub(super) async fn milestone_run_spec(&self) -> Result<MilestoneSpec, FleetError> {
        let path = self
            .ground
            .config()
            .milestone_spec
            .clone()
            .ok_or(FleetError::NoMilestoneSpec)?;
        let (spec, origin) = spec_file(path).await?;
        let SourceSpec::Git { url, rev } = &spec.upstream.source else {
            return Ok(MilestoneSpec::as_written(spec, origin));
        };
        let Some(written) = release_version(rev) else {
            return Ok(MilestoneSpec::as_written(spec, origin));
        };
        let newest = self
            .ground
            .store()
            .triggers()
            .upstream_pins(url)
            .await?
            .into_iter()
            .filter_map(|pin| release_version(&pin.tag).map(|version| (version, pin)))
            .max_by(|a, b| a.0.cmp(&b.0));
        match newest {
            Some((version, pin)) if version > written => {
                let from = rev.clone();
                let spec = moved_pin(spec, Pin::Upstream, &pin.tag).map_err(|reason| {
                    FleetError::MilestoneSpec {
                        path: origin.clone(),
                        reason,
                    }
                })?;
                Ok(MilestoneSpec {
                    spec,
                    origin,
                    followed: Some(FollowedPin { from, pin }),
                })
            }
            _ => Ok(MilestoneSpec::as_written(spec, origin)),
        }
    }
}

/// The milestone spec as a trigger runs it.
pub(super) struct MilestoneSpec {
    pub(super) spec: JobSpec,
    /// The file's path, as shown in errors and run origins.
    pub(super) origin: String,
    /// Its upstream pin moved past the file's by an earlier release run.
    pub(super) followed: Option<FollowedPin>,
}

impl MilestoneSpec {
    fn as_written(spec: JobSpec, origin: String) -> MilestoneSpec {
        MilestoneSpec {
            spec,
            origin,
            followed: None,
        }
    }
}

/// The file's upstream pin and the release run that moved it.
pub(super) struct FollowedPin {
    from: String,
    pin: UpstreamPin,
}

impl FollowedPin {
    /// What a run's note says: `; upstream pin v3.2.0 → v3.3.0 (moved by run ID: NOTE)`.
    pub(super) fn note(&self) -> String {
        format!(
            "; upstream pin {} → {} (moved by run {}: {})",
            self.from, self.pin.tag, self.pin.run_id, self.pin.note
        )
    }
}

/// The reasons whose triggers of one key are the same thing: an upstream release, the push
/// of its tag and the watcher seeing the tag all carry the tag's key.
fn debounce_reasons(reason: &str) -> Vec<&str> {
    match reason {
        "release" | "upstream-tag" => vec!["release", "upstream-tag"],
        other => vec![other],
    }
}

/// A source's git URL; `None` for a path.
fn git_url(source: &SourceSpec) -> Option<String> {
    match source {
        SourceSpec::Git { url, .. } => Some(url.clone()),
        SourceSpec::Path { .. } => None,
    }
}

/// A spec file read now (off the runtime), and its path as shown in errors and origins.
pub(super) async fn spec_file(path: std::path::PathBuf) -> Result<(JobSpec, String), FleetError> {
    {
        let shown = path.display().to_string();
        let loaded = tokio::task::spawn_blocking(move || JobSpec::load(&path))
            .await
            .map_err(|err| FleetError::MilestoneSpec {
                path: shown.clone(),
                reason: err.to_string(),
            })?;
        let spec = loaded.map_err(|err| FleetError::MilestoneSpec {
            path: shown.clone(),
            reason: format!("{err:#}"),
        })?;
        Ok((spec, shown))
    }
}

impl Triggers {
    async fn record(
        &self,
        request: &TriggerRequest,
        now_ms: i64,
        run_id: RunId,
        debounced: bool,
    ) -> Result<(), FleetError> {
        self.ground
            .store()
            .triggers()
            .insert_trigger(TriggerRow {
                reason: request.reason.clone(),
                debounce_key: request.debounce_key.clone(),
                note: request.note.clone(),
                source: request.source.to_string(),
                received_ms: now_ms,
                run_id,
                debounced,
            })
            .await?;
        Ok(())
    }
}

/// Which pin a trigger moves.
#[derive(Debug, Clone, Copy)]
enum Pin {
    Upstream,
    Fork,
}

/// `spec` with its upstream or fork at `rev`, read back through validation (the JSON form),
/// so the moved spec is as checked as any other.
fn moved_pin(spec: JobSpec, pin: Pin, rev: &str) -> Result<JobSpec, String> {
    let mut moved = spec;
    let (side, source) = match pin {
        Pin::Upstream => ("upstream", &mut moved.upstream.source),
        Pin::Fork => ("fork", &mut moved.fork.source),
    };
    match source {
        SourceSpec::Git { rev: pinned, .. } => *pinned = rev.to_string(),
        SourceSpec::Path { .. } => {
            return Err(format!(
                "its {side} is a path, which cannot be moved to `{rev}`; make it git = \"URL\" with a rev"
            ))
        }
    }
    JobSpec::from_json(&moved.to_json()).map_err(|err| format!("with {side} at `{rev}`: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_and_its_tag_push_share_a_debounce_reason() {
        assert_eq!(debounce_reasons("release"), ["release", "upstream-tag"]);
        assert_eq!(
            debounce_reasons("upstream-tag"),
            ["release", "upstream-tag"]
        );
        assert_eq!(debounce_reasons("performance-pr"), ["performance-pr"]);
    }
}
