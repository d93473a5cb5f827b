//! Issue 15: nothing of abfleet's own happens inside a timed run. A real agent (in this
//! process) runs a real job of the demo subject against a real coordinator over loopback,
//! through a proxy that delays everything the coordinator sends by 2.5 s: every upload is
//! acknowledged late, later than the 2 s the agent waits for uploads to settle before a
//! cell, so an upload is still in flight when each cell is about to start. The agent's trace points (`abfleet_agent::timeline`) are
//! recorded with their instants: each timed run's start and end (just outside the runner's
//! clock), each upload (sent to acknowledged), each spool fsync, compaction or removal, each
//! host sample. No upload, spool write or host sample may fall inside a timed run, and no
//! host sample between the runs of a cell.

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use abfleet_coordinator::CoordinatorConfig;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing_subscriber::layer::SubscriberExt;

/// One recorded trace point.
#[derive(Debug, Clone)]
struct Mark {
    at: Instant,
    what: String,
    path: String,
}

/// Records every event of the timeline target.
struct Recorder(Arc<Mutex<Vec<Mark>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Recorder {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Fields(String, String);
        impl tracing::field::Visit for Fields {
            fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
                if field.name() == "what" {
                    self.0 = value.to_string();
                }
            }
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                match field.name() {
                    "what" => self.0 = format!("{value:?}").trim_matches('"').to_string(),
                    "path" => self.1 = format!("{value:?}"),
                    _ => {}
                }
            }
        }
        let at = Instant::now();
        let mut fields = Fields(String::new(), String::new());
        event.record(&mut fields);
        self.0.lock().unwrap().push(Mark {
            at,
            what: fields.0,
            path: fields.1,
        });
    }
}

/// A TCP proxy that holds every chunk the coordinator sends for `delay` before passing it on
/// (in order): each RPC's answer, an upload's acknowledgement included, comes late.
async fn slow_proxy(target: std::net::SocketAddr, delay: Duration) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((inbound, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let Ok(outbound) = TcpStream::connect(target).await else {
                    return;
                };
                inbound.set_nodelay(true).unwrap();
                outbound.set_nodelay(true).unwrap();
                let (mut agent_read, mut agent_write) = inbound.into_split();
                let (mut coord_read, mut coord_write) = outbound.into_split();
                let up = tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut agent_read, &mut coord_write).await;
                });
                // Chunks are stamped when read and written `delay` later, in order.
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
                let reader = tokio::spawn(async move {
                    let mut buffer = vec![0u8; 64 * 1024];
                    while let Ok(n) = coord_read.read(&mut buffer).await {
                        if n == 0 || tx.send((Instant::now(), buffer[..n].to_vec())).is_err() {
                            return;
                        }
                    }
                });
                while let Some((read_at, chunk)) = rx.recv().await {
                    tokio::time::sleep_until((read_at + delay).into()).await;
                    if agent_write.write_all(&chunk).await.is_err() {
                        break;
                    }
                }
                up.abort();
                reader.abort();
            });
        }
    });
    addr
}

/// Longer than the agent's settle wait (2 s), shorter than its hush grace (3 s): the upload
/// in flight when a cell starts finishes before the cell's first run.
const ACK_DELAY: Duration = Duration::from_millis(2500);

