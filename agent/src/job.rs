//! One job, start to finish, as a sequence of stages over one [`JobContext`]: the
//! `started` event, fixtures prepared and verified, then by the generation's backend either
//! the GPU backend stage (`stages::backend`) or both sides built, the A/B cells
//! (`stages::ab_cells`), the CPU dispatch sweep (`stages::dispatch_sweep`, not on an
//! emulated host) and the untimed ISA checks (`stages::isa_checks`); a `[sweep]`
//! spec runs the retuning sweep (`stages::sweep`) instead. "Done" goes
//! out only after every earlier event was acknowledged; then the cache's eviction pass
//! (`cache`). This module only sequences.

use std::sync::atomic::Ordering;
use std::time::Duration;

use abfleet_core::events::{JobEventPayload, JobOutcome, LogLevel, Side};
use tracing::{info, warn};

use crate::build::BuiltSide;
pub use crate::context::JobContext;
use crate::context::{check_cancel, emit, fetch_and_build, prepare_fixtures, progress, Stop};

/// Runs a job and reports its outcome (already sent as the "done" event when possible).
/// Then the cache is brought under its budget, the job's entries still pinned (they are
/// what the next job is most likely to need), before the agent says it is ready again.
pub async fn run_job(mut ctx: JobContext) -> JobOutcome {
    let outcome = run_and_report(&mut ctx).await;
    ctx.cache.agent_cache().pass_blocking().await;
    outcome
}

async fn run_and_report(ctx: &mut JobContext) -> JobOutcome {
    info!(job_id = %ctx.job_id, attempt = ctx.attempt, name = %ctx.spec.name, "job started");
    let (outcome, error) = match run_stages(ctx).await {
        Ok(()) => (JobOutcome::Completed, None),
        Err(Stop::Cancelled) if ctx.handing_back.load(Ordering::SeqCst) => {
            // The agent is stopping: what was measured is uploaded (bounded: the coordinator
            // may be gone, and the spool keeps it for the next start), and no `done` goes
            // out — the coordinator requeues the job when the agent says it is leaving.
            info!(job_id = %ctx.job_id, "the agent is stopping; handing the job back");
            let _ = tokio::time::timeout(Duration::from_secs(10), ctx.sink.flush()).await;
            ctx.sink.close();
            return JobOutcome::Cancelled;
        }
        Err(Stop::Cancelled) => (
            JobOutcome::Cancelled,
            Some("the job was cancelled".to_string()),
        ),
        Err(Stop::Failed(error)) => (JobOutcome::Failed, Some(error)),
        Err(Stop::LeaseLost) => {
            warn!(job_id = %ctx.job_id, "lease lost; abandoning the job");
            ctx.sink.close();
            return JobOutcome::Failed;
        }
    };
    if let Some(error) = &error {
        let _ = ctx.sink.emit(&JobEventPayload::Log {
            level: LogLevel::Error,
            line: error.clone(),
        });
    }
    // The barrier: every earlier event is stored before "done" is sent.
    let flushed = match outcome {
        // A cancelled job does not wait long for a coordinator that may be gone.
        JobOutcome::Cancelled => tokio::time::timeout(Duration::from_secs(5), ctx.sink.flush())
            .await
            .unwrap_or(Ok(())),
        _ => ctx.sink.flush().await,
    };
    if flushed.is_ok() {
        let _ = ctx.sink.emit(&JobEventPayload::Done { outcome, error });
        let _ = tokio::time::timeout(Duration::from_secs(30), ctx.sink.flush()).await;
    }
    ctx.sink.close();
    info!(job_id = %ctx.job_id, ?outcome, "job finished");
    outcome
}

async fn run_stages(ctx: &mut JobContext) -> Result<(), Stop> {
    let calibration =
        std::fs::read_to_string(ctx.work_dir.join(abfleet_core::calibration::FILE_NAME))
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok());
    emit(
        ctx,
        JobEventPayload::Started {
            host: ctx.host.clone(),
            calibration,
        },
    )?;
    progress(
        ctx,
        "fixtures",
        "preparing and verifying fixtures".into(),
        0,
        None,
    )?;
    let prepared = prepare_fixtures(ctx).await?;
    if ctx.emulation.is_some() {
        // The emulator's times say nothing: one run per side gives the scores.
        ctx.spec.measure = crate::emulation::untimed_measure(&ctx.spec.measure);
    }
    if let Some(sweep) = ctx.spec.sweep.clone() {
        // A sweep times the fork alone, on whatever backend its generation has.
        return crate::stages::sweep::run_sweep(ctx, &sweep, &prepared).await;
    }
    let backend = abfleet_core::report::backend_of(&ctx.generation);
    if !matches!(backend, "" | "cpu" | "any") {
        return crate::stages::backend::run_backend(ctx, backend.to_string(), &prepared).await;
    }
    let mut built = Vec::new();
    for side in Side::BOTH {
        check_cancel(ctx)?;
        let recipe = match side {
            Side::Upstream => ctx.spec.upstream.build.clone(),
            Side::Fork => ctx.spec.fork.build.clone(),
        };
        built.push(fetch_and_build(ctx, side, &recipe).await?);
    }
    let built: [BuiltSide; 2] = built
        .try_into()
        .map_err(|_| Stop::Failed("internal: expected two built sides".into()))?;
    let cells = crate::stages::ab_cells::run_cells(ctx, &prepared, &built).await?;
    if let Some(sweep) = ctx.spec.backends.cpu.clone() {
        check_cancel(ctx)?;
        // The timed sweep only where times mean something; the untimed checks everywhere.
        if ctx.emulation.is_none() {
            crate::stages::dispatch_sweep::dispatch_sweep(ctx, &sweep, &prepared, &built[1])
                .await?;
        }
        check_cancel(ctx)?;
        crate::stages::isa_checks::isa_checks(ctx, &sweep, &prepared, &built[1]).await?;
    }
    progress(ctx, "done", cells.summary(), cells.cells, None)?;
    Ok(())
}
