//! A job for a GPU generation (`cuda/…`, `hip/…`, `sycl/…`): the fork alone, built for that
//! backend in its own build directory (`GpuBackendSpec::recipe`: the fork's recipe with
//! `[backends.NAME] build_args`, or the backend's own commands), its artifacts inspected by
//! the backend's retuning checks, then its workloads timed with `--backend NAME` (skipped,
//! with the reason, when the backend's `link` steps failed on this host). Upstream is not built: it has no SYCL or
//! HIP backend, and GPU sections compare the fork with its own previous run.

use std::path::PathBuf;

use abfleet_core::backend_cell::{BackendCell, BackendCellStatus};
use abfleet_core::events::{JobEventPayload, Side};
use abfleet_core::finding::{CheckResults, SkippedCheck};
use abfleet_core::spec::{FixtureSpec, GpuBackendSpec, WorkloadSpec};
use tracing::info;

use crate::build::BuiltSide;
use crate::command_line::cell_command_line;
use crate::context::{
    attempt_dir, check_cancel, emit, emit_checks, fetch_and_build, off_runtime, progress,
    quiet_for_cell, JobContext, Stop,
};
use crate::fixtures::PreparedFixture;
use crate::fork_run::{median_and_spread, run_fork};
use crate::probe::HardwareInventory;
use crate::{loadavg, retune};

/// What the checks need to know of this generation's device.
#[derive(Debug, Clone, Default)]
pub(crate) struct DeviceFacts {
    /// `sm_90`, `gfx942`, `dg2`: the architecture part of the generation key.
    pub arch: String,
    pub sm_count: Option<u32>,
    pub sub_group_sizes: Vec<u32>,
    /// The host's inventory of this generation is recorded (`--probes`).
    pub simulated: bool,
}

impl DeviceFacts {
    fn of(ctx: &JobContext, backend: &str) -> DeviceFacts {
        let arch = ctx
            .generation
            .split_once('/')
            .map(|(_, rest)| rest.to_string())
            .unwrap_or_default();
        let simulated = ctx
            .host
            .generations
            .iter()
            .any(|g| g.key == ctx.generation && g.simulated);
        let hardware: Option<HardwareInventory> = ctx
            .host
            .hardware
            .clone()
            .and_then(|value| serde_json::from_value(value).ok());
        let mut facts = DeviceFacts {
            arch,
            simulated,
            ..DeviceFacts::default()
        };
        let Some(hardware) = hardware else {
            return facts;
        };
        match backend {
            "cuda" => {
                if let crate::probe::Probe::Found(gpus) = &hardware.nvidia {
                    let wanted = facts.arch.trim_start_matches("sm_").to_string();
                    // The GPU of this generation; `-q` text has no compute capability, so a
                    // single-kind host falls back to its first GPU.
                    facts.sm_count = gpus
                        .iter()
                        .find(|g| {
                            g.compute_capability
                                .as_deref()
                                .is_some_and(|cc| cc.replace('.', "") == wanted)
                        })
                        .or(gpus.first())
                        .and_then(|g| g.sm_count.or_else(|| published_sm_count(&g.name)));
                }
            }
            "sycl" => {
                if let crate::probe::Probe::Found(gpus) = &hardware.intel {
                    // The device of this generation: the exact variant (Level Zero IP
                    // version) beats the family of the key when the probe has it.
                    let family = facts.arch.clone();
                    let device = gpus
                        .iter()
                        .filter(|g| g.architecture.name() == family)
                        .max_by_key(|g| g.sub_group_sizes.len());
                    if let Some(gpu) = device {
                        facts.sub_group_sizes = gpu.sub_group_sizes.clone();
                        if let Some(exact) = retune::sycl::device_arch_of(gpu) {
                            facts.arch = exact;
                        }
                    }
                }
            }
            _ => {}
        }
        facts
    }
}

