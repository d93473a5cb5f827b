//! The event sink of one job attempt: numbers events, writes them to the spool, and one
//! uploader task sends them to the coordinator and drops what it acknowledged. The uploader
//! stays silent while a timed run is in flight (`set_quiet`), and `flush` is the barrier
//! the job passes before it may send "done". An event the spool could not write (the work
//! dir is full) is still kept and sent, and the sink remembers the failure
//! (`spool_failure`): the job fails with it rather than run on without a durable record.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use abfleet_core::events::JobEventPayload;
use abfleet_proto::pb;
use abfleet_proto::pb::agent_service_client::AgentServiceClient;
use tokio::sync::watch;
use tonic::transport::Channel;
use tracing::{debug, error, warn};

use crate::backoff::Backoff;
use crate::spool::{Spool, SpooledEvent};

const BATCH: usize = 64;

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
    /// The first failed spool write, as the message the job fails with.
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
    quiet: watch::Sender<bool>,
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
                quiet: watch::channel(false).0,
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
        let payload_json = serde_json::to_string(payload).expect("events serialise");
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
        Ok(seq)
    }

    /// Why the spool could not be written, once a write failed: the job must fail with it
    /// (its events are still sent, but a restart would not find them).
    pub fn spool_failure(&self) -> Option<String> {
        self.lock().spool_failure.clone()
    }

    /// While quiet, nothing is uploaded (a timed run is in flight).
    pub fn set_quiet(&self, quiet: bool) {
        self.inner.quiet.send_replace(quiet);
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

    /// The uploader: runs until closed and drained, or the lease is lost.
    pub async fn upload(self, mut client: AgentServiceClient<Channel>) {
        let mut changes = self.inner.changes.subscribe();
        let mut quiet = self.inner.quiet.subscribe();
        // Jittered: after a coordinator restart, agents do not retry in the same instants.
        let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(2));
        loop {
            // Never compete with a timed run.
            while *quiet.borrow_and_update() {
                if quiet.changed().await.is_err() {
                    break;
                }
            }
            let (batch, closed) = {
                let state = self.lock();
                if state.lease_lost.is_some() {
                    return;
                }
                (state.spool.pending(BATCH), state.closed)
            };
            if batch.is_empty() {
                if closed {
                    return;
                }
                let _ = changes.changed().await;
                continue;
            }
            let request = pb::PushEventsRequest {
                agent_id: self.inner.agent_id.clone(),
                job_id: self.inner.job_id.clone(),
                attempt: self.inner.attempt,
                events: batch
                    .iter()
                    .map(|e| pb::JobEvent {
                        seq: e.seq,
                        at_ms: e.at_ms,
                        payload_json: e.payload_json.clone(),
                    })
                    .collect(),
            };
            match client.push_events(request).await {
                Ok(response) => {
                    let acked = response.into_inner().acked;
                    debug!(job_id = %self.inner.job_id, count = acked.len(), "events acknowledged");
                    {
                        let mut state = self.lock();
                        if let Err(err) = state.spool.acknowledge(&acked) {
                            warn!(error = %err, "failed to rewrite the spool");
                        }
                    }
                    self.bump();
                    backoff.reset();
                }
                Err(status)
                    if matches!(
                        status.code(),
                        tonic::Code::FailedPrecondition
                            | tonic::Code::NotFound
                            | tonic::Code::InvalidArgument
                    ) =>
                {
                    warn!(job_id = %self.inner.job_id, %status, "coordinator refused the events; dropping the attempt");
                    self.mark_lost(status.message());
                    return;
                }
                Err(status) => {
                    debug!(job_id = %self.inner.job_id, %status, "upload failed; retrying");
                    tokio::time::sleep(backoff.next_delay()).await;
                }
            }
        }
    }
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
        let sink = EventSink::open(&spool_dir, "agent", "job", 1, 0).unwrap();
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
}
