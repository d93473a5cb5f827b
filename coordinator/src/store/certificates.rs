//! Certificates as the store knows them (tables `agent_certificates`, migrations 7 and 14,
//! and `revoked_certificates`, migration 14): which certificate name each agent id is bound
//! to and which certificate (serial, fingerprint) it last registered with; and the deny list
//! `abfleet certs revoke` writes, read back whole at start. The fleet decides; this module
//! only keeps, inside one transaction per change, so a cap on ids per certificate cannot be
//! raced past by registrations arriving together.

use abfleet_core::certs::CertificateId;
use abfleet_core::AgentId;
use rusqlite::{params, OptionalExtension};

use super::Store;
use crate::error::CoordinatorError;

/// What registering an agent id under a certificate did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Binding {
    /// The id is (now) bound to this certificate name; its serial and fingerprint are noted.
    Bound,
    /// The id belongs to another certificate name.
    Owned { by: String },
    /// The certificate already speaks for this many other ids registered since the window
    /// began; the new id was not bound.
    TooManyIds { ids: Vec<AgentId> },
}

/// An agent id and the certificate it registered with last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentCertificate {
    pub agent_id: AgentId,
    pub cert_name: String,
    /// Empty for an id bound before the store kept serials (migration 14) and not
    /// registered since.
    pub certificate: CertificateId,
    pub registered_ms: i64,
}

/// A deny-list entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revocation {
    /// The serial or fingerprint the operator named (normalised hex): what a call is
    /// checked against, with `certificate`'s two when known.
    pub key: String,
    /// Both, when the coordinator had seen the certificate or was given it; otherwise
    /// only the one named in `key` (the other empty).
    pub certificate: CertificateId,
    pub role: String,
    pub name: String,
    pub reason: String,
    /// The operator certificate (or "loopback") that revoked it.
    pub revoked_by: String,
    pub revoked_ms: i64,
}

impl Revocation {
    /// Every key a call's certificate is matched against.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        [
            self.key.as_str(),
            self.certificate.serial.as_str(),
            self.certificate.fingerprint.as_str(),
        ]
        .into_iter()
        .filter(|key| !key.is_empty())
    }
}

/// Which certificate registered which agent id, and the revoked certificates. A view of the [`Store`]: `store.certificates()`.
#[derive(Clone, Copy)]
pub struct CertificateRecords<'s> {
    pub(super) store: &'s Store,
}

impl Store {
    pub fn certificates(&self) -> CertificateRecords<'_> {
        CertificateRecords { store: self }
    }
}

