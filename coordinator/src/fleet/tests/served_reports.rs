//! Reports kept in the store (`fleet::served_reports`, `store/reports.rs`), heartbeats
//! written in batches (`fleet::heartbeats`) and intake's header-only cells
//! (`store/incoming.rs`), driven through the fleet on a manual clock.

use std::time::Duration;

use abfleet_core::events::{JobEventPayload, JobOutcome};
use abfleet_core::lifecycle::RunState;
use abfleet_core::report::Report;
use abfleet_core::session::SessionMessage;
use abfleet_core::AgentId;
use tokio::sync::mpsc;

use super::{build, cell, inventory, spec, Harness};
use crate::store::{IncomingEvent, StoredEvent, StoredReport};

fn event(seq: u64, payload: JobEventPayload) -> StoredEvent {
    StoredEvent {
        seq,
        at_ms: 0,
        payload,
    }
}

fn done(seq: u64) -> StoredEvent {
    event(
        seq,
        JobEventPayload::Done {
            outcome: JobOutcome::Completed,
            error: None,
        },
    )
}

impl Harness {
    /// The report the store keeps for `run_id`, decoded; panics when none is kept.
    async fn kept_report(&self, run_id: abfleet_core::RunId) -> Report {
        match self
            .fleet
            .store()
            .reports()
            .stored_report(run_id)
            .await
            .unwrap()
        {
            Some(StoredReport::Stored(json)) => Report::from_json(&json).unwrap(),
            other => panic!("no report kept for {run_id}: {other:?}"),
        }
    }

    async fn kept(&self, run_id: abfleet_core::RunId) -> bool {
        matches!(
            self.fleet
                .store()
                .reports()
                .stored_report(run_id)
                .await
                .unwrap(),
            Some(StoredReport::Stored(_))
        )
    }
}

#[tokio::test]
async fn a_finished_runs_report_is_kept_with_its_state_and_served_as_assembled() {
    let mut h = Harness::new(3).await;
    let first = h.run_with_toolchain("cc 12", JobOutcome::Completed).await;
    let second = h.run_with_toolchain("cc 13", JobOutcome::Completed).await;
    let kept = h.kept_report(second).await;
    // The same report a fresh assembly makes, the previous run included.
    assert_eq!(kept, h.fleet.reports().fresh_report(second).await.unwrap());
    assert_eq!(kept.generations[0].previous_run, Some(first.to_string()));
    assert_eq!(h.fleet.reports().report(second).await.unwrap(), kept);
    assert_eq!(
        Report::from_json(&h.fleet.reports().report_json(second).await.unwrap()).unwrap(),
        kept
    );
    // The run's exit code is the kept report's.
    assert_eq!(
        h.run_state(second).await,
        (RunState::Done, Some(kept.exit_code))
    );
    assert_eq!(kept.status, "done");
}

#[tokio::test]
async fn a_run_still_going_is_assembled_at_each_read_and_never_kept() {
    let mut h = Harness::new(3).await;
    let run_id = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let offer = h.ready_and_take_offer().await;
    h.push(&offer, vec![cell(0, 0)]).await.unwrap();
    assert_eq!(
        h.fleet.reports().report(run_id).await.unwrap().cells.len(),
        1
    );
    assert!(!h.kept(run_id).await);
    h.push(&offer, vec![cell(1, 1)]).await.unwrap();
    assert_eq!(
        h.fleet.reports().report(run_id).await.unwrap().cells.len(),
        2
    );
    h.done(&offer, 2, JobOutcome::Completed).await;
    assert_eq!(h.kept_report(run_id).await.cells.len(), 2);
}

#[tokio::test]
async fn a_bisect_recorded_while_the_run_goes_on_is_in_the_report_it_finishes_with() {
    use abfleet_core::bisect::{BisectRecord, Bisection, Commit};
    let mut h = Harness::new(3).await;
    let run_id = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let offer = h.ready_and_take_offer().await;
    let commit = |id: &str| Commit {
        id: id.into(),
        subject: format!("commit {id}"),
    };
    let record = BisectRecord {
        what: "`psnr` on fixture `tiny`".into(),
        recorded: String::new(),
        bisection: Bisection::new(vec![commit("c1"), commit("c2")]).unwrap(),
    };
    h.fleet
        .reports()
        .record_bisect(run_id, record)
        .await
        .unwrap();
    h.done(&offer, 0, JobOutcome::Completed).await;
    let kept = h.kept_report(run_id).await;
    assert_eq!(kept.bisects.len(), 1, "the kept report lost the bisect");
    assert_eq!(kept.bisects[0].what, "`psnr` on fixture `tiny`");
    assert_eq!(kept, h.fleet.reports().fresh_report(run_id).await.unwrap());
}

