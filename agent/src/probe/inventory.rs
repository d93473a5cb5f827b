//! The whole hardware picture of a host, from the live tools or from a recorded set of their
//! outputs (`--probes DIR`).

use std::path::Path;
use std::process::Command;

use serde::{Deserialize, Serialize};

use super::amd::{parse_rocminfo, AmdGpu};
use super::cpu::{apply_cpu_sysfs, parse_cpuinfo, CpuFactSource, CpuProbe, CpuSysfsText};
use super::intel::{parse_clinfo, parse_sycl_ls, parse_xpu_smi_discovery, IntelGpu};
use super::nvidia::{
    parse_nvidia_smi_csv, parse_nvidia_smi_q_text, parse_nvidia_smi_table, parse_nvidia_smi_xml,
    NvidiaGpu,
};
use super::outcome::Probe;
use super::toolchain::{parse_tool_version, ToolVersion, TOOLS};
use super::vulkan::{parse_vulkaninfo_summary, VulkanDevice};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HardwareInventory {
    pub cpu: CpuProbe,
    pub nvidia: Probe<Vec<NvidiaGpu>>,
    pub amd: Probe<Vec<AmdGpu>>,
    pub intel: Probe<Vec<IntelGpu>>,
    /// Vulkan devices (`vulkaninfo --summary`), CPU drivers such as lavapipe included.
    /// Absent in inventories written before Vulkan was probed.
    #[serde(default = "not_probed")]
    pub vulkan: Probe<Vec<VulkanDevice>>,
    pub toolchain: Vec<ToolVersion>,
}

fn not_probed() -> Probe<Vec<VulkanDevice>> {
    Probe::absent("not probed by this agent")
}

fn read(dir: &Path, name: &str) -> Option<String> {
    std::fs::read_to_string(dir.join(name)).ok()
}

fn not_recorded(what: &str) -> String {
    format!("no recorded {what} output")
}

impl HardwareInventory {
    /// Replays a recorded probe set: `cpuinfo.txt` (with the optional `scaling_governor.txt`,
    /// `boost.txt` / `no_turbo.txt`, `amd_pstate_status.txt`, `sve_default_vector_length.txt`),
    /// `nvidia-smi-q-x.xml` / `nvidia-smi-query.csv` / `nvidia-smi-q.txt` / `nvidia-smi.txt`
    /// (the first found, in that order: the plain table says least, and may cut a product name
    /// short), `rocminfo.txt`, `sycl-ls.txt`, `clinfo.txt`, `vulkaninfo-summary.txt`, and `<tool>-version.txt` files.
    pub fn from_dir(dir: &Path) -> HardwareInventory {
        let cpu = read(dir, "cpuinfo.txt")
            .map(|t| parse_cpuinfo(&t))
            .unwrap_or_else(|| Probe::absent(not_recorded("/proc/cpuinfo")));
        let cpu = with_sysfs(cpu, &CpuSysfsText::recorded(dir), CpuFactSource::Recorded);
        let nvidia = if let Some(xml) = read(dir, "nvidia-smi-q-x.xml") {
            parse_nvidia_smi_xml(&xml)
        } else if let Some(csv) = read(dir, "nvidia-smi-query.csv") {
            parse_nvidia_smi_csv(&csv)
        } else if let Some(text) = read(dir, "nvidia-smi-q.txt") {
            parse_nvidia_smi_q_text(&text)
        } else if let Some(table) = read(dir, "nvidia-smi.txt") {
            parse_nvidia_smi_table(&table)
        } else {
            Probe::absent(not_recorded("nvidia-smi"))
        };
        let amd = read(dir, "rocminfo.txt")
            .map(|t| parse_rocminfo(&t))
            .unwrap_or_else(|| Probe::absent(not_recorded("rocminfo")));
        let intel = intel_from(
            read(dir, "clinfo.txt"),
            read(dir, "sycl-ls.txt"),
            read(dir, "xpu-smi-discovery.txt"),
        );
        let vulkan = read(dir, "vulkaninfo-summary.txt")
            .map(|t| parse_vulkaninfo_summary(&t))
            .unwrap_or_else(|| Probe::absent(not_recorded("vulkaninfo --summary")));
        let toolchain = TOOLS
            .iter()
            .filter_map(|(tool, _)| {
                read(dir, &format!("{tool}-version.txt")).and_then(|t| parse_tool_version(tool, &t))
            })
            .collect();
        HardwareInventory {
            cpu,
            nvidia,
            amd,
            intel,
            vulkan,
            toolchain,
        }
    }

    /// Runs the real tools; a missing or failing tool is absent with its reason.
    pub fn live() -> HardwareInventory {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .map(|t| parse_cpuinfo(&t))
            .unwrap_or_else(|err| Probe::absent(format!("cannot read /proc/cpuinfo: {err}")));
        let cpu = with_sysfs(cpu, &CpuSysfsText::live(), CpuFactSource::Live);
        let nvidia = match run("nvidia-smi", &["-q", "-x"]) {
            Ok(xml) => parse_nvidia_smi_xml(&xml),
            Err(reason) => Probe::absent(reason),
        };
        let amd = match run("rocminfo", &[]) {
            Ok(text) => parse_rocminfo(&text),
            Err(reason) => Probe::absent(reason),
        };
        let intel = intel_from(
            run("clinfo", &[]).ok(),
            run("sycl-ls", &[]).ok(),
            run("xpu-smi", &["discovery"]).ok(),
        );
        let vulkan = match run("vulkaninfo", &["--summary"]) {
            Ok(text) => parse_vulkaninfo_summary(&text),
            Err(reason) => Probe::absent(reason),
        };
        let toolchain = TOOLS
            .iter()
            .filter_map(|(tool, args)| {
                run(tool, args)
                    .ok()
                    .and_then(|t| parse_tool_version(tool, &t))
            })
            .collect();
        HardwareInventory {
            cpu,
            nvidia,
            amd,
            intel,
            vulkan,
            toolchain,
        }
    }
}

