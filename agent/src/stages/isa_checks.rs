//! The untimed ISA checks of a CPU generation (`[backends.cpu]`), which an emulated host runs
//! as well as a real one: every workload of the spec on the dispatch fixture, the fork's
//! binary run once per ISA level (`--cpumask`: scalar, NEON, everything on aarch64) and, on an
//! emulated host with variants, once more under each other vector length (SVE 256 and 512
//! bits); each feature's scores compared frame by frame (`core::retune::isa_parity`). On
//! aarch64 the fork's tree is scanned for SIMD it has on x86 and not on ARM, and ARM code it
//! compiles and never calls (`core::retune::simd_sources`).

use std::path::Path;

use abfleet_core::finding::CheckResults;
use abfleet_core::retune::isa_parity::{self, ScoredRun};
use abfleet_core::retune::simd_sources::{self, SourceFile};
use abfleet_core::spec::{default_levels, CpuDispatchSpec};
use tracing::info;

use crate::build::BuiltSide;
use crate::command_line::cell_command_line;
use crate::context::{
    attempt_dir, emit_checks, fork_binary_or_skip, off_runtime, progress, JobContext, Stop,
};
use crate::fixtures::PreparedFixture;
use crate::fork_run::{run_fork, run_fork_under, ForkRun};

/// Runs the checks and emits their findings and skipped checks.
pub(crate) async fn isa_checks(
    ctx: &mut JobContext,
    checks: &CpuDispatchSpec,
    prepared: &[PreparedFixture],
    fork: &BuiltSide,
) -> Result<(), Stop> {
    let Some(binary) = fork_binary_or_skip(ctx, fork, "feature_dispatch")? else {
        return Ok(());
    };
    let spec = ctx.spec.clone();
    let arch = ctx
        .emulation
        .as_ref()
        .map_or(std::env::consts::ARCH.to_string(), |e| e.arch.clone());
    let levels = if checks.levels.is_empty() {
        default_levels(&arch)
    } else {
        checks.levels.clone()
    };
    let index = spec
        .fixtures
        .iter()
        .position(|f| f.name == checks.fixture)
        .expect("the spec validated the checks' fixture");
    let (fixture, paths) = (&spec.fixtures[index], &prepared[index]);
    let variants = ctx
        .emulation
        .as_ref()
        .map(|e| (e.wrapper_name.clone(), e.variants.clone()));
    let out_dir = attempt_dir(ctx, "isa-checks")?;
    let output = out_dir.join(format!("out.{}", spec.command.output_format.extension()));
    let log = out_dir.join("run.log");
    let gate = isa_parity::Gate::of_spec(&spec);
    let level_names: Vec<&str> = levels.iter().map(|l| l.name.as_str()).collect();
    let mut results = CheckResults::default();
    for workload in &spec.workloads {
        crate::context::check_cancel(ctx)?;
        progress(
            ctx,
            "retune",
            format!(
                "ISA checks: {} at {} on {}",
                workload.name,
                level_names.join(", "),
                fixture.name
            ),
            spec.cell_count() as u32,
            Some(format!("isa/{}/{}", fixture.name, workload.name)),
        )?;
        let mut base_argv = cell_command_line(&spec, &binary, fixture, paths, workload, &output);
        base_argv.extend(checks.check_args.iter().cloned());
        let mut runs = Vec::new();
        for level in &levels {
            let mut argv = base_argv.clone();
            argv.push(checks.cpumask_option.clone());
            argv.push(level.cpumask.clone());
            let run = run_fork(ctx, &argv, &fork.tree, &output, &log).await?;
            if runs.is_empty() && !run.usable() {
                // The baseline does not score it: nothing to compare, and not an ISA
                // finding (the workload's A/B cell says why).
                let why = if rejected_feature(&run, &spec) {
                    format!(
                        "the fork rejects the workload (exit {})",
                        spec.command.unknown_feature_exit_code
                    )
                } else {
                    format!(
                        "the fork does not score it at `{}` ({}); its A/B cell says why",
                        level.name,
                        run.failure()
                    )
                };
                results.skip(
                    "cpu",
                    "feature_dispatch",
                    format!("{}: {why}, nothing to compare", workload.name),
                );
                break;
            }
            runs.push(scored(&level.name, run));
        }
        if runs.is_empty() {
            continue;
        }
        let command = checks_command(ctx, &base_argv, &checks.cpumask_option, &arch);
        results.findings.push(isa_parity::judge(
            "feature_dispatch",
            &workload.name,
            &runs,
            &gate,
            "ISA levels",
            &command,
        ));
        if let Some((default_name, variants)) = variants.as_ref().filter(|(_, v)| !v.is_empty()) {
            let top = runs.last().expect("at least the baseline ran");
            let mut lengths = vec![ScoredRun {
                name: default_name.clone(),
                scores: top.scores.clone(),
            }];
            for variant in variants {
                let run =
                    run_fork_under(ctx, &variant.wrapper, &base_argv, &fork.tree, &output, &log)
                        .await?;
                lengths.push(scored(&variant.name, run));
            }
            let wrappers: Vec<String> = variants.iter().map(|v| v.wrapper.join(" ")).collect();
            results.findings.push(isa_parity::judge(
                "vector_length",
                &workload.name,
                &lengths,
                &gate,
                "vector lengths",
                &format!(
                    "{} (and with the wrapper {})",
                    ctx.run_line(base_argv.clone()).join(" "),
                    wrappers.join(" | ")
                ),
            ));
        }
    }
    if arch == "aarch64" && !checks.sources.is_empty() {
        let root = fork.tree.join(&checks.sources);
        let shown = checks.sources.clone();
        let files = off_runtime(move || read_sources(&root)).await?;
        match files {
            Ok(files) => results.extend(simd_sources::judge(
                &files,
                &format!(
                    "#include of x86/ and arm64/ headers under {shown} of the fork's tree ({} files), arm64 sources named in its meson.build files",
                    files.len()
                ),
            )),
            Err(err) => results.skip("cpu", "isa_coverage", err),
        }
    }
    info!(
        findings = results.findings.len(),
        skipped = results.skipped.len(),
        "ISA checks finished"
    );
    emit_checks(ctx, results)?;
    Ok(())
}

