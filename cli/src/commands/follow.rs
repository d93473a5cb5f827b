//! Following a run to its end: progress while it runs, then the report written to disk and
//! the per-feature table printed. Shared by `local` and `submit --wait`.

use std::path::{Path, PathBuf};

use abfleet_core::report::Report;
use abfleet_core::RunId;
use abfleet_proto::control_link::ControlLink;
use abfleet_proto::LinkErrorKind;
use abfleet_render::render_markdown;

use super::link_error;
use crate::failure::{Classify, Failure};
use crate::progress::Progress;
use crate::table;
use abfleet_core::fail_on::FailOn;

/// What Ctrl-C means while following.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum OnInterrupt {
    /// Cancel the run (its children are stopped), then report what there is.
    CancelRun,
    /// Stop watching; the run goes on elsewhere.
    Detach,
}

pub async fn follow(
    client: &ControlLink,
    run_id: &RunId,
    out: Option<PathBuf>,
    on_interrupt: OnInterrupt,
    fail_on: &[FailOn],
) -> Result<i32, Failure> {
    // Installed now, before anything is awaited: a Ctrl-C from here on is ours to handle,
    // never the default that kills the process.
    let mut interrupt =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).infra()?;
    let mut stream = client
        .watch(run_id)
        .await
        .map_err(|err| link_error("failed to watch the run", err))?;
    let mut progress = Progress::new(&run_id.to_string());
    let mut interrupted = false;
    loop {
        tokio::select! {
            update = stream.next() => match update {
                Ok(Some(update)) => {
                    progress.update(&update);
                    if update.is_finished() {
                        break;
                    }
                }
                Ok(None) => {
                    progress.finish();
                    return Err(Failure::infra(anyhow::anyhow!("the coordinator ended the progress stream before the run finished; see `abfleet report {run_id}`")));
                }
                Err(err) if err.kind() == LinkErrorKind::Unreadable => {
                    progress.finish();
                    return Err(Failure::infra(anyhow::anyhow!("the coordinator sent a progress update this abfleet cannot read: {}; see `abfleet report {run_id}`", err.message())));
                }
                Err(err) => {
                    progress.finish();
                    return Err(link_error("lost the coordinator while following the run", err));
                }
            },
            _ = interrupt.recv(), if !interrupted => {
                interrupted = true;
                match on_interrupt {
                    OnInterrupt::CancelRun => {
                        progress.note("interrupted: cancelling the run and stopping its processes…");
                        client
                            .cancel(run_id, "interrupted (Ctrl-C)")
                            .await
                            .map_err(|err| link_error("failed to cancel the run", err))?;
                    }
                    OnInterrupt::Detach => {
                        progress.finish();
                        eprintln!("stopped following; the run goes on. Follow it again with `abfleet watch {run_id}`, or read it with `abfleet report {run_id}`");
                        return Ok(abfleet_core::exit::DETACHED);
                    }
                }
            }
        }
    }
    progress.finish();
    let report = fetch_report(client, run_id).await?;
    let out_dir = out.unwrap_or_else(|| Path::new("abfleet-out").join(run_id.to_string()));
    write_report(&report, &out_dir)?;
    print!("{}", table::render(&report));
    println!(
        "report: {}, {}, {} and {}",
        out_dir.join("report.html").display(),
        out_dir.join("report.md").display(),
        out_dir.join("report.json").display(),
        out_dir.join("junit.xml").display()
    );
    let (code, gated) = if interrupted {
        (abfleet_core::exit::CANCELLED, Vec::new())
    } else {
        gated_code(&report, fail_on)
    };
    // The last word: the code this process returns, and why (the table above says the
    // run's state, not the code: `--fail-on` may change it).
    print!("{}", crate::exit_summary::render(&report, code, &gated));
    Ok(code)
}

/// The report's exit code under `--fail-on`, and the lines of the gate that set it (none
/// when no gate did).
fn gated_code(report: &Report, fail_on: &[FailOn]) -> (i32, Vec<String>) {
    let (code, tripped) = tripped_gate(report, fail_on);
    (code, tripped.map(|(_, lines)| lines).unwrap_or_default())
}

/// The report's exit code under `--fail-on`, and the gate that set it with what tripped it.
fn tripped_gate(report: &Report, fail_on: &[FailOn]) -> (i32, Option<(FailOn, Vec<String>)>) {
    let (code, found) = abfleet_core::fail_on::gated_exit_code(report, fail_on);
    let gate = fail_on.iter().find(|gate| gate.exit_code() == code);
    (code, gate.map(|gate| (*gate, found)))
}

/// The report's exit code under `--fail-on`, saying on stderr what tripped a gate (stdout
/// carries the report itself: `abfleet report`).
pub fn exit_code_under(report: &Report, fail_on: &[FailOn]) -> i32 {
    let (code, tripped) = tripped_gate(report, fail_on);
    for (gate, line) in tripped
        .iter()
        .flat_map(|(gate, lines)| lines.iter().map(move |line| (gate, line)))
    {
        eprintln!(
            "exit {code} (--fail-on {gate}): {}",
            crate::terminal_text::visible(line)
        );
    }
    code
}

pub async fn fetch_report(client: &ControlLink, run_id: &RunId) -> Result<Report, Failure> {
    client
        .report(run_id)
        .await
        .map_err(|err| link_error("failed to get the report", err))
}

pub fn write_report(report: &Report, out_dir: &Path) -> Result<(), Failure> {
    std::fs::create_dir_all(out_dir)
        .and_then(|()| std::fs::write(out_dir.join("report.json"), report.to_json_pretty()))
        .and_then(|()| std::fs::write(out_dir.join("report.md"), render_markdown(report)))
        .and_then(|()| {
            std::fs::write(
                out_dir.join("report.html"),
                abfleet_html::render_report_html(report),
            )
        })
        .and_then(|()| {
            std::fs::write(
                out_dir.join("junit.xml"),
                abfleet_render::render_junit(report),
            )
        })
        .map_err(|err| {
            anyhow::anyhow!(
                "failed to write the report into `{}`: {err}; pass a writable --out",
                out_dir.display()
            )
        })
        .usage()
}
