//! `abfleet report`: a stored run's report as Markdown, JSON, JUnit XML or HTML, from a coordinator or
//! straight from a data dir (works with no coordinator running). What it prints goes through
//! `terminal_text::visible`: names, notes and build logs in a report came from elsewhere.

use abfleet_core::fail_on::FailOn;
use abfleet_core::report::Report;
use abfleet_core::RunId;
use abfleet_render::{render_bmf, render_junit, render_markdown};

use super::control_client;
use super::follow::fetch_report;
pub use crate::cli::HistoryArgs;
use crate::cli::{ReportFormat, StoreSource};
use crate::failure::{Classify, Failure};
use crate::terminal_text::visible;

/// Prints the report. With `--fail-on`, exits with the run's code under those gates, as
/// `submit --wait --fail-on` would have (a run still going exits 0: nothing is decided);
/// without it, 0: printing a failed run's report is not a failure.
pub async fn run(
    run_id: &str,
    format: ReportFormat,
    fail_on: &[FailOn],
    source: &StoreSource,
) -> Result<i32, Failure> {
    let parsed = resolve(run_id, source).await?;
    let report = load(parsed, source).await?;
    let text = match format {
        ReportFormat::Md => render_markdown(&report),
        ReportFormat::Json => report.to_json_pretty() + "\n",
        ReportFormat::Junit => render_junit(&report),
        ReportFormat::Html => abfleet_html::render_report_html(&report),
        ReportFormat::Bmf => render_bmf(&report),
    };
    print!("{}", visible(&text));
    if fail_on.is_empty() || !matches!(report.status.as_str(), "done" | "failed" | "cancelled") {
        return Ok(0);
    }
    Ok(super::follow::exit_code_under(&report, fail_on))
}

/// `abfleet report RUN --against EARLIER`: the two runs compared, as Markdown.
pub async fn against(
    run_id: &str,
    earlier: &str,
    format: ReportFormat,
    source: &StoreSource,
) -> Result<i32, Failure> {
    if !matches!(format, ReportFormat::Md) {
        return Err(Failure::usage(anyhow::anyhow!(
            "--against renders Markdown only; drop --format"
        )));
    }
    let now = load(run_id.parse().usage()?, source).await?;
    let before = load(earlier.parse().usage()?, source).await?;
    print!(
        "{}",
        visible(&abfleet_render::render_comparison(&now, &before))
    );
    Ok(0)
}

/// The run `text` names: a whole id, or (from a coordinator) a unique prefix of one.
async fn resolve(text: &str, source: &StoreSource) -> Result<RunId, Failure> {
    match (text.parse(), &source.data_dir) {
        (Ok(id), _) => Ok(id),
        (Err(err), Some(_)) => Err(Failure::usage(anyhow::anyhow!(
            "{err}; with --data-dir give the whole run id (`abfleet runs --data-dir DIR` lists them)"
        ))),
        (Err(_), None) => {
            let client = control_client(&source.to.coordinator, &source.to.tls).await?;
            super::ids::run_id(&client, text).await
        }
    }
}

pub async fn load(run_id: RunId, source: &StoreSource) -> Result<Report, Failure> {
    match &source.data_dir {
        Some(dir) => {
            let coordinator = abfleet_coordinator::Coordinator::open_existing(dir).usage()?;
            coordinator
                .fleet
                .reports()
                .report(run_id)
                .await
                .map_err(|err| match err {
                    abfleet_coordinator::FleetError::UnknownRun(_) => Failure::usage(err),
                    other => Failure::infra(other),
                })
        }
        None => {
            let client = control_client(&source.to.coordinator, &source.to.tls).await?;
            fetch_report(&client, &run_id).await
        }
    }
}

/// `abfleet history --generation KEY --workload W`: from a coordinator or a data dir.
pub async fn history(args: HistoryArgs, source: &StoreSource) -> Result<i32, Failure> {
    let query = abfleet_core::report::history::HistoryQuery {
        generation: args.generation.clone(),
        workload: args.workload.clone(),
        fixture: args.fixture.clone(),
        name: args.name.clone(),
        limit: args.limit,
    };
    let points = match &source.data_dir {
        Some(dir) => {
            let coordinator = abfleet_coordinator::Coordinator::open_existing(dir).usage()?;
            coordinator.fleet.reports().history(query).await.infra()?
        }
        None => control_client(&source.to.coordinator, &source.to.tls)
            .await?
            .history(&query)
            .await
            .map_err(|err| super::link_error("failed to get the history", err))?,
    };
    match args.format {
        crate::cli::HistoryFormat::Md => print!(
            "{}",
            visible(&abfleet_render::render_history(
                &points,
                &args.generation,
                &args.workload
            ))
        ),
        crate::cli::HistoryFormat::Json => {
            println!("{}", serde_json::to_string_pretty(&points).infra()?)
        }
    }
    Ok(0)
}