/// The baseline run exited the way the fork rejects a feature it does not have.
fn rejected_feature(run: &ForkRun, spec: &abfleet_core::spec::JobSpec) -> bool {
    run.exit.code() == Some(spec.command.unknown_feature_exit_code)
}

fn scored(name: &str, run: ForkRun) -> ScoredRun {
    ScoredRun {
        name: name.to_string(),
        scores: if run.usable() {
            run.scores
        } else {
            Err(run.failure())
        },
    }
}

/// The command a maintainer reruns: the fork's line with `<cpumask>` where each level's
/// value goes, through the emulator when there is one.
fn checks_command(ctx: &JobContext, argv: &[String], option: &str, arch: &str) -> String {
    let mut line = ctx.run_line(argv.to_vec());
    line.push(option.to_string());
    line.push("<cpumask>".to_string());
    format!("{} (on {arch})", line.join(" "))
}

/// Every C/C++ source and header and every `meson.build` under `root`, paths relative to it.
fn read_sources(root: &Path) -> Result<Vec<SourceFile>, String> {
    if !root.is_dir() {
        return Err(format!(
            "[backends.cpu] sources `{}` is not a folder of the fork's tree",
            root.display()
        ));
    }
    let mut files = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir)
            .map_err(|err| format!("cannot list {}: {err}", dir.display()))?;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let wanted = name == "meson.build"
                || [".c", ".cpp", ".cc", ".h", ".hpp", ".S"]
                    .iter()
                    .any(|ext| name.ends_with(ext));
            if !wanted {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let relative = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .to_string_lossy()
                .into_owned();
            files.push(SourceFile {
                path: relative,
                text,
            });
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}
