//! What the control service lists and answers, as domain values, and their wire forms both
//! ways: the coordinator's adapter builds these and sends them, the [`ControlLink`] reads
//! them back. Empty wire strings are `None` here; ids are typed.
//!
//! [`ControlLink`]: crate::control_link::ControlLink

use abfleet_core::inventory::Inventory;
use abfleet_core::lifecycle::{AgentState, RunState};
use abfleet_core::{AgentId, JobId, RunId};

use crate::convert::non_empty;
use crate::{parse_id, pb, LinkError, WireError};

/// Which page of a list to read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageRequest {
    /// At most this many items (0: the coordinator's default).
    pub size: u32,
    /// A previous page's [`Page::next_token`]; `None`: the first page.
    pub token: Option<String>,
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Where the next page starts; `None` on the last page.
    pub next_token: Option<String>,
}

impl<T> Page<T> {
    pub(crate) fn read<W>(items: Vec<W>, next_token: String) -> Result<Page<T>, LinkError>
    where
        T: TryFrom<W, Error = WireError>,
    {
        Ok(Page {
            items: items
                .into_iter()
                .map(T::try_from)
                .collect::<Result<_, _>>()
                .map_err(LinkError::from)?,
            next_token: non_empty(next_token),
        })
    }
}

/// A run as the run list shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSummary {
    pub run_id: RunId,
    pub name: String,
    pub state: RunState,
    pub trigger: String,
    pub trigger_note: Option<String>,
    pub created_ms: i64,
    /// `None` while the run runs.
    pub exit_code: Option<i32>,
}

/// An agent as the agent list shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSummary {
    pub agent_id: AgentId,
    pub inventory: Inventory,
    pub state: AgentState,
    pub last_heartbeat_ms: i64,
    pub running_job: Option<JobId>,
    /// Under mutual TLS, the certificate the id belongs to; `None` over plaintext loopback.
    pub certificate: Option<AgentCertificate>,
    /// The cache size and budget from its latest heartbeat (`None`: not reported yet, or
    /// no budget).
    pub cache_bytes: Option<u64>,
    pub max_cache_bytes: Option<u64>,
}

/// The certificate an agent last registered with, as the agent list shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentCertificate {
    pub name: String,
    pub serial: String,
    pub revoked: bool,
}

/// A certificate on the deny list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RevokedCertificate {
    /// The serial or fingerprint the operator named (normalised hex).
    pub key: String,
    /// Empty when unknown (only the other one was named).
    pub serial: String,
    pub fingerprint: String,
    /// Empty when the coordinator never saw the certificate.
    pub role: String,
    pub name: String,
    pub reason: String,
    pub revoked_by: String,
    pub revoked_ms: i64,
}

/// An agent id and the certificate it last registered with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredCertificate {
    pub agent_id: AgentId,
    pub cert_name: String,
    pub serial: String,
    pub fingerprint: String,
    /// `None`: not known.
    pub registered_ms: Option<i64>,
    pub revoked: bool,
}

/// The deny list and each agent id's certificate (`abfleet certs list`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CertificateListing {
    pub revoked: Vec<RevokedCertificate>,
    pub agents: Vec<RegisteredCertificate>,
}

/// The certificate to revoke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RevokeTarget {
    /// A serial or SHA-256 fingerprint (hex, `:` allowed).
    SerialOrFingerprint(String),
    /// The certificate itself (PEM): its serial, fingerprint, role and name are recorded.
    CertificatePem(String),
}

/// What a revocation did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevokeOutcome {
    pub revoked: RevokedCertificate,
    /// False: it was on the list already (the first entry stands).
    pub added: bool,
    /// Agents whose open session was ended.
    pub sessions_ended: Vec<AgentId>,
    pub jobs_requeued: u32,
}

impl From<RunSummary> for pb::RunSummary {
    fn from(run: RunSummary) -> Self {
        pb::RunSummary {
            run_id: run.run_id.to_string(),
            name: run.name,
            state: run.state.as_str().to_string(),
            trigger: run.trigger,
            created_ms: run.created_ms,
            exit_code: run.exit_code.unwrap_or(-1),
            trigger_note: run.trigger_note.unwrap_or_default(),
        }
    }
}

impl TryFrom<pb::RunSummary> for RunSummary {
    type Error = WireError;

    fn try_from(run: pb::RunSummary) -> Result<Self, Self::Error> {
        Ok(RunSummary {
            run_id: parse_id("run.run_id", &run.run_id)?,
            name: run.name,
            state: run
                .state
                .parse()
                .map_err(
                    |err: abfleet_core::names::UnknownName| WireError::BadDocument {
                        field: "run.state",
                        message: err.to_string(),
                    },
                )?,
            trigger: run.trigger,
            trigger_note: non_empty(run.trigger_note),
            created_ms: run.created_ms,
            exit_code: (run.exit_code >= 0).then_some(run.exit_code),
        })
    }
}

