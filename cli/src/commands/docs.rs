//! `abfleet docs update`: a run's results written into the fork's docs/benchmarks.md and
//! docs/state.md (the rules are `abfleet_render::docs`); this file only reads the report and
//! the pages and writes a page back when it changed.

use std::path::Path;

use abfleet_core::report::Report;
use abfleet_render::docs;

pub use crate::cli::DocsUpdate;
use crate::cli::{RunOrReport, StoreSource};
use crate::failure::{Classify, Failure};

pub async fn update(args: DocsUpdate, source: &StoreSource) -> Result<i32, Failure> {
    if args.benchmarks.is_none() && args.state.is_none() {
        return Err(Failure::usage(anyhow::anyhow!(
            "docs update needs --benchmarks PATH, --state PATH or both (the fork's docs/benchmarks.md and docs/state.md)"
        )));
    }
    let report = load_report(&args.run, source).await?;
    if let Some(path) = &args.benchmarks {
        write_if_changed(path, |page| docs::update_benchmarks(page, &report))?;
    }
    if let Some(path) = &args.state {
        write_if_changed(path, |page| docs::update_state(page, &report))?;
    }
    Ok(0)
}

/// The report of `--report FILE`, or of the run named.
pub(super) async fn load_report(
    run: &RunOrReport,
    source: &StoreSource,
) -> Result<Report, Failure> {
    Ok(match (run.report.as_deref(), run.run_id.as_deref()) {
        (Some(file), _) => {
            let text = std::fs::read_to_string(file).map_err(|err| {
                Failure::usage(anyhow::anyhow!("cannot read {}: {err}", file.display()))
            })?;
            Report::from_json(&text).map_err(|err| {
                Failure::usage(anyhow::anyhow!(
                    "{} is not an abfleet report.json ({err}); pass the report.json a run wrote",
                    file.display()
                ))
            })?
        }
        (None, Some(run_id)) => super::report::load(run_id.parse().usage()?, source).await?,
        (None, None) => {
            return Err(Failure::usage(anyhow::anyhow!(
                "name the run (RUN_ID) or give --report FILE"
            )))
        }
    })
}

/// Applies `update` to the page at `path` (empty when it does not exist yet) and writes the
/// result only when it differs, through a temporary file renamed over the page.
fn write_if_changed(path: &Path, update: impl Fn(&str) -> String) -> Result<(), Failure> {
    let page = match std::fs::read_to_string(path) {
        Ok(page) => page,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(err) => {
            return Err(Failure::usage(anyhow::anyhow!(
                "cannot read {}: {err}",
                path.display()
            )))
        }
    };
    let updated = update(&page);
    if updated == page {
        if page.is_empty() {
            println!("{}: nothing to write", path.display());
        } else {
            println!("{}: already up to date", path.display());
        }
        return Ok(());
    }
    let temporary = path.with_extension("md.abfleet-tmp");
    std::fs::write(&temporary, &updated)
        .and_then(|()| std::fs::rename(&temporary, path))
        .map_err(|err| {
            Failure::usage(anyhow::anyhow!(
                "cannot write {}: {err}; is its directory there and writable?",
                path.display()
            ))
        })?;
    println!("{}: updated", path.display());
    Ok(())
}
