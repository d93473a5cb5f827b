//! Triggers: a reason (release, toolchain bump, upstream tag, performance PR) and a note start
//! a run of a given spec or of the coordinator's milestone spec. Triggers of one reason and
//! key (a tag name, a PR number) within `trigger_debounce` of the first start one run; the
//! later ones are recorded as debounced into it. Every trigger is kept in the store.

use abfleet_core::spec::JobSpec;
use abfleet_core::RunId;
use tracing::info;

use super::{Fleet, FleetError};
use crate::store::TriggerRow;

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
    /// Debounce against every earlier trigger of this reason and key, not only those within
    /// the window: the toolchain watcher starts one run per new toolchain of a generation.
    pub once: bool,
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

impl Fleet {
    /// Starts a run for `request`, or records it as debounced into the run an earlier
    /// trigger of its reason and key started within the window.
    pub async fn trigger(&self, request: TriggerRequest) -> Result<TriggerOutcome, FleetError> {
        let _one_at_a_time = self.inner.triggers.lock().await;
        let now_ms = self.now_ms();
        if let Some(key) = &request.debounce_key {
            let window_ms = self.inner.config.trigger_debounce.as_millis() as i64;
            let since_ms = if request.once {
                i64::MIN
            } else {
                now_ms - window_ms
            };
            if let Some(run_id) = self
                .inner
                .store
                .debounce_target(&request.reason, key, since_ms)
                .await?
            {
                info!(run_id = %run_id, reason = %request.reason, key = %key, "trigger debounced");
                self.record(&request, now_ms, run_id, true).await?;
                return Ok(TriggerOutcome::Debounced(run_id));
            }
        }
        let of_milestone = request.spec.is_none();
        let (mut spec, origin) = match request.spec.clone() {
            Some(given) => given,
            None => self.milestone_spec().await?,
        };
        if let Some(rev) = &request.upstream_rev {
            spec = moved_upstream_pin(spec, rev).map_err(|reason| FleetError::MilestoneSpec {
                path: origin.clone(),
                reason,
            })?;
        }
        let run_id = self
            .submit_noted(spec, &request.reason, Some(&request.note), &origin)
            .await?;
        self.record(&request, now_ms, run_id, false).await?;
        if of_milestone && request.reason == TOOLCHAIN_BUMP {
            self.start_sweep(&request, now_ms, None).await?;
        }
        Ok(TriggerOutcome::Started(run_id))
    }

    /// A toolchain bump of the milestone spec starts the sweep spec too, when there is one:
    /// the winners of the fork's tunables may have moved with the compiler (docs/sweeps.md).
    /// Its run is recorded under the same trigger; a sweep spec that does not load fails the
    /// trigger with the reason, after the milestone run started. The toolchain watcher
    /// narrows it to the generation whose toolchain moved (`narrowed`: key and backend).
    pub(super) async fn start_sweep(
        &self,
        request: &TriggerRequest,
        now_ms: i64,
        narrowed: Option<(&str, &str)>,
    ) -> Result<(), FleetError> {
        let Some(path) = self.inner.config.sweep_spec.clone() else {
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
            Some((key, backend)) => super::toolchain_watch::narrowed_to(spec, key, backend)
                .map_err(|reason| FleetError::MilestoneSpec {
                    path: shown.clone(),
                    reason,
                })?,
            None => spec,
        };
        let run_id = self
            .submit_noted(spec, &request.reason, Some(&request.note), &shown)
            .await?;
        info!(run_id = %run_id, reason = %request.reason, "toolchain bump: sweep started");
        self.record(request, now_ms, run_id, false).await
    }

    /// The milestone spec, read from its file now, and its path.
    pub async fn milestone_spec(&self) -> Result<(JobSpec, String), FleetError> {
        let path = self
            .inner
            .config
            .milestone_spec
            .clone()
            .ok_or(FleetError::NoMilestoneSpec)?;
        spec_file(path).await
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

impl Fleet {
    async fn record(
        &self,
        request: &TriggerRequest,
        now_ms: i64,
        run_id: RunId,
        debounced: bool,
    ) -> Result<(), FleetError> {
        self.inner
            .store
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

/// `spec` with its upstream at `rev`, read back through validation (the JSON form), so the
/// moved spec is as checked as any other.
fn moved_upstream_pin(spec: JobSpec, rev: &str) -> Result<JobSpec, String> {
    let mut moved = spec;
    match &mut moved.upstream.source {
        abfleet_core::spec::SourceSpec::Git { rev: pinned, .. } => *pinned = rev.to_string(),
        abfleet_core::spec::SourceSpec::Path { .. } => {
            return Err(format!(
                "its upstream is a path, which cannot be moved to `{rev}`; make it git = \"URL\" with a rev"
            ))
        }
    }
    JobSpec::from_json(&moved.to_json()).map_err(|err| format!("with upstream at `{rev}`: {err}"))
}
