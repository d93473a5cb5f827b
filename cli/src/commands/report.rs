//! `abfleet report`: a stored run's report as Markdown, JSON, JUnit XML or HTML, from a coordinator or
//! straight from a data dir (works with no coordinator running).

use abfleet_core::report::{render_junit, render_markdown, Report};
use abfleet_core::RunId;

use super::control_client;
use super::follow::fetch_report;
use crate::cli::{ReportFormat, StoreSource};
use crate::failure::{Classify, Failure};

pub async fn run(run_id: &str, format: ReportFormat, source: &StoreSource) -> Result<i32, Failure> {
    let parsed: RunId = run_id.parse().usage()?;
    let report = load(parsed, source).await?;
    match format {
        ReportFormat::Md => print!("{}", render_markdown(&report)),
        ReportFormat::Json => println!("{}", report.to_json_pretty()),
        ReportFormat::Junit => print!("{}", render_junit(&report)),
        ReportFormat::Html => print!("{}", abfleet_html::render_report_html(&report)),
    }
    Ok(0)
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
    print!("{}", abfleet_core::report::render_comparison(&now, &before));
    Ok(0)
}

pub async fn load(run_id: RunId, source: &StoreSource) -> Result<Report, Failure> {
    match &source.data_dir {
        Some(dir) => {
            let coordinator =
                abfleet_coordinator::Coordinator::open(dir, Default::default()).infra()?;
            coordinator
                .fleet
                .report(run_id)
                .await
                .map_err(|err| match err {
                    abfleet_coordinator::FleetError::UnknownRun(_) => Failure::usage(err),
                    other => Failure::infra(other),
                })
        }
        None => {
            let mut client = control_client(&source.coordinator, &source.tls).await?;
            fetch_report(&mut client, &run_id.to_string()).await
        }
    }
}
