//! The fork's real CUDA kernels through a real toolchain bump. The production retuning spec
//! (fixtures/jobs/vmaf-retune.toml, its fork pointed at the real fork tree of
//! fixtures/vmaf-real) runs on an `abfleet agent` child process whose PATH has CUDA 13.0 from
//! PyPI, with recorded L40S (sm_89) and RTX PRO 6000 Blackwell (sm_120) captures standing in
//! for the GPUs. The agent is restarted with CUDA 13.5 on its PATH: the toolchain watcher
//! starts the retuning run, the agent builds the 21 kernel fatbins again, and the report says
//! per kernel and architecture what moved. The test reads the same fatbins with `cuobjdump`
//! itself and checks the report's arch lists and register diff against what it printed.
//! Both toolkits are installed by scripts/test under .toolchains/ (docs/retuning.md).

#[path = "support/retune_run.rs"]
mod retune_run;
mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use abfleet_core::finding::Severity;
use retune_run::*;

/// Recorded L40S (sm_89) and RTX PRO 6000 Blackwell (sm_120) captures stand in for the GPUs.
const GPUS: &[&str] = &["l40s-thamada", "rtx-pro-6000-blackwell-maxq-telegraf"];
const OLD: &str = "13.0.88";
const NEW: &str = "13.5.37";

/// The `bin` of a PyPI CUDA toolkit that scripts/test installed under .toolchains/.
fn toolkit_bin(version: &str) -> PathBuf {
    let venv = Path::new(ROOT)
        .join(".toolchains")
        .join(format!("cuda-{version}"));
    let lib = venv.join("lib");
    let found = std::fs::read_dir(&lib).ok().and_then(|entries| {
        entries
            .flatten()
            .map(|e| e.path().join("site-packages/nvidia/cu13/bin"))
            .find(|bin| bin.join("nvcc").is_file() && bin.join("cuobjdump").is_file())
    });
    found.unwrap_or_else(|| {
        panic!(
            "CUDA {version} from PyPI is not installed under {}: run `scripts/test --install-only` (docs/retuning.md)",
            venv.display()
        )
    })
}

/// The fatbins a build of this agent made with `version`, by their build log's toolchain line.
fn fatbin_dir(work_dir: &Path, version: &str) -> PathBuf {
    build_tree_with(work_dir, &format!("V{version}")).join("libvmaf/build/src")
}

fn cuobjdump(bin: &Path, args: &[&str], file: &Path) -> String {
    let mut all: Vec<&str> = args.to_vec();
    let file = file.display().to_string();
    all.push(&file);
    tool_output(&bin.join("cuobjdump"), &all)
}

/// This test's own reading of `cuobjdump --dump-resource-usage`: (kernel, arch) → REG.
fn registers_per_kernel(text: &str) -> BTreeMap<(String, String), u32> {
    let mut found = BTreeMap::new();
    let mut arch = String::new();
    let mut function = None;
    for line in text.lines().map(str::trim) {
        if let Some(a) = line.strip_prefix("arch = ") {
            arch = a.to_string();
        } else if let Some(f) = line.strip_prefix("Function ") {
            function = Some(f.trim_end_matches(':').to_string());
        } else if let (Some(f), Some(rest)) = (function.take(), line.strip_prefix("REG:")) {
            let count = rest.split_whitespace().next().unwrap().parse().unwrap();
            found.insert((f, arch.clone()), count);
        }
    }
    found
}

