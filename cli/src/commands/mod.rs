//! One module per subcommand; `run` dispatches.

mod agent_gc;
mod bisect;
mod calibrate;
mod certificates;
mod certs;
mod docs;
mod docs_pull_request;
mod follow;
mod ids;
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
) -> Result<abfleet_proto::control_link::ControlLink, Failure> {
    use abfleet_proto::control_link::{ConnectError, ControlLink};
    let files = tls.load().usage()?;
    ControlLink::connect(url, files.as_ref())
        .await
        .map_err(|err| match err {
            ConnectError::Endpoint(err) => Failure::usage(anyhow::Error::from(err)),
            unreachable => {
                let detail = unreachable.to_string();
                match tls_failure(&detail) {
                    Some(why) => Failure::usage(anyhow::anyhow!(
                        "the TLS handshake with the coordinator failed ({detail}): {why}"
                    )),
                    None => Failure::infra(anyhow::anyhow!(
                        "failed to reach the coordinator at {url}: {detail}; start one with `abfleet coordinator`, or pass --coordinator"
                    )),
                }
            }
        })
}

/// What a TLS handshake failure in `detail` (rustls' words, through tonic) means and what to
/// check; `None` when it is no TLS failure.
fn tls_failure(detail: &str) -> Option<String> {
    const CHECK_FILES: &str = "check that --tls-ca is the fleet's ca.pem and that --tls-cert and --tls-key were issued by that fleet's `abfleet certs` (`abfleet certs show CERT` reads one back)";
    let why = if detail.contains("UnknownIssuer") || detail.contains("BadSignature") {
        "the coordinator's certificate is not signed by the CA in --tls-ca (another fleet's CA?)"
    } else if detail.contains("NotValidForName") {
        return Some("the coordinator's certificate does not name the host in the URL: dial the name it has, or issue it with this one (`abfleet certs issue --role coordinator --san HOST`)".to_string());
    } else if detail.contains("Expired") || detail.contains("NotValidYet") {
        "a certificate is outside its validity period (expired, or the clocks disagree)"
    } else if detail.contains("invalid peer certificate")
        || detail.contains("received fatal alert")
        || detail.contains("certificate required")
        || detail.contains("HandshakeFailure")
    {
        "the coordinator and this client do not accept each other's certificates"
    } else {
        return None;
    };
    Some(format!("{why}; {CHECK_FILES}"))
}

/// A failed control call as an error a person can read.
fn link_error(what: &str, err: abfleet_proto::LinkError) -> Failure {
    use abfleet_proto::LinkErrorKind;
    let hint = if err.kind() == LinkErrorKind::Unreachable {
        format!(
            "; the connection to the coordinator failed or it stopped answering (keep-alive pings \
             unanswered for {} s): check that the URL points at a running `abfleet coordinator`",
            abfleet_proto::transport::KEEP_ALIVE_TIMEOUT.as_secs()
        )
    } else {
        String::new()
    };
    let error = anyhow::anyhow!("{what}: {}{hint}", err.message());
    match err.kind() {
        LinkErrorKind::InvalidArgument | LinkErrorKind::NotFound => Failure::usage(error),
        _ => Failure::infra(error),
    }
}

#[cfg(test)]
mod tls_failure_tests {
    use super::tls_failure;

    #[test]
    fn a_tls_failure_says_which_certificate_problem_it_is() {
        let foreign =
            tls_failure("transport error: invalid peer certificate: UnknownIssuer").unwrap();
        assert!(
            foreign
                .starts_with("the coordinator's certificate is not signed by the CA in --tls-ca"),
            "{foreign}"
        );
        let name = tls_failure("invalid peer certificate: NotValidForNameContext { .. }").unwrap();
        assert!(name.contains("--san HOST"), "{name}");
        assert_eq!(
            tls_failure("transport error: Connection refused (os error 111)"),
            None
        );
    }
}