/// SM counts NVIDIA publishes per product, for when the tools do not print one (`nvidia-smi`
/// does not): the product pages and whitepapers of the H100, A100, L40S and RTX 4090. For the
/// other Ada and Blackwell parts, the CUDA core count of NVIDIA's product page or datasheet
/// divided by their 128 FP32 cores per SM (the Ada and Blackwell whitepapers). Checked in
/// order, so a variant (`Laptop`, `D`, `SUPER`) comes before its desktop card. A name the plain
/// `nvidia-smi` table cut short (`NVIDIA GeForce RTX 5090 ...`) gets none: it may be any variant.
fn published_sm_count(name: &str) -> Option<u32> {
    const TABLE: &[(&str, u32)] = &[
        ("H100 80GB HBM3", 132), // H100 SXM5
        ("H100 SXM", 132),
        ("H100 PCIe", 114),
        ("H100 NVL", 132),
        ("A100", 108),
        ("L40S", 142),
        ("RTX 4090 Laptop", 76), // 9,728 CUDA cores
        ("RTX 4090 D", 114),     // 14,592
        ("RTX 4090", 128),
        ("RTX 4080 Laptop", 58),         // 7,424
        ("RTX 4080 SUPER", 80),          // 10,240
        ("RTX 4080", 76),                // 9,728
        ("RTX 5090 Laptop", 82),         // 10,496
        ("RTX 5090", 170),               // 21,760 (the RTX 5090 D has as many)
        ("RTX 5080 Laptop", 60),         // 7,680
        ("RTX 5080", 84),                // 10,752
        ("RTX PRO 6000 Blackwell", 188), // 24,064; Workstation, Max-Q and Server Editions
        // NVIDIA's B200 datasheet gives no SM count: 148 is the multiprocessor count CUDA
        // reports on a B200. "NVIDIA B200", so that a GB200 does not match.
        ("NVIDIA B200", 148),
    ];
    if crate::probe::nvidia::name_is_cut_short(name) {
        return None;
    }
    TABLE
        .iter()
        .find(|(pattern, _)| name.contains(pattern))
        .map(|&(_, count)| count)
}

pub(crate) async fn run_backend(
    ctx: &mut JobContext,
    backend: String,
    prepared: &[PreparedFixture],
) -> Result<(), Stop> {
    let Some(config) = ctx.spec.backends.gpu(&backend).cloned() else {
        emit(
            ctx,
            JobEventPayload::CheckSkipped(SkippedCheck::new(
                &backend,
                "build",
                format!(
                    "the spec has no [backends.{backend}]: add build_args (and artifacts) to build and check the fork for {}",
                    ctx.generation
                ),
            )),
        )?;
        return Ok(());
    };
    let device = DeviceFacts::of(ctx, &backend);
    let recipe = config.recipe(&backend, &ctx.spec.fork.build);
    check_cancel(ctx)?;
    let built = fetch_and_build(ctx, Side::Fork, &recipe).await?;
    let log = retune::build_log::read_build_log(
        &backend,
        &recipe,
        &built.tree,
        std::path::Path::new(&built.record.log_path),
    );
    if !built.usable() {
        return report_unbuilt(ctx, &backend, &built, log);
    }
    progress(
        ctx,
        "retune",
        format!("{backend} checks on {}", device.arch),
        0,
        None,
    )?;
    let mut results = run_checks(&backend, &config, &built, &device).await;
    results.findings.extend(log.findings);
    emit_checks(ctx, results)?;
    if let Some(link) = &built.unlinked {
        let reason = format!(
            "not timed: the fork's {backend} kernels built and were checked, but its binary did not link here ({link}); a bench host with everything the full link needs (docs/retuning.md) times them"
        );
        emit(
            ctx,
            JobEventPayload::CheckSkipped(SkippedCheck::new(&backend, "timing", reason.clone())),
        )?;
        for (fixture, workload) in cells(&ctx.spec) {
            let cell =
                BackendCell::skipped(&backend, &fixture.name, &workload.name, reason.clone());
            emit(ctx, JobEventPayload::BackendCell(Box::new(cell)))?;
        }
    } else if config.timed {
        time_cells(ctx, &backend, &built, &device, prepared).await?;
    }
    Ok(())
}