fn with_sysfs(cpu: CpuProbe, text: &CpuSysfsText, source: CpuFactSource) -> CpuProbe {
    match cpu {
        Probe::Found(mut info) => {
            apply_cpu_sysfs(&mut info, text, source);
            Probe::Found(info)
        }
        absent => absent,
    }
}

/// clinfo knows sub-group sizes; sycl-ls knows the Level Zero device. Prefer clinfo's list
/// when it found devices.
/// The Intel GPUs of the richest source there is: clinfo (sub-group sizes), then sycl-ls (the
/// Level Zero IP version), then `xpu-smi discovery` (names only).
fn intel_from(
    clinfo: Option<String>,
    sycl_ls: Option<String>,
    xpu_smi: Option<String>,
) -> Probe<Vec<IntelGpu>> {
    let from_clinfo = clinfo.map(|t| parse_clinfo(&t));
    if let Some(Probe::Found(gpus)) = &from_clinfo {
        if !gpus.is_empty() {
            return Probe::Found(gpus.clone());
        }
    }
    let from_sycl_ls = sycl_ls.map(|t| parse_sycl_ls(&t));
    if let Some(found @ Probe::Found(_)) = from_sycl_ls {
        return found;
    }
    if let Some(found @ Probe::Found(_)) = xpu_smi.map(|t| parse_xpu_smi_discovery(&t)) {
        return found;
    }
    from_clinfo
        .or(from_sycl_ls)
        .unwrap_or_else(|| Probe::absent("neither clinfo, sycl-ls nor xpu-smi output"))
}

/// A tool's stdout, or why there is none (not installed, failed, no device).
fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|err| format!("`{program}` is not installed ({err})"))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if output.status.success() {
        Ok(stdout)
    } else {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let reason = stderr
            .lines()
            .chain(stdout.lines())
            .find(|l| !l.trim().is_empty())
            .unwrap_or("no output");
        Err(format!(
            "`{program}` failed ({}): {}",
            output.status,
            reason.trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(host: &str) -> HardwareInventory {
        HardwareInventory::from_dir(
            &Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/probes")).join(host),
        )
    }

    #[test]
    fn recorded_sets_give_each_backend_or_say_it_is_absent() {
        let spr = recorded("xeon8480c-sapphirerapids-h100x8");
        assert!(spr.cpu.found().unwrap().isa.avx512f);
        assert!(spr.amd.is_absent() && spr.intel.is_absent());
        let a100 = recorded("a100-sxm4-80gb-telegraf");
        assert_eq!(
            a100.nvidia.found().unwrap()[0]
                .compute_capability
                .as_deref(),
            Some("sm_80")
        );
        let h100 = recorded("h100x8-cutlass-readme");
        assert_eq!(
            h100.nvidia.found().unwrap()[0]
                .compute_capability
                .as_deref(),
            Some("sm_90")
        );
        let mi300x = recorded("mi300x-x4-epyc9474f");
        assert!(mi300x
            .amd
            .found()
            .unwrap()
            .iter()
            .any(|g| g.gfx_target == "gfx942"));
        let arc = recorded("intel-arc-a770-llamacpp-doc");
        assert!(arc.intel.found().is_some(), "{:?}", arc.intel);
        assert!(recorded("nowhere").cpu.is_absent());
    }

    #[test]
    fn recorded_gpu_inventories_serialize_to_json() {
        // Regression: `Inventory.hardware` is `serde_json::to_value(&hardware).ok()`, and a
        // found GPU list used to fail to serialize, so GPU hosts reported no hardware at all.
        for host in [
            "a100-sxm4-80gb-telegraf",
            "mi300x-x4-epyc9474f",
            "intel-flex140-dg2-ocp",
        ] {
            let inventory = recorded(host);
            let json = serde_json::to_value(&inventory).unwrap_or_else(|e| panic!("{host}: {e}"));
            let back: HardwareInventory = serde_json::from_value(json).unwrap();
            assert_eq!(back, inventory, "{host}");
        }
    }

    #[test]
    fn a_missing_tool_is_absent_with_a_reason() {
        let reason = run("abfleet-no-such-tool", &[]).unwrap_err();
        assert!(reason.contains("not installed"), "{reason}");
        // Present but failing, like rocminfo on a host without /dev/kfd.
        let reason = run(
            "sh",
            &["-c", "echo 'ROCk module is NOT loaded' >&2; exit 1"],
        )
        .unwrap_err();
        assert!(
            reason.contains("failed") && reason.contains("ROCk module is NOT loaded"),
            "{reason}"
        );
    }
}
