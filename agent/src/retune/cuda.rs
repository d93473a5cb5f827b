//! The CUDA retuning checks on this host: run the real `cuobjdump` (and `nvcc --list-gpu-arch`)
//! on the fork's CUDA artifacts, read the build's own log (ptxas's `-Xptxas -v` figures and
//! warnings, per ninja target, matched to the artifact it built) and the PTX's launch bounds,
//! and turn what they print into `arch_coverage`, `registers`, `occupancy` and
//! `launch_bounds` findings for the device's architecture (`core::retune::cuda_tools`,
//! `cuda_occupancy`, `cuda_build_log` and `cuda_launch_bounds` do the reading). Artifacts with
//! the same gencode share one `arch_coverage` finding. Blocking: call it from
//! `spawn_blocking`. A missing tool, device or artifact is a skipped check, never an error.
//! No shell: every command is an argv list.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::process::Command;

use abfleet_core::finding::{CheckResults, Finding, Severity};
use abfleet_core::retune::cuda_build_log::{
    parse_ptxas_warnings, split_by_target, target_of_artifact, PtxasWarning,
};
use abfleet_core::retune::cuda_launch_bounds::{
    launch_bounds_finding, parse_ptx_launch_bounds, LaunchBounds, PtxasVerdict,
};
use abfleet_core::retune::cuda_occupancy::{kernel_findings, limits, LaunchGeometry};
use abfleet_core::retune::cuda_tools::{
    arch_coverage, fill_unknown_arch, kernel_matches, merge_ptxas, parse_list_elf,
    parse_list_gpu_arch, parse_list_ptx, parse_ptxas_log, parse_resource_usage, runs_on, CudaRuns,
};
use abfleet_core::retune::KernelResources;
pub use abfleet_core::spec::KernelLaunch;

const BACKEND: &str = "cuda";
const CHECKS: [&str; 4] = ["arch_coverage", "registers", "occupancy", "launch_bounds"];

/// What the CUDA checks look at on one host.
#[derive(Debug, Clone, Copy)]
pub struct CudaCheckInput<'a> {
    /// The fork's CUDA build outputs: objects, libraries or executables with device code, and
    /// `ptxas.log` / `*.ptxas.log` files holding the build's `-Xptxas -v` output.
    pub artifacts: &'a [PathBuf],
    /// The device's architecture as the probe says it (`8.9`, `sm_89`); `None` without an
    /// NVIDIA GPU.
    pub device_arch: Option<&'a str>,
    /// The block size to assume for kernels `launches` does not name.
    pub block_threads: u32,
    /// How the fork launches its kernels, where the spec says (`[backends.cuda] launch`);
    /// `kernel` is the symbol or its plain name (`ssim_rows` for `_Z9ssim_rowsPKfPfii`).
    pub launches: &'a [KernelLaunch],
    /// The build's log: what ptxas printed for each target (with `-Xptxas -v`, e.g. from
    /// `NVCC_APPEND_FLAGS`), split at ninja's status lines and matched to the artifacts.
    pub build_log: Option<&'a Path>,
}

/// One kernel to judge on the device's architecture, and where its figures came from.
struct Examined {
    kernel: KernelResources,
    /// The command its figures came from.
    command: String,
    /// A ptxas log said its spills (cuobjdump alone counts spills and local arrays together).
    spills_known: bool,
    /// The artifact's file name.
    artifact: String,
    /// Its `__launch_bounds__`, when it has a minimum or a maximum.
    bounds: Option<BoundsSeen>,
}

struct BoundsSeen {
    bounds: LaunchBounds,
    verdict: PtxasVerdict,
    /// Every architecture on which ptxas ignored the minimum.
    ignored_on: Vec<String>,
    command: String,
}

/// Runs the checks with `cuobjdump` and `nvcc` from `PATH`. `sm_count`: the device's SM count
/// (from the probe), needed to tell a grid-bound launch from an occupancy-bound one.
pub fn run_cuda_checks(input: &CudaCheckInput, sm_count: Option<u32>) -> CheckResults {
    run_cuda_checks_with_tools(input, sm_count, None)
}

