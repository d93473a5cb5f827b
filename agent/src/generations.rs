//! From probe results to hardware generation keys, one per backend the host can run:
//! `cpu/x86-64-v4/sapphire-rapids`, `cpu/arm/neoverse-v2`, `cuda/sm_90`, `hip/gfx942`,
//! `sycl/dg2`. The mapping tables themselves (family/model → microarchitecture, product →
//! architecture) live with the probes (`probe::uarch`, `probe::intel`, `probe::nvidia`);
//! this module only turns their answers into keys and silicon identities. Each generation
//! has two: the silicon id (everything that makes hosts measure alike, drivers included:
//! hosts pool only when it is equal) and the hardware id (the same without the GPU driver
//! and runtime versions, which the toolchain carries: runs are compared across a driver bump
//! on it).

use abfleet_core::generation::Generation;
use sha2::{Digest, Sha256};

use crate::probe::amd::AmdGpu;
use crate::probe::cpu::{CpuArch, CpuInfo};
use crate::probe::intel::{IntelArch, IntelGpu};
use crate::probe::nvidia::NvidiaGpu;
use crate::probe::HardwareInventory;
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

/// A silicon identity: the first 16 hex digits of the SHA-256 of `name=value` fields, each
/// NUL-terminated. An unknown value hashes as empty, so "unknown" and "known" differ.
fn silicon_id(fields: &[(&str, String)]) -> String {
    let mut hasher = Sha256::new();
    for (name, value) in fields {
        hasher.update(name.as_bytes());
        hasher.update(b"=");
        hasher.update(value.as_bytes());
        hasher.update([0]);
    }
    hex(&hasher.finalize())[..16].to_string()
}

/// The silicon id of `fields` and the hardware id: the same hash without the fields named in
/// `software` (the GPU driver and runtime versions, which are also in the toolchain).
fn silicon_and_hardware_ids(fields: &[(&str, String)], software: &[&str]) -> (String, String) {
    let hardware: Vec<(&str, String)> = fields
        .iter()
        .filter(|(name, _)| !software.contains(name))
        .cloned()
        .collect();
    (silicon_id(fields), silicon_id(&hardware))
}

fn text<T: ToString>(value: Option<T>) -> String {
    value.map(|v| v.to_string()).unwrap_or_default()
}

/// Every generation a probed host can run, one per distinct key (see [`dedup`]).
pub fn of(hardware: &HardwareInventory, simulated: bool) -> Vec<Generation> {
    let mut all = Vec::new();
    if let Some(info) = hardware.cpu.found() {
        all.push(cpu(info, simulated));
    }
    if let Some(gpus) = hardware.nvidia.found() {
        all.extend(nvidia(gpus, simulated));
    }
    if let Some(gpus) = hardware.amd.found() {
        all.extend(amd(gpus, simulated));
    }
    if let Some(gpus) = hardware.intel.found() {
        all.extend(intel(gpus, simulated));
    }
    if let Some(devices) = hardware.vulkan.found() {
        all.extend(vulkan(devices, simulated));
    }
    for generation in &mut all {
        generation.toolchain = toolchain_of(hardware, &generation.backend, &generation.key);
    }
    dedup(all)
}

/// A recorded CPU generation as an emulated host serves it: the key gains the `/emulated`
/// segment, the silicon and hardware ids cover the emulator (an emulated host never pools
/// with a real one, nor with another emulator), the toolchain is the cross compiler's and
/// the emulator's, and it is not `simulated` (its runs are real runs, under the emulator).
pub fn emulated(
    recorded: Generation,
    emulator: &str,
    toolchain: std::collections::BTreeMap<String, String>,
) -> Generation {
    let key = format!(
        "{}/{}",
        recorded.key,
        abfleet_core::generation::EMULATED_SEGMENT
    );
    let ids = silicon_id(&[
        ("key", key.clone()),
        ("recorded_silicon", recorded.silicon_id.clone()),
        ("emulator", emulator.to_string()),
    ]);
    Generation {
        description: format!("{}, emulated by {emulator}", recorded.description),
        key,
        silicon_id: ids.clone(),
        hardware_id: ids,
        simulated: false,
        emulator: Some(emulator.to_string()),
        toolchain,
        ..recorded
    }
}