/// This test's own reading of `cuobjdump --list-elf` / `--list-ptx`: the `sm_XY` of each line.
fn listed_arches(text: &str) -> Vec<String> {
    let mut arches: Vec<String> = text
        .lines()
        .filter_map(|l| l.rsplit('.').nth(1).map(str::to_string))
        .filter(|a| a.starts_with("sm_"))
        .collect();
    arches.sort_by_key(|a| a[3..].parse::<u32>().unwrap());
    arches.dedup();
    arches
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cuda_13_0_to_13_5_bump_on_the_forks_real_kernels() {
    let (old_bin, new_bin) = (toolkit_bin(OLD), toolkit_bin(NEW));
    let fleet = BumpFleet::start(GPUS).await;
    // CUDA 13.0: the baseline, submitted by hand; then 13.5 on the same agent: the watcher
    // starts one retuning run per generation whose toolchain changed, by itself.
    let old = fleet.baseline(&old_bin, "13.0").await;
    let new_reports = fleet
        .bump(&new_bin, "13.5", 2, "release 13.0", "release 13.5")
        .await;
    let new_for = |key: &str| report_for(&new_reports, key);
    let work_dir = &fleet.work_dir;

    let old_fatbins = fatbin_dir(work_dir, OLD);
    let new_fatbins = fatbin_dir(work_dir, NEW);
    let mut changed_registers = 0;
    for key in ["cuda/sm_89", "cuda/sm_120"] {
        let arch = key.trim_start_matches("cuda/");
        let new = new_for(key);
        for (report, fatbins) in [(&old, &old_fatbins), (new, &new_fatbins)] {
            let section = section(report, key);
            // The gencode of the fork's meson.build for CUDA 13 (the compute_50 PTX of CUDA < 13
            // is gone; sm_100, sm_120 and compute_120 above 12.8), as cuobjdump lists it.
            let motion = fatbins.join("motion_score.fatbin");
            let sass = listed_arches(&cuobjdump(&new_bin, &["--list-elf"], &motion));
            assert_eq!(
                sass,
                ["sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"]
            );
            let device = findings(section, "arch_coverage")
                .into_iter()
                .find(|f| f.subject == "device")
                .unwrap_or_else(|| panic!("{key}: one arch_coverage finding for all 21 fatbins"));
            assert_eq!(device.evidence["sass"], serde_json::json!(sass), "{key}");
            assert_eq!(
                device.evidence["ptx"],
                serde_json::json!(["compute_80", "compute_120"]),
                "{key}"
            );
            assert_eq!(device.evidence["artifacts"].as_array().unwrap().len(), 21);
            assert_eq!(device.severity, Severity::Ok, "{}", device.verdict);
            // ptxas ignores the (256, 8) and (64, 32) minimums on both: 2048 threads per SM
            // asked of SMs that hold 1536.
            let ignored: Vec<&str> = findings(section, "launch_bounds")
                .into_iter()
                .filter(|f| f.evidence["honoured"] == false)
                .map(|f| f.subject.as_str())
                .collect();
            for kernel in [
                "calculate_motion_score_kernel_8bpc",
                "motion_v2_kernel_8bpc",
                "ssimulacra2_blur_h",
                "ssimulacra2_blur_v",
            ] {
                assert!(
                    ignored.contains(&format!("{kernel}@{arch}").as_str()),
                    "{key}: {kernel} not among the ignored launch bounds {ignored:?}"
                );
            }
            assert_exit_code_rule(report);
        }

        // The register diff, against cuobjdump's own output for the same fatbins.
        let section = section(new, key);
        let registers = findings(section, "registers");
        assert!(registers.len() >= 50, "{key}: {} kernels", registers.len());
        for finding in registers {
            let (kernel, _) = finding.subject.split_once('@').unwrap();
            let artifact = finding.evidence["artifact"].as_str().unwrap();
            let read = |dir: &Path| {
                registers_per_kernel(&cuobjdump(
                    &new_bin,
                    &["--dump-resource-usage"],
                    &dir.join(artifact),
                ))[&(kernel.to_string(), arch.to_string())]
            };
            let (before, after) = (read(&old_fatbins), read(&new_fatbins));
            assert_eq!(finding.evidence["registers"], after, "{}", finding.subject);
            let previous = finding
                .previous
                .as_ref()
                .unwrap_or_else(|| panic!("{}: no previous run", finding.subject));
            let diff = format!("registers: {before} → {after}");
            let listed = previous.changes.iter().any(|c| c == &diff);
            assert_eq!(
                listed,
                before != after,
                "{}: changes {:?}, cuobjdump says {before} → {after}",
                finding.subject,
                previous.changes
            );
            changed_registers += usize::from(before != after);
        }
    }
    // CUDA 13.0 → 13.5 moved registers of 11 kernels on sm_120 and 3 on sm_89 when measured
    // (docs/retuning.md); the exact set is what cuobjdump says above.
    assert!(
        changed_registers > 0,
        "no register moved between CUDA 13.0 and 13.5"
    );
}
