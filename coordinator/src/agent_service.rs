//! The gRPC service agents dial: registration, the session stream, and event upload. Under
//! mutual TLS every call's agent id must be the one its certificate registered
//! (`Trust::bind_agent_certificate`), so an agent speaks only for itself.

use std::pin::Pin;

use abfleet_core::inventory::Inventory;
use abfleet_core::session::AgentMessage;
use abfleet_core::{AgentId, JobId};
use abfleet_proto::{parse_id, pb};
use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, UnboundedReceiverStream};
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};
use tracing::{instrument, warn};

use crate::auth::caller_of;
use crate::fleet::Fleet;
use crate::store::IncomingEvent;

pub(crate) struct AgentService {
    pub(crate) fleet: Fleet,
}

type SessionStream = Pin<Box<dyn Stream<Item = Result<pb::CoordinatorMessage, Status>> + Send>>;

#[tonic::async_trait]
impl pb::agent_service_server::AgentService for AgentService {
    #[instrument(skip_all)]
    async fn register(
        &self,
        request: Request<pb::RegisterRequest>,
    ) -> Result<Response<pb::RegisterResponse>, Status> {
        let caller = caller_of(&request)?;
        let request = request.into_inner();
        let agent_id: AgentId = parse_id("agent_id", &request.agent_id)?;
        if let Some(identity) = caller.identity() {
            self.fleet
                .trust()
                .bind_agent_certificate(agent_id, &identity.name, &identity.certificate)
                .await?;
        }
        let inventory: Inventory = request
            .inventory
            .ok_or_else(|| Status::invalid_argument("field `inventory` is missing"))?
            .try_into()?;
        self.fleet.register(agent_id, &inventory).await?;
        let config = self.fleet.config();
        Ok(Response::new(pb::RegisterResponse {
            heartbeat_interval_ms: config.heartbeat_interval.as_millis() as u64,
            lease_ms: config.lease.as_millis() as u64,
        }))
    }

    type SessionStream = SessionStream;

    async fn session(
        &self,
        request: Request<Streaming<pb::AgentMessage>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        let caller = caller_of(&request)?;
        let mut incoming = request.into_inner();
        let (sender, receiver) = mpsc::unbounded_channel();
        let fleet = self.fleet.clone();
        // The first message names the agent; the session belongs to it from then on.
        let first = incoming.message().await?.ok_or_else(|| {
            Status::invalid_argument("the session closed before its first message")
        })?;
        let agent_id: AgentId = parse_id("agent_id", &first.agent_id)?;
        if let Some(name) = caller.certificate_name() {
            fleet
                .trust()
                .check_agent_certificate(agent_id, name)
                .await?;
        }
        let certificate = caller
            .identity()
            .map(|identity| identity.certificate.clone());
        let (number, revoked) =
            fleet
                .scheduling()
                .open_session(agent_id, sender, certificate.clone())?;
        // A message the agent must hear about ends its session with that status (after
        // whatever was queued for it): the agent sees why instead of talking into the void.
        let (ending, ended) = mpsc::channel::<Status>(1);
        {
            // A revocation ends the session at once, saying why.
            let ending = ending.clone();
            tokio::spawn(async move {
                if let Ok(reason) = revoked.await {
                    let _ = ending.send(Status::unauthenticated(reason)).await;
                }
            });
        }
        tokio::spawn(async move {
            let mut next = Some(Ok(first));
            let mut broke = None;
            loop {
                let message = match next.take() {
                    Some(message) => message,
                    None => match incoming.next().await {
                        Some(message) => message,
                        None => break,
                    },
                };
                let message = match message {
                    Ok(message) => message,
                    Err(status) => {
                        broke = Some(status.message().chars().take(200).collect::<String>());
                        break;
                    }
                };
                // The interceptor checked the certificate when the stream opened; a message
                // on it after a revocation is not heard.
                if let Some(certificate) = &certificate {
                    if let Err(err) = fleet.trust().check_not_revoked(certificate) {
                        let _ = ending.try_send(Status::from(err));
                        break;
                    }
                }
                match handle_agent_message(&fleet, agent_id, message).await {
                    Ok(()) => {}
                    Err(err @ crate::FleetError::NotRegistered(_)) => {
                        warn!(agent_id = %agent_id, error = %err, "session message from an unregistered agent; ending its session");
                        let _ = ending.try_send(Status::from(err));
                        break;
                    }
                    Err(err) => {
                        warn!(agent_id = %agent_id, error = %err, "failed to handle an agent message");
                    }
                }
            }
            // Ends the outgoing stream of messages (the fleet drops the session's sender);
            // `ending` goes with this task, so the status stream ends too.
            match broke {
                Some(why) => {
                    if let Err(err) = fleet
                        .scheduling()
                        .session_broke(agent_id, number, &why)
                        .await
                    {
                        warn!(agent_id = %agent_id, error = %err, "could not requeue a broken session's jobs; the reaper will after agent_lost_after");
                    }
                }
                None => fleet.scheduling().close_session(agent_id, number),
            }
        });
        let outgoing = UnboundedReceiverStream::new(receiver)
            .map(|message| Ok(pb::CoordinatorMessage::from(message)))
            .chain(ReceiverStream::new(ended).map(Err));
        Ok(Response::new(Box::pin(outgoing)))
    }

