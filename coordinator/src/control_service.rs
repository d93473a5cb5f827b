//! The gRPC service the CLI talks to: submit, watch, report, list, cancel, and the
//! certificates' deny list (revoke, list).

use std::pin::Pin;

use abfleet_core::report::history::BISECT_TRIGGER;
use abfleet_core::spec::JobSpec;
use abfleet_core::{AgentId, RunId};
use abfleet_proto::control_link::{
    AgentCertificate, AgentSummary, CertificateListing, RegisteredCertificate, RevokeOutcome,
    RevokedCertificate, RunSummary,
};
use abfleet_proto::{parse_id, pb};
use tokio::sync::broadcast::error::RecvError;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

use crate::auth::caller_of;
use crate::fleet::{Fleet, RevokeTarget};
use crate::store::{Revocation, RunCursor, RunListing, RunOrder};

pub(crate) struct ControlService {
    pub(crate) fleet: Fleet,
}

/// The largest job spec (as JSON) the coordinator takes.
pub const MAX_SPEC_JSON_BYTES: usize = 1024 * 1024;

type ProgressStream = Pin<Box<dyn Stream<Item = Result<pb::RunProgress, Status>> + Send>>;

#[tonic::async_trait]
impl pb::control_service_server::ControlService for ControlService {
    async fn submit_run(
        &self,
        request: Request<pb::SubmitRunRequest>,
    ) -> Result<Response<pb::SubmitRunResponse>, Status> {
        let request = request.into_inner();
        if request.spec_json.len() > MAX_SPEC_JSON_BYTES {
            return Err(Status::invalid_argument(format!(
                "the job spec is {} bytes as JSON, over the coordinator's limit of {} bytes; a spec names its fixtures and commands, it does not carry data",
                request.spec_json.len(),
                MAX_SPEC_JSON_BYTES
            )));
        }
        let trigger = if request.trigger.is_empty() {
            "manual"
        } else {
            request.trigger.as_str()
        };
        // `bisect` is no reason a person gives: `abfleet bisect` submits its steps with it,
        // so they stay out of every comparison and history.
        let bisect_step = trigger == BISECT_TRIGGER;
        if !crate::TRIGGER_REASONS.contains(&trigger) && !bisect_step {
            return Err(Status::invalid_argument(format!(
                "trigger `{trigger}` is not one of {}",
                crate::TRIGGER_REASONS.join(", ")
            )));
        }
        let hardware = (!request.hardware_id.is_empty()).then(|| request.hardware_id.clone());
        if (bisect_step || hardware.is_some()) && request.milestone {
            return Err(Status::invalid_argument(
                "a bisect step or a run pinned to a hardware id carries its own spec, not the milestone spec",
            ));
        }
        let spec = if request.milestone {
            if !request.spec_json.is_empty() {
                return Err(Status::invalid_argument(
                    "a milestone run takes the coordinator's spec; send either `milestone` or a spec, not both",
                ));
            }
            None
        } else {
            let spec = JobSpec::from_json(&request.spec_json).map_err(|err| {
                Status::invalid_argument(format!(
                    "the job spec is not valid: {err}; submit it with `abfleet submit SPEC.toml`, which validates it first"
                ))
            })?;
            Some((spec, request.spec_origin.clone()))
        };
        let pull_request = if request.pull_request.is_empty() {
            None
        } else {
            if bisect_step || hardware.is_some() {
                return Err(Status::invalid_argument(
                    "a bisect step or a run pinned to a hardware id answers no pull request",
                ));
            }
            Some(
                crate::PullRequestRef::parse(&request.pull_request).map_err(|err| {
                    Status::invalid_argument(format!("--pr: {err}; give `owner/name#number`"))
                })?,
            )
        };
        check_reason("the trigger's note", &request.trigger_note)?;
        let note = (!request.trigger_note.is_empty()).then_some(request.trigger_note);
        let run_id = match (spec, note) {
            (Some((spec, origin)), note) if bisect_step || hardware.is_some() => {
                self.fleet
                    .runs()
                    .submit_on(spec, trigger, note.as_deref(), &origin, hardware.as_deref())
                    .await?
            }
            (Some((spec, origin)), None) if pull_request.is_none() => {
                self.fleet.runs().submit(spec, trigger, &origin).await?
            }
            (spec, note) => self
                .fleet
                .triggers()
                .trigger(crate::TriggerRequest {
                    reason: trigger.to_string(),
                    debounce_key: None,
                    note: note.unwrap_or_default(),
                    source: "cli",
                    spec,
                    upstream_rev: None,
                    fork_rev: None,
                    once: false,
                    pull_request,
                })
                .await?
                .run_id(),
        };
        Ok(Response::new(pb::SubmitRunResponse {
            run_id: run_id.to_string(),
        }))
    }

