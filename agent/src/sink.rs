//! The event sink of one job attempt: numbers events, writes them to the spool, and one
//! uploader task sends them to the coordinator and drops what it acknowledged. The uploader
//! does nothing while a cell is timed: it sends, acknowledges and tidies the spool only
//! under a permit of the agent's [`UploadGate`], which a stage hushes for the whole cell
//! ([`EventSink::hush`]); and `flush` is the barrier the job passes before it may send
//! "done". An event the spool could not write (the work
//! dir is full) is still kept and sent, and the sink remembers the failure
//! (`spool_failure`): the job fails with it rather than run on without a durable record.
//!
//! Sizes: an upload batch stays under [`MAX_BATCH_JSON_BYTES`] (well below the
//! coordinator's message limit); a cell event over [`MAX_EVENT_JSON_BYTES`] (the per-frame
//! scores of a long clip) is sent without its per-frame scores — times, pooled scores, deltas
//! and the parity verdict, all computed here, are kept, and a warning says so — and any other
//! event that large fails the job instead of being retried forever.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use abfleet_core::events::{JobEventPayload, LogLevel};
use abfleet_proto::agent_link::{AgentLink, EventPush, LinkErrorKind, PushReply, PushedEvent};
use tokio::sync::watch;
use tracing::{debug, error, warn};

use crate::backoff::Backoff;
use crate::spool::{Spool, SpooledEvent};
use crate::upload_gate::{Hushed, UploadGate, HUSH_GRACE};

const BATCH: usize = 64;
/// The most event JSON one upload carries (the coordinator takes up to 16 MiB a message).
pub const MAX_BATCH_JSON_BYTES: usize = 8 * 1024 * 1024;
/// The largest single event sent as it is; a larger cell event loses its per-frame scores.
pub const MAX_EVENT_JSON_BYTES: usize = 8 * 1024 * 1024;

/// The coordinator no longer holds this attempt for us; its events have nowhere to go.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the coordinator dropped job {job_id} attempt {attempt}: {reason}")]
pub struct LeaseLost {
    pub job_id: String,
    pub attempt: u32,
    pub reason: String,
}

struct State {
    spool: Spool,
    next_seq: u64,
    lease_lost: Option<LeaseLost>,
    /// The first failed spool write, or an event too large to send, as the message the job
    /// fails with.
    spool_failure: Option<String>,
    closed: bool,
}

struct Inner {
    agent_id: String,
    job_id: String,
    attempt: u32,
    state: Mutex<State>,
    /// Bumped on every change of `state`; waiters watch it.
    changes: watch::Sender<u64>,
    gate: UploadGate,
}

#[derive(Clone)]
pub struct EventSink {
    inner: Arc<Inner>,
}