/// [`run_cuda_checks`] with the tools looked up in `tools_dir` only, when given (no fallback to
/// `PATH`, so a test can hide a tool).
pub fn run_cuda_checks_with_tools(
    input: &CudaCheckInput,
    sm_count: Option<u32>,
    tools_dir: Option<&Path>,
) -> CheckResults {
    let mut results = CheckResults::default();
    let Some(device) = input.device_arch.map(str::trim).filter(|d| !d.is_empty()) else {
        skip_all(&mut results, "no NVIDIA GPU on this host");
        return results;
    };
    if input.artifacts.is_empty() {
        skip_all(&mut results, "the spec names no CUDA artifact to inspect");
        return results;
    }
    let (log_paths, binaries): (Vec<&PathBuf>, Vec<&PathBuf>) =
        input.artifacts.iter().partition(|p| is_ptxas_log(p));
    let logs = read_logs(input, &log_paths, &mut results);
    let mut examined: Vec<Examined> = Vec::new();
    if binaries.is_empty() {
        examine_logs_only(&logs, device, &mut examined, &mut results);
    } else if examine_binaries(
        &binaries,
        &logs,
        device,
        tools_dir,
        &mut examined,
        &mut results,
    )
    .is_err()
    {
        return results;
    }
    occupancy_findings(input, &examined, device, sm_count, &mut results);
    results
}

/// What the logs among the artifacts say (the ptxas logs' kernels), their names for the
/// evidence, and the build log when it reads.
struct Logs {
    ptxas_kernels: Vec<KernelResources>,
    log_names: Vec<String>,
    build_log: Option<String>,
}

fn read_logs(input: &CudaCheckInput, logs: &[&PathBuf], results: &mut CheckResults) -> Logs {
    let mut ptxas_kernels = Vec::new();
    for log in logs {
        match std::fs::read_to_string(log) {
            Ok(text) => ptxas_kernels.extend(parse_ptxas_log(&text)),
            Err(err) => results.skip(
                BACKEND,
                "registers",
                format!("cannot read the ptxas log `{}`: {err}", log.display()),
            ),
        }
    }
    let mut log_names: Vec<String> = logs.iter().map(|l| l.display().to_string()).collect();
    let build_log = input.build_log.and_then(|path| {
        std::fs::read_to_string(path)
            .map_err(|err| {
                results.skip(
                    BACKEND,
                    "launch_bounds",
                    format!("cannot read the build log `{}`: {err}", path.display()),
                )
            })
            .ok()
    });
    if let Some(path) = input.build_log.filter(|_| build_log.is_some()) {
        log_names.push(format!("the build log {}", path.display()));
    }
    Logs {
        ptxas_kernels,
        log_names,
        build_log,
    }
}

/// Only ptxas logs, no binary: the kernels of the SASS that runs on `device`, as the logs
/// give them.
fn examine_logs_only(
    logs: &Logs,
    device: &str,
    examined: &mut Vec<Examined>,
    results: &mut CheckResults,
) {
    results.skip(
        BACKEND,
        "arch_coverage",
        "only ptxas logs among the artifacts; a log does not say what the binary holds",
    );
    let mut sass: Vec<String> = logs.ptxas_kernels.iter().map(|k| k.arch.clone()).collect();
    sass.sort();
    sass.dedup();
    let command = format!("ptxas log {}", logs.log_names.join(" "));
    match runs_on(&sass, &[], device) {
        CudaRuns::NativeSass(arch) | CudaRuns::CompatibleSass(arch) => examined.extend(
            logs.ptxas_kernels
                .iter()
                .filter(|k| k.arch == arch)
                .map(|k| Examined {
                    kernel: k.clone(),
                    command: command.clone(),
                    spills_known: true,
                    artifact: String::new(),
                    bounds: None,
                }),
        ),
        _ => skip_kernels(
            results,
            format!(
                "the ptxas logs hold no SASS that runs on {device} ({})",
                sass.join(", ")
            ),
        ),
    }
}

/// cuobjdump is not there: every check is skipped, saying so.
struct NoCuobjdump;

