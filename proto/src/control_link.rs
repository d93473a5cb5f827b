//! The client's end of `ControlService`, in domain types: submit a run, follow its progress,
//! read its report and a workload's history, list runs, agents and certificates, cancel a
//! run, drain an agent, revoke a certificate, keep a bisect with its run. What calls it (the
//! CLI, `abfleet-bench`) names neither protobuf nor tonic; what it branches on in an error
//! is a [`LinkErrorKind`](crate::LinkErrorKind).

use abfleet_core::bisect::BisectRecord;
use abfleet_core::lifecycle::AgentState;
use abfleet_core::progress::RunProgress;
use abfleet_core::report::history::{HistoryPoint, HistoryQuery};
use abfleet_core::report::Report;
use abfleet_core::spec::JobSpec;
use abfleet_core::{AgentId, RunId};
use tonic::transport::Channel;

use crate::pb;
use crate::pb::control_service_client::ControlServiceClient;
pub use crate::transport::ConnectError;
use crate::transport::{Connection, TlsFiles, MAX_REPLY_BYTES};
use crate::LinkError;

pub use crate::control_views::{
    AgentCertificate, AgentSummary, CertificateListing, Page, PageRequest, RegisteredCertificate,
    RevokeOutcome, RevokeTarget, RevokedCertificate, RunSummary,
};

/// A connected client of the coordinator's control service. Cheap to clone.
#[derive(Clone)]
pub struct ControlLink {
    client: ControlServiceClient<Channel>,
}

/// Which spec a submission runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpecToRun {
    /// A spec validated by the caller, as `JobSpec::to_json` wrote it.
    Json(String),
    /// The coordinator's milestone spec (`--milestone-spec`).
    Milestone,
}

/// A run to start, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submission {
    pub spec: SpecToRun,
    /// What made the run happen (`manual`, `release`, …, `bisect`).
    pub trigger: String,
    /// Where the spec came from, for the record.
    pub spec_origin: String,
    /// What the trigger said about itself (a tag, a PR, a release name).
    pub trigger_note: Option<String>,
    /// Only on generations of this hardware identity, each job pinned to one agent that has it.
    pub hardware_id: Option<String>,
    /// `owner/name#number`: the pull request this run answers.
    pub pull_request: Option<String>,
}

impl Submission {
    /// A run of `spec` for `trigger`, nothing else said.
    pub fn new(spec: SpecToRun, trigger: &str, spec_origin: &str) -> Submission {
        Submission {
            spec,
            trigger: trigger.to_string(),
            spec_origin: spec_origin.to_string(),
            trigger_note: None,
            hardware_id: None,
            pull_request: None,
        }
    }
}

/// A run as the coordinator keeps it: its report and the validated spec it ran.
#[derive(Debug, Clone)]
pub struct StoredRun {
    pub report: Report,
    pub spec: JobSpec,
}

/// A run's progress until it ends: [`ProgressStream::next`] gives `None` only when the
/// coordinator closed the stream before the run finished.
pub struct ProgressStream {
    incoming: tonic::Streaming<pb::RunProgress>,
}

impl ProgressStream {
    /// The next update. Cancel-safe: dropped while waiting, no update is lost.
    pub async fn next(&mut self) -> Result<Option<RunProgress>, LinkError> {
        match self.incoming.message().await? {
            None => Ok(None),
            Some(update) => RunProgress::try_from(update)
                .map(Some)
                .map_err(LinkError::from),
        }
    }
}

impl ControlLink {
    /// Connects to `url` (keep-alive pings on, so a peer that stops answering ends every
    /// call instead of leaving it waiting).
    pub async fn connect(url: &str, tls: Option<&TlsFiles>) -> Result<ControlLink, ConnectError> {
        Ok(ControlLink::over(&Connection::open(url, tls).await?))
    }

    /// A client on a connection others share; replies up to [`MAX_REPLY_BYTES`] are taken.
    pub fn over(connection: &Connection) -> ControlLink {
        ControlLink {
            client: ControlServiceClient::new(connection.channel())
                .max_decoding_message_size(MAX_REPLY_BYTES),
        }
    }

    /// Starts a run; its id.
    pub async fn submit(&self, submission: Submission) -> Result<RunId, LinkError> {
        let (spec_json, milestone) = match submission.spec {
            SpecToRun::Json(json) => (json, false),
            SpecToRun::Milestone => (String::new(), true),
        };
        let response = self
            .client
            .clone()
            .submit_run(pb::SubmitRunRequest {
                spec_json,
                trigger: submission.trigger,
                spec_origin: submission.spec_origin,
                trigger_note: submission.trigger_note.unwrap_or_default(),
                milestone,
                hardware_id: submission.hardware_id.unwrap_or_default(),
                pull_request: submission.pull_request.unwrap_or_default(),
            })
            .await?
            .into_inner();
        Ok(crate::parse_id("run_id", &response.run_id)?)
    }

    /// Follows a run: its progress until it ends (a finished run's end at once).
    pub async fn watch(&self, run_id: &RunId) -> Result<ProgressStream, LinkError> {
        let incoming = self
            .client
            .clone()
            .watch_run(pb::WatchRunRequest {
                run_id: run_id.to_string(),
            })
            .await?
            .into_inner();
        Ok(ProgressStream { incoming })
    }

    /// A run's report: a finished run's as stored when it finished, a running one's so far.
    pub async fn report(&self, run_id: &RunId) -> Result<Report, LinkError> {
        let response = self.get_report(run_id).await?;
        read_report(&response.report_json)
    }

