//! The deny list: certificates `abfleet certs revoke` took back, by serial or fingerprint,
//! kept in the store (`revoked_certificates`) and in memory ([`DenyList`], shared with the
//! gRPC interceptor and the web view, which check it on every call and request). Revoking
//! takes effect at once, without a restart: the next call is refused, every open agent
//! session of the certificate is ended with the reason, and the jobs its agents held go
//! back to the queue. What the certificate did before it was revoked stays (docs/security.md).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use abfleet_core::certs::{normalize_hex, CertificateFacts, CertificateId};
use abfleet_core::lifecycle::JobState;
use abfleet_core::AgentId;
use tracing::warn;

use super::{FleetError, Trust};
use crate::store::Revocation;

/// The revoked certificates, by every key that names one (serial, fingerprint): a cheap,
/// shared handle.
#[derive(Clone, Default)]
pub struct DenyList {
    inner: Arc<RwLock<DenyState>>,
}

#[derive(Default)]
struct DenyState {
    loaded: bool,
    by_key: HashMap<String, Arc<Revocation>>,
}

impl DenyList {
    /// The revocation that names `certificate`, if any.
    pub fn revoked(&self, certificate: &CertificateId) -> Option<Arc<Revocation>> {
        let state = self.inner.read().unwrap_or_else(|p| p.into_inner());
        [&certificate.serial, &certificate.fingerprint]
            .into_iter()
            .map(|key| normalize_hex(key))
            .filter(|key| !key.is_empty())
            .find_map(|key| state.by_key.get(key.as_str()).cloned())
    }

    /// Keyed without leading zeros, as a serial or fingerprint typed by hand is
    /// (`normalize_hex`): a fingerprint starting with 0 is found by either form.
    fn insert(&self, revocation: Revocation) {
        let revocation = Arc::new(revocation);
        let mut state = self.inner.write().unwrap_or_else(|p| p.into_inner());
        for key in revocation.keys() {
            state.by_key.insert(normalize_hex(key), revocation.clone());
        }
    }
}

/// What to revoke: a certificate file's facts, or a serial or fingerprint as typed.
pub enum RevokeTarget {
    Certificate(CertificateFacts),
    Named(String),
}

/// What `revoke_certificate` did.
#[derive(Debug)]
pub struct RevokeOutcome {
    pub revocation: Revocation,
    /// False: the certificate was already on the list (its first entry stands).
    pub added: bool,
    /// Agents whose open session was ended.
    pub sessions_ended: Vec<AgentId>,
    /// Jobs that went back to the queue because a revoked agent held them.
    pub jobs_requeued: usize,
}

/// The message a revoked certificate's caller gets.
pub fn refusal(revocation: &Revocation) -> String {
    let whose = if revocation.name.is_empty() {
        String::new()
    } else {
        format!(" (`{}`, role {})", revocation.name, revocation.role)
    };
    format!(
        "certificate {}{whose} was revoked at {} by {}: {}; ask the fleet's operator for a new certificate (`abfleet certs issue`)",
        revocation.key,
        abfleet_core::report::format_utc(revocation.revoked_ms),
        revocation.revoked_by,
        revocation.reason
    )
}

impl Trust {
    /// The deny list's shared handle (the interceptor and the web view hold one).
    pub fn deny_list(&self) -> DenyList {
        self.deny_list.clone()
    }

    /// Reads the stored deny list into memory, once; every server calls it before it
    /// accepts a connection.
    pub async fn load_deny_list(&self) -> Result<(), FleetError> {
        if self
            .deny_list
            .inner
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .loaded
        {
            return Ok(());
        }
        let stored = self.ground.store().certificates().revocations().await?;
        let count = stored.len();
        for revocation in stored {
            self.deny_list.insert(revocation);
        }
        self.deny_list
            .inner
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .loaded = true;
        if count > 0 {
            tracing::info!(count, "deny list loaded: revoked certificates are refused");
        }
        Ok(())
    }

    /// The deny list and every agent id's certificate (`abfleet certs list`).
    pub async fn certificates(
        &self,
    ) -> Result<(Vec<Revocation>, Vec<crate::store::AgentCertificate>), FleetError> {
        Ok((
            self.ground.store().certificates().revocations().await?,
            self.ground
                .store()
                .certificates()
                .agent_certificates()
                .await?,
        ))
    }

    /// Refuses `certificate` when it is revoked.
    pub fn check_not_revoked(&self, certificate: &CertificateId) -> Result<(), FleetError> {
        match self.deny_list.revoked(certificate) {
            Some(revocation) => Err(FleetError::Revoked(refusal(&revocation))),
            None => Ok(()),
        }
    }

