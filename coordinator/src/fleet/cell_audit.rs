//! Intake's check of every cell an agent sends (`core::cell_audit`): each cell is derived
//! again from its raw data against the run's spec before it is stored, and what is stored is
//! the coordinator's cell — re-derived, or marked rejected with the reasons — stamped with
//! the agent and certificate that sent it. A rejected cell is stored (the agent moves on, the
//! report says what was refused and from whom) and logged; it is never a measured cell.

use abfleet_core::cell::{CellResult, MeasuredBy};
use abfleet_core::cell_audit;
use abfleet_core::events::JobEventPayload;
use abfleet_core::{AgentId, JobId};
use tracing::warn;

use super::intake_memory::JobFacts;
use super::{FleetError, Intake};
use crate::store::{EventHeader, IncomingEvent, StoredEvent};

impl Intake {
    /// `events` with each cell replaced by the coordinator's own (see the module docs).
    pub(super) async fn audit_cells(
        &self,
        agent_id: AgentId,
        job_id: JobId,
        attempt: u32,
        facts: &JobFacts,
        events: Vec<IncomingEvent>,
    ) -> Result<Vec<IncomingEvent>, FleetError> {
        if !events
            .iter()
            .any(|event| matches!(event.header, EventHeader::Cell(_)))
        {
            return Ok(events);
        }
        let measured_by = MeasuredBy {
            agent_id: agent_id.to_string(),
            certificate: self
                .ground
                .store()
                .certificates()
                .certificate_of(agent_id)
                .await?
                .map(|bound| {
                    if bound.certificate.serial.is_empty() {
                        bound.cert_name
                    } else {
                        format!("{} serial {}", bound.cert_name, bound.certificate.serial)
                    }
                }),
        };
        let spec = facts.spec.clone();
        // The bootstrap interval is derived again: milliseconds a cell, off the runtime.
        tokio::task::spawn_blocking(move || {
            events
                .into_iter()
                .map(|event| audit_event(event, &spec, &measured_by, job_id, attempt))
                .collect()
        })
        .await
        .map_err(|err| {
            FleetError::Store(crate::CoordinatorError::Internal(format!(
                "auditing cells: {err}"
            )))
        })?
    }
}

fn audit_event(
    event: IncomingEvent,
    spec: &abfleet_core::spec::JobSpec,
    measured_by: &MeasuredBy,
    job_id: JobId,
    attempt: u32,
) -> Result<IncomingEvent, FleetError> {
    if !matches!(event.header, EventHeader::Cell(_)) {
        return Ok(event);
    }
    let refuse = |reason: String| FleetError::InvalidEvent {
        job_id,
        attempt,
        seq: event.seq,
        reason,
    };
    let JobEventPayload::Cell(claimed) = JobEventPayload::from_json(&event.payload_json)
        .map_err(|err| refuse(format!("the cell does not parse: {err}")))?
    else {
        return Err(refuse(
            "a cell header on an event that is not a cell".into(),
        ));
    };
    let mut claimed: CellResult = *claimed;
    claimed.measured_by = Some(measured_by.clone());
    claimed.rejected.clear();
    let cell = match cell_audit::rederive(&claimed, spec) {
        Ok(cell) => cell,
        Err(problems) => {
            warn!(agent_id = %measured_by.agent_id, certificate = ?measured_by.certificate, job_id = %job_id, attempt, cell = claimed.index, ?problems, "rejected a cell whose summary its own data does not give");
            cell_audit::reject(claimed, problems)
        }
    };
    // Its header is the audited cell's own: the JSON is written, never read back.
    Ok(IncomingEvent::from(StoredEvent {
        seq: event.seq,
        at_ms: event.at_ms,
        payload: JobEventPayload::Cell(Box::new(cell)),
    }))
}
