//! Which certificate may speak for which agent id. Under mutual TLS the first certificate
//! that registers an agent id owns it for good (kept in the store, so a restart changes
//! nothing): a session, heartbeat or event batch under that id from any other certificate is
//! refused, so one agent cannot report for another's lease or take over its id. Plaintext
//! loopback callers carry no certificate and are not checked.

use abfleet_core::AgentId;

use super::{Fleet, FleetError};

impl Fleet {
    /// At registration: binds `agent_id` to `cert_name` on first use, refuses another name.
    pub async fn bind_agent_certificate(
        &self,
        agent_id: AgentId,
        cert_name: &str,
    ) -> Result<(), FleetError> {
        if let Some(bound) = self.cached_certificate(agent_id) {
            return check(agent_id, &bound, cert_name);
        }
        let bound = self
            .inner
            .store
            .bind_agent_certificate(agent_id, cert_name, self.now_ms())
            .await?;
        self.cache_certificate(agent_id, &bound);
        check(agent_id, &bound, cert_name)
    }

    /// On every later call: `cert_name` must be the certificate `agent_id` registered with.
    pub async fn check_agent_certificate(
        &self,
        agent_id: AgentId,
        cert_name: &str,
    ) -> Result<(), FleetError> {
        let bound = match self.cached_certificate(agent_id) {
            Some(bound) => bound,
            None => {
                let bound = self
                    .inner
                    .store
                    .agent_certificate(agent_id)
                    .await?
                    .ok_or(FleetError::NotRegistered(agent_id))?;
                self.cache_certificate(agent_id, &bound);
                bound
            }
        };
        check(agent_id, &bound, cert_name)
    }

    fn cached_certificate(&self, agent_id: AgentId) -> Option<String> {
        self.inner
            .certificates
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&agent_id)
            .cloned()
    }

    fn cache_certificate(&self, agent_id: AgentId, name: &str) {
        self.inner
            .certificates
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