/// Each binary examined with cuobjdump (its kernels, launch bounds and architectures), and
/// the architectures they cover compared with the device and what nvcc can target.
fn examine_binaries(
    binaries: &[&PathBuf],
    logs: &Logs,
    device: &str,
    tools_dir: Option<&Path>,
    examined: &mut Vec<Examined>,
    results: &mut CheckResults,
) -> Result<(), NoCuobjdump> {
    let log_parts = logs
        .build_log
        .as_deref()
        .map(|log| log_part_per_binary(log, binaries))
        .unwrap_or_else(|| vec![None; binaries.len()]);
    let Some(cuobjdump) = find_tool("cuobjdump", tools_dir) else {
        skip_all(
            results,
            "cuobjdump not found; install the CUDA toolkit (Debian: nvidia-cuda-toolkit) or put it on PATH",
        );
        return Err(NoCuobjdump);
    };
    let toolchain = match find_tool("nvcc", tools_dir) {
        Some(nvcc) => match run_tool(&nvcc, &["--list-gpu-arch"]) {
            ToolOutput::Printed(text) => parse_list_gpu_arch(&text),
            _ => Vec::new(),
        },
        None => Vec::new(),
    };
    if toolchain.is_empty() {
        results.skip(
            BACKEND,
            "arch_coverage",
            "toolchain: `nvcc --list-gpu-arch` gave nothing here, so the build is not compared with what nvcc can target",
        );
    }
    let mut coverage: Vec<Coverage> = Vec::new();
    for (binary, log_part) in binaries.iter().zip(&log_parts) {
        let part_kernels = log_part.as_deref().map(parse_ptxas_log).unwrap_or_default();
        let known: Vec<KernelResources> = logs
            .ptxas_kernels
            .iter()
            .cloned()
            .chain(part_kernels)
            .collect();
        let warnings = log_part
            .as_deref()
            .map(parse_ptxas_warnings)
            .unwrap_or_default();
        if let Some(found) = examine_binary(
            results,
            examined,
            BinaryContext {
                cuobjdump: &cuobjdump,
                binary,
                device,
                toolchain: &toolchain,
                ptxas_kernels: &known,
                warnings: &warnings,
                log_names: &logs.log_names,
            },
        ) {
            coverage.push(found);
        }
    }
    results.findings.extend(merge_coverage(coverage));
    Ok(())
}

/// Registers, occupancy, spills and launch bounds of each examined kernel on `device`, at
/// the spec's launch of it when it names one.
fn occupancy_findings(
    input: &CudaCheckInput,
    examined: &[Examined],
    device: &str,
    sm_count: Option<u32>,
    results: &mut CheckResults,
) {
    let Some(device_limits) = limits(device) else {
        if !examined.is_empty() {
            skip_kernels(
                results,
                format!("no occupancy table for {device}; add it to core::retune::cuda_occupancy"),
            );
        }
        return;
    };
    for launch in input.launches {
        if !examined
            .iter()
            .any(|e| kernel_matches(&e.kernel.name, &launch.kernel))
            && !examined.is_empty()
        {
            results.skip(
                BACKEND,
                "occupancy",
                format!(
                    "the spec's launch of `{}` matches no kernel in the artifacts; check its name",
                    launch.kernel
                ),
            );
        }
    }
    for e in examined {
        let kernel = &e.kernel;
        let launch = input
            .launches
            .iter()
            .find(|l| kernel_matches(&kernel.name, &l.kernel));
        let block_threads = launch.map_or(input.block_threads, |l| l.block_threads);
        let geometry = launch.zip(sm_count).map(|(l, sm_count)| LaunchGeometry {
            grid_blocks: l.grid_blocks,
            block_threads: l.block_threads,
            sm_count,
        });
        let mut findings = kernel_findings(
            kernel,
            &device_limits,
            block_threads,
            geometry.as_ref(),
            &e.command,
        );
        if !e.spills_known {
            for finding in findings.iter_mut().filter(|f| f.check == "registers") {
                finding.evidence.insert("spills_known".into(), false.into());
                if finding.severity == Severity::Ok && kernel.stack_bytes > 0 {
                    finding.verdict = format!(
                        "{} registers, {} B stack frame per thread: local arrays or spills, which cuobjdump cannot tell apart; add the build's -Xptxas -v log (*.ptxas.log, or NVCC_APPEND_FLAGS=-Xptxas=-v in [backends.cuda] env) to the artifacts",
                        kernel.registers, kernel.stack_bytes
                    );
                }
            }
        }
        if let Some(seen) = &e.bounds {
            findings.extend(launch_bounds_finding(
                kernel,
                &seen.bounds,
                &device_limits,
                seen.verdict,
                &seen.ignored_on,
                launch.map(|l| l.block_threads),
                &seen.command,
            ));
        }
        if !e.artifact.is_empty() {
            for finding in &mut findings {
                finding
                    .evidence
                    .insert("artifact".into(), e.artifact.clone().into());
            }
        }
        results.findings.extend(findings);
    }
}