/// The tools each backend builds with; their version lines are the generation's toolchain.
const BACKEND_TOOLS: &[(&str, &[&str])] = &[
    ("cpu", &["cc", "gcc", "clang"]),
    ("cuda", &["nvcc"]),
    ("hip", &["hipcc"]),
    ("sycl", &["icpx"]),
    ("vulkan", &["glslc"]),
];

/// A generation's toolchain: the version line of each of its backend's compilers on the
/// host, and for a GPU the driver (NVIDIA) or runtime (ROCm) its devices report.
fn toolchain_of(
    hardware: &HardwareInventory,
    backend: &str,
    key: &str,
) -> std::collections::BTreeMap<String, String> {
    let tools = BACKEND_TOOLS
        .iter()
        .find(|(b, _)| *b == backend)
        .map_or(&[][..], |(_, tools)| tools);
    let mut toolchain: std::collections::BTreeMap<String, String> = hardware
        .toolchain
        .iter()
        .filter(|t| tools.contains(&t.tool.as_str()))
        .map(|t| (t.tool.clone(), t.line.clone()))
        .collect();
    match backend {
        "cuda" => {
            if let Some(driver) = hardware.nvidia.found().and_then(|gpus| {
                gpus.iter()
                    .filter(|g| {
                        g.compute_capability
                            .as_deref()
                            .map(|sm| format!("cuda/{sm}"))
                            .as_deref()
                            == Some(key)
                    })
                    .find_map(|g| g.driver_version.clone())
            }) {
                toolchain.insert("nvidia-driver".into(), driver);
            }
        }
        "vulkan" => {
            if let Some(driver) = hardware.vulkan.found().and_then(|devices| {
                devices
                    .iter()
                    .find(|d| vulkan_key(d) == key)
                    .map(|d| d.driver_info.clone())
            }) {
                toolchain.insert("vulkan-driver".into(), driver);
            }
        }
        "hip" => {
            if let Some(runtime) = hardware.amd.found().and_then(|gpus| {
                gpus.iter()
                    .filter(|g| format!("hip/{}", g.gfx_target) == key)
                    .find_map(|g| g.runtime_version.clone())
            }) {
                toolchain.insert("rocm-runtime".into(), runtime);
            }
        }
        _ => {}
    }
    toolchain
}

/// `cpu/x86-64-v<level>/<uarch>` or `cpu/arm/<uarch>`. Silicon id: the key, model name,
/// physical and logical cores, governor, boost state and SVE vector length.
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
    let frequency = &info.frequency;
    // Nothing of a CPU's identity is software: its hardware id is its silicon id.
    let silicon_id = silicon_id(&[
        ("key", key.clone()),
        ("model", model.clone()),
        ("physical_cores", info.physical_cores.to_string()),
        ("logical_cpus", info.logical_cpus.to_string()),
        ("governor", text(frequency.governor.as_deref())),
        ("boost", text(frequency.boost_enabled)),
        (
            "sve_vector_length_bits",
            text(info.isa.sve_vector_length_bits),
        ),
    ]);
    // ARM /proc/cpuinfo has no model name: then the microarchitecture is the name.
    let mut description = match &info.model_name {
        Some(name) => format!("{name} ({})", info.microarchitecture),
        None => info.microarchitecture.clone(),
    };
    let cores = info.physical_cores;
    description.push_str(&format!(
        ", {cores} core{}",
        if cores == 1 { "" } else { "s" }
    ));
    if let Some(governor) = &frequency.governor {
        description.push_str(&format!(", governor {governor}"));
    }
    if let Some(boost) = frequency.boost_enabled {
        description.push_str(if boost { ", boost on" } else { ", boost off" });
    }
    if let Some(bits) = info.isa.sve_vector_length_bits {
        description.push_str(&format!(", SVE {bits}-bit"));
    }
    Generation {
        emulator: None,
        hardware_id: silicon_id.clone(),
        silicon_id,
        description,
        key,
        backend: "cpu".into(),
        vendor,
        simulated,
        toolchain: Default::default(),
    }
}

/// A Vulkan device's generation key: the driver names a CPU driver, the device a GPU.
fn vulkan_key(device: &crate::probe::vulkan::VulkanDevice) -> String {
    let what = if device.kind == "cpu" {
        &device.driver_name
    } else {
        &device.name
    };
    format!("vulkan/{}/{}", device.kind, slug(what))
}