/// A timed run: its log names the cell (`…/cell-NNN/SIDE-LABEL.log`).
#[derive(Debug)]
struct Window {
    start: Instant,
    end: Instant,
    cell: String,
    log: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_upload_spool_write_or_host_sample_falls_inside_a_timed_run() {
    let marks = Arc::new(Mutex::new(Vec::new()));
    let subscriber = tracing_subscriber::registry().with(tracing_subscriber::Layer::with_filter(
        Recorder(marks.clone()),
        tracing_subscriber::filter::Targets::new()
            .with_target(abfleet_agent::timeline::TARGET, tracing::Level::TRACE),
    ));
    tracing::subscriber::set_global_default(subscriber).unwrap();

    let tmp = tempfile::tempdir().unwrap();
    let spec = SpecOptions {
        workloads: &["psnr", "float_ssim", "motion"],
        runs: 4,
        frames: 12,
        ..SpecOptions::path()
    }
    .write(tmp.path(), "spec.toml");
    let coordinator =
        TestCoordinator::start(&tmp.path().join("data"), CoordinatorConfig::default()).await;
    let proxy = slow_proxy(coordinator.addr, ACK_DELAY).await;
    let agent = TestAgent::start(&format!("http://{proxy}"), &tmp.path().join("agent"));
    let mut client = coordinator.control().await;
    let (_, report) = submit_and_wait(&mut client, &spec).await;
    assert_eq!(report.status, "done", "{:?}", report.errors);
    assert_eq!(report.cells.len(), 3);
    agent.stop().await;

    let marks = marks.lock().unwrap().clone();
    // The timed runs of the cells (builds go through the runner too: left out).
    let mut windows = Vec::new();
    let mut open: Option<&Mark> = None;
    for mark in marks.iter().filter(|m| m.what.starts_with("run.")) {
        match (mark.what.as_str(), open) {
            ("run.start", None) => open = Some(mark),
            ("run.end", Some(start)) => {
                assert_eq!(start.path, mark.path, "runs do not overlap");
                if let Some(cell) = mark.path.split('/').find(|p| p.starts_with("cell-")) {
                    windows.push(Window {
                        start: start.at,
                        end: mark.at,
                        cell: cell.to_string(),
                        log: mark.path.clone(),
                    });
                }
                open = None;
            }
            other => panic!("unpaired run marks: {other:?}"),
        }
    }
    // 3 cells, each a warm-up and 4 pairs of two sides.
    assert_eq!(windows.len(), 3 * (2 + 8), "{windows:#?}");

    let mut uploads = Vec::new();
    let mut upload_start = None;
    for mark in &marks {
        match mark.what.as_str() {
            "upload.start" => upload_start = Some(mark.at),
            "upload.end" => uploads.push((upload_start.take().expect("paired"), mark.at)),
            _ => {}
        }
    }
    let instants = |what: &str| -> Vec<Instant> {
        marks
            .iter()
            .filter(|m| m.what == what)
            .map(|m| m.at)
            .collect()
    };
    let spool_writes: Vec<(String, Instant)> = ["spool.fsync", "spool.compact", "spool.remove"]
        .iter()
        .flat_map(|what| instants(what).into_iter().map(|at| (what.to_string(), at)))
        .collect();
    let samples = instants("host.sample");
    assert!(
        uploads.len() >= 5,
        "the job must upload its events: {uploads:?}"
    );
    assert!(spool_writes.len() >= 10, "{spool_writes:?}");
    assert_eq!(
        samples.len(),
        2 * 3,
        "one sample before and one after each cell"
    );

    for window in &windows {
        let inside = |at: Instant| window.start < at && at < window.end;
        for (start, end) in &uploads {
            assert!(
                *end <= window.start || *start >= window.end,
                "an upload (sent {:?} before the run started, acknowledged {:?} after) overlaps the timed run {}",
                window.start.saturating_duration_since(*start),
                end.saturating_duration_since(window.start),
                window.log
            );
        }
        for (what, at) in &spool_writes {
            assert!(!inside(*at), "{what} inside the timed run {}", window.log);
        }
        for at in &samples {
            assert!(
                !inside(*at),
                "a host sample inside the timed run {}",
                window.log
            );
        }
    }
    // No host sample between the first and the last run of a cell.
    for cell in ["cell-000", "cell-001", "cell-002"] {
        let runs: Vec<&Window> = windows.iter().filter(|w| w.cell == cell).collect();
        let (first, last) = (runs[0].start, runs[runs.len() - 1].end);
        assert!(
            samples.iter().all(|at| *at < first || *at > last),
            "a host sample between the runs of {cell}"
        );
    }
    // Uploads still happen between cells, so progress is live: not all left for the end.
    let first_cell_end = windows
        .iter()
        .filter(|w| w.cell == "cell-000")
        .map(|w| w.end)
        .max()
        .unwrap();
    let last_cell_start = windows
        .iter()
        .filter(|w| w.cell == "cell-002")
        .map(|w| w.start)
        .min()
        .unwrap();
    assert!(
        uploads
            .iter()
            .any(|(start, _)| *start > first_cell_end && *start < last_cell_start),
        "no upload between the cells"
    );
}
