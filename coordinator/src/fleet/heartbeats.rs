//! When each agent last spoke, kept in memory and written to the store in batches. With a
//! thousand agents heartbeating every 2 s, a write (a committed, fsync'd transaction) per
//! heartbeat was 500 commits a second queued on the store's one writer ahead of every event
//! batch (docs/performance.md); now one transaction a second writes them all — on the next
//! heartbeat, or on the lease reaper's next tick ([`Scheduling::write_heard`]) when the fleet falls
//! quiet. What a crash loses is at most that second (and one reaper tick) of "last heard" times, which only say whether an agent is
//! listed as lost (after `agent_lost_after`, 10 s by default); listings add what is not
//! written yet. Leases are not batched: a renewal is written at once, as before.
//!
//! A heartbeat also says how big the agent's cache is and its budget (issue 25); the latest
//! is kept here, in memory only, for `abfleet agents` and `/metrics`: the next heartbeat
//! after a restart says it again.

use std::collections::{HashMap, HashSet};

use abfleet_core::AgentId;

use super::FleetError;
use super::Scheduling;

/// Heartbeats wait about this long in memory (up to a reaper tick more when none follows).
const WRITE_EVERY_MS: i64 = 1000;

#[derive(Default)]
pub(super) struct Heard {
    /// Agent → when it last spoke, not yet written.
    pending: HashMap<AgentId, i64>,
    /// Agents the store knows (registration is never undone).
    registered: HashSet<AgentId>,
    /// When pending heartbeats were last written.
    written_ms: i64,
    /// Agent → its cache as its latest heartbeat said.
    caches: HashMap<AgentId, AgentCacheUsage>,
}

use abfleet_core::session::AgentCacheUsage;

impl Heard {
    /// The pending times, taken for writing, when there are some and the last write was
    /// [`WRITE_EVERY_MS`] ago.
    fn take_due(&mut self, now: i64) -> Option<Vec<(AgentId, i64)>> {
        if self.pending.is_empty() || now - self.written_ms < WRITE_EVERY_MS {
            return None;
        }
        self.written_ms = now;
        Some(std::mem::take(&mut self.pending).into_iter().collect())
    }
}

impl Scheduling {
    /// Records that an agent spoke (a heartbeat, a ready). `NotRegistered` for an agent the
    /// store does not know: the first time an agent is heard it is looked up (and its time
    /// written); after that, heard in memory.
    pub(super) async fn touch_agent(&self, agent_id: AgentId) -> Result<(), FleetError> {
        let now = self.ground.now_ms();
        let due = {
            let mut heard = self.heard();
            if heard.registered.contains(&agent_id) {
                heard.pending.insert(agent_id, now);
                heard.take_due(now)
            } else {
                None
            }
        };
        match due {
            Some(batch) => self.ground.store().agents().touch_all(batch).await?,
            None if self.heard().registered.contains(&agent_id) => {}
            None => {
                if !self.ground.store().agents().touch(agent_id, now).await? {
                    return Err(FleetError::NotRegistered(agent_id));
                }
                self.heard().registered.insert(agent_id);
            }
        }
        Ok(())
    }

    /// Writes the heard times still in memory once they have waited [`WRITE_EVERY_MS`]: the
    /// lease reaper calls it every tick, so the last times of a fleet that fell quiet are
    /// written too.
    pub async fn write_heard(&self) -> Result<(), FleetError> {
        let due = self.heard().take_due(self.ground.now_ms());
        if let Some(batch) = due {
            self.ground.store().agents().touch_all(batch).await?;
        }
        Ok(())
    }

    /// The agent registered (the store has it, heard now).
    pub(super) fn registered(&self, agent_id: AgentId) {
        let mut heard = self.heard();
        heard.registered.insert(agent_id);
        heard.pending.remove(&agent_id);
    }

    /// When the agent was last heard and that is not written yet.
    pub(super) fn heard_since_written(&self, agent_id: AgentId) -> Option<i64> {
        self.heard().pending.get(&agent_id).copied()
    }

    /// Keeps what an agent's heartbeat said of its cache (an agent that says nothing, an
    /// older one, is left as it was).
    pub fn record_agent_cache(&self, agent_id: AgentId, usage: AgentCacheUsage) {
        if usage != AgentCacheUsage::default() {
            self.heard().caches.insert(agent_id, usage);
        }
    }

    /// What the agent last said of its cache, since this coordinator started.
    pub fn agent_cache(&self, agent_id: AgentId) -> Option<AgentCacheUsage> {
        self.heard().caches.get(&agent_id).copied()
    }

    fn heard(&self) -> std::sync::MutexGuard<'_, Heard> {
        self.heard.lock().unwrap_or_else(|p| p.into_inner())
    }
}