    type WatchRunStream = ProgressStream;

    async fn watch_run(
        &self,
        request: Request<pb::WatchRunRequest>,
    ) -> Result<Response<Self::WatchRunStream>, Status> {
        // A watcher whose certificate is revoked while it watches is cut off at its next
        // update, told why.
        let certificate = caller_of(&request)?
            .identity()
            .map(|identity| identity.certificate.clone());
        let run_id: RunId = parse_id("run_id", &request.into_inner().run_id)?;
        // Subscribe before the snapshot, so nothing between the two is missed.
        let mut updates = self.fleet.subscribe();
        let snapshot = self.fleet.reports().snapshot(run_id).await?;
        let fleet = self.fleet.clone();
        let stream = async_stream(move |sender| async move {
            let done = snapshot.is_finished();
            if sender.send(Ok(snapshot.into())).await.is_err() || done {
                return;
            }
            loop {
                let update = updates.recv().await;
                if let Some(Err(err)) = certificate
                    .as_ref()
                    .map(|c| fleet.trust().check_not_revoked(c))
                {
                    let _ = sender.send(Err(err.into())).await;
                    return;
                }
                match update {
                    Ok(update) if update.run_id == run_id => {
                        let finished = update.is_finished();
                        if sender.send(Ok(update.into())).await.is_err() || finished {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => {
                        // Fell behind: resynchronise from the store.
                        match fleet.reports().snapshot(run_id).await {
                            Ok(snapshot) => {
                                let finished = snapshot.is_finished();
                                if sender.send(Ok(snapshot.into())).await.is_err() || finished {
                                    return;
                                }
                            }
                            Err(err) => {
                                let _ = sender.send(Err(err.into())).await;
                                return;
                            }
                        }
                    }
                    Err(RecvError::Closed) => return,
                }
            }
        });
        Ok(Response::new(stream))
    }

    async fn get_report(
        &self,
        request: Request<pb::GetReportRequest>,
    ) -> Result<Response<pb::GetReportResponse>, Status> {
        let run_id: RunId = parse_id("run_id", &request.into_inner().run_id)?;
        // A finished run's report is one stored row (`fleet::served_reports`), its spec the
        // validated JSON stored with the run: neither is decoded here.
        let report_json = self.fleet.reports().report_json(run_id).await?;
        let spec_json = self.fleet.runs().run_spec_json(run_id).await?;
        Ok(Response::new(pb::GetReportResponse {
            report_json,
            spec_json,
        }))
    }

    async fn get_history(
        &self,
        request: Request<pb::GetHistoryRequest>,
    ) -> Result<Response<pb::GetHistoryResponse>, Status> {
        let request = request.into_inner();
        if request.generation.is_empty() || request.workload.is_empty() {
            return Err(Status::invalid_argument(
                "a history needs a generation key and a workload (`abfleet history --generation KEY --workload W`)",
            ));
        }
        let non_empty = |s: String| (!s.is_empty()).then_some(s);
        let points = self
            .fleet
            .reports()
            .history(abfleet_core::report::history::HistoryQuery {
                generation: request.generation,
                workload: request.workload,
                fixture: non_empty(request.fixture),
                name: non_empty(request.name),
                limit: request.limit,
            })
            .await?;
        Ok(Response::new(pb::GetHistoryResponse {
            points_json: serde_json::to_string(&points)
                .map_err(|err| Status::internal(err.to_string()))?,
        }))
    }

    async fn record_bisect(
        &self,
        request: Request<pb::RecordBisectRequest>,
    ) -> Result<Response<pb::RecordBisectResponse>, Status> {
        let request = request.into_inner();
        let run_id: RunId = parse_id("run_id", &request.run_id)?;
        if request.bisect_json.len() > MAX_SPEC_JSON_BYTES {
            return Err(Status::invalid_argument(format!(
                "the bisect is {} bytes as JSON, over the coordinator's limit of {MAX_SPEC_JSON_BYTES} bytes",
                request.bisect_json.len()
            )));
        }
        let record: abfleet_core::bisect::BisectRecord = serde_json::from_str(&request.bisect_json)
            .map_err(|err| {
                Status::invalid_argument(format!("the bisect is not a bisect record: {err}"))
            })?;
        self.fleet.reports().record_bisect(run_id, record).await?;
        Ok(Response::new(pb::RecordBisectResponse {}))
    }

    async fn list_runs(
        &self,
        request: Request<pb::ListRunsRequest>,
    ) -> Result<Response<pb::ListRunsResponse>, Status> {
        let request = request.into_inner();
        let size = page_size(request.page_size, RUNS_PAGE);
        let cursor = if request.page_token.is_empty() {
            None
        } else {
            Some(RunCursor::from_token(&request.page_token).ok_or_else(|| {
                Status::invalid_argument(format!(
                    "page_token `{}` is not one this coordinator gave out; start again with an empty token",
                    request.page_token
                ))
            })?)
        };
        let order = if request.oldest_first {
            RunOrder::OldestFirst
        } else {
            RunOrder::NewestFirst
        };
        let mut runs = self
            .fleet
            .runs()
            .run_listing(order, cursor, size + 1)
            .await?;
        let more = runs.len() > size as usize;
        runs.truncate(size as usize);
        let next_page_token = match runs.last() {
            Some(last) if more => RunCursor::after(last).token(),
            _ => String::new(),
        };
        Ok(Response::new(pb::ListRunsResponse {
            runs: runs
                .into_iter()
                .map(|run| RunSummary::from(run).into())
                .collect(),
            next_page_token,
        }))
    }

    async fn list_agents(
        &self,
        request: Request<pb::ListAgentsRequest>,
    ) -> Result<Response<pb::ListAgentsResponse>, Status> {
        let request = request.into_inner();
        let page = Page::of(request.page_size, &request.page_token, AGENTS_PAGE)?;
        let mut agents = self
            .fleet
            .scheduling()
            .agents_page(page.offset, page.size + 1)
            .await?;
        let next_page_token = page.next_token(agents.len());
        agents.truncate(page.size as usize);
        let deny_list = self.fleet.trust().deny_list();
        let agents = agents
            .into_iter()
            .map(|(agent, state, running)| {
                let cache = self
                    .fleet
                    .scheduling()
                    .agent_cache(agent.agent_id)
                    .unwrap_or_default();
                AgentSummary {
                    agent_id: agent.agent_id,
                    inventory: agent.inventory,
                    state,
                    last_heartbeat_ms: agent.last_heartbeat_ms,
                    running_job: running,
                    certificate: agent.certificate.map(|(name, id)| AgentCertificate {
                        revoked: deny_list.revoked(&id).is_some(),
                        name,
                        serial: id.serial,
                    }),
                    cache_bytes: cache.bytes,
                    max_cache_bytes: cache.max_bytes,
                }
                .into()
            })
            .collect();
        Ok(Response::new(pb::ListAgentsResponse {
            agents,
            next_page_token,
        }))
    }

    async fn cancel_run(
        &self,
        request: Request<pb::CancelRunRequest>,
    ) -> Result<Response<pb::CancelRunResponse>, Status> {
        let request = request.into_inner();
        let run_id: RunId = parse_id("run_id", &request.run_id)?;
        check_reason("the cancellation's reason", &request.reason)?;
        let reason = if request.reason.is_empty() {
            "cancelled by request".to_string()
        } else {
            request.reason
        };
        let cancelled = self.fleet.runs().cancel(run_id, &reason).await?;
        Ok(Response::new(pb::CancelRunResponse { cancelled }))
    }

    async fn drain_agent(
        &self,
        request: Request<pb::DrainAgentRequest>,
    ) -> Result<Response<pb::DrainAgentResponse>, Status> {
        let request = request.into_inner();
        let agent_id: AgentId = parse_id("agent_id", &request.agent_id)?;
        let state = self
            .fleet
            .scheduling()
            .drain(agent_id, request.resume)
            .await?;
        Ok(Response::new(pb::DrainAgentResponse {
            state: state.as_str().to_string(),
        }))
    }

    async fn revoke_certificate(
        &self,
        request: Request<pb::RevokeCertificateRequest>,
    ) -> Result<Response<pb::RevokeCertificateResponse>, Status> {
        let revoked_by = caller_of(&request)?.describe();
        let request = request.into_inner();
        check_reason("the revocation's reason", &request.reason)?;
        let target = if request.certificate_pem.trim().is_empty() {
            RevokeTarget::Named(request.serial_or_fingerprint)
        } else {
            RevokeTarget::Certificate(
                abfleet_core::certs::certificate_facts(&request.certificate_pem).map_err(
                    |err| Status::invalid_argument(format!("the certificate to revoke: {err}")),
                )?,
            )
        };
        let outcome = self
            .fleet
            .trust()
            .revoke_certificate(target, &request.reason, &revoked_by)
            .await?;
        Ok(Response::new(
            RevokeOutcome {
                revoked: revoked_view(outcome.revocation),
                added: outcome.added,
                sessions_ended: outcome.sessions_ended,
                jobs_requeued: outcome.jobs_requeued as u32,
            }
            .into(),
        ))
    }

    async fn list_certificates(
        &self,
        _request: Request<pb::ListCertificatesRequest>,
    ) -> Result<Response<pb::ListCertificatesResponse>, Status> {
        let (revoked, agents) = self.fleet.trust().certificates().await?;
        let deny_list = self.fleet.trust().deny_list();
        Ok(Response::new(
            CertificateListing {
                revoked: revoked.into_iter().map(revoked_view).collect(),
                agents: agents
                    .into_iter()
                    .map(|bound| RegisteredCertificate {
                        agent_id: bound.agent_id,
                        revoked: deny_list.revoked(&bound.certificate).is_some(),
                        cert_name: bound.cert_name,
                        serial: bound.certificate.serial,
                        fingerprint: bound.certificate.fingerprint,
                        registered_ms: (bound.registered_ms > 0).then_some(bound.registered_ms),
                    })
                    .collect(),
            }
            .into(),
        ))
    }
}

fn revoked_view(revocation: Revocation) -> RevokedCertificate {
    RevokedCertificate {
        key: revocation.key,
        serial: revocation.certificate.serial,
        fingerprint: revocation.certificate.fingerprint,
        role: revocation.role,
        name: revocation.name,
        reason: revocation.reason,
        revoked_by: revocation.revoked_by,
        revoked_ms: revocation.revoked_ms,
    }
}

/// Default and largest page of a list call: (default, max). Runs are small; agents carry
/// their inventories (up to 256 KiB each), so a page of them stays far below the reply
/// limit.
const RUNS_PAGE: (u32, u32) = (200, 1000);
const AGENTS_PAGE: (u32, u32) = (50, 200);

/// One page of the agent list: where it starts and how long it is. The token is the
/// position of the next item; the list only appends, so paging by position sees each item
/// once.
struct Page {
    offset: u64,
    size: u32,
}

/// A list's page size: the default for 0, at most the largest.
fn page_size(requested: u32, (default, max): (u32, u32)) -> u32 {
    match requested {
        0 => default,
        n => n.min(max),
    }
}

impl Page {
    fn of(requested: u32, token: &str, limits: (u32, u32)) -> Result<Page, Status> {
        let offset = if token.is_empty() {
            0
        } else {
            token.parse::<u64>().map_err(|_| {
                Status::invalid_argument(format!(
                    "page_token `{token}` is not one this coordinator gave out; start again with an empty token"
                ))
            })?
        };
        Ok(Page {
            offset,
            size: page_size(requested, limits),
        })
    }

    /// The token of the page after this one, given how many items were fetched (one more
    /// than the page size when there are more); empty on the last page.
    fn next_token(&self, fetched: usize) -> String {
        if fetched > self.size as usize {
            (self.offset + u64::from(self.size)).to_string()
        } else {
            String::new()
        }
    }
}

impl From<RunListing> for RunSummary {
    fn from(run: RunListing) -> Self {
        RunSummary {
            run_id: run.run_id,
            name: run.name,
            state: run.state,
            trigger: run.trigger,
            trigger_note: run.trigger_note.filter(|note| !note.is_empty()),
            created_ms: run.created_ms,
            exit_code: run.exit_code,
        }
    }
}

/// A stream fed by a spawned task through a channel.
fn async_stream<F, Fut>(body: F) -> ProgressStream
where
    F: FnOnce(tokio::sync::mpsc::Sender<Result<pb::RunProgress, Status>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (sender, receiver) = tokio::sync::mpsc::channel(64);
    tokio::spawn(body(sender));
    Box::pin(tokio_stream::wrappers::ReceiverStream::new(receiver))
}

/// An operator's reason or note within `stored_text::MAX_REASON_CHARS`, or a refusal that
/// names the limit.
fn check_reason(what: &str, text: &str) -> Result<(), Status> {
    abfleet_core::stored_text::check_length(what, text, abfleet_core::stored_text::MAX_REASON_CHARS)
        .map_err(Status::invalid_argument)
}
