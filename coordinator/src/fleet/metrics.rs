//! What the coordinator counts for operators: counters the state machine bumps as things
//! happen (lease expiries, events stored, events refused, registrations, offers) and the
//! gauges read from the store and the sessions when scraped. Rendered in Prometheus' text
//! format by [`Fleet::render_metrics`]; `crate::http` serves it at `/metrics`.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use abfleet_core::lifecycle::AgentState;

use super::{Fleet, FleetError};

/// Counters since the coordinator started.
#[derive(Debug, Default)]
pub struct Counters {
    pub lease_expiries: AtomicU64,
    pub events_ingested: AtomicU64,
    pub events_refused: AtomicU64,
    pub registrations: AtomicU64,
    pub offers: AtomicU64,
}

impl Counters {
    pub(super) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

impl Fleet {
    pub fn counters(&self) -> &Counters {
        self.ground.counters()
    }

    /// Every metric, in Prometheus' text exposition format (version 0.0.4).
    pub async fn render_metrics(&self) -> Result<String, FleetError> {
        let jobs = self.store().jobs().count_by_state().await?;
        let runs = self.store().runs().count_by_state().await?;
        let agents = self.scheduling().agents().await?;
        let connected = self.scheduling().connected_sessions();
        let counters = self.ground.counters();
        let mut out = String::new();
        let mut gauge = |name: &str, help: &str, kind: &str, samples: &[(String, u64)]| {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for (labels, value) in samples {
                let _ = writeln!(out, "{name}{labels} {value}");
            }
        };
        gauge(
            "abfleet_agents_connected",
            "Agents with an open session.",
            "gauge",
            &[(String::new(), connected as u64)],
        );
        let by_state =
            |state: AgentState| agents.iter().filter(|(_, s, _)| *s == state).count() as u64;
        gauge(
            "abfleet_agents",
            "Registered agents by state (idle, busy, draining, drained, lost).",
            "gauge",
            &AgentState::ALL.map(|s| (format!("{{state=\"{s}\"}}"), by_state(s))),
        );
        let agent_label = |agent: &crate::store::AgentRow| {
            format!("{{agent=\"{}\"}}", escape(&agent.agent_id.to_string()))
        };
        let caches: Vec<_> = agents
            .iter()
            .filter_map(|(agent, _, _)| {
                Some((agent, self.scheduling().agent_cache(agent.agent_id)?))
            })
            .collect();
        gauge(
            "abfleet_agent_cache_bytes",
            "An agent's cache (builds, git mirrors, fixtures) in bytes, as its latest heartbeat said.",
            "gauge",
            &caches
                .iter()
                .filter_map(|(agent, cache)| Some((agent_label(agent), cache.bytes?)))
                .collect::<Vec<_>>(),
        );
        gauge(
            "abfleet_agent_cache_max_bytes",
            "An agent's cache budget (max_cache_bytes) in bytes; absent for an agent without one.",
            "gauge",
            &caches
                .iter()
                .filter_map(|(agent, cache)| Some((agent_label(agent), cache.max_bytes?)))
                .collect::<Vec<_>>(),
        );
        gauge(
            "abfleet_jobs",
            "Jobs in the store by state.",
            "gauge",
            &labelled(&jobs),
        );
        gauge(
            "abfleet_runs",
            "Runs in the store by state.",
            "gauge",
            &labelled(&runs),
        );
        for (name, help, counter) in [
            (
                "abfleet_lease_expiries_total",
                "Leases that expired without a heartbeat (an agent lost mid-job).",
                &counters.lease_expiries,
            ),
            (
                "abfleet_events_ingested_total",
                "Job events stored (re-sends not counted).",
                &counters.events_ingested,
            ),
            (
                "abfleet_events_refused_total",
                "Event batches refused (out of range, not the lease holder, lease lost).",
                &counters.events_refused,
            ),
            (
                "abfleet_registrations_total",
                "Agent registrations accepted.",
                &counters.registrations,
            ),
            (
                "abfleet_offers_total",
                "Jobs offered to agents.",
                &counters.offers,
            ),
        ] {
            gauge(
                name,
                help,
                "counter",
                &[(String::new(), counter.load(Ordering::Relaxed))],
            );
        }
        gauge(
            "abfleet_build_info",
            "The coordinator's version.",
            "gauge",
            &[(format!("{{version=\"{}\"}}", env!("CARGO_PKG_VERSION")), 1)],
        );
        Ok(out)
    }
}

fn labelled(counts: &[(String, u64)]) -> Vec<(String, u64)> {
    counts
        .iter()
        .map(|(state, n)| (format!("{{state=\"{}\"}}", escape(state)), *n))
        .collect()
}

/// A label value as Prometheus wants it: backslash, quote and newline escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
