//! `abfleet`: the one user-facing binary, a thin layer of argument parsing over the
//! coordinator, agent and domain crates. Exit codes are documented in `--help`.
#![forbid(unsafe_code)]

mod cli;
mod client_profile;
mod commands;
mod config;
mod defaults;
mod exit_summary;
mod failure;
mod findings;
mod github_config;
mod log_writer;
mod notify_config;
mod profile;
mod progress;
mod relative_paths;
mod table;
mod terminal_text;
#[cfg(test)]
mod test_reports;
mod text_table;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

fn main() -> ExitCode {
    let matches = cli::Cli::command().get_matches();
    let mut cli = cli::Cli::from_arg_matches(&matches).unwrap_or_else(|err| err.exit());
    init_tracing(cli.verbose, cli.log_format);
    // `--data-dir` reads a store instead of asking a coordinator: it wins over
    // ABFLEET_COORDINATOR, but both on one command line is a mistake.
    if let Some(err) = config::coordinator_and_data_dir_both_given(&matches) {
        eprintln!("error: {err}");
        return ExitCode::from(abfleet_core::exit::USAGE as u8);
    }
    // `--config FILE` fills what the command line left at its default.
    if let Err(err) = config::apply(&mut cli.command, &matches) {
        eprintln!("error: {err}");
        return ExitCode::from(abfleet_core::exit::USAGE as u8);
    }
    // A client profile fills the coordinator and TLS files no flag or variable gave.
    if let Err(err) = client_profile::apply(&mut cli.command, &matches) {
        eprintln!("error: {err}");
        return ExitCode::from(abfleet_core::exit::USAGE as u8);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: failed to start the async runtime: {err}");
            return ExitCode::from(abfleet_core::exit::NOT_CARRIED_OUT as u8);
        }
    };
    let code = match runtime.block_on(commands::run(cli.command)) {
        Ok(code) => code,
        Err(failure) => {
            // A coordinator's refusal can quote what an agent or a trigger sent.
            let message = format!("{:#}", failure.error);
            eprintln!("error: {}", terminal_text::visible(&message));
            failure.code
        }
    };
    // Children of a cancelled run are already killed; do not wait for stray tasks.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    ExitCode::from(code.clamp(0, 255) as u8)
}

fn init_tracing(verbose: u8, format: cli::LogFormat) {
    let default = match verbose {
        0 => "warn",
        1 => "info,h2=warn,tower=warn,hyper=warn",
        _ => "debug,h2=info,tower=info,hyper=info",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("ABFLEET_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(log_writer::lossy_stderr);
    match format {
        cli::LogFormat::Text => builder.init(),
        // One JSON object per line, the span and event fields (run_id, job_id, agent_id,
        // attempt) as keys, for a log pipeline.
        cli::LogFormat::Json => builder.json().with_current_span(true).init(),
    }
}
