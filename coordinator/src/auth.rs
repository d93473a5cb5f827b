//! Who is calling, and may they: the role and name in the caller's certificate under mutual
//! TLS, or "a loopback client" when the coordinator serves plaintext on loopback (which the
//! operator asked for with `--plaintext`). Each RPC names the role it needs: the agent service
//! needs `agent`, the control service `operator`. The fleet CA already verified the chain in
//! the TLS handshake; the role is read back from the certificate here, per call.

use std::sync::Arc;

use abfleet_core::certs::{self, PeerIdentity, Role};
use tonic::{Request, Status};

/// How callers are identified on this server.
#[derive(Clone)]
pub(crate) enum Access {
    /// Plaintext on loopback: only processes on this machine can call, and each may act in
    /// any role.
    LoopbackPlaintext,
    /// Mutual TLS: a caller is who its certificate says.
    MutualTls { ca_der: Arc<Vec<u8>> },
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
        match self {
            Caller::Loopback => None,
            Caller::Certified(identity) => Some(&identity.name),
        }
    }
}

impl Access {
    /// The caller of `request`, if it holds `role`; otherwise PERMISSION_DENIED (wrong role)
    /// or UNAUTHENTICATED (no usable certificate), saying which.
    pub(crate) fn require<T>(&self, request: &Request<T>, role: Role) -> Result<Caller, Status> {
        match self {
            Access::LoopbackPlaintext => Ok(Caller::Loopback),
            Access::MutualTls { ca_der } => {
                let identity = identify(ca_der, request)?;
                if identity.role != role {
                    return Err(Status::permission_denied(format!(
                        "this call needs a certificate of role `{role}`; `{}` holds role `{}` ({})",
                        identity.name,
                        identity.role,
                        what_role_may_do(identity.role)
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
    }
}
