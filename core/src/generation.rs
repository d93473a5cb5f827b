//! Hardware generations: the keys that say which hosts measure alike (`cpu/x86-64-v4/zen4`,
//! `cpu/arm/neoverse-v2`, `cuda/sm_90`, `hip/gfx942`, `sycl/dg2`), and the selectors a spec
//! uses to pick them. An agent computes its generations from its probes; the coordinator
//! only compares keys.

use serde::{Deserialize, Serialize};

/// One backend an agent can run, on one kind of silicon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Generation {
    /// `backend/...`: the report never mixes cells of different keys in one table.
    pub key: String,
    /// `cpu`, `cuda`, `hip`, `sycl`.
    pub backend: String,
    /// `intel`, `amd`, `arm`, `nvidia`, …
    pub vendor: String,
    /// A hash of what makes two hosts measure alike (key, SKU, core/SM/CU count, driver,
    /// power limit): hosts may pool results only when it is equal.
    pub silicon_id: String,
    /// The same hash without the GPU driver and runtime versions: the hardware and its
    /// settings alone. A run is compared with the previous one of the same hardware id, so a
    /// driver or ROCm bump (a toolchain change) keeps its history. Empty from agents older
    /// than this field: [`Generation::hardware_or_silicon`] then falls back to `silicon_id`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hardware_id: String,
    /// For people: `AMD EPYC 9R14 (Zen 4), 2 cores`.
    pub description: String,
    /// True when the inventory came from recorded probe output (`--probes`), not live tools:
    /// the agent's timed CPU cells still ran on its real CPU.
    #[serde(default)]
    pub simulated: bool,
    /// The emulator this generation runs under, when the host serves an architecture it is
    /// not (`qemu-aarch64 -cpu max …`): its scores are real, its times are not, so its cells
    /// gate parity and run the ISA checks and never report a speedup ([`is_emulated`]). Its
    /// key ends in [`EMULATED_SEGMENT`], so its results never mix with a real host's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulator: Option<String>,
    /// The toolchain this generation builds with, tool → version line (`nvcc` → `Cuda
    /// compilation tools, release 12.4, V12.4.131`, `cc` → `cc (Debian 12.2.0-14) 12.2.0`,
    /// the GPU driver): a change is a toolchain bump, and the coordinator's toolchain watcher
    /// starts a retuning run for the generation (docs/milestone.md).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub toolchain: std::collections::BTreeMap<String, String>,
}

impl Generation {
    /// A GPU generation: any backend but `cpu`, except a Vulkan driver that runs on the CPU
    /// (Mesa's lavapipe, `vulkan/cpu/llvmpipe`), which is no GPU in a hardware table.
    pub fn is_gpu(&self) -> bool {
        self.backend != "cpu" && !self.key.starts_with("vulkan/cpu/")
    }

    /// The hardware id, or the silicon id where the agent did not report one.
    pub fn hardware_or_silicon(&self) -> &str {
        if self.hardware_id.is_empty() {
            &self.silicon_id
        } else {
            &self.hardware_id
        }
    }

    /// `tool: old → new` for each tool whose version differs from `earlier`'s (a tool that
    /// appeared or went away counts); empty when either side reports no toolchain.
    pub fn toolchain_changes(&self, earlier: &Generation) -> Vec<String> {
        if self.toolchain.is_empty() || earlier.toolchain.is_empty() {
            return Vec::new();
        }
        let tools: std::collections::BTreeSet<&String> = self
            .toolchain
            .keys()
            .chain(earlier.toolchain.keys())
            .collect();
        tools
            .into_iter()
            .filter_map(|tool| {
                let (old, new) = (earlier.toolchain.get(tool), self.toolchain.get(tool));
                (old != new).then(|| {
                    let show = |v: Option<&String>| v.map_or("(none)".to_string(), |v| v.clone());
                    format!("{tool}: {} → {}", show(old), show(new))
                })
            })
            .collect()
    }
}

/// The last segment of an emulated generation's key: `cpu/arm/neoverse-v2/emulated`.
pub const EMULATED_SEGMENT: &str = "emulated";

/// Whether a generation key names an emulated host (its last segment is
/// [`EMULATED_SEGMENT`]). The report decides from the key alone, so a cell's timing is
/// withheld whatever the agent that sent it says about itself.
pub fn is_emulated(key: &str) -> bool {
    key.rsplit('/').next() == Some(EMULATED_SEGMENT) && key.contains('/')
}

/// What the report says where an emulated cell's speedup would be.
pub const EMULATED_NOT_TIMED: &str = "emulated: not timed";

/// `*` matches any run of characters (including `/`), `?` one character (the `wildmatch`
/// crate; no other character is special).
pub fn glob_match(pattern: &str, text: &str) -> bool {
    wildmatch::WildMatch::new(pattern).matches(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_keys() {
        assert!(glob_match("cpu/*", "cpu/x86-64-v4/zen4"));
        assert!(glob_match("*/zen?", "cpu/x86-64-v4/zen4"));
        assert!(glob_match("*", ""));
        assert!(!glob_match("cuda/*", "cpu/arm/neoverse-v2"));
        assert!(!glob_match("cpu/arm/neoverse-v?", "cpu/arm/neoverse-v20"));
        assert!(glob_match("cpu/arm/*", "cpu/arm/neoverse-v2"));
    }

    #[test]
    fn an_emulated_key_ends_in_its_segment() {
        assert!(is_emulated("cpu/arm/neoverse-v2/emulated"));
        assert!(!is_emulated("cpu/arm/neoverse-v2"));
        assert!(!is_emulated("cpu/x86-64-v3/emulated-lake"));
        assert!(!is_emulated("emulated"));
        assert!(!is_emulated("any"));
    }
}