/// Each binary's part of the build log: the parts of the ninja targets that built it, or the
/// whole log for every binary when no target matches one (a make or script build, whose
/// kernels the per-kernel names still tell apart).
fn log_part_per_binary<'l>(log: &'l str, binaries: &[&PathBuf]) -> Vec<Option<Cow<'l, str>>> {
    let stems: Vec<String> = binaries
        .iter()
        .map(|b| {
            b.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .collect();
    let mut parts: Vec<Option<Cow<str>>> = vec![None; binaries.len()];
    for part in split_by_target(log) {
        let Some(index) = part
            .target
            .as_deref()
            .and_then(|target| target_of_artifact(target, &stems))
        else {
            continue;
        };
        parts[index]
            .get_or_insert_with(|| Cow::Owned(String::new()))
            .to_mut()
            .push_str(part.text);
    }
    if parts.iter().all(Option::is_none) {
        // Borrowed: no copy of the whole log per binary.
        return vec![Some(Cow::Borrowed(log)); binaries.len()];
    }
    parts
}

/// One binary's `arch_coverage` findings and the code it holds.
struct Coverage {
    artifact: String,
    sass: Vec<String>,
    ptx: Vec<String>,
    findings: Vec<Finding>,
}

/// One `arch_coverage` finding per distinct gencode, not per artifact: the fork's 21 kernel
/// fatbins are built alike, and one finding naming them says the same as 21. When the
/// artifacts differ, each group's subject ends in `@` and its first artifact's name.
fn merge_coverage(coverage: Vec<Coverage>) -> Vec<Finding> {
    let mut groups: Vec<Coverage> = Vec::new();
    let mut members: Vec<Vec<String>> = Vec::new();
    for c in coverage {
        match groups
            .iter()
            .position(|g| g.sass == c.sass && g.ptx == c.ptx)
        {
            Some(index) => members[index].push(c.artifact),
            None => {
                members.push(vec![c.artifact.clone()]);
                groups.push(c);
            }
        }
    }
    let several = groups.len() > 1;
    groups
        .into_iter()
        .zip(members)
        .flat_map(|(group, artifacts)| {
            let first = group.artifact.clone();
            group.findings.into_iter().map(move |mut finding| {
                if several {
                    finding.subject = format!("{}@{first}", finding.subject);
                }
                if artifacts.len() > 1 {
                    finding.verdict = format!(
                        "{} (all {} artifacts: {})",
                        finding.verdict,
                        artifacts.len(),
                        artifacts.join(", ")
                    );
                }
                finding
                    .evidence
                    .insert("artifacts".into(), artifacts.clone().into());
                finding
            })
        })
        .collect()
}

struct BinaryContext<'c> {
    cuobjdump: &'c Path,
    binary: &'c Path,
    device: &'c str,
    toolchain: &'c [String],
    /// What ptxas said of this binary's kernels (its part of the build log, explicit logs).
    ptxas_kernels: &'c [KernelResources],
    /// ptxas's warnings in this binary's part of the build log.
    warnings: &'c [PtxasWarning],
    log_names: &'c [String],
}

/// Reads one binary: its `arch_coverage` (returned, to be merged across binaries) and the
/// kernels of the SASS that runs on the device (pushed to `examined`).
fn examine_binary(
    results: &mut CheckResults,
    examined: &mut Vec<Examined>,
    c: BinaryContext,
) -> Option<Coverage> {
    let path = c.binary.display().to_string();
    let file_name = c
        .binary
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.clone());
    let list_command = format!("{} --list-elf --list-ptx {path}", c.cuobjdump.display());
    let (sass, ptx) = match run_tool(c.cuobjdump, &["--list-elf", "--list-ptx", &path]) {
        ToolOutput::Printed(text) => (parse_list_elf(&text), parse_list_ptx(&text)),
        ToolOutput::NoDeviceCode => (Vec::new(), Vec::new()),
        ToolOutput::Failed(why) => {
            for check in CHECKS {
                results.skip(BACKEND, check, format!("`{list_command}` failed: {why}"));
            }
            return None;
        }
    };
    let coverage = Coverage {
        artifact: file_name.clone(),
        findings: arch_coverage(&sass, &ptx, c.toolchain, c.device, &list_command),
        sass: sass.clone(),
        ptx: ptx.clone(),
    };

    let chosen = match runs_on(&sass, &ptx, c.device) {
        CudaRuns::NativeSass(arch) | CudaRuns::CompatibleSass(arch) => arch,
        CudaRuns::PtxJit(p) => {
            skip_kernels(
                results,
                format!(
                    "{file_name}: {} JIT-compiles the {p} PTX, so no cubin says its registers",
                    c.device
                ),
            );
            return Some(coverage);
        }
        CudaRuns::Nothing => {
            skip_kernels(
                results,
                format!("{file_name}: no code in it runs on {}", c.device),
            );
            return Some(coverage);
        }
    };
    let usage_command = format!("{} --dump-resource-usage {path}", c.cuobjdump.display());
    let mut kernels = match run_tool(c.cuobjdump, &["--dump-resource-usage", &path]) {
        ToolOutput::Printed(text) => parse_resource_usage(&text),
        ToolOutput::NoDeviceCode => Vec::new(),
        ToolOutput::Failed(why) => {
            skip_kernels(results, format!("`{usage_command}` failed: {why}"));
            return Some(coverage);
        }
    };
    fill_unknown_arch(&mut kernels, &sass);
    let merged = merge_ptxas(&kernels, c.ptxas_kernels);
    let in_log = |k: &KernelResources| {
        c.ptxas_kernels
            .iter()
            .any(|p| p.name == k.name && p.arch == k.arch)
    };
    let from_log = kernels.iter().any(|k| k.arch == chosen && in_log(k));
    let command = if from_log {
        format!("{usage_command}; spills from {}", c.log_names.join(" "))
    } else {
        usage_command
    };
    let bounds = read_launch_bounds(results, c.cuobjdump, &path, &ptx);
    let before = examined.len();
    for kernel in merged.into_iter().filter(|k| k.arch == chosen) {
        let spills_known = in_log(&kernel);
        let seen = bounds.as_ref().and_then(|(bounds, bounds_command)| {
            let found = bounds.iter().find(|b| b.kernel == kernel.name)?;
            Some(bounds_seen(
                found,
                &kernel,
                spills_known,
                c.warnings,
                bounds_command,
                c.log_names,
            ))
        });
        examined.push(Examined {
            kernel,
            command: command.clone(),
            spills_known,
            artifact: file_name.clone(),
            bounds: seen,
        });
    }
    if examined.len() == before {
        skip_kernels(
            results,
            format!("{file_name}: cuobjdump lists no kernel for {chosen}"),
        );
    }
    Some(coverage)
}

