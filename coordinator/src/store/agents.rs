//! Registered agents: their inventory, when they were last heard, whether they drain.

use abfleet_core::inventory::Inventory;
use abfleet_core::AgentId;
use rusqlite::{params, OptionalExtension};

use super::{AgentRow, Store};
use crate::error::CoordinatorError;

/// Registered agents: their inventory, when they were last heard, whether they drain. A view of the [`Store`]: `store.agents()`.
#[derive(Clone, Copy)]
pub struct AgentRecords<'s> {
    pub(super) store: &'s Store,
}

impl Store {
    pub fn agents(&self) -> AgentRecords<'_> {
        AgentRecords { store: self }
    }
}

impl AgentRecords<'_> {
    /// Records an agent's inventory; returns the one it registered with before, if any (an
    /// unreadable earlier one counts as none).
    pub async fn upsert(
        &self,
        agent_id: AgentId,
        inventory: &Inventory,
        now_ms: i64,
    ) -> Result<Option<Inventory>, CoordinatorError> {
        let inventory_json = serde_json::to_string(inventory)
            .map_err(|err| CoordinatorError::Internal(err.to_string()))?;
        self.store.with(move |conn| {
            let tx = conn.transaction()?;
            let earlier: Option<String> = tx
                .query_row(
                    "SELECT inventory_json FROM agents WHERE agent_id = ?1",
                    params![agent_id],
                    |row| row.get(0),
                )
                .optional()?;
            tx.execute(
                "INSERT INTO agents (agent_id, inventory_json, registered_ms, last_heartbeat_ms) VALUES (?1, ?2, ?3, ?3)
                 ON CONFLICT(agent_id) DO UPDATE SET inventory_json = excluded.inventory_json, last_heartbeat_ms = excluded.last_heartbeat_ms",
                params![agent_id, inventory_json, now_ms],
            )?;
            tx.commit()?;
            Ok(earlier.and_then(|json| serde_json::from_str(&json).ok()))
        })
        .await
    }

    /// Records that the agent spoke; false when no agent of that id is registered.
    pub async fn touch(&self, agent_id: AgentId, now_ms: i64) -> Result<bool, CoordinatorError> {
        self.store
            .with(move |conn| {
                let changed = conn.execute(
                    "UPDATE agents SET last_heartbeat_ms = ?2 WHERE agent_id = ?1",
                    params![agent_id, now_ms],
                )?;
                Ok(changed > 0)
            })
            .await
    }

    /// Records when each agent last spoke, all in one transaction (agents the store does not
    /// know are skipped).
    pub async fn touch_all(&self, heard: Vec<(AgentId, i64)>) -> Result<(), CoordinatorError> {
        if heard.is_empty() {
            return Ok(());
        }
        self.store.with(move |conn| {
            let tx = conn.transaction()?;
            {
                let mut stmt = tx.prepare_cached(
                    "UPDATE agents SET last_heartbeat_ms = MAX(last_heartbeat_ms, ?2) WHERE agent_id = ?1",
                )?;
                for (agent_id, at_ms) in heard {
                    stmt.execute(params![agent_id, at_ms])?;
                }
            }
            tx.commit()?;
            Ok(())
        })
        .await
    }

    pub async fn all(&self) -> Result<Vec<AgentRow>, CoordinatorError> {
        self.page(0, u32::MAX).await
    }

    /// Up to `limit` agents from position `offset`, in registration order (a registration
    /// again keeps its place, so paging by offset sees each agent once).
    pub async fn page(&self, offset: u64, limit: u32) -> Result<Vec<AgentRow>, CoordinatorError> {
        self.store
            .read(move |conn| {
                let mut stmt = conn.prepare(
                    "SELECT a.agent_id, a.inventory_json, a.last_heartbeat_ms, a.draining,
                        c.cert_name, c.serial, c.fingerprint
                 FROM agents a LEFT JOIN agent_certificates c ON c.agent_id = a.agent_id
                 ORDER BY a.registered_ms, a.agent_id LIMIT ?1 OFFSET ?2",
                )?;
                let rows = stmt.query_map(params![i64::from(limit), offset as i64], |row| {
                    Ok((
                        (
                            row.get::<_, AgentId>(0)?,
                            row.get::<_, String>(1)?,
                            row.get::<_, i64>(2)?,
                            row.get::<_, bool>(3)?,
                        ),
                        (
                            row.get::<_, Option<String>>(4)?,
                            row.get::<_, Option<String>>(5)?,
                            row.get::<_, Option<String>>(6)?,
                        ),
                    ))
                })?;
                let mut agents = Vec::new();
                for row in rows {
                    let (
                        (agent_id, inventory_json, last_heartbeat_ms, draining),
                        (name, serial, fingerprint),
                    ) = row?;
                    let certificate = name.map(|name| {
                        (
                            name,
                            abfleet_core::certs::CertificateId {
                                serial: serial.unwrap_or_default(),
                                fingerprint: fingerprint.unwrap_or_default(),
                            },
                        )
                    });
                    agents.push(AgentRow {
                        certificate,
                        agent_id,
                        inventory: serde_json::from_str(&inventory_json).map_err(|err| {
                            CoordinatorError::Corrupt(format!(
                                "inventory of agent {agent_id}: {err}"
                            ))
                        })?,
                        last_heartbeat_ms,
                        draining,
                    });
                }
                Ok(agents)
            })
            .await
    }

    /// Marks an agent draining (or not); `false` when no such agent registered.
    pub async fn set_draining(
        &self,
        agent_id: AgentId,
        draining: bool,
    ) -> Result<bool, CoordinatorError> {
        self.store
            .with(move |conn| {
                let changed = conn.execute(
                    "UPDATE agents SET draining = ?2 WHERE agent_id = ?1",
                    params![agent_id, draining],
                )?;
                Ok(changed == 1)
            })
            .await
    }
}
