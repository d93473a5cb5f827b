//! Who is calling, and may they: the role and name in the caller's certificate under mutual
//! TLS, or "a loopback client" when the coordinator serves plaintext on loopback (which the
//! operator asked for with `--plaintext`). Each RPC names the role it needs: the agent service
//! needs `agent`, the control service `operator`. The fleet CA already verified the chain in
//! the TLS handshake; the role is read back from the certificate here, per call. Each
//! certificate also gets a token bucket of calls ([`RateLimit`]), so one caller cannot
//! flood the coordinator. A certificate on the deny list (`abfleet certs revoke`) is refused
//! on every call, from the moment it is revoked.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use abfleet_core::certs::{self, PeerIdentity, Role};
use tonic::{Request, Status};

use crate::fleet::{refusal, DenyList};

/// How callers are identified on this server.
#[derive(Clone)]
pub(crate) enum Access {
    /// Plaintext on loopback: only processes on this machine can call, and each may act in
    /// any role.
    LoopbackPlaintext,
    /// Mutual TLS: a caller is who its certificate says.
    MutualTls {
        ca_der: Arc<Vec<u8>>,
        buckets: Arc<Buckets>,
        deny_list: DenyList,
    },
}

/// How many calls one certificate may make: `burst` at once, then `per_second` sustained.
/// A streaming call (an agent's session, a watch) counts once, when it opens.
#[derive(Debug, Clone, Copy)]
pub struct RateLimit {
    pub per_second: f64,
    pub burst: u32,
}

impl Default for RateLimit {
    /// Far above what agents (an event batch per cell, a report fetch) and people need.
    fn default() -> Self {
        RateLimit {
            per_second: 50.0,
            burst: 200,
        }
    }
}

/// One token bucket per caller.
#[derive(Debug)]
pub(crate) struct Buckets {
    limit: RateLimit,
    buckets: Mutex<HashMap<String, Bucket>>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Buckets {
    pub(crate) fn new(limit: RateLimit) -> Buckets {
        Buckets {
            limit,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one call from `caller`'s bucket at `now`; when it is empty, how long until
    /// the next call is allowed.
    fn take(&self, caller: &str, now: Instant) -> Result<(), Duration> {
        let burst = f64::from(self.limit.burst.max(1));
        let rate = self.limit.per_second.max(f64::MIN_POSITIVE);
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let bucket = buckets.entry(caller.to_string()).or_insert(Bucket {
            tokens: burst,
            at: now,
        });
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate).min(burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.tokens) / rate))
        }
    }
}

/// A caller that passed [`Access::require`].
#[derive(Debug, Clone)]
pub(crate) enum Caller {
    Loopback,
    Certified(PeerIdentity),
}

impl Caller {
    /// The certificate's name, when there is a certificate.
    pub(crate) fn certificate_name(&self) -> Option<&str> {
        self.identity().map(|identity| identity.name.as_str())
    }

    /// Who the certificate says the caller is, when there is a certificate.
    pub(crate) fn identity(&self) -> Option<&PeerIdentity> {
        match self {
            Caller::Loopback => None,
            Caller::Certified(identity) => Some(identity),
        }
    }

    /// How the caller is named in records (who revoked, who cancelled): `role/name`, or
    /// `loopback`.
    pub(crate) fn describe(&self) -> String {
        match self {
            Caller::Loopback => "loopback".to_string(),
            Caller::Certified(identity) => format!("{}/{}", identity.role, identity.name),
        }
    }
}

impl Access {
    /// The caller of `request`, if it holds `role`; otherwise PERMISSION_DENIED (wrong role)
    /// or UNAUTHENTICATED (no usable certificate), saying which.
    pub(crate) fn require<T>(&self, request: &Request<T>, role: Role) -> Result<Caller, Status> {
        match self {
            Access::LoopbackPlaintext => Ok(Caller::Loopback),
            Access::MutualTls {
                ca_der,
                buckets,
                deny_list,
            } => {
                let identity = identify(ca_der, request)?;
                if let Some(revocation) = deny_list.revoked(&identity.certificate) {
                    return Err(Status::unauthenticated(refusal(&revocation)));
                }
                if identity.role != role {
                    return Err(Status::permission_denied(format!(
                        "this call needs a certificate of role `{role}`; `{}` holds role `{}` ({})",
                        identity.name,
                        identity.role,
                        what_role_may_do(identity.role)
                    )));
                }
                let key = format!("{}/{}", identity.role, identity.name);
                if let Err(wait) = buckets.take(&key, Instant::now()) {
                    return Err(Status::resource_exhausted(format!(
                        "rate limit: `{}` made more than {} calls at once ({} per second sustained); retry in {} ms",
                        identity.name,
                        buckets.limit.burst,
                        buckets.limit.per_second,
                        wait.as_millis().max(1)
                    )));
                }
                Ok(Caller::Certified(identity))
            }
        }
    }
}

impl Access {
    /// An interceptor that lets only callers of `role` through, and leaves the [`Caller`] in
    /// the request's extensions for the handler.
    pub(crate) fn interceptor(
        &self,
        role: Role,
    ) -> impl FnMut(Request<()>) -> Result<Request<()>, Status> + Clone {
        let access = self.clone();
        move |mut request: Request<()>| {
            let caller = access.require(&request, role)?;
            request.extensions_mut().insert(caller);
            Ok(request)
        }
    }
}

/// The caller the interceptor left on `request`.
pub(crate) fn caller_of<T>(request: &Request<T>) -> Result<Caller, Status> {
    request
        .extensions()
        .get::<Caller>()
        .cloned()
        .ok_or_else(|| Status::internal("the request passed no role check"))
}

fn identify<T>(ca_der: &[u8], request: &Request<T>) -> Result<PeerIdentity, Status> {
    let peer = request
        .peer_certs()
        .and_then(|chain| chain.first().cloned())
        .ok_or_else(|| {
            Status::unauthenticated(
                "no client certificate; connect over TLS with a certificate from `abfleet certs issue`",
            )
        })?;
    certs::peer_identity(ca_der, peer.as_ref()).map_err(|err| {
        Status::unauthenticated(format!("the client certificate is not accepted: {err}"))
    })
}

fn what_role_may_do(role: Role) -> &'static str {
    match role {
        Role::Agent => "agents may only register and report on their own jobs",
        Role::Operator => "operators may submit, cancel and read runs, not act as agents",
        Role::Coordinator => "a coordinator certificate is for serving, not for calling",
        Role::Viewer => "viewers may only read the web view (`--web`), not call the coordinator",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_allows_the_burst_then_the_rate_and_keeps_callers_apart() {
        let buckets = Buckets::new(RateLimit {
            per_second: 2.0,
            burst: 3,
        });
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(buckets.take("operator/ops", t0).is_ok());
        }
        let wait = buckets.take("operator/ops", t0).unwrap_err();
        assert_eq!(wait, Duration::from_millis(500));
        assert!(
            buckets.take("agent/a", t0).is_ok(),
            "another caller's bucket"
        );
        assert!(buckets
            .take("operator/ops", t0 + Duration::from_millis(499))
            .is_err());
        assert!(buckets
            .take("operator/ops", t0 + Duration::from_millis(1000))
            .is_ok());
        // Refill stops at the burst.
        let later = t0 + Duration::from_secs(3600);
        for _ in 0..3 {
            assert!(buckets.take("operator/ops", later).is_ok());
        }
        assert!(buckets.take("operator/ops", later).is_err());
    }
}