/// The launch bounds the binary's PTX keeps (`cuobjdump --dump-ptx`), with the command; `None`
/// (and a skipped check) when it cannot be read. A binary without PTX keeps none.
fn read_launch_bounds(
    results: &mut CheckResults,
    cuobjdump: &Path,
    path: &str,
    ptx: &[String],
) -> Option<(Vec<LaunchBounds>, String)> {
    if ptx.is_empty() {
        return None;
    }
    let command = format!("{} --dump-ptx {path}", cuobjdump.display());
    match run_tool(cuobjdump, &["--dump-ptx", path]) {
        ToolOutput::Printed(text) => Some((parse_ptx_launch_bounds(&text), command)),
        ToolOutput::NoDeviceCode => None,
        ToolOutput::Failed(why) => {
            results.skip(
                BACKEND,
                "launch_bounds",
                format!("`{command}` failed: {why}"),
            );
            None
        }
    }
}

/// What ptxas did with `kernel`'s bounds on its architecture: ignored when it warned so,
/// honoured when its verbose lines for the kernel are there without such a warning, unknown
/// without verbose lines.
fn bounds_seen(
    bounds: &LaunchBounds,
    kernel: &KernelResources,
    verbose_lines: bool,
    warnings: &[PtxasWarning],
    bounds_command: &str,
    log_names: &[String],
) -> BoundsSeen {
    let ignoring: Vec<&PtxasWarning> = warnings
        .iter()
        .filter(|w| w.kernel == kernel.name && w.ignores_launch_bounds())
        .collect();
    let mut ignored_on: Vec<String> = ignoring.iter().filter_map(|w| w.arch.clone()).collect();
    ignored_on.dedup();
    let verdict = if ignoring
        .iter()
        .any(|w| w.arch.as_deref() == Some(kernel.arch.as_str()))
    {
        PtxasVerdict::Ignored
    } else if verbose_lines {
        PtxasVerdict::Honoured
    } else {
        PtxasVerdict::Unknown
    };
    let command = if log_names.is_empty() {
        bounds_command.to_string()
    } else {
        format!(
            "{bounds_command}; ptxas warnings from {}",
            log_names.join(" ")
        )
    };
    BoundsSeen {
        bounds: bounds.clone(),
        verdict,
        ignored_on,
        command,
    }
}

enum ToolOutput {
    Printed(String),
    /// cuobjdump on a file without device code (exit 255, "does not contain device code").
    NoDeviceCode,
    Failed(String),
}

