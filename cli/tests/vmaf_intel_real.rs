//! The fork's real SYCL kernels, compiled for Intel GPUs. `abfleet local` runs the production
//! retuning spec (fixtures/jobs/vmaf-retune.toml, its fork pointed at the real fork tree of
//! fixtures/vmaf-real) with `sycl-spirv` (DPC++'s front end from the intel-sycl-rt wheel) and
//! Debian's `ocloc` on its PATH, and recorded `sycl-ls` of an Arc A770 (acm-g10) and a Data
//! Center GPU Max 1100 (pvc) standing in for the GPUs: the build turns the fork's 17 SYCL
//! sources into SPIR-V and into zebins for both devices, with and without the large register
//! file, and the report says per kernel what each got. The test dumps every zebin's `.ze_info`
//! with `llvm-objcopy` and reads `ocloc`'s own output itself, and checks the report's GRF
//! counts, SIMD widths and spills against them, and the fork's sources that do not compile
//! against the front end's own errors. Toolchains: scripts/install-intel-toolchains.

#[path = "support/retune_run.rs"]
mod retune_run;
mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use abfleet_core::finding::{Finding, Severity};
use retune_run::*;

/// (generation key, ocloc device) of the two recorded GPUs.
const DEVICES: [(&str, &str); 2] = [("sycl/dg2", "acm-g10"), ("sycl/pvc", "pvc")];

/// This test's own reading of a `.ze_info` dump: kernel symbol → (grf_count, simd_size).
fn read_ze_info(text: &str) -> BTreeMap<String, (u64, u64)> {
    let mut kernels = BTreeMap::new();
    let mut in_kernels = false;
    let mut current: Option<(String, u64, u64)> = None;
    for line in text.lines() {
        if !line.starts_with(' ') {
            in_kernels = line.starts_with("kernels:");
        }
        if !in_kernels {
            continue;
        }
        if let Some(name) = line.strip_prefix("  - name:") {
            if let Some((name, grf, simd)) = current.take() {
                kernels.insert(name, (grf, simd));
            }
            current = Some((name.trim().to_string(), 0, 0));
        } else if let Some((_, grf, simd)) = current.as_mut() {
            let field = line.trim();
            if let Some(v) = field.strip_prefix("grf_count:") {
                *grf = v.trim().parse().unwrap();
            } else if let Some(v) = field.strip_prefix("simd_size:") {
                *simd = v.trim().parse().unwrap();
            }
        }
    }
    if let Some((name, grf, simd)) = current {
        kernels.insert(name, (grf, simd));
    }
    kernels.remove("Intel_Symbol_Table_Void_Program");
    kernels
}

/// `llvm-objcopy --dump-section .ze_info` of one zebin.
fn dump_ze_info(zebin: &Path, scratch: &Path) -> String {
    let out = scratch.join(format!(
        "{}.ze_info",
        zebin.display().to_string().replace('/', "_")
    ));
    let status = Command::new("llvm-objcopy-19")
        .arg(format!("--dump-section=.ze_info={}", out.display()))
        .arg(zebin)
        .arg("/dev/null")
        .status()
        .unwrap();
    assert!(status.success(), "llvm-objcopy {}", zebin.display());
    std::fs::read_to_string(out).unwrap()
}

/// `ocloc`'s `spilled around N` lines: kernel symbol → N.
fn ocloc_spills(log: &str) -> BTreeMap<String, u64> {
    log.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("warning: kernel ")?;
            let (kernel, rest) = rest.split_once(' ')?;
            let n = rest.rsplit_once("spilled around ")?.1.trim().parse().ok()?;
            Some((kernel.to_string(), n))
        })
        .collect()
}

/// The finding of `symbol` from `source` on the device and mode `subject_end` names.
fn by_symbol<'r>(
    findings: &[&'r Finding],
    source: &str,
    symbol: &str,
    subject_end: &str,
) -> &'r Finding {
    let mut found = findings.iter().copied().filter(|f| {
        f.evidence["symbol"] == symbol
            && f.subject.starts_with(&format!("{source}::"))
            && f.subject.ends_with(subject_end)
    });
    let finding = found
        .next()
        .unwrap_or_else(|| panic!("no finding for {source} {symbol} {subject_end}"));
    assert!(
        found.next().is_none(),
        "two findings for {source} {symbol} {subject_end}"
    );
    finding
}

