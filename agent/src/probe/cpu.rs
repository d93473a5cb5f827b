//! Parses `/proc/cpuinfo` in its x86 and ARM forms into identity, core counts, ISA features
//! that matter for benchmarking (x86-64 levels, AVX-512, AMX, NEON, SVE) and a
//! microarchitecture name from [`super::uarch`].

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
    /// Not in `/proc/cpuinfo`; needs `prctl(PR_SVE_GET_VL)` or
    /// `/proc/sys/abi/sve_default_vector_length`. Left `None` here.
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

    #[test]
    fn empty_text_is_absent() {
        assert!(parse_cpuinfo("").is_absent());
        assert!(parse_cpuinfo("\n\n").is_absent());
    }
}