    #[instrument(skip_all, fields(job_id = %request.get_ref().job_id, attempt = request.get_ref().attempt))]
    async fn push_events(
        &self,
        request: Request<pb::PushEventsRequest>,
    ) -> Result<Response<pb::PushEventsResponse>, Status> {
        let caller = caller_of(&request)?;
        let request = request.into_inner();
        let agent_id: AgentId = parse_id("agent_id", &request.agent_id)?;
        if let Some(name) = caller.certificate_name() {
            self.fleet
                .trust()
                .check_agent_certificate(agent_id, name)
                .await?;
        }
        let job_id: JobId = parse_id("job_id", &request.job_id)?;
        let mut events = Vec::with_capacity(request.events.len());
        for event in request.events {
            // A cell's header only (`store/incoming.rs`); its body is read with the report.
            let (seq, at_ms) = (event.seq, event.at_ms);
            let event = IncomingEvent::parse(seq, at_ms, event.payload_json).map_err(|err| {
                Status::invalid_argument(format!(
                    "event {seq} of job {job_id} does not parse: {err}; is the agent newer than the coordinator?"
                ))
            })?;
            events.push(event);
        }
        if request.lost_before > 0 {
            // The agent no longer holds events the coordinator asked for: the attempt is
            // redone, unless the store has them after all.
            self.fleet
                .intake()
                .events_lost(agent_id, job_id, request.attempt, request.lost_before)
                .await?;
        }
        match self
            .fleet
            .intake()
            .push_events(agent_id, job_id, request.attempt, events)
            .await
        {
            Ok(acked) => Ok(Response::new(pb::PushEventsResponse {
                acked,
                missing: None,
            })),
            Err(crate::FleetError::MissingEvents { first, last, .. }) => {
                Ok(Response::new(pb::PushEventsResponse {
                    acked: Vec::new(),
                    missing: Some(pb::MissingEvents { first, last }),
                }))
            }
            Err(err) => Err(err.into()),
        }
    }
}

async fn handle_agent_message(
    fleet: &Fleet,
    agent_id: AgentId,
    message: pb::AgentMessage,
) -> Result<(), crate::FleetError> {
    let message = match AgentMessage::try_from(message) {
        Ok(message) => message,
        Err(err) => {
            warn!(agent_id = %agent_id, error = %err, "an agent's session message does not decode; ignoring it");
            return Ok(());
        }
    };
    match message {
        AgentMessage::Heartbeat { running, cache } => {
            fleet.scheduling().record_agent_cache(agent_id, cache);
            fleet.scheduling().heartbeat(agent_id, running).await
        }
        AgentMessage::Ready { resume } => fleet.scheduling().ready(agent_id, resume).await,
        AgentMessage::Leaving { job_id, attempt } => {
            fleet
                .scheduling()
                .agent_leaving(agent_id, job_id, attempt)
                .await
        }
    }
}