#[test]
fn the_forks_real_sycl_kernels_for_an_arc_a770_and_a_max_1100() {
    let bin = toolchain_bin("intel-sycl-2026.2", "sycl-spirv");
    let tmp = tempfile::tempdir().unwrap();
    let spec = real_fork_and_spec(tmp.path());
    let (text, code, report) = local_run(
        tmp.path(),
        &spec,
        &["intel-arc-a770-llamacpp-doc", "intel-max1100-salehjg-blog"],
        &[("PATH", path_with(&bin))],
    );
    // The fork's SYCL sources that do not compile are fail findings: exit 4.
    assert_eq!(code, Some(4), "{text}");
    let work_dir = tmp.path().join("work");

    let tree = build_tree_with(&work_dir, "sycl-spirv: intel-sycl-rt 2026.2.0");
    let aot = tree.join("libvmaf/build-sycl/aot");
    let build_log = std::fs::read_to_string(tree.parent().unwrap().join("build.log")).unwrap();
    let scratch = tmp.path().join("ze_info");
    std::fs::create_dir_all(&scratch).unwrap();

    // The sources without SPIR-V, and the front end's first error for each, as it printed it.
    let sources = std::fs::read_dir(tree.join("libvmaf/src/feature/sycl"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter_map(|n| n.strip_suffix(".cpp").map(str::to_string))
        .collect::<Vec<_>>();
    assert_eq!(sources.len(), 17);
    let mut failed: Vec<String> = sources
        .iter()
        .filter(|n| !aot.join("spirv").join(format!("{n}.spv")).is_file())
        .map(|name| {
            let file = format!("libvmaf/src/feature/sycl/{name}.cpp:");
            let line = build_log
                .lines()
                .map(str::trim)
                .find(|l| l.starts_with(&file) && l.contains(": error: "))
                .unwrap_or_else(|| panic!("no error of {name} in the build log"));
            let number = line[file.len()..].split(':').next().unwrap();
            format!("libvmaf/src/feature/sycl/{name}.cpp:{number}")
        })
        .collect();
    failed.sort();
    assert_eq!(failed.len(), 2, "{failed:?}");

    for (key, device) in DEVICES {
        let section = retune_run::section(&report, key);
        let mut built: Vec<String> = findings(section, "build")
            .iter()
            .map(|f| {
                assert_eq!(f.severity, Severity::Fail, "{}", f.verdict);
                f.subject.clone()
            })
            .collect();
        built.sort();
        assert_eq!(built, failed, "{key}");

        let registers = findings(section, "registers");
        let sub_groups = findings(section, "sub_group_size");
        let mut kernels_seen = 0;
        for (dir, suffix) in [
            (device.to_string(), format!("@{device}")),
            (
                format!("{device}-large-grf"),
                format!("@{device}+large-grf"),
            ),
        ] {
            for source in &sources {
                let zebin = aot.join(&dir).join(format!("{source}.zebin"));
                if !zebin.is_file() {
                    continue;
                }
                let kernels = read_ze_info(&dump_ze_info(&zebin, &scratch));
                let spills = ocloc_spills(
                    &std::fs::read_to_string(aot.join(&dir).join(format!("{source}.log"))).unwrap(),
                );
                for (symbol, (grf, simd)) in &kernels {
                    kernels_seen += 1;
                    let finding = by_symbol(&registers, source, symbol, &suffix);
                    assert_eq!(finding.evidence["grf_count"], *grf, "{}", finding.subject);
                    assert_eq!(finding.evidence["simd_size"], *simd, "{}", finding.subject);
                    match spills.get(symbol) {
                        Some(n) => {
                            assert_eq!(finding.evidence["spill_bytes"], *n, "{}", finding.subject);
                            assert_eq!(finding.severity, Severity::Warn, "{}", finding.verdict);
                        }
                        None => {
                            assert_eq!(finding.evidence["spill_bytes"], 0, "{}", finding.subject)
                        }
                    }
                    if dir.ends_with("-large-grf") {
                        assert_eq!(*grf, 256, "the large register file: {symbol}");
                    }
                }
            }
        }
        assert_eq!(
            registers.len(),
            kernels_seen,
            "{key}: one per kernel and mode"
        );
        assert!(kernels_seen > 100, "{key}: {kernels_seen} kernels");
        // Every kernel that requires a sub-group size got that SIMD width on both devices.
        assert!(sub_groups.len() > 40, "{key}: {}", sub_groups.len());
        assert!(
            sub_groups.iter().all(|f| f.severity == Severity::Ok),
            "{key}"
        );
        // At least one kernel spills at the default register file on each device.
        assert!(
            registers.iter().any(|f| f.severity == Severity::Warn),
            "{key}: no spill"
        );
    }
}