    /// A run's report as the coordinator sends it (compact JSON, docs/report-format.md),
    /// not decoded: for a caller that passes it on or only times the call.
    pub async fn report_json(&self, run_id: &RunId) -> Result<String, LinkError> {
        Ok(self.get_report(run_id).await?.report_json)
    }

    /// A run's report and the spec it ran (what `abfleet bisect RUN` re-runs).
    pub async fn run(&self, run_id: &RunId) -> Result<StoredRun, LinkError> {
        let response = self.get_report(run_id).await?;
        Ok(StoredRun {
            report: read_report(&response.report_json)?,
            spec: JobSpec::from_json(&response.spec_json).map_err(|err| {
                LinkError::unreadable(format!(
                    "the coordinator sent a job spec this abfleet cannot read ({err}); are they the same version?"
                ))
            })?,
        })
    }

    async fn get_report(&self, run_id: &RunId) -> Result<pb::GetReportResponse, LinkError> {
        Ok(self
            .client
            .clone()
            .get_report(pb::GetReportRequest {
                run_id: run_id.to_string(),
            })
            .await?
            .into_inner())
    }

    /// One workload's results over time on a generation, oldest first.
    pub async fn history(&self, query: &HistoryQuery) -> Result<Vec<HistoryPoint>, LinkError> {
        let response = self
            .client
            .clone()
            .get_history(pb::GetHistoryRequest {
                generation: query.generation.clone(),
                workload: query.workload.clone(),
                fixture: query.fixture.clone().unwrap_or_default(),
                name: query.name.clone().unwrap_or_default(),
                limit: query.limit,
            })
            .await?
            .into_inner();
        serde_json::from_str(&response.points_json).map_err(|err| {
            LinkError::unreadable(format!(
                "the coordinator sent a history this abfleet cannot read ({err}); are they the same version?"
            ))
        })
    }

    /// Keeps a finished bisect with the run it bisected.
    pub async fn record_bisect(
        &self,
        run_id: &RunId,
        record: &BisectRecord,
    ) -> Result<(), LinkError> {
        let bisect_json = serde_json::to_string(record).expect("a bisect record serialises");
        self.client
            .clone()
            .record_bisect(pb::RecordBisectRequest {
                run_id: run_id.to_string(),
                bisect_json,
            })
            .await?;
        Ok(())
    }

    /// One page of runs (newest first unless `oldest_first`).
    pub async fn runs(
        &self,
        page: PageRequest,
        oldest_first: bool,
    ) -> Result<Page<RunSummary>, LinkError> {
        let response = self
            .client
            .clone()
            .list_runs(pb::ListRunsRequest {
                page_size: page.size,
                page_token: page.token.unwrap_or_default(),
                oldest_first,
            })
            .await?
            .into_inner();
        Page::read(response.runs, response.next_page_token)
    }

    /// One page of the agents the coordinator knows, with their inventories.
    pub async fn agents(&self, page: PageRequest) -> Result<Page<AgentSummary>, LinkError> {
        let response = self
            .client
            .clone()
            .list_agents(pb::ListAgentsRequest {
                page_size: page.size,
                page_token: page.token.unwrap_or_default(),
            })
            .await?
            .into_inner();
        Page::read(response.agents, response.next_page_token)
    }

    /// Cancels a run; false when it had already finished.
    pub async fn cancel(&self, run_id: &RunId, reason: &str) -> Result<bool, LinkError> {
        Ok(self
            .client
            .clone()
            .cancel_run(pb::CancelRunRequest {
                run_id: run_id.to_string(),
                reason: reason.to_string(),
            })
            .await?
            .into_inner()
            .cancelled)
    }

    /// Drains an agent (or, with `resume`, lets it take jobs again); its state after.
    pub async fn drain(&self, agent_id: &AgentId, resume: bool) -> Result<AgentState, LinkError> {
        let state = self
            .client
            .clone()
            .drain_agent(pb::DrainAgentRequest {
                agent_id: agent_id.to_string(),
                resume,
            })
            .await?
            .into_inner()
            .state;
        state
            .parse()
            .map_err(|err: abfleet_core::names::UnknownName| {
                LinkError::unreadable(format!(
                    "the coordinator answered an agent state this abfleet does not know ({err}); is it from another abfleet version?"
                ))
            })
    }

    /// Puts a certificate on the deny list, with why.
    pub async fn revoke(
        &self,
        target: RevokeTarget,
        reason: &str,
    ) -> Result<RevokeOutcome, LinkError> {
        let (serial_or_fingerprint, certificate_pem) = match target {
            RevokeTarget::SerialOrFingerprint(key) => (key, String::new()),
            RevokeTarget::CertificatePem(pem) => (String::new(), pem),
        };
        let response = self
            .client
            .clone()
            .revoke_certificate(pb::RevokeCertificateRequest {
                serial_or_fingerprint,
                certificate_pem,
                reason: reason.to_string(),
            })
            .await?
            .into_inner();
        Ok(RevokeOutcome::try_from(response)?)
    }

    /// The deny list, and the certificate each agent id last registered with.
    pub async fn certificates(&self) -> Result<CertificateListing, LinkError> {
        let response = self
            .client
            .clone()
            .list_certificates(pb::ListCertificatesRequest {})
            .await?
            .into_inner();
        Ok(CertificateListing::try_from(response)?)
    }
}

fn read_report(json: &str) -> Result<Report, LinkError> {
    Report::from_json(json).map_err(|err| {
        LinkError::unreadable(format!(
            "the coordinator sent a report this abfleet cannot read ({err}); are they the same version?"
        ))
    })
}
