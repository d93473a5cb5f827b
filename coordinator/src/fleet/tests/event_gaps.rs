//! Issue 23, case 8, through the fleet: a batch that starts after a gap in its attempt's
//! sequence numbers (the store was restored from a copy older than what it acknowledged) is
//! never stored; the coordinator asks for the missing events, and when the agent no longer
//! holds them the attempt ends for good and the next one keeps the stored cells, measures
//! the lost ones and the report says why.

use abfleet_core::events::JobOutcome;
use abfleet_core::lifecycle::JobState;

use super::{cell, spec, Harness};
use crate::fleet::FleetError;

#[tokio::test]
async fn a_batch_after_a_gap_is_refused_whole_naming_the_missing_events() {
    let mut h = Harness::new(3).await;
    let run_id = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let offer = h.ready_and_take_offer().await;
    let (job, attempt) = (offer.job_id, offer.attempt);
    h.fleet
        .intake()
        .push_events(h.agent, job, attempt, vec![cell(0, 0), cell(1, 1)])
        .await
        .unwrap();
    // Events 2 and 3 were acknowledged by the store that the backup replaced.
    let refused = h
        .fleet
        .intake()
        .push_events(h.agent, job, attempt, vec![cell(2, 4)])
        .await
        .unwrap_err();
    assert!(
        matches!(
            refused,
            FleetError::MissingEvents {
                first: 2,
                last: 3,
                ..
            }
        ),
        "{refused:?}"
    );
    assert_eq!(
        h.fleet
            .store()
            .events()
            .event_count(job, attempt)
            .await
            .unwrap(),
        2
    );
    // The agent still held them (in its spool file): sent in order, all of it is stored.
    let stored = h
        .fleet
        .intake()
        .push_events(
            h.agent,
            job,
            attempt,
            vec![cell(2, 2), cell(3, 3), cell(4, 4)],
        )
        .await
        .unwrap();
    assert_eq!(stored, vec![2, 3, 4]);
    // Nothing the store has is called lost: the batch goes on as usual.
    h.fleet
        .intake()
        .events_lost(h.agent, job, attempt, 5)
        .await
        .unwrap();
    assert_eq!(h.job_state(run_id).await, JobState::Leased);
}

#[tokio::test]
async fn events_the_agent_no_longer_holds_redo_the_attempt_keeping_the_stored_cells() {
    let mut h = Harness::new(3).await;
    let run_id = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let offer = h.ready_and_take_offer().await;
    let (job, attempt) = (offer.job_id, offer.attempt);
    let count = spec().cell_count() as u32;
    assert!(count >= 3, "the spec has {count} cells");
    h.fleet
        .intake()
        .push_events(h.agent, job, attempt, vec![cell(0, 0)])
        .await
        .unwrap();
    // Cell 1 (event 1) was acknowledged and lost with the restore; cell 2 comes next.
    let missing = h
        .fleet
        .intake()
        .push_events(h.agent, job, attempt, vec![cell(2, 2)])
        .await
        .unwrap_err();
    assert!(matches!(
        missing,
        FleetError::MissingEvents {
            first: 1,
            last: 1,
            ..
        }
    ));
    let redone = h
        .fleet
        .intake()
        .events_lost(h.agent, job, attempt, 2)
        .await
        .unwrap_err();
    let FleetError::AttemptRedone {
        first: 1,
        last: 1,
        state,
        ..
    } = redone
    else {
        panic!("expected the attempt to be redone, got {redone:?}");
    };
    assert_eq!(state, "queued again");
    // The old attempt cannot take its lease back: not by events, not by a heartbeat.
    let late = h
        .fleet
        .intake()
        .push_events(h.agent, job, attempt, vec![cell(1, 1)])
        .await
        .unwrap_err();
    assert!(matches!(late, FleetError::LeaseLost { .. }), "{late:?}");
    let next = h.ready_and_take_offer().await;
    assert_eq!(next.attempt, attempt + 1);
    assert_eq!(next.kept_cells.iter().copied().collect::<Vec<_>>(), vec![0]);
    let events = (1..count)
        .map(|index| cell(index, u64::from(index - 1)))
        .collect();
    h.fleet
        .intake()
        .push_events(h.agent, job, next.attempt, events)
        .await
        .unwrap();
    h.done(&next, u64::from(count - 1), JobOutcome::Completed)
        .await;
    let report = h.fleet.reports().report(run_id).await.unwrap();
    let indexes: Vec<u32> = report.cells.iter().map(|c| c.index).collect();
    assert_eq!(indexes, (0..count).collect::<Vec<_>>(), "every cell once");
    let lines: Vec<String> = report.attempt_history.iter().map(|a| a.line()).collect();
    assert!(
        lines[0].contains("events 1..=1 of attempt 1 were lost"),
        "{lines:?}"
    );
    assert!(lines[1].contains("1 cell kept from attempt 1"), "{lines:?}");
    let markdown = abfleet_render::render_markdown(&report);
    assert!(markdown.contains("were lost"), "{markdown}");
    assert_eq!(
        h.run_state(run_id).await.0,
        abfleet_core::lifecycle::RunState::Done
    );
}
