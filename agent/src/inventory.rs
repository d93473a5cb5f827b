//! What an agent reports when it registers: the host facts, the full hardware probe and
//! the generation keys made from it, read live or from a recorded probe set (`--probes`).

use std::path::Path;

use abfleet_core::inventory::Inventory;
use sysinfo::{CpuRefreshKind, MemoryRefreshKind, RefreshKind, System};

use crate::error::AgentError;
use crate::generations;
use crate::probe::HardwareInventory;

/// Reads the live host: basic facts, every probe, its generations.
pub fn probe_host() -> Inventory {
    let mut inventory = basic_host();
    let hardware = HardwareInventory::live();
    inventory.generations = generations::of(&hardware, false);
    inventory.hardware = serde_json::to_value(&hardware).ok();
    inventory
}

/// An inventory from a recorded probe set (files named as `HardwareInventory::from_dir`
/// reads them): one machine stands in for a host of another kind. Its timed CPU cells
/// still run on the real CPU; its generations are marked `simulated`.
pub fn from_recorded_probes(dir: &Path) -> Result<Inventory, AgentError> {
    if !dir.is_dir() {
        return Err(AgentError::Io {
            what: format!("read the recorded probes in `{}` (not a directory; pass --probes DIR with cpuinfo.txt and the tools' outputs)", dir.display()),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        });
    }
    let hardware = HardwareInventory::from_dir(dir);
    let Some(cpu) = hardware.cpu.found() else {
        return Err(AgentError::Io {
            what: format!(
                "read `{}` (a recorded probe set needs at least cpuinfo.txt)",
                dir.join("cpuinfo.txt").display()
            ),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        });
    };
    let live = basic_host();
    let name = dir
        .file_name()
        .map_or("host".into(), |n| n.to_string_lossy().into_owned());
    Ok(Inventory {
        hostname: format!("recorded-{name}"),
        os: format!(
            "recorded probes from {} (running on {})",
            dir.display(),
            live.hostname
        ),
        kernel: live.kernel,
        arch: match cpu.arch {
            crate::probe::CpuArch::X86_64 => "x86_64".into(),
            crate::probe::CpuArch::Aarch64 => "aarch64".into(),
        },
        cpu_model: cpu
            .model_name
            .clone()
            .unwrap_or_else(|| cpu.microarchitecture.clone()),
        physical_cores: cpu.physical_cores as u32,
        logical_cores: cpu.logical_cpus as u32,
        memory_bytes: live.memory_bytes,
        generations: generations::of(&hardware, true),
        hardware: serde_json::to_value(&hardware).ok(),
    })
}

/// The live host with the GPUs of recorded probe sets added (`--gpu-probes`): its CPU, its
/// own GPUs and its toolchains are read live, so a GPU job builds with the real compilers of
/// this host; the recorded GPUs' generations are marked `simulated` (checked, never timed)
/// and take this host's compiler versions. A generation the host has for real stays real.
pub fn live_with_recorded_gpus(dirs: &[std::path::PathBuf]) -> Result<Inventory, AgentError> {
    let mut inventory = basic_host();
    let mut hardware = HardwareInventory::live();
    let mut generations = generations::of(&hardware, false);
    for dir in dirs {
        if !dir.is_dir() {
            return Err(AgentError::Io {
                what: format!(
                    "read the recorded GPU probes in `{}` (not a directory; pass --gpu-probes DIR with nvidia-smi, rocminfo or sycl-ls output)",
                    dir.display()
                ),
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            });
        }
        let mut recorded = HardwareInventory::from_dir(dir);
        if recorded.nvidia.is_absent() && recorded.amd.is_absent() && recorded.intel.is_absent() {
            return Err(AgentError::Io {
                what: format!(
                    "read a GPU from `{}` (it has no nvidia-smi, rocminfo, sycl-ls or clinfo output)",
                    dir.display()
                ),
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            });
        }
        recorded.cpu = crate::probe::Probe::absent("a --gpu-probes set adds GPUs only");
        recorded.toolchain = hardware.toolchain.clone();
        for generation in generations::of(&recorded, true) {
            if !generations.iter().any(|g| g.key == generation.key) {
                generations.push(generation);
            }
        }
        add_gpus(&mut hardware.nvidia, recorded.nvidia);
        add_gpus(&mut hardware.amd, recorded.amd);
        add_gpus(&mut hardware.intel, recorded.intel);
    }
    inventory.generations = generations;
    inventory.hardware = serde_json::to_value(&hardware).ok();
    Ok(inventory)
}

fn add_gpus<T>(live: &mut crate::probe::Probe<Vec<T>>, recorded: crate::probe::Probe<Vec<T>>) {
    use crate::probe::Probe;
    let Probe::Found(mut more) = recorded else {
        return;
    };
    match live {
        Probe::Found(gpus) => gpus.append(&mut more),
        Probe::Absent { .. } => *live = Probe::Found(more),
    }
}

/// The basic host facts from sysinfo: name, OS, kernel, CPU model, cores, memory.
pub(crate) fn basic_host() -> Inventory {
    let system = System::new_with_specifics(
        RefreshKind::nothing()
            .with_cpu(CpuRefreshKind::nothing())
            .with_memory(MemoryRefreshKind::nothing().with_ram()),
    )
    .ok();
    let cpu_model = system
        .as_ref()
        .and_then(|s| s.cpus().first().map(|c| c.brand().trim().to_string()))
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| "unknown CPU".to_string());
    let logical_cores = system.as_ref().map_or(0, |s| s.cpus().len() as u32);
    Inventory {
        hostname: System::host_name().unwrap_or_else(|_| "unknown-host".to_string()),
        os: System::long_os_version().unwrap_or_else(|_| std::env::consts::OS.to_string()),
        kernel: System::kernel_version().unwrap_or_default(),
        arch: std::env::consts::ARCH.to_string(),
        cpu_model,
        physical_cores: System::physical_core_count().map_or(logical_cores, |n| n as u32),
        logical_cores,
        memory_bytes: system.as_ref().map_or(0, System::total_memory),
        generations: Vec::new(),
        hardware: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_hosts_get_their_generation_keys() {
        let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/probes"));
        let cases = [
            (
                "xeon8480c-sapphirerapids-h100x8",
                "cpu/x86-64-v4/sapphire-rapids",
            ),
            ("core-i5-12400-alderlake", "cpu/x86-64-v3/alder-lake"),
            ("grace-neoverse-v2", "cpu/arm/neoverse-v2"),
        ];
        for (host, key) in cases {
            let inventory = from_recorded_probes(&dir.join(host)).unwrap();
            let keys: Vec<&str> = inventory
                .generations
                .iter()
                .map(|g| g.key.as_str())
                .collect();
            assert!(keys.contains(&key), "{host}: {keys:?}");
            assert!(inventory.generations.iter().all(|g| g.simulated));
        }
        let missing = from_recorded_probes(&dir.join("no-such-host"))
            .unwrap_err()
            .to_string();
        assert!(missing.contains("--probes DIR"), "{missing}");
    }

    #[test]
    fn the_live_host_has_a_name_cores_and_memory() {
        let inv = probe_host();
        assert!(!inv.hostname.is_empty());
        assert!(inv.logical_cores >= 1, "{inv:?}");
        assert!(inv.memory_bytes > 0, "{inv:?}");
        assert_eq!(inv.arch, std::env::consts::ARCH);
        assert!(
            inv.generations
                .iter()
                .any(|g| g.backend == "cpu" && !g.simulated),
            "{:?}",
            inv.generations
        );
    }
}
