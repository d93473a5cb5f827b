//! The fork's real HIP kernels through a real AMD compiler bump. The production retuning spec
//! (fixtures/jobs/vmaf-retune.toml, its fork pointed at the real fork tree of
//! fixtures/vmaf-real) runs on an `abfleet agent` child process whose PATH has the LLVM 19
//! `hipcc` (clang-19, HIP 6.4.3 headers, ROCm 6 device libraries), with recorded rocminfo of an
//! MI250X (gfx90a), an MI300X (gfx942) and a host with an RX 7900 XTX (gfx1100) and an RX 6900 XT
//! (gfx1030) standing in for the GPUs. The agent is restarted with ROCm 7.2's LLVM doing the
//! codegen: the toolchain watcher starts the retuning runs, the agent builds the 11 kernel
//! bundles again, and the report says per kernel, target and figure what moved. The test
//! unbundles the same code objects with `clang-offload-bundler` and reads their metadata with
//! `llvm-readelf --notes` itself, and checks the report's figures and diff against that.
//! Both toolchains are installed by scripts/test (scripts/install-amd-toolchains).

#[path = "support/retune_run.rs"]
mod retune_run;
mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use abfleet_core::finding::Severity;
use retune_run::*;

/// gfx90a, gfx942, and gfx1100 + gfx1030 in one host.
const GPUS: &[&str] = &[
    "mi250x-lumi-rocm4208",
    "mi300x-x4-epyc9474f",
    "rx7900xtx-rx6900xt-rocm3273",
];
const KEYS: [&str; 4] = ["hip/gfx90a", "hip/gfx942", "hip/gfx1030", "hip/gfx1100"];
/// Words of each toolchain's `hipcc --version` first line.
const OLD: &str = "LLVM 19.1.7 (Debian clang-19)";
const NEW: &str = "ROCm 7.2.2 LLVM";

/// What the test reads from one code object's notes: kernel → figure → value.
type Figures = BTreeMap<String, BTreeMap<&'static str, u64>>;

/// This test's own reading of `llvm-readelf --notes`: each kernel's `.name` and the counts the
/// report states (`.vgpr_count` … `.private_segment_fixed_size`, `.wavefront_size`). A kernel's
/// map is a `- ` item at indent 2 of `amdhsa.kernels`, its fields at indent 4 (its arguments'
/// fields, `.name` among them, deeper).
fn read_notes(text: &str) -> Figures {
    const FIELDS: [(&str, &str); 6] = [
        (".vgpr_count:", "vgprs"),
        (".sgpr_count:", "sgprs"),
        (".vgpr_spill_count:", "vgpr_spills"),
        (".sgpr_spill_count:", "sgpr_spills"),
        (".private_segment_fixed_size:", "scratch_bytes"),
        (".wavefront_size:", "wave_size"),
    ];
    let mut kernels = Figures::new();
    let mut current: Option<(Option<String>, BTreeMap<&'static str, u64>)> = None;
    let mut finish = |current: &mut Option<(Option<String>, BTreeMap<&'static str, u64>)>| {
        if let Some((Some(name), fields)) = current.take() {
            kernels.insert(name, fields);
        }
    };
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        let trimmed = line.trim();
        if indent == 0 {
            finish(&mut current);
            continue;
        }
        let field = match (indent, trimmed.strip_prefix("- ")) {
            (2, Some(first)) => {
                finish(&mut current);
                current = Some((None, BTreeMap::new()));
                first
            }
            (4, None) => trimmed,
            _ => continue,
        };
        let Some((name, fields)) = current.as_mut() else {
            continue;
        };
        if let Some(value) = field.strip_prefix(".name:") {
            *name = Some(value.trim().to_string());
        }
        for (key, figure) in FIELDS {
            if let Some(value) = field.strip_prefix(key) {
                fields.insert(figure, value.trim().parse().unwrap());
            }
        }
    }
    finish(&mut current);
    kernels
}

/// The code objects of the bundles, each unbundled and read by the test itself once (a bundle
/// holds many kernels of one target).
struct CodeObjects {
    scratch: PathBuf,
    read: BTreeMap<(PathBuf, String), Figures>,
}

impl CodeObjects {
    fn new(scratch: PathBuf) -> CodeObjects {
        std::fs::create_dir_all(&scratch).unwrap();
        CodeObjects {
            scratch,
            read: BTreeMap::new(),
        }
    }

