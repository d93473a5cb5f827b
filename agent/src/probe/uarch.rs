//! The one table that names CPU microarchitectures from identification numbers.
//!
//! x86 is keyed by (vendor, family, model[, stepping]); ARM by (implementer, part). Each entry
//! cites where its numbers come from. Anything not listed maps to an explicit `unknown (...)`.

/// One x86 entry: model range (inclusive) within a family, optional stepping range.
struct X86Entry {
    vendor: &'static str,
    family: u32,
    models: (u32, u32),
    steppings: Option<(u32, u32)>,
    name: &'static str,
}

const fn amd(family: u32, lo: u32, hi: u32, name: &'static str) -> X86Entry {
    X86Entry {
        vendor: "AuthenticAMD",
        family,
        models: (lo, hi),
        steppings: None,
        name,
    }
}

const fn intel(model: u32, name: &'static str) -> X86Entry {
    X86Entry {
        vendor: "GenuineIntel",
        family: 6,
        models: (model, model),
        steppings: None,
        name,
    }
}

const fn intel_stepping(model: u32, lo: u32, hi: u32, name: &'static str) -> X86Entry {
    X86Entry {
        vendor: "GenuineIntel",
        family: 6,
        models: (model, model),
        steppings: Some((lo, hi)),
        name,
    }
}

#[rustfmt::skip]
const X86_TABLE: &[X86Entry] = &[
    // AMD: model ranges from the Linux kernel, arch/x86/kernel/cpu/amd.c, bsp_init_amd()
    // (the X86_FEATURE_ZEN1..ZEN5 assignment by family and model range), cross-checked with
    // AMD's Processor Programming Reference (PPR) for each family.
    amd(0x17, 0x00, 0x2f, "Zen"),       // family 17h models 00h-2Fh: Naples, Summit/Pinnacle Ridge
    amd(0x17, 0x30, 0x4f, "Zen 2"),     // 17h 30h-4Fh: Rome (31h), Castle Peak
    amd(0x17, 0x60, 0x7f, "Zen 2"),     // 17h 60h-7Fh: Renoir, Lucienne, Matisse (71h)
    amd(0x17, 0x90, 0x91, "Zen 2"),     // 17h 90h-91h: Van Gogh
    amd(0x17, 0xa0, 0xaf, "Zen 2"),     // 17h A0h-AFh: Mendocino
    amd(0x19, 0x00, 0x0f, "Zen 3"),     // 19h 00h-0Fh: Milan (01h), Chagall (08h)
    amd(0x19, 0x20, 0x5f, "Zen 3"),     // 19h 20h-5Fh: Vermeer (21h), Rembrandt, Cezanne (50h)
    amd(0x19, 0x10, 0x1f, "Zen 4"),     // 19h 10h-1Fh: Genoa (11h), Storm Peak (18h)
    amd(0x19, 0x60, 0xaf, "Zen 4"),     // 19h 60h-AFh: Raphael (61h), Phoenix (74h/78h), Bergamo/Siena (A0h-AFh)
    amd(0x1a, 0x00, 0x2f, "Zen 5"),     // 1Ah 00h-2Fh: Turin (02h), Turin dense (11h), Strix Point (24h)
    amd(0x1a, 0x40, 0x4f, "Zen 5"),     // 1Ah 40h-4Fh: Granite Ridge (44h)
    amd(0x1a, 0x60, 0x7f, "Zen 5"),     // 1Ah 60h-7Fh: Krackan Point
    // Intel family 6: model numbers from the Linux kernel, arch/x86/include/asm/intel-family.h
    // (INTEL_*), which follows the Intel SDM vol. 4 table 2-1 (CPUID signature values).
    // Model 0x55 is shared: stepping 0-4 Skylake-SP, 5-7 Cascade Lake, 10-11 Cooper Lake
    // (intel-family.h comments; Linux arch/x86/kernel/cpu/intel.c uses the same split).
    intel_stepping(0x55, 0, 4, "Skylake-SP"),
    intel_stepping(0x55, 5, 7, "Cascade Lake"),
    intel_stepping(0x55, 10, 11, "Cooper Lake"),
    intel(0x4e, "Skylake"),             // SKYLAKE_L
    intel(0x5e, "Skylake"),             // SKYLAKE
    intel(0x6a, "Ice Lake-SP"),         // ICELAKE_X
    intel(0x6c, "Ice Lake-D"),          // ICELAKE_D
    intel(0x8f, "Sapphire Rapids"),     // SAPPHIRERAPIDS_X
    intel(0xcf, "Emerald Rapids"),      // EMERALDRAPIDS_X
    intel(0xad, "Granite Rapids"),      // GRANITERAPIDS_X
    intel(0xae, "Granite Rapids-D"),    // GRANITERAPIDS_D
    intel(0xaf, "Sierra Forest"),       // ATOM_CRESTMONT_X
    intel(0x97, "Alder Lake"),          // ALDERLAKE
    intel(0x9a, "Alder Lake"),          // ALDERLAKE_L
    intel(0xb7, "Raptor Lake"),         // RAPTORLAKE
    intel(0xba, "Raptor Lake"),         // RAPTORLAKE_P
    intel(0xbf, "Raptor Lake"),         // RAPTORLAKE_S
    intel(0xaa, "Meteor Lake"),         // METEORLAKE_L
    intel(0xac, "Meteor Lake"),         // METEORLAKE
    intel(0xbd, "Lunar Lake"),          // LUNARLAKE_M
    intel(0xc6, "Arrow Lake"),          // ARROWLAKE
    intel(0xc5, "Arrow Lake"),          // ARROWLAKE_H
    intel(0xb5, "Arrow Lake"),          // ARROWLAKE_U
];

