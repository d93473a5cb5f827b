//! The host facts an agent reports when it registers (the basic slice; the full hardware
//! probe fills `Inventory::hardware`).

use abfleet_core::inventory::Inventory;
use sysinfo::{CpuRefreshKind, MemoryRefreshKind, RefreshKind, System};

/// Reads the live host.
pub fn probe_host() -> Inventory {
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
    fn the_live_host_has_a_name_cores_and_memory() {
        let inv = probe_host();
        assert!(!inv.hostname.is_empty());
        assert!(inv.logical_cores >= 1, "{inv:?}");
        assert!(inv.memory_bytes > 0, "{inv:?}");
        assert_eq!(inv.arch, std::env::consts::ARCH);
    }
}
