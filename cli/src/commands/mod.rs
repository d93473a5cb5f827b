//! One module per subcommand; `run` dispatches.

mod calibrate;
mod certs;
mod follow;
mod lists;
mod local;
mod occupancy;
mod report;
mod serve;
mod submit;

use crate::cli::Command;
use crate::failure::Failure;

pub async fn run(command: Command) -> Result<i32, Failure> {
    match command {
        Command::Local {
            spec,
            out,
            data_dir,
            work_dir,
            trigger,
        } => local::run(&spec, out, &data_dir, &work_dir, trigger.trigger).await,
        Command::Calibrate {
            spec,
            trials,
            out,
            data_dir,
            work_dir,
        } => calibrate::run(&spec, trials, out, &data_dir, &work_dir).await,
        Command::Coordinator {
            listen,
            data_dir,
            lease_seconds,
            heartbeat_seconds,
            max_attempts,
        } => {
            serve::coordinator(
                listen,
                &data_dir,
                lease_seconds,
                heartbeat_seconds,
                max_attempts,
            )
            .await
        }
        Command::Agent {
            coordinator,
            work_dir,
            probes,
            policy,
        } => {
            serve::agent(
                &coordinator,
                &work_dir,
                probes.as_deref(),
                policy.as_deref(),
            )
            .await
        }
        Command::Submit {
            spec,
            coordinator,
            wait,
            out,
            trigger,
        } => submit::run(&spec, &coordinator, wait, out, trigger.trigger).await,
        Command::Report {
            run_id,
            format,
            source,
        } => report::run(&run_id, format, &source).await,
        Command::Runs { source } => lists::runs(&source).await,
        Command::Agents { coordinator } => lists::agents(&coordinator).await,
        Command::Cancel {
            run_id,
            coordinator,
        } => lists::cancel(&run_id, &coordinator).await,
        Command::Certs { command } => certs::run(command),
        Command::Occupancy {
            arch,
            block,
            regs,
            vgprs,
            sgprs,
            smem,
        } => occupancy::run(&occupancy::OccupancyArgs {
            arch,
            block,
            regs,
            vgprs,
            sgprs,
            smem,
        }),
    }
}

/// Connects the control client, with an error that says what to check.
async fn control_client(
    url: &str,
) -> Result<
    abfleet_proto::pb::control_service_client::ControlServiceClient<tonic::transport::Channel>,
    Failure,
> {
    abfleet_proto::pb::control_service_client::ControlServiceClient::connect(url.to_string())
        .await
        .map_err(|err| {
            Failure::infra(anyhow::anyhow!(
                "failed to reach the coordinator at {url}: {err}; start one with `abfleet coordinator`, or pass --coordinator"
            ))
        })
}

/// A gRPC status as an error a person can read.
fn status_error(what: &str, status: tonic::Status) -> Failure {
    let error = anyhow::anyhow!("{what}: {}", status.message());
    match status.code() {
        tonic::Code::InvalidArgument | tonic::Code::NotFound => Failure::usage(error),
        _ => Failure::infra(error),
    }
}
