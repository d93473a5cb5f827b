//! What an agent says about the host it runs on. The first slice is the basic host facts;
//! `hardware` leaves room for the full probe (ISA levels, GPUs, toolchains).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Inventory {
    pub hostname: String,
    pub os: String,
    pub kernel: String,
    pub arch: String,
    pub cpu_model: String,
    pub physical_cores: u32,
    pub logical_cores: u32,
    pub memory_bytes: u64,
    /// The backends this host can run, one generation key each.
    #[serde(default)]
    pub generations: Vec<crate::generation::Generation>,
    /// The full hardware probe, when an agent reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware: Option<serde_json::Value>,
}

impl Inventory {
    /// One line for report headings: `host (CPU, N cores, M GiB)`.
    pub fn summary(&self) -> String {
        format!(
            "{} ({}, {} cores / {} threads, {:.0} GiB)",
            self.hostname,
            self.cpu_model,
            self.physical_cores,
            self.logical_cores,
            self.memory_bytes as f64 / (1u64 << 30) as f64
        )
    }
}