    /// Puts a certificate on the deny list (stored first), ends its agents' sessions and
    /// requeues their jobs.
    pub async fn revoke_certificate(
        &self,
        target: RevokeTarget,
        reason: &str,
        revoked_by: &str,
    ) -> Result<RevokeOutcome, FleetError> {
        let reason = reason.trim();
        if reason.is_empty() {
            return Err(FleetError::BadRevocation(
                "say why the certificate is revoked (`--reason \"key of bench-7 lost\"`): the reason is shown to whoever presents it and kept".into(),
            ));
        }
        let now = self.ground.now_ms();
        let revocation = match target {
            RevokeTarget::Certificate(facts) => Revocation {
                key: facts.identity.certificate.serial.clone(),
                role: facts.identity.role.to_string(),
                name: facts.identity.name.clone(),
                certificate: facts.identity.certificate,
                reason: reason.to_string(),
                revoked_by: revoked_by.to_string(),
                revoked_ms: now,
            },
            RevokeTarget::Named(text) => {
                let key = normalize_hex(&text);
                if key.is_empty() {
                    return Err(FleetError::BadRevocation(format!(
                        "`{text}` is neither a certificate serial nor a SHA-256 fingerprint (hex, `:` allowed); `abfleet certs show FILE` and `abfleet certs list` print both, or pass the certificate file with `--cert`"
                    )));
                }
                // Fill in the rest from an agent that registered with it, when one did.
                let known = self
                    .ground
                    .store()
                    .certificates()
                    .agent_certificates()
                    .await?
                    .into_iter()
                    .find(|bound| bound.certificate.is_named_by(&key));
                let (certificate, role, name) = match known {
                    Some(bound) => (bound.certificate, "agent".to_string(), bound.cert_name),
                    None => (
                        CertificateId {
                            serial: String::new(),
                            fingerprint: String::new(),
                        },
                        String::new(),
                        String::new(),
                    ),
                };
                Revocation {
                    key,
                    certificate,
                    role,
                    name,
                    reason: reason.to_string(),
                    revoked_by: revoked_by.to_string(),
                    revoked_ms: now,
                }
            }
        };
        let added = self
            .ground
            .store()
            .certificates()
            .revoke_certificate(revocation.clone())
            .await?;
        self.deny_list.insert(revocation.clone());
        warn!(key = %revocation.key, name = %revocation.name, reason = %revocation.reason, by = %revocation.revoked_by, "certificate revoked");
        let sessions_ended = self.end_revoked_sessions();
        let jobs_requeued = self.requeue_revoked_agents_jobs(&sessions_ended).await?;
        Ok(RevokeOutcome {
            revocation,
            added,
            sessions_ended,
            jobs_requeued,
        })
    }

    /// Ends every open session whose certificate is now revoked, telling the agent why.
    fn end_revoked_sessions(&self) -> Vec<AgentId> {
        let deny_list = &self.deny_list;
        let ended = self
            .scheduling
            .end_sessions_where(|certificate| deny_list.revoked(certificate).map(|r| refusal(&r)));
        for agent in &ended {
            warn!(agent_id = %agent, "session ended: its certificate was revoked");
        }
        ended
    }

    /// Requeues the jobs leased to `agents` and to every other agent id whose last
    /// registration used a revoked certificate.
    async fn requeue_revoked_agents_jobs(&self, agents: &[AgentId]) -> Result<usize, FleetError> {
        let mut revoked_agents: Vec<AgentId> = agents.to_vec();
        for bound in self
            .ground
            .store()
            .certificates()
            .agent_certificates()
            .await?
        {
            if self.deny_list.revoked(&bound.certificate).is_some() {
                revoked_agents.push(bound.agent_id);
            }
        }
        let mut requeued = 0;
        for job in self
            .ground
            .store()
            .jobs()
            .in_state(JobState::Leased)
            .await?
        {
            let Some(agent) = job.agent_id.filter(|a| revoked_agents.contains(a)) else {
                continue;
            };
            self.scheduling.release(
                job.job_id,
                job.run_id,
                format!(
                    "agent {agent}'s certificate was revoked during attempt {}; what it sent after the revocation was refused",
                    job.attempt
                ),
            )
            .await?;
            requeued += 1;
        }
        if requeued > 0 {
            self.scheduling.dispatch().await?;
        }
        Ok(requeued)
    }
}