/// One ARM entry: (implementer, part) → core name, with the products known to use it.
struct ArmEntry {
    implementer: u32,
    part: u32,
    name: &'static str,
}

#[rustfmt::skip]
const ARM_TABLE: &[ArmEntry] = &[
    // Part numbers from the Linux kernel, arch/arm64/include/asm/cputype.h
    // (ARM_CPU_IMP_ARM = 0x41, ARM_CPU_PART_*; APM/Ampere = 0xc0, AMPERE_CPU_PART_*).
    ArmEntry { implementer: 0x41, part: 0xd0c, name: "Neoverse N1" },  // AWS Graviton2, Ampere Altra/Altra Max
    ArmEntry { implementer: 0x41, part: 0xd40, name: "Neoverse V1" },  // AWS Graviton3/3E
    ArmEntry { implementer: 0x41, part: 0xd49, name: "Neoverse N2" },  // Microsoft Cobalt 100
    ArmEntry { implementer: 0x41, part: 0xd4f, name: "Neoverse V2" },  // NVIDIA Grace, AWS Graviton4, Google Axion
    ArmEntry { implementer: 0x41, part: 0xd84, name: "Neoverse V3" },  // ARM_CPU_PART_NEOVERSE_V3
    ArmEntry { implementer: 0x41, part: 0xd83, name: "Neoverse V3AE" },// ARM_CPU_PART_NEOVERSE_V3AE
    ArmEntry { implementer: 0x41, part: 0xd8e, name: "Neoverse N3" },  // ARM_CPU_PART_NEOVERSE_N3
    ArmEntry { implementer: 0x41, part: 0xd0b, name: "Cortex-A76" },
    ArmEntry { implementer: 0x41, part: 0xd41, name: "Cortex-A78" },
    ArmEntry { implementer: 0xc0, part: 0xac3, name: "AmpereOne" },    // AMPERE_CPU_PART_AMPERE1
];

/// Implementer names, from the same cputype.h (`*_CPU_IMP_*`).
#[rustfmt::skip]
const ARM_IMPLEMENTERS: &[(u32, &str)] = &[
    (0x41, "ARM"), (0x42, "Broadcom"), (0x43, "Cavium"), (0x46, "Fujitsu"),
    (0x48, "HiSilicon"), (0x4e, "NVIDIA"), (0x51, "Qualcomm"), (0x61, "Apple"),
    (0xc0, "Ampere"),
];

/// Names an x86 microarchitecture; `unknown (family X model Y)` when not in the table.
pub fn x86_microarchitecture(vendor: &str, family: u32, model: u32, stepping: u32) -> String {
    X86_TABLE
        .iter()
        .find(|entry| {
            entry.vendor == vendor
                && entry.family == family
                && (entry.models.0..=entry.models.1).contains(&model)
                && entry
                    .steppings
                    .is_none_or(|(lo, hi)| (lo..=hi).contains(&stepping))
        })
        .map(|entry| entry.name.to_owned())
        .unwrap_or_else(|| format!("unknown (family {family} model {model})"))
}

/// Names an ARM core; `unknown (implementer 0x.. part 0x...)` when not in the table.
pub fn arm_microarchitecture(implementer: u32, part: u32) -> String {
    ARM_TABLE
        .iter()
        .find(|entry| entry.implementer == implementer && entry.part == part)
        .map(|entry| entry.name.to_owned())
        .unwrap_or_else(|| format!("unknown (implementer {implementer:#04x} part {part:#05x})"))
}

/// The implementer's name, or its hex code when not listed.
pub fn arm_implementer_name(implementer: u32) -> String {
    ARM_IMPLEMENTERS
        .iter()
        .find(|(code, _)| *code == implementer)
        .map(|(_, name)| (*name).to_owned())
        .unwrap_or_else(|| format!("{implementer:#04x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cascade_lake_and_skylake_sp_split_on_stepping() {
        assert_eq!(
            x86_microarchitecture("GenuineIntel", 6, 0x55, 4),
            "Skylake-SP"
        );
        assert_eq!(
            x86_microarchitecture("GenuineIntel", 6, 0x55, 7),
            "Cascade Lake"
        );
    }

    #[test]
    fn zen_generations_by_family_and_model() {
        assert_eq!(
            x86_microarchitecture("AuthenticAMD", 0x17, 0x31, 0),
            "Zen 2"
        );
        assert_eq!(
            x86_microarchitecture("AuthenticAMD", 0x19, 0x01, 1),
            "Zen 3"
        );
        assert_eq!(
            x86_microarchitecture("AuthenticAMD", 0x19, 0x11, 1),
            "Zen 4"
        );
        assert_eq!(
            x86_microarchitecture("AuthenticAMD", 0x1a, 0x02, 0),
            "Zen 5"
        );
    }

    #[test]
    fn unknown_x86_names_family_and_model() {
        assert_eq!(
            x86_microarchitecture("GenuineIntel", 6, 1, 0),
            "unknown (family 6 model 1)"
        );
    }

    #[test]
    fn unknown_arm_names_implementer_and_part() {
        assert_eq!(
            arm_microarchitecture(0x41, 0xfff),
            "unknown (implementer 0x41 part 0xfff)"
        );
    }
}
