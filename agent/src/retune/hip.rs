//! The HIP checks on this host: find the HIP fat binaries in the fork's built artifacts, list
//! their code objects with the real `clang-offload-bundler`, unbundle the device's ones and
//! read their AMDGPU metadata with the real `llvm-readelf --notes`; `core::retune::hip_tools`
//! and `core::retune::amd_occupancy` turn that into findings.
//!
//! An object, library or executable holds its fat binary in the `.hip_fatbin` section (one
//! bundle per translation unit, each starting with `__CLANG_OFFLOAD_BUNDLE__`), and the bundler
//! lists nothing when handed the object itself; so each bundle is cut out of the file into a
//! temporary `.hipfb` first. A missing tool, no AMD GPU or no artifact is a skipped check,
//! never an error. Blocking: call it from `spawn_blocking`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

use abfleet_core::finding::{CheckResults, Finding, Severity};
use abfleet_core::retune::amd_occupancy::{limits, AmdLimits};
use abfleet_core::retune::hip_kernels;
pub use abfleet_core::retune::hip_kernels::ForkLaunches;
use abfleet_core::retune::hip_tools::{
    offload_coverage, parse_bundler_entries, parse_code_object_metadata, processor,
    target_id_loads_on, BundleEntry,
};

/// What the HIP checks look at.
#[derive(Debug, Clone, Copy)]
pub struct HipCheckInput<'a> {
    /// Built files holding HIP fat binaries (objects, libraries, executables, `.hipfb`).
    pub artifacts: &'a [PathBuf],
    /// The device's gfx target from `rocminfo` (`gfx942` or `gfx942:sramecc+:xnack-`);
    /// `None` when this host has no AMD GPU.
    pub device_gfx: Option<&'a str>,
    /// The fork's `hip_gfx_targets` as the spec states it (empty: autodetect).
    pub configured_targets: Option<&'a [String]>,
    /// How the fork launches its kernels (`[backends.hip] launch`, `wave_size`): occupancy is
    /// judged at these workgroup sizes.
    pub fork: ForkLaunches<'a>,
}

/// The two inspectors, as found on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HipTools {
    pub bundler: PathBuf,
    pub readelf: PathBuf,
}

impl HipTools {
    /// Looks on `PATH` (then `$ROCM_PATH/llvm/bin` and `/opt/rocm/llvm/bin`) for
    /// `clang-offload-bundler` and `llvm-readelf`, unversioned or as Debian's `-NN` names.
    pub fn find() -> Result<HipTools, String> {
        let bundler = find_tool("clang-offload-bundler").ok_or_else(|| {
            "clang-offload-bundler is not installed; install hipcc (or ROCm's llvm) to inspect HIP fat binaries".to_string()
        })?;
        let readelf = find_tool("llvm-readelf").ok_or_else(|| {
            "llvm-readelf is not installed; install llvm (or ROCm's llvm) to read AMDGPU code objects".to_string()
        })?;
        Ok(HipTools { bundler, readelf })
    }
}

const BACKEND: &str = "hip";
const CHECKS: [&str; 3] = ["arch_coverage", "registers", "occupancy"];
const BUNDLE_MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";

/// Runs the HIP checks with the tools found on this host.
pub fn run_hip_checks(input: &HipCheckInput) -> CheckResults {
    run_hip_checks_with(input, HipTools::find())
}

/// [`run_hip_checks`] with the tools given (or the reason they are missing).
pub fn run_hip_checks_with(input: &HipCheckInput, tools: Result<HipTools, String>) -> CheckResults {
    let mut results = CheckResults::default();
    let skip_all = |results: &mut CheckResults, reason: &str| {
        for check in CHECKS {
            results.skip(BACKEND, check, reason);
        }
    };
    let Some(device) = input.device_gfx.map(str::trim).filter(|d| !d.is_empty()) else {
        skip_all(
            &mut results,
            "no AMD GPU on this host (rocminfo lists none)",
        );
        return results;
    };
    if input.artifacts.is_empty() {
        skip_all(&mut results, "the spec lists no HIP artifacts to inspect");
        return results;
    }
    let tools = match tools {
        Ok(tools) => tools,
        Err(reason) => {
            skip_all(&mut results, &reason);
            return results;
        }
    };
    let scratch = match ScratchDir::new() {
        Ok(dir) => dir,
        Err(reason) => {
            skip_all(&mut results, &reason);
            return results;
        }
    };
    let several = input.artifacts.len() > 1;
    let mut coverage: Vec<(String, Finding)> = Vec::new();
    for (index, artifact) in input.artifacts.iter().enumerate() {
        let dir = scratch.path.join(index.to_string());
        let mut artifact_results = check_artifact(input, device, artifact, &tools, &dir);
        let (covered, others): (Vec<Finding>, Vec<Finding>) = artifact_results
            .findings
            .into_iter()
            .partition(|f| f.check == "arch_coverage");
        artifact_results.findings = others;
        coverage.extend(covered.into_iter().map(|f| (file_name(artifact), f)));
        results.extend(name_artifact(artifact_results, artifact, several));
    }
    let coverage = if several {
        merge_coverage(coverage)
    } else {
        coverage.into_iter().map(|(_, finding)| finding).collect()
    };
    results.findings.splice(0..0, coverage);
    results
}

