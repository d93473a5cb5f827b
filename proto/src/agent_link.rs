//! The agent's end of `AgentService`, in domain types: register, the session (messages out,
//! messages in), and event uploads. The agent names neither protobuf nor tonic; what it
//! branches on in an error is a [`LinkErrorKind`].

use std::time::Duration;

use abfleet_core::inventory::Inventory;
use abfleet_core::session::{AgentMessage, JobOffer, SessionMessage};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

pub use crate::link_error::{LinkError, LinkErrorKind};
use crate::pb;
use crate::pb::agent_service_client::AgentServiceClient;
use crate::transport::{client_endpoint, Connection, TlsFiles, TransportError};
use crate::{agent_message, WireError};

/// A lazily connected client of the coordinator's agent service. Cheap to clone.
#[derive(Clone)]
pub struct AgentLink {
    client: AgentServiceClient<Channel>,
}

/// What registering told the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registration {
    /// How often to send a heartbeat (at least 50 ms).
    pub heartbeat_interval: Duration,
}

/// One event of an upload, as the spool keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushedEvent {
    pub seq: u64,
    pub at_ms: i64,
    pub payload_json: String,
}

/// One upload of a job attempt's events.
#[derive(Debug)]
pub struct EventPush<'a> {
    pub agent_id: &'a str,
    pub job_id: &'a str,
    pub attempt: u32,
    pub events: Vec<PushedEvent>,
    /// Events before this sequence number are gone from the agent (0: none are).
    pub lost_before: u64,
}

/// What the coordinator answered an upload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushReply {
    /// These sequence numbers are stored.
    Acked(Vec<u64>),
    /// The coordinator lacks events `first..=last` it once acknowledged.
    Missing { first: u64, last: u64 },
}

/// The session is closed: nothing more can be sent on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the session is closed")]
pub struct SessionClosed;

/// The agent's half of an open session, sending.
pub struct SessionSender {
    agent_id: String,
    tx: mpsc::Sender<pb::AgentMessage>,
}

impl SessionSender {
    pub async fn send(&self, message: AgentMessage) -> Result<(), SessionClosed> {
        self.tx
            .send(agent_message(&self.agent_id, message))
            .await
            .map_err(|_| SessionClosed)
    }
}

/// The agent's half of an open session, receiving.
pub struct SessionReceiver {
    incoming: tonic::Streaming<pb::CoordinatorMessage>,
}

impl SessionReceiver {
    /// The next message; `None` when the coordinator closed the session.
    pub async fn next(&mut self) -> Result<Option<Received>, LinkError> {
        loop {
            match self.incoming.message().await? {
                None => return Ok(None),
                Some(message) => {
                    if let Some(received) = decode(message) {
                        return Ok(Some(received));
                    }
                }
            }
        }
    }
}

/// One message from the coordinator, as the agent reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum Received {
    Message(SessionMessage),
    /// An offer this agent cannot read (its spec or ids do not decode): the agent refuses
    /// it through the attempt's events, with `error` as the reason.
    UnreadableOffer {
        job_id: String,
        run_id: String,
        attempt: u32,
        next_seq: u64,
        error: String,
    },
    /// A cancel or lease-lost message whose ids do not decode: names no job of this agent.
    Unreadable {
        error: String,
    },
}

/// A coordinator message as the agent reads it; `None` for a message without a kind
/// (a newer coordinator's), which the agent ignores.
pub fn decode(message: pb::CoordinatorMessage) -> Option<Received> {
    use pb::coordinator_message::Kind;
    match message.kind? {
        Kind::Offer(offer) => Some(decode_offer(offer)),
        kind => Some(
            match SessionMessage::try_from(pb::CoordinatorMessage { kind: Some(kind) }) {
                Ok(message) => Received::Message(message),
                Err(err) => Received::Unreadable {
                    error: err.to_string(),
                },
            },
        ),
    }
}

fn decode_offer(offer: pb::JobOffer) -> Received {
    // Kept for a refusal; the spec's text is not.
    let (job_id, run_id, attempt, next_seq) = (
        offer.job_id.clone(),
        offer.run_id.clone(),
        offer.attempt,
        offer.next_seq,
    );
    let error = match JobOffer::try_from(offer) {
        Ok(offer) => return Received::Message(SessionMessage::Offer(Box::new(offer))),
        Err(WireError::BadDocument {
            field: "offer.spec_json",
            message,
        }) => format!(
            "the agent cannot read the job spec ({message}); is the agent older than the coordinator?"
        ),
        Err(err) => format!(
            "the agent cannot read the job offer ({err}); is the agent older than the coordinator?"
        ),
    };
    Received::UnreadableOffer {
        job_id,
        run_id,
        attempt,
        next_seq,
        error,
    }
}

impl AgentLink {
    /// A client that dials `url` when first used: connect timeout 5 s, keep-alive 20 s.
    pub fn connect_lazy(url: &str, tls: Option<&TlsFiles>) -> Result<AgentLink, TransportError> {
        let channel = client_endpoint(url, tls)?
            .connect_timeout(Duration::from_secs(5))
            .keep_alive_timeout(Duration::from_secs(20))
            .connect_lazy();
        Ok(AgentLink {
            client: AgentServiceClient::new(channel),
        })
    }