    /// What `llvm-readelf --notes` says of `kernel` in the `gfx` code object of `bundle`.
    fn kernel(&mut self, bundle: &Path, gfx: &str, kernel: &str) -> BTreeMap<&'static str, u64> {
        let key = (bundle.to_path_buf(), gfx.to_string());
        if !self.read.contains_key(&key) {
            let out = self.scratch.join(format!("{}.co", self.read.len()));
            let figures = code_object_figures(bundle, gfx, &out);
            self.read.insert(key.clone(), figures);
        }
        self.read[&key]
            .get(kernel)
            .cloned()
            .unwrap_or_else(|| panic!("{}: no {kernel} for {gfx}", bundle.display()))
    }
}

/// The code object of `gfx` in a bundle, unbundled to `out` and read with `llvm-readelf`.
fn code_object_figures(bundle: &Path, gfx: &str, out: &Path) -> Figures {
    let bundler = Path::new("/usr/bin/clang-offload-bundler-19");
    let readelf = Path::new("/usr/bin/llvm-readelf-19");
    let listed = tool_output(
        bundler,
        &[
            "--list",
            "--type=o",
            &format!("--input={}", bundle.display()),
        ],
    );
    let entry = listed
        .lines()
        .find(|l| l.ends_with(&format!("--{gfx}")))
        .unwrap_or_else(|| panic!("{}: no {gfx} in {listed}", bundle.display()));
    tool_output(
        bundler,
        &[
            "--unbundle",
            "--type=o",
            &format!("--input={}", bundle.display()),
            &format!("--targets={entry}"),
            &format!("--output={}", out.display()),
        ],
    );
    read_notes(&tool_output(
        readelf,
        &["--notes", &out.display().to_string()],
    ))
}

/// The processors `clang-offload-bundler --list` names in a bundle, sorted.
fn bundled_targets(bundle: &Path) -> Vec<String> {
    let listed = tool_output(
        Path::new("/usr/bin/clang-offload-bundler-19"),
        &[
            "--list",
            "--type=o",
            &format!("--input={}", bundle.display()),
        ],
    );
    let mut targets: Vec<String> = listed
        .lines()
        .filter_map(|l| l.rsplit_once("--").map(|(_, gfx)| gfx.to_string()))
        .filter(|gfx| gfx.starts_with("gfx"))
        .collect();
    targets.sort();
    targets
}