/// Bundles that hold the same targets share one `arch_coverage` finding, naming them in
/// `artifacts` (the fork's 11 kernel bundles give one per device, as CUDA's fatbins do).
fn merge_coverage(coverage: Vec<(String, Finding)>) -> Vec<Finding> {
    let mut merged: Vec<(Finding, Vec<String>)> = Vec::new();
    for (artifact, finding) in coverage {
        let same = merged.iter_mut().find(|(kept, _)| {
            kept.severity == finding.severity
                && kept.verdict == finding.verdict
                && kept.evidence.get("targets") == finding.evidence.get("targets")
        });
        match same {
            Some((_, artifacts)) => artifacts.push(artifact),
            None => merged.push((finding, vec![artifact])),
        }
    }
    merged
        .into_iter()
        .map(|(finding, artifacts)| {
            let verdict = if artifacts.len() > 1 {
                format!("{} — all {} bundles", finding.verdict, artifacts.len())
            } else {
                format!("{} — {}", finding.verdict, artifacts[0])
            };
            Finding { verdict, ..finding }.with("artifacts", artifacts)
        })
        .collect()
}

fn file_name(artifact: &Path) -> String {
    artifact
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| artifact.display().to_string())
}

fn check_artifact(
    input: &HipCheckInput,
    device: &str,
    artifact: &Path,
    tools: &HipTools,
    dir: &Path,
) -> CheckResults {
    let mut results = CheckResults::default();
    let shown = artifact.display();
    let bytes = match std::fs::read(artifact) {
        Ok(bytes) => bytes,
        Err(err) => {
            for check in CHECKS {
                results.skip(
                    BACKEND,
                    check,
                    format!("cannot read `{shown}`: {err}; build the fork's HIP backend first"),
                );
            }
            return results;
        }
    };
    let offsets = bundle_offsets(&bytes);
    if offsets.is_empty() {
        let device_processor = processor(device);
        results.findings.push(
            Finding::new(
                BACKEND,
                "arch_coverage",
                device_processor,
                Severity::Fail,
                format!("`{shown}` holds no HIP fat binary, so no code for {device_processor}: build the fork with HIP or name the HIP library in artifacts"),
                format!("search for {} in {shown}", String::from_utf8_lossy(BUNDLE_MAGIC)),
            )
            .with("targets", Vec::<String>::new())
            .with("device", device),
        );
        results.skip(
            BACKEND,
            "registers",
            format!("`{shown}` holds no AMDGPU code object"),
        );
        results.skip(
            BACKEND,
            "occupancy",
            format!("`{shown}` holds no AMDGPU code object"),
        );
        return results;
    }
    if let Err(err) = std::fs::create_dir_all(dir) {
        for check in CHECKS {
            results.skip(
                BACKEND,
                check,
                format!("cannot create `{}`: {err}", dir.display()),
            );
        }
        return results;
    }

    let Ok(listed) = list_bundles(artifact, &bytes, &offsets, device, tools, dir, &mut results)
    else {
        return results;
    };
    let Listed {
        built,
        list_commands,
        device_bundles,
    } = listed;
    results.findings.extend(offload_coverage(
        &built,
        device,
        input.configured_targets,
        &list_commands.join("; "),
    ));

    let device_processor = processor(device);
    if device_bundles.is_empty() {
        let reason =
            format!("no code object for {device_processor} in `{shown}` (see arch_coverage)");
        results.skip(BACKEND, "registers", &reason);
        results.skip(BACKEND, "occupancy", reason);
        return results;
    }
    let Some(arch_limits) = limits(device) else {
        let reason = format!(
            "no occupancy table for {device_processor}; add it to core::retune::amd_occupancy"
        );
        results.skip(BACKEND, "registers", &reason);
        results.skip(BACKEND, "occupancy", reason);
        return results;
    };
    code_object_findings(
        &device_bundles,
        &arch_limits,
        input.fork,
        tools,
        dir,
        &mut results,
    );
    results
}