/// `vulkan/<kind>/<driver>` for a CPU driver (`vulkan/cpu/llvmpipe`: lavapipe says it is
/// one), `vulkan/<kind>/<device>` for a GPU (`vulkan/discrete/nvidia-geforce-rtx-4090`).
/// Silicon id: the key, device name, vendor, driver name and version; the hardware id
/// leaves the driver's version out.
pub fn vulkan(devices: &[crate::probe::vulkan::VulkanDevice], simulated: bool) -> Vec<Generation> {
    devices
        .iter()
        .map(|device| {
            let key = vulkan_key(device);
            let (silicon_id, hardware_id) = silicon_and_hardware_ids(
                &[
                    ("key", key.clone()),
                    ("name", device.name.clone()),
                    ("vendor_id", device.vendor_id.clone()),
                    ("driver", device.driver_name.clone()),
                    ("driver_info", device.driver_info.clone()),
                ],
                &["driver_info"],
            );
            let kind = if device.kind == "cpu" {
                "a CPU driver: its times are this CPU's"
            } else {
                "a GPU"
            };
            Generation {
                emulator: None,
                silicon_id,
                hardware_id,
                description: format!(
                    "{} ({}, {kind}; Vulkan {})",
                    device.name, device.driver_info, device.api_version
                ),
                key,
                backend: "vulkan".into(),
                vendor: device.vendor().into(),
                simulated,
                toolchain: Default::default(),
            }
        })
        .collect()
}

/// `cuda/sm_XY`. Silicon id: the key, product name, SM count, memory, driver, power limit,
/// application and maximum SM clocks, MIG mode.
pub fn nvidia(gpus: &[NvidiaGpu], simulated: bool) -> Vec<Generation> {
    gpus.iter()
        .filter_map(|gpu| {
            let sm = gpu.compute_capability.as_ref()?;
            let key = format!("cuda/{sm}");
            let (silicon_id, hardware_id) = silicon_and_hardware_ids(
                &[
                    ("key", key.clone()),
                    ("name", gpu.name.clone()),
                    ("sm_count", text(gpu.sm_count)),
                    ("memory_total_mib", text(gpu.memory_total_mib)),
                    ("driver", text(gpu.driver_version.as_deref())),
                    (
                        "power_limit_w",
                        text(gpu.power_limit_w.map(|w| format!("{w:.0}"))),
                    ),
                    (
                        "applications_graphics_clock_mhz",
                        text(gpu.applications_graphics_clock_mhz),
                    ),
                    ("max_sm_clock_mhz", text(gpu.max_sm_clock_mhz)),
                    ("mig_mode", text(gpu.mig_mode.as_deref())),
                ],
                &["driver"],
            );
            Some(Generation {
                emulator: None,
                silicon_id,
                hardware_id,
                description: format!(
                    "{} ({sm}, driver {})",
                    gpu.name,
                    gpu.driver_version.as_deref().unwrap_or("?")
                ),
                key,
                backend: "cuda".into(),
                vendor: "nvidia".into(),
                simulated,
                toolchain: Default::default(),
            })
        })
        .collect()
}

/// `hip/gfxNNN`. Silicon id: the key, marketing name, compute units, wavefront size,
/// maximum clock, HSA runtime (ROCr) and ROCk driver versions.
pub fn amd(gpus: &[AmdGpu], simulated: bool) -> Vec<Generation> {
    gpus.iter()
        .map(|gpu| {
            let key = format!("hip/{}", gpu.gfx_target);
            let name = gpu
                .marketing_name
                .clone()
                .unwrap_or_else(|| gpu.gfx_target.clone());
            let (silicon_id, hardware_id) = silicon_and_hardware_ids(
                &[
                    ("key", key.clone()),
                    ("name", name.clone()),
                    ("compute_units", text(gpu.compute_units)),
                    ("wavefront_size", text(gpu.wavefront_size)),
                    ("max_clock_mhz", text(gpu.max_clock_mhz)),
                    ("runtime_version", text(gpu.runtime_version.as_deref())),
                    (
                        "rock_module_version",
                        text(gpu.rock_module_version.as_deref()),
                    ),
                ],
                &["runtime_version", "rock_module_version"],
            );
            Generation {
                emulator: None,
                silicon_id,
                hardware_id,
                description: format!(
                    "{name} ({}, {} CUs)",
                    gpu.gfx_target,
                    gpu.compute_units
                        .map_or_else(|| "?".to_owned(), |n| n.to_string())
                ),
                key,
                backend: "hip".into(),
                vendor: "amd".into(),
                simulated,
                toolchain: Default::default(),
            }
        })
        .collect()
}

