//! From probe results to hardware generation keys, one per backend the host can run:
//! `cpu/x86-64-v4/sapphire-rapids`, `cpu/arm/neoverse-v2`, `cuda/sm_90`, `hip/gfx942`,
//! `sycl/dg2`. The mapping tables themselves (family/model → microarchitecture, product →
//! architecture) live with the probes (`probe::uarch`, `probe::intel`, `probe::nvidia`);
//! this module only turns their answers into keys and silicon identities.

use abfleet_core::generation::Generation;
use sha2::{Digest, Sha256};

use crate::probe::amd::AmdGpu;
use crate::probe::cpu::{CpuArch, CpuInfo};
use crate::probe::intel::IntelGpu;
use crate::probe::nvidia::NvidiaGpu;
use crate::source::hex;

/// `Sapphire Rapids` → `sapphire-rapids`; `Zen 4` → `zen4`.
fn slug(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    let mut out = String::new();
    for word in lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        // `zen 4` reads better as `zen4`, `neoverse v2` as `neoverse-v2`.
        let number_after_word = word.chars().all(|c| c.is_ascii_digit())
            && out.ends_with(|c: char| c.is_ascii_alphabetic());
        if !out.is_empty() && !number_after_word {
            out.push('-');
        }
        out.push_str(word);
    }
    out
}

fn silicon_id(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    hex(&hasher.finalize())[..16].to_string()
}

pub fn cpu(info: &CpuInfo, simulated: bool) -> Generation {
    let uarch = slug(&info.microarchitecture);
    let (key, vendor) = match info.arch {
        CpuArch::X86_64 => {
            let level = info.isa.x86_64_level.unwrap_or(1);
            let vendor = match info.vendor.as_str() {
                "GenuineIntel" => "intel",
                "AuthenticAMD" => "amd",
                other => other,
            };
            (
                format!("cpu/x86-64-v{level}/{uarch}"),
                vendor.to_ascii_lowercase(),
            )
        }
        CpuArch::Aarch64 => (format!("cpu/arm/{uarch}"), slug(&info.vendor)),
    };
    let model = info
        .model_name
        .clone()
        .unwrap_or_else(|| info.microarchitecture.clone());
    let cores = info.physical_cores.to_string();
    Generation {
        silicon_id: silicon_id(&[&key, &model, &cores]),
        description: format!(
            "{model} ({}), {} cores",
            info.microarchitecture, info.physical_cores
        ),
        key,
        backend: "cpu".into(),
        vendor,
        simulated,
    }
}

pub fn nvidia(gpus: &[NvidiaGpu], simulated: bool) -> Vec<Generation> {
    gpus.iter()
        .filter_map(|gpu| {
            let sm = gpu.compute_capability.as_ref()?;
            let key = format!("cuda/{sm}");
            let power = gpu
                .power_limit_w
                .map(|w| format!("{w:.0}"))
                .unwrap_or_default();
            let sms = gpu.sm_count.map(|n| n.to_string()).unwrap_or_default();
            Some(Generation {
                silicon_id: silicon_id(&[
                    &key,
                    &gpu.name,
                    &sms,
                    gpu.driver_version.as_deref().unwrap_or(""),
                    &power,
                ]),
                description: format!(
                    "{} ({sm}, driver {})",
                    gpu.name,
                    gpu.driver_version.as_deref().unwrap_or("?")
                ),
                key,
                backend: "cuda".into(),
                vendor: "nvidia".into(),
                simulated,
            })
        })
        .collect()
}

pub fn amd(gpus: &[AmdGpu], simulated: bool) -> Vec<Generation> {
    gpus.iter()
        .map(|gpu| {
            let key = format!("hip/{}", gpu.gfx_target);
            let name = gpu
                .marketing_name
                .clone()
                .unwrap_or_else(|| gpu.gfx_target.clone());
            let cus = gpu.compute_units.map(|n| n.to_string()).unwrap_or_default();
            Generation {
                silicon_id: silicon_id(&[&key, &name, &cus]),
                description: format!("{name} ({}, {} CUs)", gpu.gfx_target, cus),
                key,
                backend: "hip".into(),
                vendor: "amd".into(),
                simulated,
            }
        })
        .collect()
}

pub fn intel(gpus: &[IntelGpu], simulated: bool) -> Vec<Generation> {
    gpus.iter()
        .map(|gpu| {
            let arch = serde_json::to_value(&gpu.architecture)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_else(|| "unknown".into());
            let key = format!("sycl/{arch}");
            Generation {
                silicon_id: silicon_id(&[
                    &key,
                    &gpu.name,
                    gpu.driver_version.as_deref().unwrap_or(""),
                ]),
                description: format!("{} ({arch})", gpu.name),
                key,
                backend: "sycl".into(),
                vendor: "intel".into(),
                simulated,
            }
        })
        .collect()
}

/// Generations with the same key on one host (eight identical GPUs) are one generation.
pub fn dedup(mut generations: Vec<Generation>) -> Vec<Generation> {
    let mut seen = std::collections::BTreeSet::new();
    generations.retain(|g| seen.insert(g.key.clone()));
    generations
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn microarchitecture_names_become_key_segments() {
        assert_eq!(slug("Zen 4"), "zen4");
        assert_eq!(slug("Sapphire Rapids"), "sapphire-rapids");
        assert_eq!(slug("Neoverse V2"), "neoverse-v2");
        assert_eq!(slug("Neoverse-N1"), "neoverse-n1");
    }
}