/// The checks of an artifact stopped early; `results` says why.
struct Stopped;

/// What the bundles of an artifact hold.
struct Listed {
    /// Every target id built, in the order first listed.
    built: Vec<String>,
    /// The commands that listed them, for the evidence.
    list_commands: Vec<String>,
    /// Each bundle with code objects that load on the device, and those entries.
    device_bundles: Vec<(PathBuf, Vec<BundleEntry>)>,
}

/// Lists every bundle of `bytes` (the artifact's, found at `offsets`) and remembers where
/// the device's code objects are.
fn list_bundles(
    artifact: &Path,
    bytes: &[u8],
    offsets: &[(usize, usize)],
    device: &str,
    tools: &HipTools,
    dir: &Path,
    results: &mut CheckResults,
) -> Result<Listed, Stopped> {
    let shown = artifact.display();
    let mut built: Vec<String> = Vec::new();
    let mut list_commands: Vec<String> = Vec::new();
    let mut device_bundles: Vec<(PathBuf, Vec<BundleEntry>)> = Vec::new();
    for (n, &(start, end)) in offsets.iter().enumerate() {
        let input_path = if start == 0 && end == bytes.len() {
            artifact.to_path_buf()
        } else {
            let path = dir.join(format!("bundle-{n}.hipfb"));
            if let Err(err) = std::fs::write(&path, &bytes[start..end]) {
                results.skip(
                    BACKEND,
                    "arch_coverage",
                    format!("cannot write `{}`: {err}", path.display()),
                );
                return Err(Stopped);
            }
            path
        };
        let args = [
            "--list".to_string(),
            "--type=o".to_string(),
            format!("--input={}", input_path.display()),
        ];
        let command = command_line(&tools.bundler, &args);
        let listed = match run(&tools.bundler, &args) {
            Ok(stdout) => stdout,
            Err(reason) => {
                for check in CHECKS {
                    results.skip(BACKEND, check, format!("`{command}` failed: {reason}"));
                }
                return Err(Stopped);
            }
        };
        list_commands.push(if input_path == artifact {
            command
        } else {
            format!(
                "{command} (bundle {} of {}, at byte {start} of {shown})",
                n + 1,
                offsets.len()
            )
        });
        let entries = parse_bundler_entries(&listed);
        for entry in &entries {
            if !built.contains(&entry.target_id) {
                built.push(entry.target_id.clone());
            }
        }
        let for_device: Vec<BundleEntry> = entries
            .into_iter()
            .filter(|e| target_id_loads_on(&e.target_id, device))
            .collect();
        if !for_device.is_empty() {
            device_bundles.push((input_path, for_device));
        }
    }
    // In one order whatever the bundler's version lists them in: a compiler bump must not
    // read as a change of targets.
    built.sort();
    Ok(Listed {
        built,
        list_commands,
        device_bundles,
    })
}

