//! Parses `/proc/cpuinfo` in its x86 and ARM forms into identity, core counts, ISA features
//! that matter for benchmarking (x86-64 levels, AVX-512, AMX, NEON, SVE) and a
//! microarchitecture name from [`super::uarch`]; adds what `/proc/cpuinfo` does not say
//! (frequency governor, boost, SVE vector length) from the sysfs/procfs files that do.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::outcome::{key_value, Probe};
use super::uarch;

/// `/proc/cpuinfo`, parsed, or why it could not be read.
pub type CpuProbe = Probe<CpuInfo>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CpuArch {
    X86_64,
    Aarch64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct X86Ident {
    pub family: u32,
    pub model: u32,
    pub stepping: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArmIdent {
    pub implementer: u32,
    pub part: u32,
    pub variant: u32,
    pub revision: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuInfo {
    pub arch: CpuArch,
    /// `vendor_id` on x86; the implementer's name on ARM.
    pub vendor: String,
    pub model_name: Option<String>,
    pub x86: Option<X86Ident>,
    pub arm: Option<ArmIdent>,
    /// Number of `processor` blocks in the text.
    pub logical_cpus: usize,
    /// x86: distinct (physical id, core id) pairs; ARM: processor count.
    pub physical_cores: usize,
    /// x86 `cpu cores` (per package), when given.
    pub cores_per_package: Option<u32>,
    /// x86 `siblings` (logical CPUs per package), when given.
    pub siblings_per_package: Option<u32>,
    /// x86: siblings > cpu cores. ARM: false (server ARM cores have no SMT).
    pub smt: bool,
    pub isa: IsaFeatures,
    pub microarchitecture: String,
    /// Governor and boost state: not in `/proc/cpuinfo`; filled by [`apply_cpu_sysfs`].
    #[serde(default)]
    pub frequency: CpuFrequency,
}

/// The frequency policy the host runs under: two hosts with the same CPU but a different
/// governor or boost setting do not measure alike.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuFrequency {
    /// `scaling_governor` of cpu0 (`performance`, `powersave`, `schedutil`, ...).
    pub governor: Option<String>,
    /// Why the governor is unknown.
    pub governor_note: Option<String>,
    /// Whether turbo/boost is allowed.
    pub boost_enabled: Option<bool>,
    /// The file the boost state came from: `cpufreq/boost`, or `intel_pstate/no_turbo`
    /// (inverted: `1` means boost off).
    pub boost_source: Option<String>,
    /// Why the boost state is unknown.
    pub boost_note: Option<String>,
    /// `amd_pstate/status` (`active`, `passive`, `guided`), as information.
    pub amd_pstate_status: Option<String>,
}

/// Where [`CpuSysfsText`] was read from; decides what a missing file means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuFactSource {
    /// The running host's sysfs/procfs: a missing file means the kernel does not expose it.
    Live,
    /// A recorded probe set (`--probes DIR`): a missing file means it was not recorded.
    Recorded,
}

/// The raw text of the optional CPU files, `None` where the file is absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuSysfsText {
    /// [`SCALING_GOVERNOR_PATH`] / `scaling_governor.txt`.
    pub scaling_governor: Option<String>,
    /// [`CPUFREQ_BOOST_PATH`] / `boost.txt`.
    pub boost: Option<String>,
    /// [`INTEL_PSTATE_NO_TURBO_PATH`] / `no_turbo.txt`.
    pub no_turbo: Option<String>,
    /// [`AMD_PSTATE_STATUS_PATH`] / `amd_pstate_status.txt`.
    pub amd_pstate_status: Option<String>,
    /// [`SVE_DEFAULT_VECTOR_LENGTH_PATH`] / `sve_default_vector_length.txt`.
    pub sve_default_vector_length: Option<String>,
}

pub const SCALING_GOVERNOR_PATH: &str = "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor";
pub const CPUFREQ_BOOST_PATH: &str = "/sys/devices/system/cpu/cpufreq/boost";
pub const INTEL_PSTATE_NO_TURBO_PATH: &str = "/sys/devices/system/cpu/intel_pstate/no_turbo";
pub const AMD_PSTATE_STATUS_PATH: &str = "/sys/devices/system/cpu/amd_pstate/status";
/// In bytes, for new processes (Linux `Documentation/arch/arm64/sve.rst`).
pub const SVE_DEFAULT_VECTOR_LENGTH_PATH: &str = "/proc/sys/abi/sve_default_vector_length";

