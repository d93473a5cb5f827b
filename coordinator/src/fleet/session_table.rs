//! The open session of each connected agent and who waits for a job: scheduling's memory.
//! Only this module takes its locks; `sessions.rs` decides (with the store) and asks this
//! table, dispatch holds [`SessionTable::dispatching`] so one job is never offered twice,
//! and a revocation ends sessions through [`SessionTable::end_where`] (asked by
//! `Scheduling::end_sessions_where`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use abfleet_core::certs::CertificateId;
use abfleet_core::session::{JobOffer, OutgoingMessage, SessionMessage};
use abfleet_core::spec::SpecJson;
use abfleet_core::{AgentId, JobId};
use tokio::sync::{mpsc, oneshot};
use tracing::warn;

use super::FleetError;

/// Where a session's messages to its agent go (the agent service forwards them to the wire).
/// Unbounded: an offer, a cancel or a lost lease must never be dropped because the agent's
/// connection is slow to drain, and there are few of them (a handful per job), so the queue
/// stays small.
pub type SessionSender = mpsc::UnboundedSender<OutgoingMessage>;

struct Session {
    number: u64,
    sender: SessionSender,
    /// The agent said it is idle and has not been offered a job since: when, as a ticket of
    /// a counter that only grows (dispatch offers to the smallest, the longest waiting).
    waiting: Option<u64>,
    /// When the agent last spoke on this session (opened it, heartbeat, ready): a session
    /// silent longer than `agent_lost_after` may be replaced by a new one under its id.
    last_seen_ms: i64,
    /// The certificate the session was opened with (mutual TLS only).
    certificate: Option<CertificateId>,
    /// Ends the session with a reason the agent is told (a revocation); the service that
    /// holds the stream waits on the other end.
    ending: Option<oneshot::Sender<String>>,
}

/// How an agent's session went.
#[derive(Debug, Clone)]
pub(super) struct Gone {
    pub(super) at_ms: i64,
    /// Set when it broke (`session_broke`): what the coordinator saw.
    pub(super) broke: Option<String>,
}

#[derive(Default)]
pub(super) struct SessionTable {
    sessions: Mutex<HashMap<AgentId, Session>>,
    /// Agents whose session closed and who have not opened another since: when it closed,
    /// and why when it broke. A job such an agent holds is requeued once it has stayed away
    /// `agent_lost_after` (closed) or the restart grace (broke)
    /// (`leases::reap_expired_leases`); kept in memory only, so after a restart the lease
    /// alone decides.
    disconnected: Mutex<HashMap<AgentId, Gone>>,
    /// Session numbers and waiting tickets, from one counter that only grows.
    next_ticket: AtomicU64,
    /// Held while dispatching, so two dispatches never offer one job twice.
    dispatching: tokio::sync::Mutex<()>,
    /// How often each attempt was resumed by its restarted agent.
    resumes: Mutex<HashMap<(JobId, u32), u32>>,
}