/// A build that made nothing usable. The toolchain refusing a target the spec asks for is
/// "checks not run here", with its line; the fork's own code not compiling is a `build`
/// finding per file (its first error) and untimed cells; anything else fails the cells.
fn report_unbuilt(
    ctx: &mut JobContext,
    backend: &str,
    built: &BuiltSide,
    log: retune::build_log::BuildLogReading,
) -> Result<(), Stop> {
    let failed = built.record.error.as_deref().unwrap_or("see the build log");
    let (reason, status) = if let Some(line) = &log.unsupported_target {
        (
            format!(
                "checks not run here: this host's {backend} toolchain cannot build a target the spec asks for (`{line}`); a host with a newer toolchain runs them"
            ),
            BackendCellStatus::Skipped,
        )
    } else if !log.findings.is_empty() {
        let files: Vec<&str> = log.findings.iter().map(|f| f.subject.as_str()).collect();
        (
            format!(
                "not built: the fork's {backend} code does not compile ({}; see the build findings)",
                files.join(", ")
            ),
            BackendCellStatus::Skipped,
        )
    } else {
        (
            format!("the fork's {backend} build failed: {failed}"),
            BackendCellStatus::Failed,
        )
    };
    let mut results = CheckResults::default();
    results.skip(backend, "checks", reason.clone());
    if log.unsupported_target.is_none() {
        results.findings = log.findings;
    }
    emit_checks(ctx, results)?;
    for (fixture, workload) in cells(&ctx.spec) {
        let mut cell = BackendCell::new(backend, &fixture.name, &workload.name, status);
        cell.reason = Some(reason.clone());
        emit(ctx, JobEventPayload::BackendCell(Box::new(cell)))?;
    }
    Ok(())
}

fn cells(spec: &abfleet_core::spec::JobSpec) -> Vec<(FixtureSpec, WorkloadSpec)> {
    spec.fixtures
        .iter()
        .flat_map(|f| spec.workloads.iter().map(move |w| (f.clone(), w.clone())))
        .collect()
}

/// The same workload on the same binary with `--backend cpu` and its own feature names: the
/// backend's scores are gated against it (`BackendParity`). A CPU run that fails leaves the
/// cell ungated, with why.
async fn gate_against_cpu(
    ctx: &mut JobContext,
    cell: &mut BackendCell,
    backend_scores: &abfleet_core::scores::Scores,
    (binary, built): (&std::path::Path, &BuiltSide),
    fixture: &FixtureSpec,
    paths: &PreparedFixture,
    workload: &WorkloadSpec,
) -> Result<(), Stop> {
    let out_dir = attempt_dir(ctx, &format!("cpu-{}-{}", fixture.name, workload.name))?;
    let output = out_dir.join(format!(
        "out.{}",
        ctx.spec.command.output_format.extension()
    ));
    let log = out_dir.join("run.log");
    let mut argv = cell_command_line(&ctx.spec, binary, fixture, paths, workload, &output);
    argv.push("--backend".into());
    argv.push("cpu".into());
    let run = run_fork(ctx, &argv, &built.tree, &output, &log).await?;
    match (&run.scores, run.usable()) {
        (Ok(cpu), true) => {
            cell.cpu_parity = Some(abfleet_core::backend_cell::BackendParity::judge(
                cpu,
                backend_scores,
                &abfleet_core::retune::isa_parity::Gate::of_spec(&ctx.spec),
            ));
        }
        _ => {
            cell.reason = Some(format!(
                "not gated: the CPU path of the same binary did not score ({})",
                run.failure()
            ));
        }
    }
    Ok(())
}