/// `sycl/<arch>`. Silicon id: the key, device name, driver, device (IP) version, compute
/// units, maximum clock. A device whose architecture the table in `probe::intel` does not
/// know gets no generation (it stays in the inventory): one `sycl/unknown` key would put
/// unrelated devices in one report table.
pub fn intel(gpus: &[IntelGpu], simulated: bool) -> Vec<Generation> {
    gpus.iter()
        .filter(|gpu| gpu.architecture != IntelArch::Unknown)
        .map(|gpu| {
            let arch = gpu.architecture.name();
            let key = format!("sycl/{arch}");
            let (silicon_id, hardware_id) = silicon_and_hardware_ids(
                &[
                    ("key", key.clone()),
                    ("name", gpu.name.clone()),
                    ("driver", text(gpu.driver_version.as_deref())),
                    ("device_version", text(gpu.device_version.as_deref())),
                    ("compute_units", text(gpu.compute_units)),
                    ("max_clock_mhz", text(gpu.max_clock_mhz)),
                ],
                &["driver"],
            );
            Generation {
                emulator: None,
                silicon_id,
                hardware_id,
                description: format!("{} ({arch})", gpu.name),
                key,
                backend: "sycl".into(),
                vendor: "intel".into(),
                simulated,
                toolchain: Default::default(),
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
    use crate::probe::cpu::{apply_cpu_sysfs, CpuFactSource, CpuSysfsText};

    fn recorded(host: &str) -> HardwareInventory {
        HardwareInventory::from_dir(
            &std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/probes"))
                .join(host),
        )
    }

    fn one<T: Clone>(probe: &crate::probe::Probe<Vec<T>>) -> T {
        probe.found().expect("recorded backend found")[0].clone()
    }

    #[test]
    fn nvidia_hosts_differing_only_in_driver_do_not_pool() {
        let gpu = one(&recorded("h100-sxm5-della-pli").nvidia);
        let same = gpu.clone();
        let mut newer_driver = gpu.clone();
        newer_driver.driver_version = Some("550.54.15".into());
        let mut capped = gpu.clone();
        capped.power_limit_w = Some(500.0);
        let mut locked_clock = gpu.clone();
        locked_clock.applications_graphics_clock_mhz = Some(1755);
        let mut counted = gpu.clone();
        counted.sm_count = Some(132);
        let id = |g| nvidia(&[g], false)[0].silicon_id.clone();
        let hardware = |g| nvidia(&[g], false)[0].hardware_id.clone();
        let base = id(gpu.clone());
        assert_eq!(base, id(same));
        for other in [
            newer_driver.clone(),
            capped.clone(),
            locked_clock.clone(),
            counted.clone(),
        ] {
            assert_ne!(base, id(other));
        }
        // The hardware id leaves the driver out (it is in the toolchain): a driver bump keeps
        // the run's history; the hardware and its settings still do not pool.
        let base_hardware = hardware(gpu);
        assert_ne!(
            base_hardware, base,
            "the silicon id has the driver, the hardware id not"
        );
        assert_eq!(base_hardware, hardware(newer_driver));
        for other in [capped, locked_clock, counted] {
            assert_ne!(base_hardware, hardware(other));
        }
    }

    #[test]
    fn amd_hosts_differing_only_in_driver_or_runtime_do_not_pool() {
        let gpu = one(&recorded("mi300x-x4-epyc9474f").amd);
        let mut runtime = gpu.clone();
        runtime.runtime_version = Some("1.14".into());
        let mut driver = gpu.clone();
        driver.rock_module_version = Some("6.7.0".into());
        let mut fewer_cus = gpu.clone();
        fewer_cus.compute_units = Some(228);
        let id = |g| amd(&[g], false)[0].silicon_id.clone();
        let hardware = |g| amd(&[g], false)[0].hardware_id.clone();
        let base = id(gpu.clone());
        assert_eq!(base, id(gpu.clone()));
        for other in [runtime.clone(), driver.clone(), fewer_cus.clone()] {
            assert_ne!(base, id(other));
        }
        let base_hardware = hardware(gpu);
        assert_eq!(base_hardware, hardware(runtime));
        assert_eq!(base_hardware, hardware(driver));
        assert_ne!(base_hardware, hardware(fewer_cus));
    }

    #[test]
    fn intel_hosts_differing_only_in_driver_do_not_pool() {
        let gpu = one(&recorded("intel-flex140-dg2-ocp").intel);
        let mut driver = gpu.clone();
        driver.driver_version = Some("23.05.25593.18".into());
        let id = |g| intel(&[g], false)[0].silicon_id.clone();
        let hardware = |g| intel(&[g], false)[0].hardware_id.clone();
        assert_eq!(id(gpu.clone()), id(gpu.clone()));
        assert_ne!(id(gpu.clone()), id(driver.clone()));
        assert_eq!(hardware(gpu), hardware(driver));
    }

    #[test]
    fn an_intel_gpu_of_unknown_architecture_gets_no_generation() {
        let gpus = recorded("intel-arc-a770-llamacpp-doc")
            .intel
            .found()
            .unwrap()
            .clone();
        assert_eq!(gpus[1].name, "Intel(R) UHD Graphics 730");
        assert_eq!(gpus[1].architecture, IntelArch::Unknown);
        let keys: Vec<String> = intel(&gpus, false).into_iter().map(|g| g.key).collect();
        assert_eq!(keys, ["sycl/dg2"]);
    }

    #[test]
    fn cpu_hosts_differing_only_in_governor_boost_or_sve_length_do_not_pool() {
        let genoa = recorded("epyc9r14-genoa-m7a").cpu.found().unwrap().clone();
        let with = |mut info: CpuInfo, text: CpuSysfsText| {
            apply_cpu_sysfs(&mut info, &text, CpuFactSource::Live);
            cpu(&info, false).silicon_id
        };
        let performance = CpuSysfsText {
            scaling_governor: Some("performance".into()),
            boost: Some("1".into()),
            ..CpuSysfsText::default()
        };
        let base = with(genoa.clone(), performance.clone());
        assert_eq!(base, with(genoa.clone(), performance.clone()));
        let powersave = CpuSysfsText {
            scaling_governor: Some("powersave".into()),
            ..performance.clone()
        };
        let no_boost = CpuSysfsText {
            boost: Some("0".into()),
            ..performance.clone()
        };
        assert_ne!(base, with(genoa.clone(), powersave.clone()));
        assert_ne!(base, with(genoa.clone(), no_boost));
        // A CPU's settings are hardware: its hardware id is its silicon id.
        let mut governed = genoa.clone();
        apply_cpu_sysfs(&mut governed, &powersave, CpuFactSource::Live);
        let generation = cpu(&governed, false);
        assert_eq!(generation.hardware_id, generation.silicon_id);
        // The key does not change with the governor: the same generation, another silicon.
        assert_eq!(cpu(&genoa, false).key, "cpu/x86-64-v4/zen4");

        let grace = recorded("grace-neoverse-v2").cpu.found().unwrap().clone();
        let vl = |bytes: &str| CpuSysfsText {
            sve_default_vector_length: Some(bytes.into()),
            ..CpuSysfsText::default()
        };
        assert_ne!(with(grace.clone(), vl("16")), with(grace.clone(), vl("32")));
        assert_eq!(with(grace.clone(), vl("16")), with(grace, vl("16")));
    }

    #[test]
    fn silicon_fields_are_named_so_values_cannot_shift_between_them() {
        let a = silicon_id(&[("a", "1".into()), ("b", String::new())]);
        let b = silicon_id(&[("a", String::new()), ("b", "1".into())]);
        assert_ne!(a, b);
        assert_eq!(a.len(), 16);
    }

    #[test]
    fn microarchitecture_names_become_key_segments() {
        assert_eq!(slug("Zen 4"), "zen4");
        assert_eq!(slug("Sapphire Rapids"), "sapphire-rapids");
        assert_eq!(slug("Neoverse V2"), "neoverse-v2");
        assert_eq!(slug("Neoverse-N1"), "neoverse-n1");
    }
}
