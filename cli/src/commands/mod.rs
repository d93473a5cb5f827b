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
        Command::Drain {
            agent_id,
            resume,
            coordinator,
        } => lists::drain(&agent_id, resume, &coordinator).await,
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
    let unreachable = |err: &dyn std::fmt::Display| {
        Failure::infra(anyhow::anyhow!(
            "failed to reach the coordinator at {url}: {err}; start one with `abfleet coordinator`, or pass --coordinator"
        ))
    };
    let endpoint = tonic::transport::Endpoint::from_shared(url.to_string())
        .map_err(|err| Failure::usage(anyhow::anyhow!("`{url}` is not a coordinator URL: {err}")))?
        .connect_timeout(CONNECT_TIMEOUT)
        // A peer that accepts TCP but never answers (not a coordinator, or one that hangs)
        // fails its keep-alive pings and ends every call on the connection, unary or a
        // progress stream, instead of leaving the CLI waiting forever.
        .http2_keep_alive_interval(KEEP_ALIVE_INTERVAL)
        .keep_alive_timeout(KEEP_ALIVE_TIMEOUT)
        .keep_alive_while_idle(true);
    let channel = tokio::time::timeout(CONNECT_TIMEOUT, endpoint.connect())
        .await
        .map_err(|_| {
            unreachable(&format!(
                "no connection within {} s",
                CONNECT_TIMEOUT.as_secs()
            ))
        })?
        .map_err(|err| unreachable(&err))?;
    Ok(abfleet_proto::pb::control_service_client::ControlServiceClient::new(channel))
}

/// How long the CLI waits to connect to a coordinator.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// How often an open connection to the coordinator is pinged, and how long a ping may go
/// unanswered before the connection (and every call on it) fails.
const KEEP_ALIVE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);
const KEEP_ALIVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A gRPC status as an error a person can read.
fn status_error(what: &str, status: tonic::Status) -> Failure {
    let hint = if matches!(
        status.code(),
        tonic::Code::Unavailable | tonic::Code::Unknown
    ) {
        format!(
            "; the connection to the coordinator failed or it stopped answering (keep-alive pings \
             unanswered for {} s): check that the URL points at a running `abfleet coordinator`",
            KEEP_ALIVE_TIMEOUT.as_secs()
        )
    } else {
        String::new()
    };
    let error = anyhow::anyhow!("{what}: {}{hint}", status.message());
    match status.code() {
        tonic::Code::InvalidArgument | tonic::Code::NotFound => Failure::usage(error),
        _ => Failure::infra(error),
    }
}
