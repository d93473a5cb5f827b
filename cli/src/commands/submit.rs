//! `abfleet submit`: validate a spec here, send it to a coordinator, optionally follow it.

use std::path::{Path, PathBuf};

use abfleet_core::spec::JobSpec;
use abfleet_proto::pb;

use super::follow::{follow, OnInterrupt};
use super::{control_client, status_error};
use crate::cli::{TlsArgs, Trigger};
use crate::failure::{Classify, Failure};

pub async fn run(
    spec_path: &Path,
    coordinator: &str,
    tls: &TlsArgs,
    wait: bool,
    out: Option<PathBuf>,
    trigger: Trigger,
) -> Result<i32, Failure> {
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
    let mut client = control_client(coordinator, tls).await?;
    let run_id = client
        .submit_run(pb::SubmitRunRequest {
            spec_json,
            trigger: trigger.as_str().to_string(),
            spec_origin: spec_path.display().to_string(),
        })
        .await
        .map_err(|s| status_error("failed to submit the run", s))?
        .into_inner()
        .run_id;
    if !wait {
        println!("{run_id}");
        return Ok(0);
    }
    eprintln!("submitted run {run_id}");
    follow(&mut client, &run_id, out, OnInterrupt::Detach).await
}