    /// A client on a connection others share.
    pub fn over(connection: &Connection) -> AgentLink {
        AgentLink {
            client: AgentServiceClient::new(connection.channel()),
        }
    }

    pub async fn register(
        &self,
        agent_id: &str,
        inventory: &Inventory,
        agent_version: &str,
    ) -> Result<Registration, LinkError> {
        let response = self
            .client
            .clone()
            .register(pb::RegisterRequest {
                agent_id: agent_id.to_string(),
                inventory: Some(inventory.clone().into()),
                agent_version: agent_version.to_string(),
            })
            .await?
            .into_inner();
        Ok(Registration {
            heartbeat_interval: Duration::from_millis(response.heartbeat_interval_ms.max(50)),
        })
    }

    /// Opens a session whose first messages are `first` (they go before anything sent later).
    pub async fn open_session(
        &self,
        agent_id: &str,
        first: Vec<AgentMessage>,
    ) -> Result<(SessionSender, SessionReceiver), LinkError> {
        let (tx, rx) = mpsc::channel(16.max(first.len()));
        for message in first {
            let _ = tx.send(agent_message(agent_id, message)).await;
        }
        let incoming = self
            .client
            .clone()
            .session(ReceiverStream::new(rx))
            .await?
            .into_inner();
        Ok((
            SessionSender {
                agent_id: agent_id.to_string(),
                tx,
            },
            SessionReceiver { incoming },
        ))
    }

    pub async fn push_events(&self, push: EventPush<'_>) -> Result<PushReply, LinkError> {
        let request = pb::PushEventsRequest {
            agent_id: push.agent_id.to_string(),
            job_id: push.job_id.to_string(),
            attempt: push.attempt,
            events: push
                .events
                .into_iter()
                .map(|e| pb::JobEvent {
                    seq: e.seq,
                    at_ms: e.at_ms,
                    payload_json: e.payload_json,
                })
                .collect(),
            lost_before: push.lost_before,
        };
        let response = self.client.clone().push_events(request).await?.into_inner();
        Ok(match response.missing {
            Some(missing) => PushReply::Missing {
                first: missing.first,
                last: missing.last,
            },
            None => PushReply::Acked(response.acked),
        })
    }
}

#[cfg(test)]
mod tests {
    use abfleet_core::spec::JobSpec;

    use super::*;

    fn offer(spec_json: &str, job_id: &str) -> pb::CoordinatorMessage {
        pb::CoordinatorMessage {
            kind: Some(pb::coordinator_message::Kind::Offer(pb::JobOffer {
                job_id: job_id.to_string(),
                run_id: abfleet_core::ids::RunId::new_random().to_string(),
                attempt: 3,
                spec_json: spec_json.to_string(),
                lease_ms: 1000,
                next_seq: 7,
                generation: String::new(),
                kept_cells: Vec::new(),
            })),
        }
    }

    #[test]
    fn an_offer_whose_spec_does_not_decode_is_an_unreadable_offer() {
        let job_id = abfleet_core::ids::JobId::new_random().to_string();
        let Some(Received::UnreadableOffer {
            job_id: got,
            attempt,
            next_seq,
            error,
            ..
        }) = decode(offer("{not a spec", &job_id))
        else {
            panic!("not an unreadable offer");
        };
        assert_eq!((got.as_str(), attempt, next_seq), (job_id.as_str(), 3, 7));
        assert!(
            error.starts_with("the agent cannot read the job spec (")
                && error.ends_with("); is the agent older than the coordinator?"),
            "{error}"
        );
    }

    #[test]
    fn an_offer_whose_job_id_does_not_decode_is_an_unreadable_offer() {
        let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/jobs"));
        let spec = JobSpec::from_toml(
            include_str!("../../fixtures/jobs/demo.toml"),
            std::path::Path::new("demo.toml"),
            dir,
        )
        .unwrap();
        let Some(Received::UnreadableOffer { job_id, error, .. }) =
            decode(offer(&spec.to_json(), "not-an-id"))
        else {
            panic!("not an unreadable offer");
        };
        assert_eq!(job_id, "not-an-id");
        assert!(error.contains("offer.job_id"), "{error}");
        // A readable offer decodes.
        let id = abfleet_core::ids::JobId::new_random();
        let Some(Received::Message(SessionMessage::Offer(decoded))) =
            decode(offer(&spec.to_json(), &id.to_string()))
        else {
            panic!("a readable offer must decode");
        };
        assert_eq!((decoded.job_id, decoded.attempt), (id, 3));
    }

    #[test]
    fn a_message_without_a_kind_is_skipped_and_a_bad_cancel_is_unreadable() {
        assert_eq!(decode(pb::CoordinatorMessage { kind: None }), None);
        let cancel = pb::CoordinatorMessage {
            kind: Some(pb::coordinator_message::Kind::Cancel(pb::CancelJob {
                job_id: "nope".into(),
                reason: "r".into(),
            })),
        };
        assert!(matches!(decode(cancel), Some(Received::Unreadable { .. })));
    }
}
