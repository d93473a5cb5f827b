//! Snapshot tests of the hardware probes: every recorded probe set under `fixtures/probes/`
//! (except the GPU toolchain captures, which feed the retune parsers) replayed through
//! `HardwareInventory::from_dir`, with the generation keys and silicon ids it yields.
//!
//! Each set has one snapshot in `tests/snapshots/`, named after its directory, reviewed by
//! hand against the recorded file. A second table pins the keys each set must give, so a
//! snapshot accepted in a hurry still cannot hide a wrong key.

use std::path::{Path, PathBuf};

use abfleet_agent::generations;
use abfleet_agent::probe::HardwareInventory;
use abfleet_core::generation::Generation;
use serde::Serialize;

/// What a recorded probe set gives: the whole inventory and the generations made from it.
#[derive(Serialize)]
struct ProbeSnapshot {
    inventory: HardwareInventory,
    generations: Vec<Generation>,
}

fn probes_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/probes")
}

/// The recorded hardware probe sets: every directory but the GPU toolchain captures.
fn recorded_sets() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(probes_dir())
        .expect("fixtures/probes exists")
        .map(|entry| entry.expect("readable entry"))
        .filter(|entry| entry.path().is_dir())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        // Compiler outputs, not probe sets: read by the retuning parsers' own tests.
        .filter(|name| {
            !["toolchain-cuda-", "toolchain-hip-", "toolchain-intel-"]
                .iter()
                .any(|prefix| name.starts_with(prefix))
        })
        .collect();
    names.sort();
    names
}

fn snapshot_of(name: &str) -> ProbeSnapshot {
    let inventory = HardwareInventory::from_dir(&probes_dir().join(name));
    let generations = generations::of(&inventory, true);
    ProbeSnapshot {
        inventory,
        generations,
    }
}

/// The generation keys each recorded set must give, checked against its capture by hand:
/// x86 keys from the family/model and flags in `cpuinfo.txt`, ARM keys from `CPU part`,
/// GPU keys from the reported compute capability, the rocminfo agent `Name`, or the Intel
/// device name / PCI id.
const EXPECTED_KEYS: &[(&str, &[&str])] = &[
    ("a100-sxm4-80gb-telegraf", &["cuda/sm_80"]),
    ("ampere-altra-neoverse-n1", &["cpu/arm/neoverse-n1"]),
    ("b200x8-modal-glossary", &["cuda/sm_100"]),
    ("core-i5-12400-alderlake", &["cpu/x86-64-v3/alder-lake"]),
    ("core-ultra9-285-arrowlake", &["cpu/x86-64-v3/arrow-lake"]),
    ("epyc9r14-genoa-m7a", &["cpu/x86-64-v4/zen4"]),
    ("grace-neoverse-v2", &["cpu/arm/neoverse-v2"]),
    ("graviton2-neoverse-n1", &["cpu/arm/neoverse-n1"]),
    ("graviton3-neoverse-v1", &["cpu/arm/neoverse-v1"]),
    ("h100-sxm5-della-pli", &["cuda/sm_90"]),
    ("h100x8-cutlass-readme", &["cuda/sm_90"]),
    // xpu-smi discovery names the card only: the family from its name.
    ("intel-arc-a770-chsasank-blog", &["sycl/dg2"]),
    ("intel-arc-a770-cjmills", &["sycl/dg2"]),
    // The UHD 730 iGPU line is not in the architecture table: inventory only, no key.
    ("intel-arc-a770-llamacpp-doc", &["sycl/dg2"]),
    // IP version 20.1.0 is not a listed AOT device (bmg_g21 is 20.1.4): the family.
    ("intel-arc-b580-canonical-oneapi-packaging", &["sycl/bmg"]),
    ("intel-flex140-dg2-ocp", &["sycl/dg2"]),
    ("intel-irisxe-llamacpp-doc-windows", &["sycl/tgllp"]),
    ("intel-max1100-salehjg-blog", &["sycl/pvc"]),
    ("intel-max1550-aurora-alcf", &["sycl/pvc"]),
    ("l40s-thamada", &["cuda/sm_89"]),
    ("lavapipe-mesa-22.3.6", &["vulkan/cpu/llvmpipe"]),
    ("mi210-x4-epyc9554-rocm3246", &["hip/gfx90a"]),
    // An author's excerpt from `Agent 5` on, without the `HSA Agents` header: not read as
    // rocminfo output (a cut capture must not pass for a whole one).
    ("mi250x-lumi-csc-summerschool", &[]),
    ("mi250x-lumi-rocm4208", &["hip/gfx90a"]),
    // The two EPYC 9474F agents are CPU agents, not GPUs; the cut capture keeps one MI300X.
    ("mi300x-x4-epyc9474f", &["hip/gfx942"]),
    ("neoverse-v3ae", &["cpu/arm/neoverse-v3ae"]),
    ("rtx-pro-6000-blackwell-maxq-telegraf", &["cuda/sm_120"]),
    ("rtx4090x8-thamada", &["cuda/sm_89"]),
    ("rtx5090-laptop-gotree94", &["cuda/sm_120"]),
    // The RX 6800 XT and the Raphael iGPU (gfx1036) are both GPU agents.
    ("rx6800xt-rocm2330", &["hip/gfx1030", "hip/gfx1036"]),
    ("rx7900xtx-rocm3949", &["hip/gfx1100"]),
    (
        "rx7900xtx-rx6900xt-rocm3273",
        &["hip/gfx1100", "hip/gfx1030"],
    ),
    ("toolchain-gcc-12-debian", &[]),
    ("xeon6972p-graniterapids", &["cpu/x86-64-v4/granite-rapids"]),
    (
        "xeon8480c-sapphirerapids-h100x8",
        &["cpu/x86-64-v4/sapphire-rapids"],
    ),
];