fn run_tool(tool: &Path, args: &[&str]) -> ToolOutput {
    match Command::new(tool).args(args).output() {
        Err(err) => ToolOutput::Failed(format!("cannot run {}: {err}", tool.display())),
        Ok(out) => {
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            if out.status.success() {
                ToolOutput::Printed(stdout)
            } else if stderr.contains("does not contain device code")
                || stdout.contains("does not contain device code")
            {
                ToolOutput::NoDeviceCode
            } else {
                let message = stderr
                    .lines()
                    .chain(stdout.lines())
                    .map(str::trim)
                    .find(|l| !l.is_empty())
                    .unwrap_or("no output")
                    .to_string();
                ToolOutput::Failed(format!("{} ({message})", out.status))
            }
        }
    }
}

/// `name` in `tools_dir` when given (no fallback, so a test can hide a tool), else on `PATH`.
fn find_tool(name: &str, tools_dir: Option<&Path>) -> Option<PathBuf> {
    let dirs: Vec<PathBuf> = match tools_dir {
        Some(dir) => vec![dir.to_path_buf()],
        None => std::env::var_os("PATH")
            .map(|path| std::env::split_paths(&path).collect())
            .unwrap_or_default(),
    };
    dirs.into_iter()
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

fn is_ptxas_log(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n == "ptxas.log" || n.ends_with(".ptxas.log"))
}

fn skip_all(results: &mut CheckResults, reason: &str) {
    for check in CHECKS {
        results.skip(BACKEND, check, reason);
    }
}

fn skip_kernels(results: &mut CheckResults, reason: String) {
    results.skip(BACKEND, "registers", reason.clone());
    results.skip(BACKEND, "occupancy", reason.clone());
    results.skip(BACKEND, "launch_bounds", reason);
}

#[cfg(test)]
mod tests {
    use super::*;
    use abfleet_core::finding::Finding;

    /// The kernels compiled for real by these tests: one light, one that needs 254 registers,
    /// one squeezed into 64 by `__launch_bounds__(128, 8)` so that it spills.
    const SOURCE: &str = r#"
__global__ void light(const float *in, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * 2.0f;
}
#define ACC96(NAME, BOUNDS)                                                        \
__global__ void BOUNDS NAME(const double *a, const double *b, double *out, int n) { \
    double acc[96];                                                                 \
    _Pragma("unroll") for (int k = 0; k < 96; ++k) acc[k] = 0.0;                    \
    for (int i = threadIdx.x; i + 96 <= n; i += 96 * blockDim.x) {                  \
        _Pragma("unroll") for (int k = 0; k < 96; ++k) acc[k] += a[i + k] * b[i + k] * (k + 1); \
    }                                                                               \
    double s = 0.0;                                                                 \
    _Pragma("unroll") for (int k = 0; k < 96; ++k) s += acc[k] * acc[(k + 13) % 96]; \
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;                                 \
}
ACC96(wide, )
ACC96(squeezed, __launch_bounds__(128, 8))
"#;

    /// A real build: `nvcc -c` for sm_80 and sm_86 SASS plus compute_86 PTX, with its
    /// `-Xptxas -v` log. `None` (with the reason printed) only when ABFLEET_SKIP_CUDA=1;
    /// without nvcc and without that variable the test fails.
    fn build(dir: &Path) -> Option<(PathBuf, PathBuf)> {
        let Some(nvcc) = find_tool("nvcc", None) else {
            if std::env::var("ABFLEET_SKIP_CUDA").as_deref() == Ok("1") {
                eprintln!("skipped: nvcc is not on PATH and ABFLEET_SKIP_CUDA=1");
                return None;
            }
            panic!(
                "nvcc is not on PATH: install the CUDA toolkit (Debian: nvidia-cuda-toolkit), or set ABFLEET_SKIP_CUDA=1 to skip this test"
            );
        };
        let source = dir.join("k.cu");
        std::fs::write(&source, SOURCE).unwrap();
        let object = dir.join("k.o");
        let out = Command::new(nvcc)
            .arg("-O3")
            .arg("-c")
            .arg(&source)
            .arg("-o")
            .arg(&object)
            .args(["-gencode", "arch=compute_80,code=sm_80"])
            .args(["-gencode", "arch=compute_86,code=sm_86"])
            .args(["-gencode", "arch=compute_86,code=compute_86"])
            .args(["-Xptxas", "-v"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "nvcc failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let log = dir.join("k.ptxas.log");
        std::fs::write(&log, &out.stderr).unwrap();
        Some((object, log))
    }

    fn input<'a>(
        artifacts: &'a [PathBuf],
        device: Option<&'a str>,
        launches: &'a [KernelLaunch],
    ) -> CudaCheckInput<'a> {
        CudaCheckInput {
            artifacts,
            device_arch: device,
            block_threads: 128,
            launches,
            build_log: None,
        }
    }