#[test]
fn the_tests_own_notes_reader_on_a_capture() {
    let text = std::fs::read_to_string(
        Path::new(ROOT)
            .join("fixtures/probes/toolchain-hip-6-llvm-19-fork/llvm-readelf-notes-gfx942.txt"),
    )
    .unwrap();
    let kernels = read_notes(&text);
    assert_eq!(kernels.keys().collect::<Vec<_>>(), ["psnr_hvs_hip"]);
    let k = &kernels["psnr_hvs_hip"];
    assert_eq!(
        (k["vgprs"], k["sgprs"], k["vgpr_spills"], k["sgpr_spills"]),
        (128, 106, 179, 57)
    );
    assert_eq!((k["scratch_bytes"], k["wave_size"]), (496, 64));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_llvm_19_to_rocm_7_2_bump_on_the_forks_real_hip_kernels() {
    let old_bin = toolchain_bin("amd-llvm-19", "hipcc");
    let new_bin = toolchain_bin("amd-rocm-7.2", "hipcc");
    let fleet = BumpFleet::start(GPUS).await;
    // LLVM 19: the baseline, submitted by hand; then ROCm 7.2's LLVM on the same agent: one
    // toolchain-bump run per AMD generation.
    let old = fleet.baseline(&old_bin, "llvm-19").await;
    let new_reports = fleet.bump(&new_bin, "rocm-7.2", KEYS.len(), OLD, NEW).await;
    let new_for = |key: &str| report_for(&new_reports, key);
    let work_dir = &fleet.work_dir;
    let tmp = &fleet.tmp;

    let old_tree = build_tree_with(work_dir, OLD).join("libvmaf/build/src");
    let new_tree = build_tree_with(work_dir, NEW).join("libvmaf/build/src");
    let mut code_objects = CodeObjects::new(tmp.path().join("code-objects"));
    let mut changed = 0;
    let mut spill_moves = Vec::new();
    for key in KEYS {
        let gfx = key.trim_start_matches("hip/");
        for (report, tree) in [(&old, &old_tree), (new_for(key), &new_tree)] {
            let section = section(report, key);
            // Every bundle holds the four targets, as the bundler lists them: one finding
            // names all 11.
            let coverage = findings(section, "arch_coverage");
            assert_eq!(coverage.len(), 1, "{key}: {coverage:?}");
            let finding = coverage[0];
            assert_eq!(finding.severity, Severity::Ok, "{}", finding.verdict);
            let artifacts = finding.evidence["artifacts"].as_array().unwrap();
            assert_eq!(artifacts.len(), 11, "{key}");
            for artifact in artifacts {
                let artifact = artifact.as_str().unwrap();
                assert_eq!(
                    finding.evidence["targets"],
                    serde_json::json!(bundled_targets(&tree.join(artifact))),
                    "{key}: {artifact}"
                );
            }
            // The fork's host code does not compile: a build finding with its first error.
            let build = findings(section, "build");
            assert!(
                build
                    .iter()
                    .any(|f| f.subject == "libvmaf/src/hip/common.h:25"
                        && f.severity == Severity::Warn
                        && f.verdict.contains("conflicting types for")),
                "{key}: {build:?}"
            );
            // The kernels reduce over 64 lanes: wrong on RDNA's wave32.
            let waves = findings(section, "wave_size");
            assert!(waves.len() >= 20, "{key}: {} kernels", waves.len());
            let expected = if gfx.starts_with("gfx9") {
                Severity::Ok
            } else {
                Severity::Fail
            };
            assert!(
                waves.iter().all(|f| f.severity == expected),
                "{key}: {:?}",
                waves.iter().map(|f| &f.verdict).collect::<Vec<_>>()
            );
            assert_exit_code_rule(report);
        }

        // Every figure against llvm-readelf's own notes, and the diff against the old build.
        let section = section(new_for(key), key);
        let registers = findings(section, "registers");
        assert!(registers.len() >= 20, "{key}: {} kernels", registers.len());
        for finding in registers {
            let (artifact, kernel_at) = finding.subject.split_once(':').unwrap();
            let kernel = kernel_at.strip_suffix(&format!("@{gfx}")).unwrap();
            let before = code_objects.kernel(&old_tree.join(artifact), gfx, kernel);
            let after = code_objects.kernel(&new_tree.join(artifact), gfx, kernel);
            let previous = finding
                .previous
                .as_ref()
                .unwrap_or_else(|| panic!("{}: no previous run", finding.subject));
            for (figure, value) in &after {
                assert_eq!(
                    finding.evidence[*figure], *value,
                    "{}: {figure}",
                    finding.subject
                );
                let diff = format!("{figure}: {} → {value}", before[figure]);
                assert_eq!(
                    previous.changes.contains(&diff),
                    before[figure] != *value,
                    "{}: changes {:?}, llvm-readelf says {diff}",
                    finding.subject,
                    previous.changes
                );
            }
            changed += usize::from(before != after);
            if before["vgpr_spills"] != after["vgpr_spills"] {
                spill_moves.push(format!(
                    "{kernel}@{gfx}: {} → {}",
                    before["vgpr_spills"], after["vgpr_spills"]
                ));
            }
            if after["vgpr_spills"] > 0 {
                assert_eq!(finding.severity, Severity::Warn, "{}", finding.verdict);
            }
        }
    }
    // LLVM 19 → ROCm 7.2 moved registers of many kernels and psnr_hvs's spills on every
    // target when measured (docs/retuning.md); the exact set is what llvm-readelf says above.
    assert!(changed > 0, "no figure moved between the two compilers");
    assert!(
        spill_moves
            .iter()
            .any(|m| m.starts_with("psnr_hvs_hip@gfx942")),
        "{spill_moves:?}"
    );
}

/// Debian 12's hipcc 5.2 (clang 15) rejects gfx942: on a host with only that compiler the AMD
/// checks are "not run here" with the compiler's own line, and no cell fails.
#[test]
fn a_toolchain_too_old_for_gfx942_is_checks_not_run_here() {
    let hipcc = Path::new("/usr/bin/hipcc");
    assert!(
        hipcc.is_file(),
        "Debian's hipcc 5.2 is not installed: run `scripts/test --install-only`"
    );
    let tmp = tempfile::tempdir().unwrap();
    let spec = real_fork_and_spec(tmp.path());
    let (text, code, report) = local_run(
        tmp.path(),
        &spec,
        &["mi300x-x4-epyc9474f"],
        &[("HIP_PLATFORM", "amd".to_string())],
    );
    assert_eq!(code, Some(0), "nothing failed: {text}");
    let section = section(&report, "hip/gfx942");
    assert!(section.findings.is_empty(), "{:?}", section.findings);
    let skipped: Vec<&str> = section
        .skipped_checks
        .iter()
        .map(|s| s.reason.as_str())
        .collect();
    assert!(
        skipped
            .iter()
            .any(|r| r.starts_with("checks not run here")
                && r.contains("invalid target ID 'gfx942'")),
        "{skipped:?}"
    );
    assert!(
        !section.backend_cells.is_empty()
            && section
                .backend_cells
                .iter()
                .all(|c| c.status == abfleet_core::backend_cell::BackendCellStatus::Skipped),
        "{:?}",
        section.backend_cells
    );
}
