//! Which certificate may speak for which agent id. Under mutual TLS the first certificate
//! name that registers an agent id owns it for good (kept in the store, so a restart changes
//! nothing): a session, heartbeat or event batch under that id from any other certificate is
//! refused, so one agent cannot report for another's lease or take over its id. One
//! certificate may bring at most `max_agent_ids_per_certificate` new ids within an hour (an
//! agent keeps its id in its work dir; a flood of fresh ids is not an agent). Plaintext
//! loopback callers carry no certificate and are not checked. The deny list is
//! `revocations`.

use std::time::Duration;

use abfleet_core::certs::CertificateId;
use abfleet_core::AgentId;

use std::sync::Arc;

use super::state::Ground;
use super::{FleetError, Scheduling};
use crate::store::Binding;

/// The window over which new agent ids per certificate are counted.
pub const AGENT_ID_WINDOW: Duration = Duration::from_secs(3600);

/// Trust: which certificate speaks for which agent id, and the deny list. Owns the cache
/// of bindings and the deny list; a revocation ends sessions and requeues jobs through
/// `scheduling`.
#[derive(Clone)]
pub struct Trust {
    pub(super) ground: Ground,
    pub(super) scheduling: Scheduling,
    /// Agent id → the certificate name it is bound to.
    certificates: Arc<CertificateCache>,
    /// Revoked certificates (`revocations`), shared with the servers' checks.
    pub(super) deny_list: super::revocations::DenyList,
}

impl Trust {
    pub(super) fn new(ground: Ground, scheduling: Scheduling) -> Trust {
        Trust {
            ground,
            scheduling,
            certificates: Default::default(),
            deny_list: Default::default(),
        }
    }

    /// At registration: binds `agent_id` to `cert_name` on first use (within the cap on new
    /// ids), refuses another name, and notes the certificate the id registered with.
    pub async fn bind_agent_certificate(
        &self,
        agent_id: AgentId,
        cert_name: &str,
        certificate: &CertificateId,
    ) -> Result<(), FleetError> {
        if let Some(bound) = self.certificates.get(agent_id) {
            check(agent_id, &bound, cert_name)?;
        }
        let now = self.ground.now_ms();
        let most = self.ground.config().max_agent_ids_per_certificate;
        let cap = (most > 0).then(|| (most, now - AGENT_ID_WINDOW.as_millis() as i64));
        match self
            .ground
            .store()
            .certificates()
            .bind_agent_certificate(agent_id, cert_name, certificate.clone(), now, cap)
            .await?
        {
            Binding::Bound => {
                self.certificates.keep(agent_id, cert_name);
                Ok(())
            }
            Binding::Owned { by } => {
                self.certificates.keep(agent_id, &by);
                check(agent_id, &by, cert_name)
            }
            Binding::TooManyIds { ids } => Err(FleetError::TooManyAgentIds {
                cert_name: cert_name.to_string(),
                ids: ids.len(),
                most,
            }),
        }
    }

    /// On every later call: `cert_name` must be the certificate `agent_id` registered with.
    pub async fn check_agent_certificate(
        &self,
        agent_id: AgentId,
        cert_name: &str,
    ) -> Result<(), FleetError> {
        let bound = match self.certificates.get(agent_id) {
            Some(bound) => bound,
            None => {
                let bound = self
                    .ground
                    .store()
                    .certificates()
                    .agent_certificate(agent_id)
                    .await?
                    .ok_or(FleetError::NotRegistered(agent_id))?;
                self.certificates.keep(agent_id, &bound);
                bound
            }
        };
        check(agent_id, &bound, cert_name)
    }
}

/// Agent id → the certificate name it is bound to: a cache of the store's table, taken
/// only here.
#[derive(Default)]
pub(super) struct CertificateCache {
    bound: std::sync::Mutex<std::collections::HashMap<AgentId, String>>,
}

impl CertificateCache {
    fn get(&self, agent_id: AgentId) -> Option<String> {
        self.bound
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&agent_id)
            .cloned()
    }

    fn keep(&self, agent_id: AgentId, name: &str) {
        self.bound
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(agent_id, name.to_string());
    }
}

fn check(agent_id: AgentId, bound: &str, presented: &str) -> Result<(), FleetError> {
    if bound == presented {
        Ok(())
    } else {
        Err(FleetError::CertificateMismatch {
            agent_id,
            bound: bound.to_string(),
            presented: presented.to_string(),
        })
    }
}