#[test]
fn every_recorded_probe_set_matches_its_snapshot() {
    for name in recorded_sets() {
        let snapshot = snapshot_of(&name);
        insta::with_settings!({
            snapshot_path => "snapshots",
            prepend_module_to_snapshot => false,
            description => format!("HardwareInventory::from_dir(fixtures/probes/{name}) and its generations"),
        }, {
            insta::assert_json_snapshot!(name.as_str(), snapshot);
        });
    }
}

#[test]
fn every_recorded_probe_set_gives_its_expected_keys() {
    let listed: Vec<&str> = EXPECTED_KEYS.iter().map(|(name, _)| *name).collect();
    let recorded = recorded_sets();
    assert_eq!(
        recorded, listed,
        "a recorded probe set was added or removed: list its expected keys here"
    );
    for (name, expected) in EXPECTED_KEYS {
        let keys: Vec<String> = snapshot_of(name)
            .generations
            .into_iter()
            .map(|g| g.key)
            .collect();
        assert_eq!(&keys, expected, "{name}");
    }
}

#[test]
fn recorded_generations_are_simulated_and_each_has_a_silicon_id() {
    for name in recorded_sets() {
        for generation in snapshot_of(&name).generations {
            assert!(generation.simulated, "{name}: {generation:?}");
            assert_eq!(generation.silicon_id.len(), 16, "{name}: {generation:?}");
        }
    }
}

#[test]
fn hosts_of_one_generation_pool_only_with_equal_silicon() {
    // Both H100 captures are cuda/sm_90, but the query CSV names no driver, memory or power
    // limit: the same generation, and they must not pool.
    let della = snapshot_of("h100-sxm5-della-pli").generations;
    let cutlass = snapshot_of("h100x8-cutlass-readme").generations;
    assert_eq!(della[0].key, cutlass[0].key);
    assert_ne!(della[0].silicon_id, cutlass[0].silicon_id);
}

#[test]
fn sub_group_sizes_come_from_clinfo_when_it_prints_them() {
    let flex = snapshot_of("intel-flex140-dg2-ocp").inventory;
    let gpus = flex.intel.found().expect("flex 140 found");
    assert_eq!(gpus[0].sub_group_sizes, vec![8, 16, 32]);
    // The A770 clinfo capture stops before that line, and sycl-ls never prints it.
    for name in ["intel-arc-a770-cjmills", "intel-arc-a770-llamacpp-doc"] {
        let inventory = snapshot_of(name).inventory;
        let gpus = inventory.intel.found().expect("arc found");
        assert!(gpus[0].sub_group_sizes.is_empty(), "{name}");
    }
}