/// The backend's checks on its build artifacts; a missing artifact or tool is a skipped
/// check with its reason.
async fn run_checks(
    backend: &str,
    config: &GpuBackendSpec,
    built: &BuiltSide,
    device: &DeviceFacts,
) -> CheckResults {
    let mut results = CheckResults::default();
    let mut artifacts: Vec<PathBuf> = Vec::new();
    for artifact in &config.artifacts {
        let path = built.tree.join(artifact);
        if path.exists() {
            if let Err(reason) =
                crate::input_checks::inside_tree("the artifact", &built.tree, artifact)
            {
                results.skip(backend, "artifacts", reason);
                continue;
            }
            artifacts.push(path);
        } else {
            results.skip(
                backend,
                "artifacts",
                format!(
                    "`{}` was not built: check [backends.{backend}] artifacts against what the build writes",
                    artifact.display()
                ),
            );
        }
    }
    let backend = backend.to_string();
    let config = config.clone();
    let device = device.clone();
    let build_log = PathBuf::from(&built.record.log_path);
    let checked = tokio::task::spawn_blocking(move || {
        check_artifacts(&backend, &config, &artifacts, &build_log, &device)
    })
    .await
    .unwrap_or_else(|err| {
        let mut failed = CheckResults::default();
        failed.skip("gpu", "checks", format!("the check task failed: {err}"));
        failed
    });
    results.extend(checked);
    results
}

fn check_artifacts(
    backend: &str,
    config: &GpuBackendSpec,
    artifacts: &[PathBuf],
    build_log: &std::path::Path,
    device: &DeviceFacts,
) -> CheckResults {
    let device_arch = (!device.arch.is_empty()).then_some(device.arch.as_str());
    match backend {
        "cuda" => retune::cuda::run_cuda_checks(
            &retune::cuda::CudaCheckInput {
                artifacts,
                device_arch,
                block_threads: config.block_threads,
                launches: &config.launch,
                build_log: build_log.is_file().then_some(build_log),
            },
            device.sm_count,
        ),
        "hip" => retune::hip::run_hip_checks(&retune::hip::HipCheckInput {
            artifacts,
            device_gfx: device_arch,
            configured_targets: config.gfx_targets.as_deref(),
            fork: retune::hip::ForkLaunches {
                launches: &config.launch,
                wave_size: config.wave_size,
            },
        }),
        "sycl" => retune::sycl::run_sycl_checks(&retune::sycl::SyclCheckInput {
            configured_aot: &config.aot_targets,
            device_arch,
            device_subgroups: &device.sub_group_sizes,
            required_subgroups: &config.subgroup_sizes,
            artifacts,
        }),
        "vulkan" => {
            let mut results = CheckResults::default();
            results.skip(
                "vulkan",
                "checks",
                "the Vulkan backend's shaders are SPIR-V that the driver compiles at run time: no register or occupancy figures to read from the build; its scores are gated against the CPU path instead",
            );
            results
        }
        other => {
            let mut results = CheckResults::default();
            results.skip(
                other,
                "checks",
                format!("abfleet has no checks for backend `{other}`"),
            );
            results
        }
    }
}

/// The fork's workloads with `--backend NAME`: a discarded warm-up, then the spec's runs.
/// A recorded (simulated) device is not timed: there is no such device on this host.
async fn time_cells(
    ctx: &mut JobContext,
    backend: &str,
    built: &BuiltSide,
    device: &DeviceFacts,
    prepared: &[PreparedFixture],
) -> Result<(), Stop> {
    let spec = ctx.spec.clone();
    let binary = built.binary.clone().expect("only a built fork is timed");
    for (index, fixture) in spec.fixtures.iter().enumerate() {
        for workload in &spec.workloads {
            check_cancel(ctx)?;
            if device.simulated {
                let reason = format!(
                    "not timed: this host's {backend} inventory is recorded (--probes), there is no real {} device here",
                    device.arch
                );
                let cell = BackendCell::skipped(backend, &fixture.name, &workload.name, reason);
                emit(ctx, JobEventPayload::BackendCell(Box::new(cell)))?;
                continue;
            }
            let label = format!("{}/{}", fixture.name, workload.name);
            progress(
                ctx,
                "timing",
                format!("timing {label} on {backend}"),
                0,
                Some(label),
            )?;
            let quiet = quiet_for_cell(ctx).await?;
            let cell = time_cell(
                ctx,
                backend,
                &binary,
                built,
                fixture,
                &prepared[index],
                workload,
            )
            .await?;
            drop(quiet);
            info!(backend, cell = %cell.label(), status = ?cell.status, "backend cell finished");
            emit(ctx, JobEventPayload::BackendCell(Box::new(cell)))?;
        }
    }
    Ok(())
}

