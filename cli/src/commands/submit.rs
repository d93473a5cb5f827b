//! `abfleet submit` and `abfleet trigger`: validate a spec here (or name the coordinator's
//! milestone spec), send it to a coordinator, optionally follow it.

use std::path::{Path, PathBuf};

use abfleet_core::spec::JobSpec;
use abfleet_proto::control_link::{SpecToRun, Submission};

use super::follow::{follow, OnInterrupt};
use super::{control_client, link_error};
use crate::cli::{CoordinatorArgs, FailOnArg, SubmitCommand, TlsArgs, TriggerArg, TriggerCommand};
use crate::failure::{Classify, Failure};
use abfleet_core::fail_on::FailOn;

/// `abfleet submit SPEC`: the run's id printed, or with `--wait` its progress, report and
/// exit code.
pub async fn run(args: SubmitCommand) -> Result<i32, Failure> {
    let SubmitCommand {
        spec: spec_path,
        to: CoordinatorArgs {
            coordinator, tls, ..
        },
        wait,
        out,
        trigger: TriggerArg { trigger },
        fail_on: FailOnArg { fail_on },
    } = args;
    let (spec_path, coordinator, tls, fail_on) = (&spec_path, &coordinator, &tls, &fail_on[..]);
    let spec_json = load_spec(spec_path)?;
    let client = control_client(coordinator, tls).await?;
    let run_id = client
        .submit(Submission::new(
            SpecToRun::Json(spec_json),
            trigger.as_str(),
            &spec_path.display().to_string(),
        ))
        .await
        .map_err(|err| link_error("failed to submit the run", err))?;
    if !wait {
        println!("{run_id}");
        return Ok(0);
    }
    eprintln!("submitted run {run_id}");
    follow(&client, &run_id, out, OnInterrupt::Detach, fail_on).await
}

/// A spec read and validated here, as JSON the coordinator takes.
fn load_spec(spec_path: &Path) -> Result<String, Failure> {
    // Loading resolves relative paths against the spec's directory, so agents get absolute ones.
    let spec = JobSpec::load(spec_path).usage()?;
    if let Some(warning) = spec.measure.verdict_limit_warning() {
        eprintln!("warning: {warning}");
    }
    let spec_json = spec.to_json();
    if spec_json.len() > abfleet_coordinator::MAX_SPEC_JSON_BYTES {
        return Err(Failure::usage(anyhow::anyhow!(
            "{} is {} bytes as JSON, over the coordinator's limit of {} bytes; a spec names its fixtures and commands, it does not carry data",
            spec_path.display(),
            spec_json.len(),
            abfleet_coordinator::MAX_SPEC_JSON_BYTES
        )));
    }
    Ok(spec_json)
}

/// `abfleet trigger`: a run started for a reason (with SPEC, or the coordinator's
/// milestone spec), then as `submit`.
pub async fn trigger(args: TriggerCommand) -> Result<i32, Failure> {
    let TriggerCommand {
        reason,
        note,
        pr,
        spec,
        to: CoordinatorArgs {
            coordinator, tls, ..
        },
        wait,
        out,
        fail_on: FailOnArg { fail_on },
    } = args;
    let (coordinator, tls, fail_on) = (&coordinator, &tls, &fail_on[..]);
    let (spec_to_run, spec_origin) = match spec.as_deref() {
        Some(path) => (
            SpecToRun::Json(load_spec(path)?),
            path.display().to_string(),
        ),
        None => (SpecToRun::Milestone, String::new()),
    };
    let client = control_client(coordinator, tls).await?;
    let run_id = client
        .submit(Submission {
            trigger_note: Some(note.clone()).filter(|note| !note.is_empty()),
            pull_request: pr,
            ..Submission::new(spec_to_run, reason.as_str(), &spec_origin)
        })
        .await
        .map_err(|err| link_error("failed to trigger the run", err))?;
    if !wait {
        println!("{run_id}");
        return Ok(0);
    }
    eprintln!("triggered run {run_id} ({}: {})", reason.as_str(), note);
    follow(&client, &run_id, out, OnInterrupt::Detach, fail_on).await
}

/// `abfleet watch RUN`: follows a run already going (or finished: its report at once).
pub async fn watch(
    run_id: &str,
    coordinator: &str,
    tls: &TlsArgs,
    out: Option<PathBuf>,
    fail_on: &[FailOn],
) -> Result<i32, Failure> {
    let client = control_client(coordinator, tls).await?;
    let parsed = super::ids::run_id(&client, run_id).await?;
    follow(&client, &parsed, out, OnInterrupt::Detach, fail_on).await
}