impl EventSink {
    pub fn open(
        spool_dir: &std::path::Path,
        agent_id: &str,
        job_id: &str,
        attempt: u32,
        next_seq: u64,
        gate: UploadGate,
    ) -> std::io::Result<EventSink> {
        let spool = Spool::open(spool_dir, job_id, attempt)?;
        let next_seq = spool
            .pending(usize::MAX)
            .last()
            .map_or(next_seq, |e| e.seq + 1)
            .max(next_seq);
        Ok(EventSink {
            inner: Arc::new(Inner {
                agent_id: agent_id.to_string(),
                job_id: job_id.to_string(),
                attempt,
                state: Mutex::new(State {
                    spool,
                    next_seq,
                    lease_lost: None,
                    spool_failure: None,
                    closed: false,
                }),
                changes: watch::channel(0).0,
                gate,
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn bump(&self) {
        self.inner.changes.send_modify(|n| *n += 1);
    }

    /// Numbers an event and makes it durable; the uploader sends it when it can.
    pub fn emit(&self, payload: &JobEventPayload) -> Result<u64, LeaseLost> {
        let (payload_json, slimmed) = match fit_event(payload) {
            Ok(fitted) => fitted,
            Err(message) => {
                error!(job_id = %self.inner.job_id, "{message}");
                let mut state = self.lock();
                if let Some(lost) = &state.lease_lost {
                    return Err(lost.clone());
                }
                state.spool_failure.get_or_insert(message);
                // Nothing was numbered: the next event takes this number.
                let next = state.next_seq;
                drop(state);
                self.bump();
                return Ok(next);
            }
        };
        let seq = {
            let mut state = self.lock();
            if let Some(lost) = &state.lease_lost {
                return Err(lost.clone());
            }
            let seq = state.next_seq;
            state.next_seq += 1;
            let event = SpooledEvent {
                seq,
                at_ms: now_ms(),
                payload_json,
            };
            if let Err(err) = state.spool.push(event) {
                let message = spool_failure_message(state.spool.path(), &err);
                error!(job_id = %self.inner.job_id, seq, error = %err, "{message}; the event is kept in memory and still sent");
                state.spool_failure.get_or_insert(message);
            }
            seq
        };
        self.bump();
        if let Some(note) = slimmed {
            warn!(job_id = %self.inner.job_id, seq, "{note}");
            self.emit(&JobEventPayload::Log {
                level: abfleet_core::events::LogLevel::Warn,
                line: note,
            })?;
        }
        Ok(seq)
    }

    /// Why the spool could not be written, once a write failed: the job must fail with it
    /// (its events are still sent, but a restart would not find them).
    pub fn spool_failure(&self) -> Option<String> {
        self.lock().spool_failure.clone()
    }

    /// Quiet until the guard is dropped: no upload, acknowledgement or spool upkeep of any
    /// sink of this agent runs meanwhile. Waits for an upload in flight to finish first
    /// (at most [`HUSH_GRACE`], then it is dropped and sent again later). A stage holds it
    /// for a whole cell: warm-ups and every timed run.
    pub async fn hush(&self) -> Hushed {
        self.inner.gate.hush().await
    }

    pub fn lease_lost(&self) -> Option<LeaseLost> {
        self.lock().lease_lost.clone()
    }

    /// Waits until every emitted event is acknowledged.
    pub async fn flush(&self) -> Result<(), LeaseLost> {
        let mut changes = self.inner.changes.subscribe();
        loop {
            {
                let state = self.lock();
                if let Some(lost) = &state.lease_lost {
                    return Err(lost.clone());
                }
                if state.spool.is_empty() {
                    return Ok(());
                }
            }
            if changes.changed().await.is_err() {
                return Ok(());
            }
        }
    }

    /// Whether every event was acknowledged, and none refused or lost.
    pub fn delivered_all(&self) -> bool {
        let state = self.lock();
        state.lease_lost.is_none()
            && state.spool_failure.is_none()
            && state.spool.pending(1).is_empty()
    }

    /// Stops the uploader once the spool is empty (or at once if the lease is lost).
    pub fn close(&self) {
        self.lock().closed = true;
        self.bump();
    }

    /// Marks the attempt lost (the coordinator said so on the session) and drops the spool.
    pub fn mark_lost(&self, reason: &str) {
        {
            let mut state = self.lock();
            if state.lease_lost.is_none() {
                state.lease_lost = Some(LeaseLost {
                    job_id: self.inner.job_id.clone(),
                    attempt: self.inner.attempt,
                    reason: reason.to_string(),
                });
            }
            let _ = state.spool.discard();
        }
        self.bump();
    }

    /// The uploader: runs until closed and drained, or the lease is lost. Everything it
    /// does (send, acknowledge, tidy the spool) it does under an upload permit, so never
    /// while a cell is timed.
    pub async fn upload(self, client: AgentLink) {
        let mut changes = self.inner.changes.subscribe();
        // Jittered: after a coordinator restart, agents do not retry in the same instants.
        let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(2));
        // Halved when a coordinator with a smaller message limit refuses a batch as too large.
        let mut budget = MAX_BATCH_JSON_BYTES;
        // Set when the coordinator asked for events this agent no longer holds.
        let mut lost_before = 0;
        loop {
            // Never compete with a timed run.
            let permit = self.inner.gate.permit().await;
            let Some((batch, closed)) = self.next_batch(budget) else {
                return;
            };
            if batch.is_empty() {
                drop(permit);
                if closed {
                    return;
                }
                let _ = changes.changed().await;
                continue;
            }
            // What a refusal as too large needs of the batch, which the push takes.
            let count = batch.len();
            let batch_bytes: usize = batch.iter().map(|e| e.payload_json.len()).sum();
            let (first_seq, first_bytes) = (batch[0].seq, batch[0].payload_json.len());
            let request = EventPush {
                agent_id: &self.inner.agent_id,
                job_id: &self.inner.job_id,
                attempt: self.inner.attempt,
                events: batch
                    .into_iter()
                    .map(|e| PushedEvent {
                        seq: e.seq,
                        at_ms: e.at_ms,
                        payload_json: e.payload_json,
                    })
                    .collect(),
                lost_before,
            };
            crate::timeline::mark("upload.start");
            let pushed = {
                let push = client.push_events(request);
                tokio::pin!(push);
                tokio::select! {
                    pushed = &mut push => Some(pushed),
                    // A cell wants quiet: the batch may finish for a while, else it is dropped
                    // and sent again after the cell (the coordinator ignores what it stored).
                    () = self.inner.gate.hush_requested() => {
                        tokio::time::timeout(HUSH_GRACE, &mut push).await.ok()
                    }
                }
            };
            let Some(pushed) = pushed else {
                crate::timeline::mark("upload.end");
                debug!(job_id = %self.inner.job_id, "upload dropped: a cell is being timed");
                continue;
            };
            match pushed {
                Ok(PushReply::Missing { first, last }) => {
                    lost_before = self.resend_missing(first, last);
                    continue;
                }
                Ok(PushReply::Acked(acked)) => {
                    lost_before = 0;
                    debug!(job_id = %self.inner.job_id, count = acked.len(), "events acknowledged");
                    self.lock().spool.acknowledge(&acked);
                    self.bump();
                    backoff.reset();
                }
                Err(status)
                    if matches!(
                        status.kind(),
                        LinkErrorKind::FailedPrecondition
                            | LinkErrorKind::NotFound
                            | LinkErrorKind::InvalidArgument
                    ) =>
                {
                    crate::timeline::mark("upload.end");
                    warn!(job_id = %self.inner.job_id, %status, "coordinator refused the events; dropping the attempt");
                    self.mark_lost(status.message());
                    return;
                }
                Err(status) if status.kind() == LinkErrorKind::OutOfRange && count > 1 => {
                    budget = (batch_bytes / 2).max(1);
                    warn!(job_id = %self.inner.job_id, %status, budget, "the coordinator refused a batch as too large; sending smaller ones");
                }
                Err(status) if status.kind() == LinkErrorKind::OutOfRange => {
                    self.drop_refused_event(first_seq, first_bytes, status.message());
                }
                Err(status) => {
                    crate::timeline::mark("upload.end");
                    drop(permit);
                    debug!(job_id = %self.inner.job_id, %status, "upload failed; retrying");
                    tokio::time::sleep(backoff.next_delay()).await;
                    continue;
                }
            }
            crate::timeline::mark("upload.end");
        }
    }
}

impl EventSink {
    /// The next batch to send, within `budget` bytes, and whether the sink is closed; `None`
    /// once the lease is lost. Tidies the spool first when it needs it.
    fn next_batch(&self, budget: usize) -> Option<(Vec<crate::spool::SpooledEvent>, bool)> {
        let mut state = self.lock();
        if state.lease_lost.is_some() {
            return None;
        }
        if state.spool.needs_upkeep() {
            if let Err(err) = state.spool.upkeep() {
                warn!(error = %err, "failed to tidy the spool; acknowledged events stay in it");
            }
        }
        Some((
            within_bytes(state.spool.pending(BATCH), budget),
            state.closed,
        ))
    }

    /// One event the coordinator will never take: dropped and the job failed (its "done"
    /// still goes), rather than retried forever. A note goes in its place, so the attempt's
    /// sequence stays whole.
    fn drop_refused_event(&self, seq: u64, bytes: usize, why: &str) {
        let message = format!(
            "the coordinator refused event {seq} ({bytes} bytes) as too large: {why}; the job stops"
        );
        error!(job_id = %self.inner.job_id, "{message}");
        {
            let note = JobEventPayload::Log {
                level: LogLevel::Error,
                line: message.clone(),
            };
            let note = serde_json::to_string(&note).expect("events serialise");
            let mut state = self.lock();
            state.spool.replace(seq, note);
            state.spool_failure.get_or_insert(message);
        }
        self.bump();
    }

    /// The coordinator lacks events `first..=last` of this attempt (its store was restored
    /// from an older copy after it acknowledged them): queues them again from the spool file
    /// when it still holds them and returns 0, else returns what to tell the coordinator
    /// (`lost_before`: it redoes the attempt).
    fn resend_missing(&self, first: u64, last: u64) -> u64 {
        let recovered = self.lock().spool.recover(first, last);
        match recovered {
            Ok(true) => {
                warn!(job_id = %self.inner.job_id, first, last, "the coordinator lacks events it acknowledged (restored from an older copy?); sending them again from the spool");
                0
            }
            Ok(false) | Err(_) => {
                error!(job_id = %self.inner.job_id, first, last, "the coordinator lacks events it acknowledged (restored from an older copy?) and the spool no longer holds them; the coordinator redoes the attempt");
                last.saturating_add(1)
            }
        }
    }
}

/// The event as JSON, small enough to send: a cell event too large as it is goes without
/// its per-frame scores (with the note to log); any other event too large is an error the
/// job fails with.
fn fit_event(payload: &JobEventPayload) -> Result<(String, Option<String>), String> {
    let json = serde_json::to_string(payload).expect("events serialise");
    if json.len() <= MAX_EVENT_JSON_BYTES {
        return Ok((json, None));
    }
    let mib = |bytes: usize| bytes as f64 / (1024.0 * 1024.0);
    if let JobEventPayload::Cell(cell) = payload {
        let mut slim = cell.clone();
        let mut frames = 0;
        for side in [&mut slim.upstream, &mut slim.fork] {
            if let Some(scores) = &mut side.scores {
                frames = frames.max(scores.frames.len());
                scores.frames.clear();
            }
        }
        let slim_json =
            serde_json::to_string(&JobEventPayload::Cell(slim)).expect("events serialise");
        if slim_json.len() <= MAX_EVENT_JSON_BYTES {
            let note = format!(
                "cell {} ({}/{}): its {frames} frames of per-frame scores make the event {:.1} MiB, over the {:.0} MiB an event may carry; they are left out of the report. Times, pooled scores, the deltas and the parity verdict (computed on the agent over every frame) are kept; each side's output file is in the agent's work dir",
                cell.index,
                cell.fixture,
                cell.workload,
                mib(json.len()),
                mib(MAX_EVENT_JSON_BYTES)
            );
            return Ok((slim_json, Some(note)));
        }
    }
    Err(format!(
        "an event of {:.1} MiB is over the {:.0} MiB an event may carry and cannot be made smaller; the job stops rather than retry it forever",
        mib(json.len()),
        mib(MAX_EVENT_JSON_BYTES)
    ))
}

/// The oldest events whose JSON adds up to at most `budget` bytes (always at least one).
fn within_bytes(events: Vec<SpooledEvent>, budget: usize) -> Vec<SpooledEvent> {
    let mut total = 0;
    let mut kept = Vec::with_capacity(events.len());
    for event in events {
        total += event.payload_json.len();
        if !kept.is_empty() && total > budget {
            break;
        }
        kept.push(event);
    }
    kept
}

/// What the job fails with when its spool cannot be written.
fn spool_failure_message(path: &std::path::Path, err: &std::io::Error) -> String {
    let dir = path.parent().unwrap_or(path).display();
    if err.kind() == std::io::ErrorKind::StorageFull || err.raw_os_error() == Some(28) {
        format!(
            "the agent's work dir is full (`{dir}`, writing the event spool): free space and rerun"
        )
    } else {
        format!(
            "failed to write the event spool `{}`: {err}; check that the agent's work dir is writable and rerun",
            path.display()
        )
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use abfleet_core::events::LogLevel;

    use super::*;
    use crate::spool::tests::Tmpfs;

    /// Issue 11: on a full disk the sink said "kept in memory only" while the event was
    /// gone; now it is kept and sent, and the failure is there for the job to fail with.
    #[test]
    fn an_event_the_full_disk_refused_is_still_pending_and_the_failure_is_told() {
        let Some(fs) = Tmpfs::mount("64k") else {
            return;
        };
        let spool_dir = fs.dir.path().join("spool");
        let sink = EventSink::open(&spool_dir, "agent", "job", 1, 0, UploadGate::new()).unwrap();
        fs.fill(0);
        let line = "y".repeat(8192);
        let seq = sink
            .emit(&JobEventPayload::Log {
                level: LogLevel::Info,
                line,
            })
            .unwrap();
        assert_eq!(seq, 0);
        let failure = sink.spool_failure().expect("the failed write must be told");
        assert!(
            failure.starts_with("the agent's work dir is full")
                && failure.contains(&spool_dir.display().to_string())
                && failure.ends_with("free space and rerun"),
            "{failure}"
        );
        let state = sink.lock();
        assert_eq!(
            state.spool.len(),
            1,
            "the event must stay pending, to be sent"
        );
        assert_eq!(state.next_seq, 1);
    }

    /// A side of a cell with `frames` frames of three metrics each.
    fn side(frames: u32) -> abfleet_core::cell::SideMeasurement {
        use abfleet_core::scores::{FrameScores, Scores};
        let metrics = ["psnr_y", "psnr_cb", "psnr_cr"];
        abfleet_core::cell::SideMeasurement {
            status: abfleet_core::cell::SideStatus::Ok,
            times: vec![1.0, 1.1, 0.9],
            cpu_times: vec![1.0, 1.1, 0.9],
            warmup_times: vec![1.0],
            scores: Some(Scores {
                frames: (0..frames)
                    .map(|n| FrameScores {
                        frame_num: u64::from(n),
                        metrics: metrics
                            .iter()
                            .map(|m| (m.to_string(), 30.0 + f64::from(n % 97) / 7.0))
                            .collect(),
                    })
                    .collect(),
                ..Scores::default()
            }),
            returncode: Some(0),
            error: None,
            stderr_tail: None,
            command: None,
        }
    }

    fn cell(frames: u32) -> abfleet_core::cell::CellResult {
        let spec = abfleet_core::spec::JobSpec::load(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fixtures/jobs/demo.toml"
        )))
        .unwrap();
        abfleet_core::cell::CellResult::evaluate(
            abfleet_core::cell::CellInput {
                index: 0,
                fixture: "clip".into(),
                workload: "psnr".into(),
                upstream: side(frames),
                fork: side(frames),
                load_avg_1min: [0.1, 0.1],
                idle_cores: 1.0,
                host_flags: Vec::new(),
                seed: 1,
                run_order: Vec::new(),
                stop_reason: abfleet_core::paired::StopReason::NotAdaptive,
                overhead_seconds: None,
            },
            &spec,
        )
    }

    /// Issue 11: one cell of a long clip was over the coordinator's message limit and was
    /// retried forever. Now it goes without its per-frame scores, and the log says so.
    #[test]
    fn a_cell_too_large_to_send_goes_without_its_frames_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let sink = EventSink::open(dir.path(), "agent", "job", 1, 0, UploadGate::new()).unwrap();
        let big = cell(100_000);
        assert!(
            serde_json::to_string(&JobEventPayload::Cell(Box::new(big.clone())))
                .unwrap()
                .len()
                > MAX_EVENT_JSON_BYTES
        );
        sink.emit(&JobEventPayload::Cell(Box::new(big.clone())))
            .unwrap();
        assert!(sink.spool_failure().is_none());
        let pending = sink.lock().spool.pending(10);
        assert_eq!(pending.len(), 2, "the cell and a warning");
        assert!(pending[0].payload_json.len() <= MAX_EVENT_JSON_BYTES);
        let JobEventPayload::Cell(sent) = serde_json::from_str(&pending[0].payload_json).unwrap()
        else {
            panic!("not a cell: {}", &pending[0].payload_json[..200]);
        };
        assert!(sent.upstream.scores.as_ref().unwrap().frames.is_empty());
        assert_eq!(
            sent.parity, big.parity,
            "the verdict computed over all frames stays"
        );
        assert_eq!(sent.score_delta, big.score_delta);
        assert_eq!(sent.upstream.times, big.upstream.times);
        let JobEventPayload::Log { level, line } =
            serde_json::from_str(&pending[1].payload_json).unwrap()
        else {
            panic!("not a log line");
        };
        assert_eq!(level, LogLevel::Warn);
        assert!(line.contains("100000 frames of per-frame scores"), "{line}");

        // A small cell goes as it is.
        let small = cell(10);
        sink.emit(&JobEventPayload::Cell(Box::new(small.clone())))
            .unwrap();
        let pending = sink.lock().spool.pending(10);
        let JobEventPayload::Cell(sent) = serde_json::from_str(&pending[2].payload_json).unwrap()
        else {
            panic!("not a cell");
        };
        assert_eq!(sent.upstream.scores.unwrap().frames.len(), 10);
    }

    #[test]
    fn an_event_that_cannot_be_made_small_enough_fails_the_job_and_is_not_spooled() {
        let dir = tempfile::tempdir().unwrap();
        let sink = EventSink::open(dir.path(), "agent", "job", 1, 0, UploadGate::new()).unwrap();
        sink.emit(&JobEventPayload::Log {
            level: LogLevel::Info,
            line: "z".repeat(MAX_EVENT_JSON_BYTES + 1),
        })
        .unwrap();
        let failure = sink.spool_failure().expect("the job must fail");
        assert!(failure.contains("cannot be made smaller"), "{failure}");
        assert_eq!(sink.lock().spool.len(), 0, "nothing blocks the uploader");
    }

    #[test]
    fn upload_batches_stay_under_the_byte_budget_but_always_carry_one_event() {
        let event = |seq, bytes| SpooledEvent {
            seq,
            at_ms: 0,
            payload_json: "x".repeat(bytes),
        };
        let batch = within_bytes(vec![event(0, 5), event(1, 5), event(2, 5)], 10);
        assert_eq!(batch.iter().map(|e| e.seq).collect::<Vec<_>>(), [0, 1]);
        let batch = within_bytes(vec![event(0, 50), event(1, 5)], 10);
        assert_eq!(
            batch.len(),
            1,
            "a lone event larger than the budget still goes"
        );
    }
}