#[tokio::test]
async fn an_earlier_run_finishing_later_is_in_the_later_runs_report() {
    let mut h = Harness::new(3).await;
    h.clock.advance(Duration::from_secs(60));
    let earlier = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let earlier_offer = h.ready_and_take_offer().await;
    h.fleet
        .intake()
        .push_events(
            h.agent,
            earlier_offer.job_id,
            earlier_offer.attempt,
            vec![event(0, build("cc 12"))],
        )
        .await
        .unwrap();
    // A second agent runs a later run of the same spec to its end first.
    h.clock.advance(Duration::from_secs(60));
    let later = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let other = AgentId::new_random();
    h.fleet.register(other, &inventory()).await.unwrap();
    let (sender, mut other_session) = mpsc::unbounded_channel();
    h.fleet
        .scheduling()
        .open_session(other, sender, None)
        .unwrap();
    h.fleet.scheduling().ready(other, None).await.unwrap();
    let Ok(SessionMessage::Offer(later_offer)) = other_session.try_recv() else {
        panic!("the second agent was offered nothing");
    };
    assert_eq!(later_offer.run_id, later);
    h.fleet
        .intake()
        .push_events(
            other,
            later_offer.job_id,
            later_offer.attempt,
            vec![event(0, build("cc 13")), done(1)],
        )
        .await
        .unwrap();
    assert_eq!(h.kept_report(later).await.generations[0].previous_run, None);
    // The earlier run ends: the later run's kept report compared with nothing, so it goes,
    // and the next read compares the later run with it.
    h.done(&earlier_offer, 1, JobOutcome::Completed).await;
    assert!(!h.kept(later).await);
    let report = h.fleet.reports().report(later).await.unwrap();
    assert_eq!(
        report.generations[0].previous_run,
        Some(earlier.to_string())
    );
    assert_eq!(report.generations[0].previous_toolchain["fork"], "cc 12");
    assert_eq!(h.kept_report(later).await, report);
}

#[tokio::test]
async fn late_events_of_a_cancelled_run_are_in_its_report_after_it_was_read() {
    let mut h = Harness::new(3).await;
    let run_id = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let offer = h.ready_and_take_offer().await;
    h.push(&offer, vec![cell(0, 0)]).await.unwrap();
    h.fleet.runs().cancel(run_id, "by test").await.unwrap();
    let read = h.fleet.reports().report(run_id).await.unwrap();
    assert_eq!((read.status.as_str(), read.cells.len()), ("cancelled", 1));
    assert!(
        h.kept(run_id).await,
        "a finished run's report is kept once read"
    );
    // The agent uploads what it measured before it heard of the cancel.
    h.push(&offer, vec![cell(1, 1)]).await.unwrap();
    let report = h.fleet.reports().report(run_id).await.unwrap();
    assert_eq!(report.cells.len(), 2);
    assert_eq!(report.exit_code, abfleet_core::exit::CANCELLED);
}

/// Issue 23: every cell is derived again at intake, so a cell body the coordinator cannot
/// read (a newer agent's shape) is refused with its batch, saying so, instead of stored
/// unchecked.
#[tokio::test]
async fn a_cell_body_the_coordinator_cannot_read_is_refused_with_its_batch() {
    let mut h = Harness::new(3).await;
    h.fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let offer = h.ready_and_take_offer().await;
    let spec = spec();
    // What a newer agent might send: the header intake reads, a body of another shape.
    let body = serde_json::json!({
        "kind": "cell",
        "index": 1,
        "fixture": spec.fixtures[0].name,
        "workload": spec.workloads[1].name,
        "parity": "ok",
        "upstream": "a shape this coordinator does not know",
    })
    .to_string();
    let unreadable = IncomingEvent::parse(1, 0, body).unwrap();
    let refused = h
        .push(&offer, vec![IncomingEvent::from(cell(0, 0)), unreadable])
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, super::super::FleetError::InvalidEvent { seq: 1, reason, .. } if reason.contains("does not parse")),
        "{refused}"
    );
    assert_eq!(h.cell_count(offer.job_id).await, 0);
}

#[tokio::test]
async fn heartbeats_are_written_together_and_listed_before_they_are() {
    let h = Harness::new(3).await;
    let stored_ms = || async { h.fleet.store().agents().all().await.unwrap()[0].last_heartbeat_ms };
    let listed_ms = || async {
        h.fleet.scheduling().agents().await.unwrap()[0]
            .0
            .last_heartbeat_ms
    };
    let registered = stored_ms().await;
    // The first heartbeat after registration is due (over a second since nothing was
    // written): written at once.
    h.clock.advance(Duration::from_secs(2));
    h.fleet.scheduling().heartbeat(h.agent, None).await.unwrap();
    let first = stored_ms().await;
    assert_eq!(first, registered + 2_000);
    // Within the second after a write, heartbeats wait in memory; listings see them.
    h.clock.advance(Duration::from_millis(400));
    h.fleet.scheduling().heartbeat(h.agent, None).await.unwrap();
    assert_eq!(stored_ms().await, first);
    assert_eq!(listed_ms().await, first + 400);
    // The next one due writes every waiting heartbeat.
    h.clock.advance(Duration::from_millis(700));
    h.fleet.scheduling().heartbeat(h.agent, None).await.unwrap();
    assert_eq!(stored_ms().await, first + 1_100);
    // An agent the store does not know is still refused at once.
    let stranger = AgentId::new_random();
    assert!(matches!(
        h.fleet.scheduling().heartbeat(stranger, None).await,
        Err(crate::FleetError::NotRegistered(id)) if id == stranger
    ));
}