impl From<AgentSummary> for pb::AgentSummary {
    fn from(agent: AgentSummary) -> Self {
        let certificate = agent.certificate.unwrap_or(AgentCertificate {
            name: String::new(),
            serial: String::new(),
            revoked: false,
        });
        pb::AgentSummary {
            agent_id: agent.agent_id.to_string(),
            inventory: Some(agent.inventory.into()),
            state: agent.state.as_str().to_string(),
            last_heartbeat_ms: agent.last_heartbeat_ms,
            running_job_id: agent
                .running_job
                .map(|id| id.to_string())
                .unwrap_or_default(),
            cert_name: certificate.name,
            cert_serial: certificate.serial,
            cert_revoked: certificate.revoked,
            cache_bytes: agent.cache_bytes,
            max_cache_bytes: agent.max_cache_bytes,
        }
    }
}

impl TryFrom<pb::AgentSummary> for AgentSummary {
    type Error = WireError;

    fn try_from(agent: pb::AgentSummary) -> Result<Self, Self::Error> {
        let inventory = agent.inventory.ok_or(WireError::Missing {
            field: "agent.inventory",
        })?;
        Ok(AgentSummary {
            agent_id: parse_id("agent.agent_id", &agent.agent_id)?,
            inventory: Inventory::try_from(inventory)?,
            state: agent
                .state
                .parse()
                .map_err(
                    |err: abfleet_core::names::UnknownName| WireError::BadDocument {
                        field: "agent.state",
                        message: err.to_string(),
                    },
                )?,
            last_heartbeat_ms: agent.last_heartbeat_ms,
            running_job: non_empty(agent.running_job_id)
                .map(|id| parse_id("agent.running_job_id", &id))
                .transpose()?,
            certificate: non_empty(agent.cert_name).map(|name| AgentCertificate {
                name,
                serial: agent.cert_serial,
                revoked: agent.cert_revoked,
            }),
            cache_bytes: agent.cache_bytes,
            max_cache_bytes: agent.max_cache_bytes,
        })
    }
}

impl From<RevokedCertificate> for pb::RevokedCertificate {
    fn from(revoked: RevokedCertificate) -> Self {
        pb::RevokedCertificate {
            key: revoked.key,
            serial: revoked.serial,
            fingerprint: revoked.fingerprint,
            role: revoked.role,
            name: revoked.name,
            reason: revoked.reason,
            revoked_by: revoked.revoked_by,
            revoked_ms: revoked.revoked_ms,
        }
    }
}

impl From<pb::RevokedCertificate> for RevokedCertificate {
    fn from(revoked: pb::RevokedCertificate) -> Self {
        RevokedCertificate {
            key: revoked.key,
            serial: revoked.serial,
            fingerprint: revoked.fingerprint,
            role: revoked.role,
            name: revoked.name,
            reason: revoked.reason,
            revoked_by: revoked.revoked_by,
            revoked_ms: revoked.revoked_ms,
        }
    }
}

impl From<RegisteredCertificate> for pb::AgentCertificate {
    fn from(bound: RegisteredCertificate) -> Self {
        pb::AgentCertificate {
            agent_id: bound.agent_id.to_string(),
            cert_name: bound.cert_name,
            serial: bound.serial,
            fingerprint: bound.fingerprint,
            registered_ms: bound.registered_ms.unwrap_or(0),
            revoked: bound.revoked,
        }
    }
}

impl TryFrom<pb::AgentCertificate> for RegisteredCertificate {
    type Error = WireError;

    fn try_from(bound: pb::AgentCertificate) -> Result<Self, Self::Error> {
        Ok(RegisteredCertificate {
            agent_id: parse_id("agents.agent_id", &bound.agent_id)?,
            cert_name: bound.cert_name,
            serial: bound.serial,
            fingerprint: bound.fingerprint,
            registered_ms: (bound.registered_ms > 0).then_some(bound.registered_ms),
            revoked: bound.revoked,
        })
    }
}

impl From<CertificateListing> for pb::ListCertificatesResponse {
    fn from(listing: CertificateListing) -> Self {
        pb::ListCertificatesResponse {
            revoked: listing.revoked.into_iter().map(Into::into).collect(),
            agents: listing.agents.into_iter().map(Into::into).collect(),
        }
    }
}

impl TryFrom<pb::ListCertificatesResponse> for CertificateListing {
    type Error = WireError;

    fn try_from(listing: pb::ListCertificatesResponse) -> Result<Self, Self::Error> {
        Ok(CertificateListing {
            revoked: listing.revoked.into_iter().map(Into::into).collect(),
            agents: listing
                .agents
                .into_iter()
                .map(TryInto::try_into)
                .collect::<Result<_, _>>()?,
        })
    }
}

impl From<RevokeOutcome> for pb::RevokeCertificateResponse {
    fn from(outcome: RevokeOutcome) -> Self {
        pb::RevokeCertificateResponse {
            revoked: Some(outcome.revoked.into()),
            added: outcome.added,
            sessions_ended: outcome
                .sessions_ended
                .iter()
                .map(ToString::to_string)
                .collect(),
            jobs_requeued: outcome.jobs_requeued,
        }
    }
}