impl CpuSysfsText {
    /// Reads the running host's files.
    pub fn live() -> CpuSysfsText {
        let read = |path: &str| std::fs::read_to_string(path).ok();
        CpuSysfsText {
            scaling_governor: read(SCALING_GOVERNOR_PATH),
            boost: read(CPUFREQ_BOOST_PATH),
            no_turbo: read(INTEL_PSTATE_NO_TURBO_PATH),
            amd_pstate_status: read(AMD_PSTATE_STATUS_PATH),
            sve_default_vector_length: read(SVE_DEFAULT_VECTOR_LENGTH_PATH),
        }
    }

    /// Reads a recorded probe set's copies of those files.
    pub fn recorded(dir: &std::path::Path) -> CpuSysfsText {
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
        CpuSysfsText {
            scaling_governor: read("scaling_governor.txt"),
            boost: read("boost.txt"),
            no_turbo: read("no_turbo.txt"),
            amd_pstate_status: read("amd_pstate_status.txt"),
            sve_default_vector_length: read("sve_default_vector_length.txt"),
        }
    }
}

/// Fills the governor, boost state and SVE vector length that `/proc/cpuinfo` lacks.
pub fn apply_cpu_sysfs(info: &mut CpuInfo, text: &CpuSysfsText, source: CpuFactSource) {
    let value = |raw: &Option<String>| {
        raw.as_deref()
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    let missing = |what: &str, recorded_name: &str| match source {
        CpuFactSource::Live => format!("{what} not exposed (VM or no cpufreq driver)"),
        CpuFactSource::Recorded => {
            format!("{what} not recorded (no {recorded_name} in the probe set)")
        }
    };
    let frequency = &mut info.frequency;
    frequency.governor = value(&text.scaling_governor);
    frequency.governor_note = frequency
        .governor
        .is_none()
        .then(|| missing("scaling governor", "scaling_governor.txt"));
    let boost = value(&text.boost).and_then(|v| flag(&v).map(|on| (on, "cpufreq/boost")));
    let no_turbo = value(&text.no_turbo)
        .and_then(|v| flag(&v).map(|no_turbo| (!no_turbo, "intel_pstate/no_turbo")));
    match boost.or(no_turbo) {
        Some((enabled, file)) => {
            frequency.boost_enabled = Some(enabled);
            frequency.boost_source = Some(file.to_owned());
            frequency.boost_note = None;
        }
        None => {
            frequency.boost_enabled = None;
            frequency.boost_source = None;
            frequency.boost_note = Some(missing("boost state", "boost.txt or no_turbo.txt"));
        }
    }
    frequency.amd_pstate_status = value(&text.amd_pstate_status);

    if info.isa.sve {
        let bits = value(&text.sve_default_vector_length)
            .and_then(|v| parse_sve_default_vector_length(&v));
        info.isa.sve_vector_length_bits = bits;
        info.isa.sve_vector_length_note = match (bits, source) {
            (Some(_), _) => None,
            (None, CpuFactSource::Live) => Some(format!(
                "the SVE vector length is not in /proc/cpuinfo and {SVE_DEFAULT_VECTOR_LENGTH_PATH} \
                 is not readable"
            )),
            (None, CpuFactSource::Recorded) => Some(
                "the SVE vector length is not in /proc/cpuinfo and the probe set has no \
                 sve_default_vector_length.txt"
                    .to_owned(),
            ),
        };
    }
}

/// `/proc/sys/abi/sve_default_vector_length` holds bytes (`32` on a 256-bit Neoverse V1);
/// returns bits. `None` unless it is a valid SVE length (a multiple of 16 bytes, 16..=256).
pub fn parse_sve_default_vector_length(text: &str) -> Option<u32> {
    let bytes: u32 = text.trim().parse().ok()?;
    ((16..=256).contains(&bytes) && bytes.is_multiple_of(16)).then_some(bytes * 8)
}

/// A sysfs `0`/`1` flag.
fn flag(value: &str) -> Option<bool> {
    match value {
        "1" => Some(true),
        "0" => Some(false),
        _ => None,
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IsaFeatures {
    /// Highest x86-64 micro-architecture level (1-4) the flags satisfy.
    pub x86_64_level: Option<u8>,
    pub avx2: bool,
    pub fma: bool,
    pub avx512f: bool,
    pub avx512bw: bool,
    pub avx512dq: bool,
    pub avx512cd: bool,
    pub avx512vl: bool,
    /// `avx512_vnni`.
    pub avx512_vnni: bool,
    /// `avx_vnni` (VEX-encoded, e.g. Alder Lake).
    pub avx_vnni: bool,
    pub amx_tile: bool,
    pub amx_bf16: bool,
    pub amx_int8: bool,
    /// ARM `asimd`.
    pub neon: bool,
    pub sve: bool,
    pub sve2: bool,
    /// The default SVE vector length for new processes, in bits. Not in `/proc/cpuinfo`:
    /// [`apply_cpu_sysfs`] reads `/proc/sys/abi/sve_default_vector_length` (bytes).
    pub sve_vector_length_bits: Option<u32>,
    /// Why the SVE vector length is unknown, when SVE is present.
    pub sve_vector_length_note: Option<String>,
}

const X86_64_V1: &[&str] = &[
    "lm", "cmov", "cx8", "fpu", "fxsr", "mmx", "syscall", "sse", "sse2",
];
const X86_64_V2: &[&str] = &["cx16", "lahf_lm", "popcnt", "sse4_1", "sse4_2", "ssse3"];
/// `lzcnt` is reported as `abm` in `/proc/cpuinfo`.
const X86_64_V3: &[&str] = &[
    "avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave",
];
const X86_64_V4: &[&str] = &["avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"];

const SVE_LENGTH_NOTE: &str = "the SVE vector length is not in /proc/cpuinfo; read \
                               /proc/sys/abi/sve_default_vector_length or use prctl(PR_SVE_GET_VL)";

/// Parses `/proc/cpuinfo` text; absent when it holds no processor block.
pub fn parse_cpuinfo(text: &str) -> CpuProbe {
    let blocks = blocks(text);
    let processors: Vec<&Vec<(&str, &str)>> = blocks
        .iter()
        .filter(|block| field(block, "processor").is_some())
        .collect();
    let Some(first) = processors.first() else {
        return Probe::absent("no processor entries in /proc/cpuinfo output");
    };
    let logical_cpus = processors.len();
    if let Some(vendor) = field(first, "vendor_id") {
        let number = |key| field(first, key).and_then(|v| v.parse::<u32>().ok());
        let ident = X86Ident {
            family: number("cpu family").unwrap_or(0),
            model: number("model").unwrap_or(0),
            stepping: number("stepping").unwrap_or(0),
        };
        let cores: BTreeSet<(&str, &str)> = processors
            .iter()
            .map(|b| {
                (
                    field(b, "physical id").unwrap_or(""),
                    field(b, "core id").unwrap_or(""),
                )
            })
            .collect();
        let cores_per_package = number("cpu cores");
        let siblings_per_package = number("siblings");
        let flags: BTreeSet<&str> = field(first, "flags")
            .unwrap_or("")
            .split_whitespace()
            .collect();
        Probe::Found(CpuInfo {
            arch: CpuArch::X86_64,
            vendor: vendor.to_owned(),
            model_name: field(first, "model name").map(str::to_owned),
            microarchitecture: uarch::x86_microarchitecture(
                vendor,
                ident.family,
                ident.model,
                ident.stepping,
            ),
            x86: Some(ident),
            arm: None,
            logical_cpus,
            physical_cores: cores.len(),
            cores_per_package,
            siblings_per_package,
            smt: matches!((siblings_per_package, cores_per_package), (Some(s), Some(c)) if s > c),
            isa: x86_features(&flags),
            frequency: CpuFrequency::default(),
        })
    } else if let Some(implementer) = field(first, "CPU implementer").and_then(hex) {
        let number = |key| field(first, key).and_then(hex).unwrap_or(0);
        let ident = ArmIdent {
            implementer,
            part: number("CPU part"),
            variant: number("CPU variant"),
            revision: number("CPU revision"),
        };
        let features: BTreeSet<&str> = field(first, "Features")
            .unwrap_or("")
            .split_whitespace()
            .collect();
        let sve = features.contains("sve");
        Probe::Found(CpuInfo {
            arch: CpuArch::Aarch64,
            vendor: uarch::arm_implementer_name(implementer),
            model_name: field(first, "model name").map(str::to_owned),
            microarchitecture: uarch::arm_microarchitecture(ident.implementer, ident.part),
            x86: None,
            arm: Some(ident),
            logical_cpus,
            physical_cores: logical_cpus,
            cores_per_package: None,
            siblings_per_package: None,
            smt: false,
            isa: IsaFeatures {
                neon: features.contains("asimd"),
                sve,
                sve2: features.contains("sve2"),
                sve_vector_length_bits: None,
                sve_vector_length_note: sve.then(|| SVE_LENGTH_NOTE.to_owned()),
                ..IsaFeatures::default()
            },
            frequency: CpuFrequency::default(),
        })
    } else {
        Probe::absent("/proc/cpuinfo has neither vendor_id (x86) nor CPU implementer (ARM)")
    }
}

fn x86_features(flags: &BTreeSet<&str>) -> IsaFeatures {
    let all = |set: &[&str]| set.iter().all(|flag| flags.contains(flag));
    let level = [X86_64_V1, X86_64_V2, X86_64_V3, X86_64_V4]
        .iter()
        .take_while(|set| all(set))
        .count();
    let has = |flag: &str| flags.contains(flag);
    IsaFeatures {
        x86_64_level: (level > 0).then_some(level as u8),
        avx2: has("avx2"),
        fma: has("fma"),
        avx512f: has("avx512f"),
        avx512bw: has("avx512bw"),
        avx512dq: has("avx512dq"),
        avx512cd: has("avx512cd"),
        avx512vl: has("avx512vl"),
        avx512_vnni: has("avx512_vnni"),
        avx_vnni: has("avx_vnni"),
        amx_tile: has("amx_tile"),
        amx_bf16: has("amx_bf16"),
        amx_int8: has("amx_int8"),
        ..IsaFeatures::default()
    }
}

/// Blank-line separated blocks of `key : value` pairs.
fn blocks(text: &str) -> Vec<Vec<(&str, &str)>> {
    let mut out = vec![Vec::new()];
    for line in text.lines() {
        if line.trim().is_empty() {
            if out.last().is_some_and(|b| !b.is_empty()) {
                out.push(Vec::new());
            }
        } else if let Some(pair) = key_value(line) {
            if pair.0 == "processor" && out.last().is_some_and(|b| !b.is_empty()) {
                out.push(Vec::new());
            }
            if let Some(block) = out.last_mut() {
                block.push(pair);
            }
        }
    }
    out
}

fn field<'a>(block: &[(&'a str, &'a str)], key: &str) -> Option<&'a str> {
    block.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

fn hex(value: &str) -> Option<u32> {
    let digits = value.strip_prefix("0x").unwrap_or(value);
    u32::from_str_radix(digits, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> CpuInfo {
        match parse_cpuinfo(text) {
            Probe::Found(info) => info,
            Probe::Absent { reason } => panic!("absent: {reason}"),
        }
    }

    #[test]
    fn genoa_is_zen4_with_avx512_and_level_4() {
        let cpu = parse(include_str!(
            "../../../fixtures/probes/epyc9r14-genoa-m7a/cpuinfo.txt"
        ));
        assert_eq!(cpu.arch, CpuArch::X86_64);
        assert_eq!(cpu.vendor, "AuthenticAMD");
        assert_eq!(cpu.model_name.as_deref(), Some("AMD EPYC 9R14"));
        assert_eq!(
            cpu.x86,
            Some(X86Ident {
                family: 25,
                model: 17,
                stepping: 1
            })
        );
        assert_eq!(cpu.microarchitecture, "Zen 4");
        assert_eq!(cpu.isa.x86_64_level, Some(4));
        assert!(cpu.isa.avx512f && cpu.isa.avx512bw && cpu.isa.avx512vl && cpu.isa.avx512_vnni);
        assert!(!cpu.isa.amx_tile);
        assert_eq!(
            (cpu.cores_per_package, cpu.siblings_per_package),
            (Some(32), Some(32))
        );
        assert!(!cpu.smt);
        assert_eq!((cpu.logical_cpus, cpu.physical_cores), (1, 1));
    }

    #[test]
    fn sapphire_rapids_has_amx_and_smt() {
        let cpu = parse(include_str!(
            "../../../fixtures/probes/xeon8480c-sapphirerapids-h100x8/cpuinfo.txt"
        ));
        assert_eq!(
            cpu.x86,
            Some(X86Ident {
                family: 6,
                model: 143,
                stepping: 8
            })
        );
        assert_eq!(cpu.microarchitecture, "Sapphire Rapids");
        assert_eq!(cpu.isa.x86_64_level, Some(4));
        assert!(cpu.isa.amx_tile && cpu.isa.amx_bf16 && cpu.isa.amx_int8);
        assert!(cpu.isa.avx512_vnni);
        assert!(cpu.smt, "siblings 112 > cpu cores 56");
        assert_eq!(cpu.logical_cpus, 1);
    }

    #[test]
    fn granite_rapids_is_level_4_with_amx() {
        let cpu = parse(include_str!(
            "../../../fixtures/probes/xeon6972p-graniterapids/cpuinfo.txt"
        ));
        assert_eq!(
            cpu.x86,
            Some(X86Ident {
                family: 6,
                model: 173,
                stepping: 1
            })
        );
        assert_eq!(cpu.microarchitecture, "Granite Rapids");
        assert_eq!(cpu.isa.x86_64_level, Some(4));
        assert!(cpu.isa.amx_tile && cpu.isa.amx_int8 && cpu.isa.amx_bf16);
        assert!(!cpu.smt);
    }

    #[test]
    fn alder_lake_is_level_3_without_avx512() {
        let cpu = parse(include_str!(
            "../../../fixtures/probes/core-i5-12400-alderlake/cpuinfo.txt"
        ));
        assert_eq!(
            cpu.model_name.as_deref(),
            Some("12th Gen Intel(R) Core(TM) i5-12400")
        );
        assert_eq!(
            cpu.x86,
            Some(X86Ident {
                family: 6,
                model: 151,
                stepping: 5
            })
        );
        assert_eq!(cpu.microarchitecture, "Alder Lake");
        assert_eq!(cpu.isa.x86_64_level, Some(3));
        assert!(cpu.isa.avx2 && cpu.isa.fma && cpu.isa.avx_vnni);
        assert!(!cpu.isa.avx512f && !cpu.isa.avx512_vnni);
        assert!(cpu.smt, "siblings 12 > cpu cores 6");
        // The capture keeps 2 blocks: processor 0 and 1, both core id 0 (SMT siblings).
        assert_eq!((cpu.logical_cpus, cpu.physical_cores), (2, 1));
    }

    #[test]
    fn arrow_lake_is_level_3_without_smt() {
        let cpu = parse(include_str!(
            "../../../fixtures/probes/core-ultra9-285-arrowlake/cpuinfo.txt"
        ));
        assert_eq!(
            cpu.x86,
            Some(X86Ident {
                family: 6,
                model: 198,
                stepping: 2
            })
        );
        assert_eq!(cpu.microarchitecture, "Arrow Lake");
        assert_eq!(cpu.isa.x86_64_level, Some(3));
        assert!(cpu.isa.avx_vnni && !cpu.isa.avx512f);
        assert!(!cpu.smt);
    }

    #[test]
    fn grace_is_neoverse_v2_with_sve2() {
        let cpu = parse(include_str!(
            "../../../fixtures/probes/grace-neoverse-v2/cpuinfo.txt"
        ));
        assert_eq!(cpu.arch, CpuArch::Aarch64);
        assert_eq!(cpu.vendor, "ARM");
        assert_eq!(
            cpu.arm,
            Some(ArmIdent {
                implementer: 0x41,
                part: 0xd4f,
                variant: 0,
                revision: 0
            })
        );
        assert_eq!(cpu.microarchitecture, "Neoverse V2");
        assert!(cpu.isa.neon && cpu.isa.sve && cpu.isa.sve2);
        assert_eq!(cpu.isa.sve_vector_length_bits, None);
        assert!(cpu.isa.sve_vector_length_note.is_some());
        assert_eq!(cpu.isa.x86_64_level, None);
        assert_eq!((cpu.logical_cpus, cpu.physical_cores), (1, 1));
    }

    #[test]
    fn graviton3_is_neoverse_v1_with_sve_only() {
        let cpu = parse(include_str!(
            "../../../fixtures/probes/graviton3-neoverse-v1/cpuinfo.txt"
        ));
        assert_eq!(
            cpu.arm,
            Some(ArmIdent {
                implementer: 0x41,
                part: 0xd40,
                variant: 1,
                revision: 1
            })
        );
        assert_eq!(cpu.microarchitecture, "Neoverse V1");
        assert!(cpu.isa.neon && cpu.isa.sve && !cpu.isa.sve2);
    }

    #[test]
    fn neoverse_v3ae_has_sve2() {
        let cpu = parse(include_str!(
            "../../../fixtures/probes/neoverse-v3ae/cpuinfo.txt"
        ));
        assert_eq!(cpu.arm.as_ref().map(|a| a.part), Some(0xd83));
        assert_eq!(cpu.microarchitecture, "Neoverse V3AE");
        assert!(cpu.isa.sve && cpu.isa.sve2);
    }

    #[test]
    fn graviton2_and_altra_are_neoverse_n1_without_sve() {
        for text in [
            include_str!("../../../fixtures/probes/graviton2-neoverse-n1/cpuinfo.txt"),
            include_str!("../../../fixtures/probes/ampere-altra-neoverse-n1/cpuinfo.txt"),
        ] {
            let cpu = parse(text);
            assert_eq!(cpu.microarchitecture, "Neoverse N1");
            assert!(cpu.isa.neon && !cpu.isa.sve);
            assert_eq!(cpu.isa.sve_vector_length_note, None);
        }
        let altra = parse(include_str!(
            "../../../fixtures/probes/ampere-altra-neoverse-n1/cpuinfo.txt"
        ));
        assert_eq!((altra.logical_cpus, altra.physical_cores), (2, 2));
    }

    const GRACE: &str = include_str!("../../../fixtures/probes/grace-neoverse-v2/cpuinfo.txt");
    const GENOA: &str = include_str!("../../../fixtures/probes/epyc9r14-genoa-m7a/cpuinfo.txt");

    #[test]
    fn sve_default_vector_length_is_bytes_and_becomes_bits() {
        assert_eq!(parse_sve_default_vector_length("32\n"), Some(256));
        assert_eq!(parse_sve_default_vector_length("16"), Some(128));
        assert_eq!(parse_sve_default_vector_length("256"), Some(2048));
        // Not a multiple of 128 bits, out of range, or not a number.
        for bad in ["24", "0", "512", "", "sixteen"] {
            assert_eq!(parse_sve_default_vector_length(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn sve_vector_length_comes_from_the_procfs_file() {
        let mut cpu = parse(GRACE);
        let text = CpuSysfsText {
            sve_default_vector_length: Some("16\n".into()),
            ..CpuSysfsText::default()
        };
        apply_cpu_sysfs(&mut cpu, &text, CpuFactSource::Live);
        assert_eq!(cpu.isa.sve_vector_length_bits, Some(128));
        assert_eq!(cpu.isa.sve_vector_length_note, None);

        let mut cpu = parse(GRACE);
        apply_cpu_sysfs(&mut cpu, &CpuSysfsText::default(), CpuFactSource::Recorded);
        assert_eq!(cpu.isa.sve_vector_length_bits, None);
        assert!(cpu
            .isa
            .sve_vector_length_note
            .as_deref()
            .is_some_and(|n| n.contains("sve_default_vector_length.txt")));
    }

    #[test]
    fn an_x86_host_has_no_sve_length_even_if_the_file_is_given() {
        let mut cpu = parse(GENOA);
        let text = CpuSysfsText {
            sve_default_vector_length: Some("32".into()),
            ..CpuSysfsText::default()
        };
        apply_cpu_sysfs(&mut cpu, &text, CpuFactSource::Live);
        assert_eq!(cpu.isa.sve_vector_length_bits, None);
        assert_eq!(cpu.isa.sve_vector_length_note, None);
    }

    #[test]
    fn governor_and_boost_from_cpufreq_or_inverted_no_turbo() {
        let mut cpu = parse(GENOA);
        let text = CpuSysfsText {
            scaling_governor: Some("performance\n".into()),
            boost: Some("1\n".into()),
            amd_pstate_status: Some("active\n".into()),
            ..CpuSysfsText::default()
        };
        apply_cpu_sysfs(&mut cpu, &text, CpuFactSource::Live);
        assert_eq!(cpu.frequency.governor.as_deref(), Some("performance"));
        assert_eq!(cpu.frequency.governor_note, None);
        assert_eq!(cpu.frequency.boost_enabled, Some(true));
        assert_eq!(cpu.frequency.boost_source.as_deref(), Some("cpufreq/boost"));
        assert_eq!(cpu.frequency.amd_pstate_status.as_deref(), Some("active"));

        // intel_pstate: no_turbo = 1 means boost is off.
        let text = CpuSysfsText {
            scaling_governor: Some("powersave\n".into()),
            no_turbo: Some("1\n".into()),
            ..CpuSysfsText::default()
        };
        apply_cpu_sysfs(&mut cpu, &text, CpuFactSource::Live);
        assert_eq!(cpu.frequency.governor.as_deref(), Some("powersave"));
        assert_eq!(cpu.frequency.boost_enabled, Some(false));
        assert_eq!(
            cpu.frequency.boost_source.as_deref(),
            Some("intel_pstate/no_turbo")
        );
        assert_eq!(cpu.frequency.amd_pstate_status, None);
    }

    #[test]
    fn missing_frequency_files_are_none_with_a_reason() {
        let mut cpu = parse(GENOA);
        apply_cpu_sysfs(&mut cpu, &CpuSysfsText::default(), CpuFactSource::Live);
        assert_eq!(cpu.frequency.governor, None);
        assert_eq!(cpu.frequency.boost_enabled, None);
        assert_eq!(
            cpu.frequency.governor_note.as_deref(),
            Some("scaling governor not exposed (VM or no cpufreq driver)")
        );
        assert_eq!(
            cpu.frequency.boost_note.as_deref(),
            Some("boost state not exposed (VM or no cpufreq driver)")
        );
        apply_cpu_sysfs(&mut cpu, &CpuSysfsText::default(), CpuFactSource::Recorded);
        assert_eq!(
            cpu.frequency.governor_note.as_deref(),
            Some("scaling governor not recorded (no scaling_governor.txt in the probe set)")
        );
        // A value that is not 0/1 is not guessed at.
        let text = CpuSysfsText {
            boost: Some("yes".into()),
            ..CpuSysfsText::default()
        };
        apply_cpu_sysfs(&mut cpu, &text, CpuFactSource::Live);
        assert_eq!(cpu.frequency.boost_enabled, None);
    }

    #[test]
    fn the_live_host_has_a_governor_or_says_why_not() {
        let Probe::Found(mut cpu) =
            parse_cpuinfo(&std::fs::read_to_string("/proc/cpuinfo").unwrap())
        else {
            panic!("live /proc/cpuinfo absent")
        };
        apply_cpu_sysfs(&mut cpu, &CpuSysfsText::live(), CpuFactSource::Live);
        let f = &cpu.frequency;
        assert!(f.governor.is_some() != f.governor_note.is_some(), "{f:?}");
        assert!(f.boost_enabled.is_some() != f.boost_note.is_some(), "{f:?}");
    }

    #[test]
    fn empty_text_is_absent() {
        assert!(parse_cpuinfo("").is_absent());
        assert!(parse_cpuinfo("\n\n").is_absent());
    }
}