impl SessionTable {
    fn sessions(&self) -> MutexGuard<'_, HashMap<AgentId, Session>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn disconnected(&self) -> MutexGuard<'_, HashMap<AgentId, Gone>> {
        self.disconnected.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn ticket(&self) -> u64 {
        // Starts at 1: session number 0 is never open.
        self.next_ticket.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Opens a session, unless another of that id is open and has spoken within
    /// `lost_after_ms`; returns its number and where its ending reason arrives.
    pub(super) fn open(
        &self,
        agent_id: AgentId,
        sender: SessionSender,
        certificate: Option<CertificateId>,
        now_ms: i64,
        lost_after_ms: i64,
    ) -> Result<(u64, oneshot::Receiver<String>), FleetError> {
        let number = self.ticket();
        let mut sessions = self.sessions();
        if sessions
            .get(&agent_id)
            .is_some_and(|s| !s.sender.is_closed() && now_ms - s.last_seen_ms <= lost_after_ms)
        {
            return Err(FleetError::AgentConnected(agent_id));
        }
        let (ending, ended) = oneshot::channel();
        sessions.insert(
            agent_id,
            Session {
                number,
                sender,
                waiting: None,
                last_seen_ms: now_ms,
                certificate,
                ending: Some(ending),
            },
        );
        drop(sessions);
        self.disconnected().remove(&agent_id);
        Ok((number, ended))
    }

    /// The agent spoke on its session.
    pub(super) fn touch(&self, agent_id: AgentId, now_ms: i64) {
        if let Some(session) = self.sessions().get_mut(&agent_id) {
            session.last_seen_ms = now_ms;
        }
    }

    /// Forgets the agent's session `number` if it is still the open one, and notes when it
    /// went (the reaper's `agent_lost_after` counts from then). False when a newer session
    /// replaced it.
    pub(super) fn remove(
        &self,
        agent_id: AgentId,
        number: u64,
        now_ms: i64,
        broke: Option<&str>,
    ) -> bool {
        let mut sessions = self.sessions();
        if sessions.get(&agent_id).is_none_or(|s| s.number != number) {
            return false;
        }
        sessions.remove(&agent_id);
        // Recorded under the sessions lock: a new session, which clears it, cannot come in
        // between.
        self.disconnected().insert(
            agent_id,
            Gone {
                at_ms: now_ms,
                broke: broke.map(str::to_string),
            },
        );
        true
    }

    /// Agents whose session closed at least `closed_grace_ms` ago, or broke at least
    /// `broke_grace_ms` ago, and who have not opened another: how long ago, and how it went.
    pub(super) fn gone(
        &self,
        now_ms: i64,
        closed_grace_ms: i64,
        broke_grace_ms: i64,
    ) -> HashMap<AgentId, (i64, Gone)> {
        self.disconnected()
            .iter()
            .filter(|(_, gone)| {
                let grace = if gone.broke.is_some() {
                    broke_grace_ms
                } else {
                    closed_grace_ms
                };
                now_ms - gone.at_ms >= grace
            })
            .map(|(agent, gone)| (*agent, (now_ms - gone.at_ms, gone.clone())))
            .collect()
    }

    /// Queues a message on the agent's session (never dropped for want of room). False, and
    /// logged, when the agent has no open session: it learns on its next heartbeat or ready.
    pub(super) fn send(&self, agent_id: AgentId, message: OutgoingMessage) -> bool {
        let kind = match &message {
            SessionMessage::Offer(_) => "offer",
            SessionMessage::Cancel { .. } => "cancel",
            SessionMessage::LeaseLost { .. } => "lease lost",
        };
        let sent = self
            .sessions()
            .get(&agent_id)
            .is_some_and(|session| session.sender.send(message).is_ok());
        if !sent {
            warn!(agent_id = %agent_id, kind, "the agent has no open session; the message is not delivered (its next heartbeat is answered again)");
        }
        sent
    }

    /// The agent waits for a job; a repeated "ready" keeps its place in the queue.
    pub(super) fn wait_for_job(&self, agent_id: AgentId) {
        let ticket = self.ticket();
        if let Some(session) = self.sessions().get_mut(&agent_id) {
            session.waiting.get_or_insert(ticket);
        }
    }

    /// Of the waiting agents `may_take` accepts, the one idle the longest, whatever its id.
    pub(super) fn longest_waiting(&self, may_take: impl Fn(AgentId) -> bool) -> Option<AgentId> {
        self.sessions()
            .iter()
            .filter_map(|(id, s)| s.waiting.map(|ticket| (ticket, *id)))
            .filter(|(_, id)| may_take(*id))
            .min()
            .map(|(_, id)| id)
    }

    /// Offers a job on the agent's session; it waits no longer. False when its session went
    /// away since it was chosen.
    pub(super) fn offer(&self, agent_id: AgentId, offer: JobOffer<SpecJson>) -> bool {
        match self.sessions().get_mut(&agent_id) {
            Some(session) => {
                session.waiting = None;
                session
                    .sender
                    .send(SessionMessage::Offer(Box::new(offer)))
                    .is_ok()
            }
            None => false,
        }
    }

    /// Counts one more resume of `attempt`; false (nothing counted) once it had `max`.
    pub(super) fn count_resume(&self, attempt: (JobId, u32), max: u32) -> bool {
        let mut resumes = self.resumes.lock().unwrap_or_else(|p| p.into_inner());
        let count = resumes.entry(attempt).or_default();
        if *count >= max {
            return false;
        }
        *count += 1;
        true
    }

    /// Open sessions.
    pub(super) fn connected(&self) -> usize {
        self.sessions().len()
    }

    /// Ends every open session whose certificate `why_end` names a reason for: the session is
    /// forgotten and its agent told the reason. Returns the agents whose session ended.
    pub(super) fn end_where(
        &self,
        why_end: impl Fn(&CertificateId) -> Option<String>,
    ) -> Vec<AgentId> {
        let mut sessions = self.sessions();
        let ending: Vec<(AgentId, String)> = sessions
            .iter()
            .filter_map(|(agent, session)| Some((*agent, why_end(session.certificate.as_ref()?)?)))
            .collect();
        for (agent, reason) in &ending {
            if let Some(mut session) = sessions.remove(agent) {
                if let Some(ending) = session.ending.take() {
                    let _ = ending.send(reason.clone());
                }
            }
        }
        ending.into_iter().map(|(agent, _)| agent).collect()
    }

    /// Held while dispatching (see the field).
    pub(super) async fn dispatching(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.dispatching.lock().await
    }
}