/// Each device code object unbundled and its kernels' registers and occupancy judged, once
/// per kernel and architecture.
fn code_object_findings(
    device_bundles: &[(PathBuf, Vec<BundleEntry>)],
    arch_limits: &AmdLimits,
    fork: ForkLaunches,
    tools: &HipTools,
    dir: &Path,
    results: &mut CheckResults,
) {
    let mut seen: Vec<String> = Vec::new();
    for (n, (bundle, entries)) in device_bundles.iter().enumerate() {
        let mut args = vec![
            "--unbundle".to_string(),
            "--type=o".to_string(),
            format!("--input={}", bundle.display()),
            format!(
                "--targets={}",
                entries
                    .iter()
                    .map(|e| e.entry.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        ];
        let outputs: Vec<PathBuf> = entries
            .iter()
            .enumerate()
            .map(|(i, e)| dir.join(format!("code-{n}-{i}-{}.co", e.target_id.replace(':', "_"))))
            .collect();
        args.extend(outputs.iter().map(|o| format!("--output={}", o.display())));
        if let Err(reason) = run(&tools.bundler, &args) {
            skip_kernel_checks(results, &command_line(&tools.bundler, &args), &reason);
            continue;
        }
        for code_object in &outputs {
            let args = ["--notes".to_string(), code_object.display().to_string()];
            let command = command_line(&tools.readelf, &args);
            let notes = match run(&tools.readelf, &args) {
                Ok(notes) => notes,
                Err(reason) => {
                    skip_kernel_checks(results, &command, &reason);
                    continue;
                }
            };
            let kernels = parse_code_object_metadata(&notes);
            if kernels.is_empty() {
                results.skip(
                    BACKEND,
                    "registers",
                    format!("`{command}` shows no kernel metadata; is the code object stripped?"),
                );
                continue;
            }
            for kernel in kernels {
                let key = format!("{}@{}", kernel.name, kernel.gfx);
                if seen.contains(&key) {
                    continue;
                }
                seen.push(key);
                results.findings.extend(hip_kernels::code_object_findings(
                    &kernel,
                    arch_limits,
                    fork,
                    &command,
                ));
            }
        }
    }
}

/// With several artifacts, findings and skips say which one they are about: the subject gets
/// the artifact's file name in front (`libfoo.so:gfx942`).
fn name_artifact(mut results: CheckResults, artifact: &Path, several: bool) -> CheckResults {
    if several {
        let name = file_name(artifact);
        for finding in &mut results.findings {
            finding.subject = format!("{name}:{}", finding.subject);
        }
    }
    results
}

/// Where each offload bundle starts and ends: from one magic to the next (or the end of the
/// file). A magic not followed by a plausible bundle count (1..=1024) is not a bundle.
fn bundle_offsets(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut starts = Vec::new();
    let mut from = 0;
    while let Some(at) = find(&bytes[from..], BUNDLE_MAGIC) {
        let start = from + at;
        let count_at = start + BUNDLE_MAGIC.len();
        if let Some(count) = bytes.get(count_at..count_at + 8) {
            let count = u64::from_le_bytes(count.try_into().expect("8 bytes"));
            if (1..=1024).contains(&count) {
                starts.push(start);
            }
        }
        from = start + BUNDLE_MAGIC.len();
    }
    starts
        .iter()
        .enumerate()
        .map(|(i, &start)| (start, starts.get(i + 1).copied().unwrap_or(bytes.len())))
        .collect()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn run(program: &Path, args: &[String]) -> Result<String, String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|err| format!("cannot start it: {err}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let first = stderr
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim();
        return Err(format!("{}: {first}", output.status));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

fn command_line(program: &Path, args: &[String]) -> String {
    let name = program
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| program.display().to_string());
    std::iter::once(name)
        .chain(args.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ")
}

fn find_tool(base: &str) -> Option<PathBuf> {
    let mut names = vec![base.to_string()];
    names.extend((14..=22).rev().map(|v| format!("{base}-{v}")));
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(rocm) = std::env::var_os("ROCM_PATH") {
        dirs.push(PathBuf::from(rocm).join("llvm/bin"));
    }
    dirs.push(PathBuf::from("/opt/rocm/llvm/bin"));
    names.iter().find_map(|name| {
        dirs.iter()
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    })
}

/// A temporary directory removed when dropped (the agent has no `tempfile` at run time).
struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    fn new() -> Result<ScratchDir, String> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let path = std::env::temp_dir().join(format!(
            "abfleet-hip-{}-{nanos}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path)
            .map_err(|err| format!("cannot create `{}`: {err}; check TMPDIR", path.display()))?;
        Ok(ScratchDir { path })
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// The per-kernel checks (registers, occupancy) cannot run when a tool fails on a code object.
fn skip_kernel_checks(results: &mut CheckResults, command: &str, reason: &str) {
    for check in ["registers", "occupancy"] {
        results.skip(BACKEND, check, format!("`{command}` failed: {reason}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/probes/toolchain-hip-5.2-many-kernels/many_kernels.hip"
    ));

    /// Compiles the recorded capture's source for gfx90a and gfx1030 with the real hipcc.
    /// `None` (after saying why) only when hipcc is missing and ABFLEET_SKIP_HIP=1.
    fn compile_for_gfx90a_and_gfx1030(dir: &Path) -> Option<PathBuf> {
        let hipcc = std::env::var_os("PATH").and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("hipcc"))
                .find(|c| c.is_file())
        });
        let Some(hipcc) = hipcc else {
            if std::env::var("ABFLEET_SKIP_HIP").as_deref() == Ok("1") {
                eprintln!("skipped: hipcc is not on PATH and ABFLEET_SKIP_HIP=1");
                return None;
            }
            panic!("hipcc is not on PATH: install it (`apt-get install hipcc`) or set ABFLEET_SKIP_HIP=1 to skip the real HIP test");
        };
        let source = dir.join("many_kernels.hip");
        std::fs::write(&source, SOURCE).unwrap();
        let object = dir.join("many_kernels.o");
        let output = Command::new(hipcc)
            .env("HIP_PLATFORM", "amd")
            .arg("-O3")
            .arg("-c")
            .arg(&source)
            .args(["--offload-arch=gfx90a", "--offload-arch=gfx1030", "-o"])
            .arg(&object)
            .output()
            .unwrap();
        assert!(
            output.status.success() && object.is_file(),
            "hipcc failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Some(object)
    }

    fn tools_here() -> HipTools {
        HipTools::find().expect("hipcc is installed, so are clang-offload-bundler and llvm-readelf")
    }

    #[test]
    fn bundles_with_the_same_targets_share_one_coverage_finding() {
        let dir = tempfile::tempdir().unwrap();
        let Some(object) = compile_for_gfx90a_and_gfx1030(dir.path()) else {
            return;
        };
        let copy = dir.path().join("copy.o");
        std::fs::copy(&object, &copy).unwrap();
        let host_only = dir.path().join("host.o");
        std::fs::write(&host_only, b"no offload bundle here").unwrap();
        let artifacts = vec![object, copy, host_only];
        let results = run_hip_checks_with(
            &HipCheckInput {
                artifacts: &artifacts,
                device_gfx: Some("gfx90a"),
                configured_targets: None,
                fork: ForkLaunches::default(),
            },
            Ok(tools_here()),
        );
        let coverage: Vec<&Finding> = results
            .findings
            .iter()
            .filter(|f| f.check == "arch_coverage")
            .collect();
        assert_eq!(coverage.len(), 2, "{coverage:?}");
        assert_eq!(coverage[0].severity, Severity::Ok);
        assert_eq!(
            coverage[0].evidence["artifacts"],
            serde_json::json!(["many_kernels.o", "copy.o"])
        );
        assert!(
            coverage[0].verdict.ends_with("— all 2 bundles"),
            "{}",
            coverage[0].verdict
        );
        assert_eq!(coverage[1].severity, Severity::Fail);
        assert_eq!(
            coverage[1].evidence["artifacts"],
            serde_json::json!(["host.o"])
        );
        // Per-kernel findings still name their bundle.
        assert!(results
            .findings
            .iter()
            .any(|f| f.check == "registers" && f.subject.starts_with("copy.o:")));
    }

    #[test]
    fn real_fat_binary_on_a_built_and_a_missing_device() {
        let dir = tempfile::tempdir().unwrap();
        let Some(object) = compile_for_gfx90a_and_gfx1030(dir.path()) else {
            return;
        };
        let artifacts = vec![object];
        let tools = tools_here();

        let built = run_hip_checks_with(
            &HipCheckInput {
                artifacts: &artifacts,
                device_gfx: Some("gfx90a"),
                configured_targets: None,
                fork: ForkLaunches::default(),
            },
            Ok(tools.clone()),
        );
        assert!(built.skipped.is_empty(), "{:?}", built.skipped);
        let coverage: Vec<&Finding> = built
            .findings
            .iter()
            .filter(|f| f.check == "arch_coverage")
            .collect();
        assert_eq!(coverage.len(), 1);
        assert_eq!(coverage[0].severity, Severity::Ok);
        assert_eq!(
            coverage[0].evidence["targets"],
            serde_json::json!(["gfx1030", "gfx90a"])
        );
        assert!(
            coverage[0].command.contains("--list --type=o"),
            "{}",
            coverage[0].command
        );
        assert!(
            coverage[0].command.contains("at byte 4096"),
            "{}",
            coverage[0].command
        );
        let kernel_subjects: Vec<&str> = built
            .findings
            .iter()
            .filter(|f| f.check == "occupancy")
            .map(|f| f.subject.as_str())
            .collect();
        assert_eq!(
            kernel_subjects,
            [
                "_Z10scale_copyPKfPffi@gfx90a",
                "_Z13lds_tile_blurPKfPfii@gfx90a",
                "_Z17many_accumulatorsPKdS0_Pdi@gfx90a",
                "_Z19private_array_spillPKiPfi@gfx90a",
                "_Z9agpr_userPf@gfx90a"
            ]
        );
        let registers = |name: &str| {
            built
                .findings
                .iter()
                .find(|f| f.check == "registers" && f.subject.starts_with(name))
                .unwrap()
        };
        // The 32 clobbered AGPRs count in gfx90a's unified VGPR file.
        assert!(
            registers("_Z9agpr_userPf").evidence["vgprs"]
                .as_u64()
                .unwrap()
                >= 32
        );
        assert!(registers("_Z9agpr_userPf")
            .command
            .starts_with("llvm-readelf"));
        let lds = built
            .findings
            .iter()
            .find(|f| f.check == "occupancy" && f.subject.starts_with("_Z13lds"))
            .unwrap();
        assert_eq!(lds.evidence["lds_bytes"], 20736);
        assert_eq!(lds.evidence["limiter"], "lds");

        let missing = run_hip_checks_with(
            &HipCheckInput {
                artifacts: &artifacts,
                device_gfx: Some("gfx942:sramecc+:xnack-"),
                configured_targets: Some(&["gfx90a".to_string(), "gfx1030".to_string()]),
                fork: ForkLaunches::default(),
            },
            Ok(tools),
        );
        assert_eq!(missing.findings.len(), 1, "{:?}", missing.findings);
        let fail = &missing.findings[0];
        assert_eq!(fail.identity(), ("hip", "arch_coverage", "gfx942"));
        assert_eq!(fail.severity, Severity::Fail);
        assert_eq!(
            fail.verdict,
            "no code object for gfx942: the kernels cannot load; add it to hip_gfx_targets"
        );
        let skipped: Vec<&str> = missing.skipped.iter().map(|s| s.check.as_str()).collect();
        assert_eq!(skipped, ["registers", "occupancy"]);
    }

    #[test]
    fn no_device_no_tools_and_no_fat_binary_are_not_errors() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain.o");
        std::fs::write(&plain, b"\x7fELF not a HIP object").unwrap();
        let artifacts = vec![plain];

        let no_device = run_hip_checks(&HipCheckInput {
            artifacts: &artifacts,
            device_gfx: None,
            configured_targets: None,
            fork: ForkLaunches::default(),
        });
        assert!(no_device.findings.is_empty());
        assert_eq!(no_device.skipped.len(), 3);
        assert!(no_device.skipped[0].reason.contains("no AMD GPU"));

        let input = HipCheckInput {
            artifacts: &artifacts,
            device_gfx: Some("gfx90a"),
            configured_targets: None,
            fork: ForkLaunches::default(),
        };
        let no_tools =
            run_hip_checks_with(&input, Err("clang-offload-bundler is not installed".into()));
        assert!(no_tools.findings.is_empty());
        assert_eq!(no_tools.skipped.len(), 3);

        let missing_file = vec![dir.path().join("absent.so")];
        let unreadable = run_hip_checks_with(
            &HipCheckInput {
                artifacts: &missing_file,
                ..input
            },
            Ok(HipTools {
                bundler: "clang-offload-bundler".into(),
                readelf: "llvm-readelf".into(),
            }),
        );
        assert_eq!(unreadable.skipped.len(), 3);
        assert!(unreadable.skipped[0].reason.starts_with("cannot read"));

        // A file without a bundle: the tools are never run, so fake paths do.
        let no_bundle = run_hip_checks_with(
            &input,
            Ok(HipTools {
                bundler: "/nonexistent/clang-offload-bundler".into(),
                readelf: "/nonexistent/llvm-readelf".into(),
            }),
        );
        assert_eq!(no_bundle.findings.len(), 1);
        assert_eq!(no_bundle.findings[0].severity, Severity::Fail);
        assert!(no_bundle.findings[0]
            .verdict
            .contains("holds no HIP fat binary"));
    }

    #[test]
    fn bundles_are_found_between_magics() {
        let mut bytes = vec![0u8; 100];
        for _ in 0..2 {
            bytes.extend_from_slice(BUNDLE_MAGIC);
            bytes.extend_from_slice(&2u64.to_le_bytes());
            bytes.extend_from_slice(&[0u8; 50]);
        }
        // A stray magic with an implausible count is not a bundle.
        bytes.extend_from_slice(BUNDLE_MAGIC);
        bytes.extend_from_slice(&u64::MAX.to_le_bytes());
        let offsets = bundle_offsets(&bytes);
        assert_eq!(offsets, [(100, 182), (182, bytes.len())]);
        assert!(bundle_offsets(b"nothing here").is_empty());
    }
}