    fn finding<'r>(results: &'r CheckResults, check: &str, subject: &str) -> &'r Finding {
        results
            .findings
            .iter()
            .find(|f| f.check == check && f.subject.starts_with(subject))
            .unwrap_or_else(|| panic!("no {check} {subject} in {:#?}", results.findings))
    }

    #[test]
    fn a_real_build_on_an_sm_86_device() {
        let dir = tempfile::tempdir().unwrap();
        let Some((object, log)) = build(dir.path()) else {
            return;
        };
        let artifacts = vec![object, log];
        let launches = vec![KernelLaunch {
            kernel: "wide".into(),
            grid_blocks: 40,
            block_threads: 128,
        }];
        let results = run_cuda_checks(&input(&artifacts, Some("8.6"), &launches), Some(84));

        let device = finding(&results, "arch_coverage", "device");
        assert_eq!(device.severity, Severity::Ok, "{}", device.verdict);
        assert_eq!(
            device.evidence["sass"],
            serde_json::json!(["sm_80", "sm_86"])
        );
        assert_eq!(device.evidence["ptx"], serde_json::json!(["compute_86"]));
        assert!(
            device.command.contains("--list-elf --list-ptx"),
            "{}",
            device.command
        );
        let toolchain = finding(&results, "arch_coverage", "toolchain");
        assert_eq!(
            toolchain.severity,
            Severity::Warn,
            "nvcc targets newer than sm_86"
        );
        assert_eq!(toolchain.evidence["floor"], 80);
        assert_eq!(toolchain.evidence["newest"], 86);

        // Kernels of the sm_86 cubin only: 3 kernels × (registers, occupancy), and the
        // launch bounds of the one that has them.
        assert_eq!(results.findings.len(), 2 + 7, "{:#?}", results.findings);
        // (128, 8): 1024 threads fit an sm_86 SM (1536), and the -v log has its lines without
        // a warning: honoured.
        let bounds = finding(&results, "launch_bounds", "_Z8squeezedPKdS0_Pdi@sm_86");
        assert_eq!(bounds.severity, Severity::Ok, "{}", bounds.verdict);
        assert_eq!(bounds.evidence["honoured"], true);
        assert_eq!(bounds.evidence["min_blocks"], 8);
        assert!(results.findings[2..]
            .iter()
            .all(|f| f.subject.ends_with("@sm_86")));
        let squeezed = finding(&results, "registers", "_Z8squeezedPKdS0_Pdi@sm_86");
        assert_eq!(squeezed.severity, Severity::Warn);
        assert_eq!(squeezed.evidence["registers"], 64);
        assert!(
            squeezed.evidence["spill_bytes"].as_u64().unwrap() > 0,
            "the log's spills"
        );
        assert!(
            squeezed.command.contains("k.ptxas.log"),
            "{}",
            squeezed.command
        );
        let light = finding(&results, "registers", "_Z5lightPKfPfi@sm_86");
        assert_eq!(light.severity, Severity::Ok);

        // `wide` is launched with 40 blocks on 84 SMs: grid-bound, no warning.
        let wide = finding(&results, "occupancy", "_Z4widePKdS0_Pdi@sm_86");
        assert_eq!(wide.evidence["bound"], "grid");
        assert_eq!(wide.severity, Severity::Ok, "{}", wide.verdict);
        assert!(wide.evidence["registers"].as_u64().unwrap() > 200);
        assert!(results.skipped.is_empty(), "{:?}", results.skipped);
    }

    #[test]
    fn a_real_build_on_devices_it_does_not_target() {
        let dir = tempfile::tempdir().unwrap();
        let Some((object, _log)) = build(dir.path()) else {
            return;
        };
        let artifacts = vec![object];

        // sm_89 runs the sm_86 cubin: warn, and the kernels are those of sm_86.
        let results = run_cuda_checks(&input(&artifacts, Some("sm_89"), &[]), None);
        let device = finding(&results, "arch_coverage", "device");
        assert_eq!(device.severity, Severity::Warn);
        assert!(
            device
                .verdict
                .contains("runs sm_86 SASS, not tuned for sm_89"),
            "{}",
            device.verdict
        );
        let wide = finding(&results, "occupancy", "_Z4widePKdS0_Pdi@sm_86");
        assert_eq!(wide.evidence["bound"], "unknown");
        // Without the ptxas log, the squeezed kernel's stack cannot be called spills or not.
        let squeezed = finding(&results, "registers", "_Z8squeezedPKdS0_Pdi@sm_86");
        assert_eq!(squeezed.evidence["spills_known"], false);
        assert!(
            squeezed.verdict.contains("cuobjdump cannot tell apart"),
            "{}",
            squeezed.verdict
        );
        assert_eq!(wide.evidence["max_warps"], 48);
        assert_eq!(wide.severity, Severity::Warn, "{}", wide.verdict);

        // sm_90 JIT-compiles the compute_86 PTX: no cubin to read registers from.
        let results = run_cuda_checks(&input(&artifacts, Some("9.0"), &[]), Some(132));
        let device = finding(&results, "arch_coverage", "device");
        assert!(
            device.verdict.contains("PTX JIT at first launch"),
            "{}",
            device.verdict
        );
        assert!(results.findings.iter().all(|f| f.check == "arch_coverage"));
        assert!(results.skipped.iter().any(|s| s.check == "registers"));

        // sm_75 can run nothing in it.
        let results = run_cuda_checks(&input(&artifacts, Some("7.5"), &[]), None);
        assert_eq!(
            finding(&results, "arch_coverage", "device").severity,
            Severity::Fail
        );
    }

    #[test]
    fn a_host_object_has_no_device_code() {
        let dir = tempfile::tempdir().unwrap();
        if build(dir.path()).is_none() {
            return;
        }
        // A host-only object: cuobjdump exits 255 with "does not contain device code".
        let host = dir.path().join("host.o");
        std::fs::write(dir.path().join("host.cpp"), "int f() { return 1; }\n").unwrap();
        let out = Command::new(find_tool("nvcc", None).unwrap())
            .args(["-x", "c++", "-c", "-o"])
            .arg(&host)
            .arg(dir.path().join("host.cpp"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let artifacts = vec![host];
        let results = run_cuda_checks(&input(&artifacts, Some("8.9"), &[]), None);
        let device = finding(&results, "arch_coverage", "device");
        assert_eq!(device.severity, Severity::Fail);
        assert!(
            device.verdict.contains("no device code"),
            "{}",
            device.verdict
        );
    }

    #[test]
    fn missing_tools_or_device_are_skips() {
        let artifacts = vec![PathBuf::from("/nonexistent/k.o")];
        let no_tools = tempfile::tempdir().unwrap();
        let results = run_cuda_checks_with_tools(
            &input(&artifacts, Some("8.9"), &[]),
            None,
            Some(no_tools.path()),
        );
        assert!(results.findings.is_empty());
        assert_eq!(results.skipped.len(), 4);
        assert!(results
            .skipped
            .iter()
            .all(|s| s.reason.contains("cuobjdump not found")));

        let results = run_cuda_checks(&input(&artifacts, None, &[]), None);
        assert!(results.findings.is_empty());
        assert_eq!(
            results
                .skipped
                .iter()
                .map(|s| s.check.as_str())
                .collect::<Vec<_>>(),
            CHECKS
        );
        assert!(results.skipped[0].reason.contains("no NVIDIA GPU"));
    }

    #[test]
    fn recorded_ptxas_log_alone_gives_kernel_findings() {
        let log = PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fixtures/probes/toolchain-cuda-11.8-many-kernels/nvcc-Xptxas-v-build.log"
        ));
        // The file is not named *.ptxas.log; copy it under a name the agent reads as a log.
        let dir = tempfile::tempdir().unwrap();
        let named = dir.path().join("many_kernels.ptxas.log");
        std::fs::copy(&log, &named).unwrap();
        let artifacts = vec![named];
        let results = run_cuda_checks(&input(&artifacts, Some("8.9"), &[]), None);
        assert_eq!(results.findings.len(), 14, "7 kernels × 2");
        let spill = finding(
            &results,
            "registers",
            "_Z17dot_acc96_boundedPKdS0_Pdi@sm_89",
        );
        assert_eq!(spill.evidence["spill_bytes"], 1544);
        assert!(results.skipped.iter().any(|s| s.check == "arch_coverage"));
    }

    #[test]
    fn launches_deserialize_strictly() {
        let launch: KernelLaunch =
            serde_json::from_str(r#"{"kernel":"ssim_rows","grid_blocks":60,"block_threads":256}"#)
                .unwrap();
        assert_eq!(launch.grid_blocks, 60);
        assert!(serde_json::from_str::<KernelLaunch>(
            r#"{"kernel":"k","grid_blocks":1,"block_threads":1,"blocks":2}"#
        )
        .is_err());
    }
}