impl TryFrom<pb::RevokeCertificateResponse> for RevokeOutcome {
    type Error = WireError;

    fn try_from(response: pb::RevokeCertificateResponse) -> Result<Self, Self::Error> {
        Ok(RevokeOutcome {
            revoked: response
                .revoked
                .ok_or(WireError::Missing { field: "revoked" })?
                .into(),
            added: response.added,
            sessions_ended: response
                .sessions_ended
                .iter()
                .map(|id| parse_id("sessions_ended", id))
                .collect::<Result<_, _>>()?,
            jobs_requeued: response.jobs_requeued,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inventory() -> Inventory {
        Inventory {
            hostname: "bench-7".into(),
            os: "linux".into(),
            arch: "x86_64".into(),
            logical_cores: 16,
            ..Inventory::default()
        }
    }

    #[test]
    fn a_run_summary_survives_the_wire_running_and_finished() {
        for (exit_code, note) in [(None, None), (Some(3), Some("v3.2.0".to_string()))] {
            let run = RunSummary {
                run_id: RunId::new_random(),
                name: "vmaf".into(),
                state: if exit_code.is_some() {
                    RunState::Done
                } else {
                    RunState::Running
                },
                trigger: "release".into(),
                trigger_note: note,
                created_ms: 1_765_000_000_000,
                exit_code,
            };
            let wire = pb::RunSummary::from(run.clone());
            assert_eq!(RunSummary::try_from(wire).unwrap(), run);
        }
    }

    #[test]
    fn an_agent_summary_survives_the_wire_with_and_without_a_certificate() {
        for certificate in [
            None,
            Some(AgentCertificate {
                name: "bench-7".into(),
                serial: "0a1b".into(),
                revoked: true,
            }),
        ] {
            let agent = AgentSummary {
                agent_id: AgentId::new_random(),
                inventory: inventory(),
                state: AgentState::Busy,
                last_heartbeat_ms: 42,
                running_job: certificate.as_ref().map(|_| JobId::new_random()),
                certificate,
                cache_bytes: Some(10),
                max_cache_bytes: None,
            };
            let wire = pb::AgentSummary::from(agent.clone());
            assert_eq!(AgentSummary::try_from(wire).unwrap(), agent);
        }
    }

    #[test]
    fn certificates_survive_the_wire() {
        let revoked = RevokedCertificate {
            key: "0a1b".into(),
            serial: "0a1b".into(),
            name: "bench-7".into(),
            role: "agent".into(),
            reason: "host retired".into(),
            revoked_by: "loopback".into(),
            revoked_ms: 5,
            ..RevokedCertificate::default()
        };
        let listing = CertificateListing {
            revoked: vec![revoked.clone()],
            agents: vec![RegisteredCertificate {
                agent_id: AgentId::new_random(),
                cert_name: "bench-7".into(),
                serial: "0a1b".into(),
                fingerprint: "ff".into(),
                registered_ms: None,
                revoked: true,
            }],
        };
        let wire = pb::ListCertificatesResponse::from(listing.clone());
        assert_eq!(CertificateListing::try_from(wire).unwrap(), listing);
        let outcome = RevokeOutcome {
            revoked,
            added: true,
            sessions_ended: vec![AgentId::new_random()],
            jobs_requeued: 2,
        };
        let wire = pb::RevokeCertificateResponse::from(outcome.clone());
        assert_eq!(RevokeOutcome::try_from(wire).unwrap(), outcome);
    }

    #[test]
    fn a_run_state_or_id_this_build_does_not_know_is_unreadable_and_named() {
        let mut wire = pb::RunSummary::from(RunSummary {
            run_id: RunId::new_random(),
            name: String::new(),
            state: RunState::Queued,
            trigger: "manual".into(),
            trigger_note: None,
            created_ms: 0,
            exit_code: None,
        });
        wire.state = "paused".into();
        let err = RunSummary::try_from(wire.clone()).unwrap_err().to_string();
        assert!(err.contains("run.state") && err.contains("paused"), "{err}");
        wire.state = "done".into();
        wire.run_id = "nope".into();
        let err = Page::<RunSummary>::read(vec![wire], String::new()).unwrap_err();
        assert_eq!(err.kind(), crate::LinkErrorKind::Unreadable);
        assert!(err.message().contains("run.run_id"), "{err}");
    }

    #[test]
    fn an_empty_page_token_is_the_last_page() {
        let page = Page::<RunSummary>::read(Vec::<pb::RunSummary>::new(), String::new()).unwrap();
        assert_eq!(page.next_token, None);
        let page = Page::<RunSummary>::read(Vec::<pb::RunSummary>::new(), "200".into()).unwrap();
        assert_eq!(page.next_token.as_deref(), Some("200"));
    }
}
