//! Parses `rocminfo` into one [`AmdGpu`] per GPU agent (gfx target, marketing name, CUs,
//! wavefront size, SIMDs per CU).

use serde::{Deserialize, Serialize};

use super::outcome::{key_value, leading_number, Probe};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AmdGpu {
    /// The agent `Name`, e.g. `gfx942`.
    pub gfx_target: String,
    /// The full ISA name, e.g. `amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-`, when listed.
    pub isa: Option<String>,
    pub marketing_name: Option<String>,
    pub uuid: Option<String>,
    pub compute_units: Option<u32>,
    pub wavefront_size: Option<u32>,
    pub simds_per_cu: Option<u32>,
    /// `Max Clock Freq. (MHz)` of the agent.
    #[serde(default)]
    pub max_clock_mhz: Option<u32>,
    /// The HSA `Runtime Version` of the host (ROCr), shared by every agent.
    #[serde(default)]
    pub runtime_version: Option<String>,
    /// The amdgpu/ROCk kernel driver version from `ROCk module version X is loaded`, when
    /// the header gives it (older rocminfo prints only `ROCk module is loaded`).
    #[serde(default)]
    pub rock_module_version: Option<String>,
}

/// Parses `rocminfo` output; absent when it lists no GPU agent.
pub fn parse_rocminfo(text: &str) -> Probe<Vec<AmdGpu>> {
    if !text.contains("HSA Agents") {
        let first = text
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim();
        return Probe::absent(if first.is_empty() {
            "rocminfo printed nothing".to_owned()
        } else {
            format!("rocminfo lists no HSA agents: {first}")
        });
    }
    let runtime_version = text.lines().find_map(|line| match key_value(line) {
        Some(("Runtime Version", value)) if !value.is_empty() => Some(value.to_owned()),
        _ => None,
    });
    let rock_module_version = text.lines().find_map(|line| {
        line.trim()
            .strip_prefix("ROCk module version ")?
            .split_whitespace()
            .next()
            .map(str::to_owned)
    });
    let mut gpus = Vec::new();
    for agent in text.split("*******").skip(1) {
        let mut fields: Vec<(&str, &str)> = Vec::new();
        let mut isa = None;
        for line in agent.lines() {
            let indent = line.len() - line.trim_start().len();
            let Some((key, value)) = key_value(line) else {
                continue;
            };
            if indent == 2 {
                fields.push((key, value));
            } else if key == "Name" && value.starts_with("amdgcn-") && isa.is_none() {
                isa = Some(value.to_owned());
            }
        }
        let field = |key: &str| {
            fields
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| *v)
                .filter(|v| !v.is_empty())
        };
        if field("Device Type") != Some("GPU") {
            continue;
        }
        let number = |key: &str| field(key).and_then(leading_number).map(|n| n as u32);
        gpus.push(AmdGpu {
            gfx_target: field("Name").unwrap_or("").to_owned(),
            isa,
            marketing_name: field("Marketing Name").map(str::to_owned),
            uuid: field("Uuid").map(str::to_owned),
            compute_units: number("Compute Unit"),
            wavefront_size: number("Wavefront Size"),
            simds_per_cu: number("SIMDs per CU"),
            max_clock_mhz: number("Max Clock Freq. (MHz)"),
            runtime_version: runtime_version.clone(),
            rock_module_version: rock_module_version.clone(),
        });
    }
    if gpus.is_empty() {
        Probe::absent("rocminfo lists no GPU agent")
    } else {
        Probe::Found(gpus)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MI300X: &str = include_str!("../../../fixtures/probes/mi300x-x4-epyc9474f/rocminfo.txt");

    #[test]
    fn mi300x_is_gfx942_with_304_cus() {
        let Probe::Found(gpus) = parse_rocminfo(MI300X) else {
            panic!("absent")
        };
        assert_eq!(
            gpus.len(),
            1,
            "the capture keeps the first MI300X agent only"
        );
        let gpu = &gpus[0];
        assert_eq!(gpu.gfx_target, "gfx942");
        assert_eq!(
            gpu.isa.as_deref(),
            Some("amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-")
        );
        assert_eq!(gpu.marketing_name.as_deref(), Some("AMD Instinct MI300X"));
        assert_eq!(gpu.uuid.as_deref(), Some("GPU-8d1457e2c20f59d2"));
        assert_eq!(gpu.compute_units, Some(304));
        assert_eq!(gpu.wavefront_size, Some(64));
        assert_eq!(gpu.simds_per_cu, Some(4));
        assert_eq!(gpu.max_clock_mhz, Some(2100));
        assert_eq!(gpu.runtime_version.as_deref(), Some("1.1"));
        assert_eq!(
            gpu.rock_module_version, None,
            "this rocminfo prints `ROCk module is loaded` without a version"
        );
    }

    #[test]
    fn rock_module_version_when_the_header_gives_it() {
        // Newer rocminfo headers name the kernel driver version; the rest is the real capture.
        let text = MI300X.replacen(
            "ROCk module is loaded",
            "ROCk module version 6.7.0 is loaded",
            1,
        );
        let Probe::Found(gpus) = parse_rocminfo(&text) else {
            panic!("absent")
        };
        assert_eq!(gpus[0].rock_module_version.as_deref(), Some("6.7.0"));
    }

    #[test]
    fn cpu_agents_only_is_absent() {
        // The real capture cut before Agent 3: only the two EPYC CPU agents remain.
        let cut = MI300X.find("Agent 3").expect("agent 3 in capture");
        assert_eq!(
            parse_rocminfo(&MI300X[..cut]).absent_reason(),
            Some("rocminfo lists no GPU agent")
        );
    }

    #[test]
    fn empty_output_is_absent() {
        assert!(parse_rocminfo("").is_absent());
    }
}
