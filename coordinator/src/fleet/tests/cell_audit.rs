//! Issue 23, case 2, through the fleet: a cell whose summary its own data does not give is
//! stored marked rejected (never as measured) and named in the report with the agent that
//! sent it; an honest cell is stored as the coordinator derived it, with its sender; a
//! second report of a cell index in one attempt is refused with its batch.

use abfleet_core::events::{JobEventPayload, JobOutcome};
use abfleet_render::render_markdown;

use super::{cell, spec, Harness};
use crate::fleet::FleetError;
use crate::store::StoredEvent;

/// Cell `index` as `cell` makes it, edited by `lie`.
fn edited(
    index: u32,
    seq: u64,
    lie: impl FnOnce(&mut abfleet_core::cell::CellResult),
) -> StoredEvent {
    let mut event = cell(index, seq);
    let JobEventPayload::Cell(cell) = &mut event.payload else {
        unreachable!()
    };
    lie(cell);
    event
}

#[tokio::test]
async fn a_fabricated_cell_is_stored_rejected_and_named_in_the_report_with_its_agent() {
    let mut h = Harness::new(3).await;
    let run_id = h
        .fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let offer = h.ready_and_take_offer().await;
    let count = spec().cell_count() as u32;
    let mut events = vec![
        cell(0, 0),
        edited(1, 1, |cell| {
            cell.speedup = Some(1000.0);
        }),
        edited(2, 2, |cell| {
            cell.fork.times = vec![-5.0; 3];
        }),
    ];
    for index in 3..count {
        events.push(cell(index, u64::from(index)));
    }
    h.push(&offer, events).await.unwrap();
    h.done(&offer, u64::from(count), JobOutcome::Completed)
        .await;
    let report = h.fleet.reports().report(run_id).await.unwrap();
    assert_eq!(report.cells.len(), count as usize);
    let agent = h.agent.to_string();
    for cell in &report.cells {
        let by = cell
            .measured_by
            .as_ref()
            .expect("every cell names its sender");
        assert_eq!(by.agent_id, agent);
    }
    let rejected: Vec<u32> = report
        .cells
        .iter()
        .filter(|cell| !cell.rejected.is_empty())
        .map(|cell| cell.index)
        .collect();
    assert_eq!(rejected, [1, 2]);
    for index in [1, 2] {
        let cell = &report.cells[index];
        assert!(cell.is_unavailable(), "{cell:?}");
        assert_eq!(cell.speedup, None);
    }
    // What disagreed, never the value re-derived from the cell's own data (an oracle a
    // consistent liar would send back).
    let refusal = &report.cells[1].rejected[0];
    assert!(
        refusal.contains("speedup 1000 sent, which its own data does not give"),
        "{refusal}"
    );
    assert!(!refusal.contains("1 from"), "{refusal}");
    assert!(report.cells[2].rejected[0].contains("fork has a run of -5 s"));
    // Never a measured result: the run was not carried out.
    assert_eq!(report.exit_code, abfleet_core::exit::NOT_CARRIED_OUT);
    let markdown = render_markdown(&report);
    assert!(
        markdown.contains(&format!("rejected by the coordinator from agent {agent}")),
        "{markdown}"
    );
    assert!(markdown.contains("**rejected**"), "{markdown}");
}

#[tokio::test]
async fn a_second_report_of_a_cell_in_one_attempt_is_refused_with_its_batch() {
    let mut h = Harness::new(3).await;
    h.fleet
        .runs()
        .submit(spec(), "manual", "test")
        .await
        .unwrap();
    let offer = h.ready_and_take_offer().await;
    h.push(&offer, vec![cell(0, 0)]).await.unwrap();
    let refused = h
        .push(
            &offer,
            vec![cell(1, 1), edited(0, 2, |cell| cell.speedup = Some(2.0))],
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, FleetError::InvalidEvent { seq: 2, reason, .. } if reason.contains("cell 0 was already reported by event 0")),
        "{refused}"
    );
    // Nothing of the batch was stored: cell 1 is not either.
    assert_eq!(
        h.fleet
            .store()
            .events()
            .stored_cells(offer.job_id)
            .await
            .unwrap(),
        [(offer.attempt, 0)]
    );
    // A re-send of the stored event is still just acknowledged.
    let acked = h.push(&offer, vec![cell(0, 0)]).await.unwrap();
    assert_eq!(acked, [0]);
}
