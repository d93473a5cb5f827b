//! One module per subcommand; `run` dispatches.

mod agent_gc;
mod bisect;
mod calibrate;
mod certificates;
mod certs;
mod docs;
mod docs_pull_request;
mod follow;
mod lists;
mod local;
mod manual;
mod occupancy;
mod report;
mod serve;
mod submit;

use crate::cli::{AgentAction, AgentCommand, Command, ConfigCommand, CoordinatorArgs, DocsCommand};
use crate::failure::{Classify, Failure};

pub async fn run(command: Command) -> Result<i32, Failure> {
    match command {
        Command::Local(args) => local::run(args).await,
        Command::Calibrate {
            spec,
            trials,
            out,
            data_dir,
            work_dir,
        } => calibrate::run(&spec, trials, out, &data_dir, &work_dir).await,
        Command::Coordinator(args) => serve::coordinator(args).await,
        Command::Agent(AgentCommand {
            action:
                Some(AgentAction::Gc {
                    work_dir,
                    max_cache_bytes,
                    dry_run,
                    config: _,
                }),
            ..
        }) => agent_gc::gc(&work_dir, max_cache_bytes, dry_run),
        Command::Agent(args) => serve::agent(args).await,
        Command::Submit(args) => submit::run(args).await,
        Command::Trigger(args) => submit::trigger(args).await,
        Command::Report {
            run_id,
            format,
            against: Some(earlier),
            source,
            ..
        } => report::against(&run_id, &earlier, format, &source).await,
        Command::Report {
            run_id,
            format,
            fail_on,
            against: None,
            source,
        } => report::run(&run_id, format, &fail_on.fail_on, &source).await,
        Command::History { query, source } => report::history(query, &source).await,
        Command::Runs {
            limit,
            all,
            format,
            source,
        } => lists::runs(if all { None } else { Some(limit) }, format, &source).await,
        Command::Agents {
            to: CoordinatorArgs {
                coordinator, tls, ..
            },
            format,
        } => lists::agents(&coordinator, &tls, format).await,
        Command::Cancel {
            run_id,
            to: CoordinatorArgs {
                coordinator, tls, ..
            },
        } => lists::cancel(&run_id, &coordinator, &tls).await,
        Command::Bisect {
            target,
            to: CoordinatorArgs {
                coordinator, tls, ..
            },
        } => bisect::run(target, &coordinator, &tls).await,
        Command::Docs {
            command: DocsCommand::Update { update, source },
        } => docs::update(update, &source).await,
        Command::Docs {
            command: DocsCommand::PullRequest(args),
        } => docs_pull_request::run(args).await,
        Command::Watch {
            run_id,
            to: CoordinatorArgs {
                coordinator, tls, ..
            },
            out,
            fail_on,
        } => submit::watch(&run_id, &coordinator, &tls, out, &fail_on.fail_on).await,
        Command::Config {
            command: ConfigCommand::Check { file, format },
        } => Ok(crate::config::check_file(&file, format)),
        Command::Drain {
            agent_id,
            resume,
            to: CoordinatorArgs {
                coordinator, tls, ..
            },
        } => lists::drain(&agent_id, resume, &coordinator, &tls).await,
        Command::Certs { command } => certs::run(command).await,
        Command::Completions { shell } => manual::completions(shell),
        Command::Man { out } => manual::man_pages(&out),
        Command::Occupancy(args) => occupancy::run(&args),
    }
}

/// Connects the control client, with an error that says what to check.
async fn control_client(
    url: &str,
    tls: &crate::cli::TlsArgs,
) -> Result<
    abfleet_proto::pb::control_service_client::ControlServiceClient<tonic::transport::Channel>,
    Failure,
> {
    use abfleet_proto::transport::CONNECT_TIMEOUT;
    let unreachable = |err: &dyn std::fmt::Display| {
        Failure::infra(anyhow::anyhow!(
            "failed to reach the coordinator at {url}: {err}; start one with `abfleet coordinator`, or pass --coordinator"
        ))
    };
    let files = tls.load().usage()?;
    // Keep-alive pings (set by client_endpoint) make a peer that accepts TCP but never
    // answers end every call on the connection, unary or a progress stream, instead of
    // leaving the CLI waiting forever.
    let endpoint = abfleet_proto::transport::client_endpoint(url, files.as_ref()).usage()?;
    let channel = tokio::time::timeout(CONNECT_TIMEOUT, endpoint.connect())
        .await
        .map_err(|_| {
            unreachable(&format!(
                "no connection within {} s",
                CONNECT_TIMEOUT.as_secs()
            ))
        })?
        .map_err(|err| unreachable(&error_chain(&err)))?;
    Ok(
        abfleet_proto::pb::control_service_client::ControlServiceClient::new(channel)
            .max_decoding_message_size(abfleet_coordinator::MAX_REPLY_BYTES),
    )
}

/// An error with its sources, so a TLS failure says why (`invalid peer certificate: …`).
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(inner) = source {
        let part = inner.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = inner.source();
    }
    text
}

/// A gRPC status as an error a person can read.
fn status_error(what: &str, status: tonic::Status) -> Failure {
    let hint = if matches!(
        status.code(),
        tonic::Code::Unavailable | tonic::Code::Unknown
    ) {
        format!(
            "; the connection to the coordinator failed or it stopped answering (keep-alive pings \
             unanswered for {} s): check that the URL points at a running `abfleet coordinator`",
            abfleet_proto::transport::KEEP_ALIVE_TIMEOUT.as_secs()
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