async fn time_cell(
    ctx: &mut JobContext,
    backend: &str,
    binary: &std::path::Path,
    built: &BuiltSide,
    fixture: &FixtureSpec,
    paths: &PreparedFixture,
    workload: &WorkloadSpec,
) -> Result<BackendCell, Stop> {
    let out_dir = attempt_dir(
        ctx,
        &format!("{backend}-{}-{}", fixture.name, workload.name),
    )?;
    let output = out_dir.join(format!(
        "out.{}",
        ctx.spec.command.output_format.extension()
    ));
    let log = out_dir.join("run.log");
    let config = ctx.spec.backends.gpu(backend).cloned();
    let on_backend = WorkloadSpec {
        args: config
            .as_ref()
            .map_or(workload.args.clone(), |c| c.backend_args(&workload.args)),
        ..workload.clone()
    };
    let mut argv = cell_command_line(&ctx.spec, binary, fixture, paths, &on_backend, &output);
    argv.push("--backend".into());
    argv.push(backend.into());
    let mut cell = BackendCell::new(
        backend,
        &fixture.name,
        &workload.name,
        BackendCellStatus::Measured,
    );
    cell.load_avg_1min
        .push(off_runtime(loadavg::one_minute).await?);
    let mut scores = None;
    for round in 0..=ctx.spec.measure.runs {
        let run = run_fork(ctx, &argv, &built.tree, &output, &log).await?;
        if round == 0 && run.exit.code() == Some(ctx.spec.command.unknown_feature_exit_code) {
            cell.status = BackendCellStatus::Skipped;
            cell.reason = Some(format!(
                "the fork has no {backend} kernel for this workload: `{}` exits {} (an unknown feature)",
                on_backend.args.join(" "),
                ctx.spec.command.unknown_feature_exit_code
            ));
            break;
        }
        let reported = run.key("backend");
        let failure = if !run.usable() {
            Some(run.failure())
        } else if reported.as_deref().is_some_and(|r| r != backend) {
            Some(format!(
                "asked for --backend {backend}, the output says `{}` ran: the backend did not engage",
                reported.as_deref().unwrap_or("?")
            ))
        } else if run.metric_keys() == Some(0) {
            Some("the output has no metrics in frames[0]: the backend did not engage".to_string())
        } else {
            None
        };
        // The fork's JSON names no backend for a kernel asked by its suffixed name: the name
        // is what chose it, so the report says so.
        let asked = config
            .as_ref()
            .filter(|c| !c.feature_suffix.is_empty() && on_backend.args != workload.args)
            .map(|_| {
                format!(
                    "{backend} (asked as {})",
                    on_backend.expected_features().join(", ")
                )
            });
        cell.backend_reported = reported.or(asked).or(cell.backend_reported.take());
        cell.metric_keys = run.metric_keys().or(cell.metric_keys);
        if let Some(reason) = failure {
            cell.status = BackendCellStatus::Failed;
            cell.reason = Some(reason);
            cell.times.clear();
            break;
        }
        if round > 0 {
            cell.times.push(run.wall_s);
        }
        if scores.is_none() {
            scores = run.scores.ok();
        }
    }
    if let (BackendCellStatus::Measured, Some(scores)) = (cell.status, &scores) {
        cell.pooled = scores.pooled_means();
        if config.as_ref().is_some_and(|c| c.gate_against_cpu) {
            gate_against_cpu(
                ctx,
                &mut cell,
                scores,
                (binary, built),
                fixture,
                paths,
                workload,
            )
            .await?;
        }
    }
    cell.load_avg_1min
        .push(off_runtime(loadavg::one_minute).await?);
    if cell.status == BackendCellStatus::Measured {
        if let Some((median, spread)) = median_and_spread(&cell.times) {
            cell.median_seconds = Some(median);
            cell.spread_pct = Some(spread);
        }
    }
    Ok(cell)
}
