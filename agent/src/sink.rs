//! The event sink of one job attempt: numbers events, writes them to the spool, and one
//! uploader task sends them to the coordinator and drops what it acknowledged. The uploader
//! stays silent while a timed run is in flight (`set_quiet`), and `flush` is the barrier
//! the job passes before it may send "done".

use std::sync::{Arc, Mutex};
use std::time::Duration;

use abfleet_core::events::JobEventPayload;
use abfleet_proto::pb;
use abfleet_proto::pb::agent_service_client::AgentServiceClient;
use tokio::sync::watch;
use tonic::transport::Channel;
use tracing::{debug, warn};

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
                warn!(job_id = %self.inner.job_id, error = %err, "failed to write the spool; the event is kept in memory only");
            }
            seq
        };
        self.bump();
        Ok(seq)
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
        let mut backoff = Duration::from_millis(50);
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
                    backoff = Duration::from_millis(50);
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
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
            }
        }
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