impl CertificateRecords<'_> {
    /// Binds `agent_id` to `cert_name` unless it is bound already, noting the certificate it
    /// registered with now. A new id is refused when `cap` = (ids, since_ms) and the name
    /// already has that many ids registered since `since_ms`.
    pub async fn bind_agent_certificate(
        &self,
        agent_id: AgentId,
        cert_name: &str,
        certificate: CertificateId,
        now_ms: i64,
        cap: Option<(u32, i64)>,
    ) -> Result<Binding, CoordinatorError> {
        let cert_name = cert_name.to_string();
        self.store.with(move |conn| {
            let tx = conn.transaction()?;
            let bound: Option<String> = tx
                .query_row(
                    "SELECT cert_name FROM agent_certificates WHERE agent_id = ?1",
                    params![agent_id],
                    |row| row.get(0),
                )
                .optional()?;
            match bound {
                Some(owner) if owner != cert_name => return Ok(Binding::Owned { by: owner }),
                Some(_) => {}
                None => {
                    if let Some((most, since_ms)) = cap {
                        let mut stmt = tx.prepare(
                            "SELECT agent_id FROM agent_certificates
                             WHERE cert_name = ?1 AND registered_ms >= ?2 ORDER BY registered_ms",
                        )?;
                        let ids = stmt
                            .query_map(params![cert_name, since_ms], |row| row.get(0))?
                            .collect::<rusqlite::Result<Vec<_>>>()?;
                        if ids.len() >= most as usize {
                            return Ok(Binding::TooManyIds { ids });
                        }
                    }
                    tx.execute(
                        "INSERT INTO agent_certificates (agent_id, cert_name, bound_ms) VALUES (?1, ?2, ?3)",
                        params![agent_id, cert_name, now_ms],
                    )?;
                }
            }
            tx.execute(
                "UPDATE agent_certificates SET serial = ?2, fingerprint = ?3, registered_ms = ?4
                 WHERE agent_id = ?1",
                params![agent_id, certificate.serial, certificate.fingerprint, now_ms],
            )?;
            tx.commit()?;
            Ok(Binding::Bound)
        })
        .await
    }

    /// The certificate name `agent_id` is bound to, if any.
    pub async fn agent_certificate(
        &self,
        agent_id: AgentId,
    ) -> Result<Option<String>, CoordinatorError> {
        self.store
            .with(move |conn| {
                Ok(conn
                    .query_row(
                        "SELECT cert_name FROM agent_certificates WHERE agent_id = ?1",
                        params![agent_id],
                        |row| row.get(0),
                    )
                    .optional()?)
            })
            .await
    }

    /// The certificate `agent_id` is bound to and last registered with.
    pub async fn certificate_of(
        &self,
        agent_id: AgentId,
    ) -> Result<Option<AgentCertificate>, CoordinatorError> {
        self.store.read(move |conn| {
            Ok(conn
                .query_row(
                    "SELECT cert_name, serial, fingerprint, registered_ms FROM agent_certificates WHERE agent_id = ?1",
                    params![agent_id],
                    |row| {
                        Ok(AgentCertificate {
                            agent_id,
                            cert_name: row.get(0)?,
                            certificate: CertificateId {
                                serial: row.get(1)?,
                                fingerprint: row.get(2)?,
                            },
                            registered_ms: row.get(3)?,
                        })
                    },
                )
                .optional()?)
        })
        .await
    }

    /// Every agent id's certificate, by certificate name then id.
    pub async fn agent_certificates(&self) -> Result<Vec<AgentCertificate>, CoordinatorError> {
        self.store
            .read(|conn| {
                let mut stmt = conn.prepare(
                    "SELECT agent_id, cert_name, serial, fingerprint, registered_ms
                 FROM agent_certificates ORDER BY cert_name, agent_id",
                )?;
                let rows = stmt.query_map([], |row| {
                    Ok((
                        row.get::<_, AgentId>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, String>(3)?,
                        row.get::<_, i64>(4)?,
                    ))
                })?;
                let mut out = Vec::new();
                for row in rows {
                    let (agent_id, cert_name, serial, fingerprint, registered_ms) = row?;
                    out.push(AgentCertificate {
                        agent_id,
                        cert_name,
                        certificate: CertificateId {
                            serial,
                            fingerprint,
                        },
                        registered_ms,
                    });
                }
                Ok(out)
            })
            .await
    }

    /// Adds `revocation` to the deny list; false when its key was already there (the first
    /// entry, its reason and time, stay).
    pub async fn revoke_certificate(
        &self,
        revocation: Revocation,
    ) -> Result<bool, CoordinatorError> {
        self.store
            .with(move |conn| {
                let added = conn.execute(
                    "INSERT INTO revoked_certificates
                 (key, serial, fingerprint, role, name, reason, revoked_by, revoked_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT(key) DO NOTHING",
                    params![
                        revocation.key,
                        revocation.certificate.serial,
                        revocation.certificate.fingerprint,
                        revocation.role,
                        revocation.name,
                        revocation.reason,
                        revocation.revoked_by,
                        revocation.revoked_ms
                    ],
                )?;
                Ok(added == 1)
            })
            .await
    }

    /// The whole deny list, oldest first.
    pub async fn revocations(&self) -> Result<Vec<Revocation>, CoordinatorError> {
        self.store
            .read(|conn| {
                let mut stmt = conn.prepare(
                    "SELECT key, serial, fingerprint, role, name, reason, revoked_by, revoked_ms
                 FROM revoked_certificates ORDER BY revoked_ms, key",
                )?;
                let rows = stmt.query_map([], |row| {
                    Ok(Revocation {
                        key: row.get(0)?,
                        certificate: CertificateId {
                            serial: row.get(1)?,
                            fingerprint: row.get(2)?,
                        },
                        role: row.get(3)?,
                        name: row.get(4)?,
                        reason: row.get(5)?,
                        revoked_by: row.get(6)?,
                        revoked_ms: row.get(7)?,
                    })
                })?;
                Ok(rows.collect::<rusqlite::Result<_>>()?)
            })
            .await
    }
}
