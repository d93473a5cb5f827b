//! An event as intake takes it: its JSON as the agent sent it, stored as it is, and of a cell
//! (nearly all of a job's events, and the big ones) only the header intake checks and indexes
//! — index, fixture, workload, parity. The cell's body (sides, times, per-frame scores) is
//! decoded once, when the run's report is assembled; decoding it at intake too was a third of
//! the coordinator's ingest time (docs/performance.md). Every other kind is small and rare,
//! and is decoded whole.

use abfleet_core::cell::CellParity;
use abfleet_core::events::{EventKind, JobEventPayload};
use serde::Deserialize;

use super::StoredEvent;

/// One numbered event on its way into the store.
#[derive(Debug, Clone)]
pub struct IncomingEvent {
    pub seq: u64,
    pub at_ms: i64,
    pub header: EventHeader,
    /// The payload's JSON, stored verbatim.
    pub payload_json: String,
}

/// What intake knows of an event's payload.
#[derive(Debug, Clone)]
pub enum EventHeader {
    Cell(CellHeader),
    /// Any other kind, decoded whole.
    Other(JobEventPayload),
}

/// The fields of a cell event intake reads; the rest of the JSON is skipped, unallocated.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CellHeader {
    pub index: u32,
    pub fixture: String,
    pub workload: String,
    pub parity: CellParity,
}

impl IncomingEvent {
    /// Reads `payload_json`: a cell's header, or any other payload whole. The error is
    /// serde's, naming what did not parse.
    pub fn parse(seq: u64, at_ms: i64, payload_json: String) -> serde_json::Result<Self> {
        let mut payload_json = payload_json;
        let header = match cell_header(&payload_json) {
            // A cell's texts are clipped when it is decoded for its report.
            Some(header) => EventHeader::Cell(header?),
            None => {
                let mut payload = JobEventPayload::from_json(&payload_json)?;
                if payload.clip_texts() {
                    payload_json = serde_json::to_string(&payload)?;
                }
                EventHeader::Other(payload)
            }
        };
        Ok(IncomingEvent {
            seq,
            at_ms,
            header,
            payload_json,
        })
    }

    pub fn kind(&self) -> EventKind {
        match &self.header {
            EventHeader::Cell(_) => EventKind::Cell,
            EventHeader::Other(payload) => payload.kind(),
        }
    }
}

/// A cell's header, when the JSON is a cell event: `{"kind":"cell",…}` as serde writes it,
/// or the tag anywhere else (checked by decoding the tag alone).
fn cell_header(json: &str) -> Option<serde_json::Result<CellHeader>> {
    const CELL_FIRST: &str = r#"{"kind":"cell","#;
    #[derive(Deserialize)]
    struct Tag<'a> {
        #[serde(borrow)]
        kind: Option<std::borrow::Cow<'a, str>>,
    }
    let is_cell = json.starts_with(CELL_FIRST)
        || serde_json::from_str::<Tag<'_>>(json)
            .is_ok_and(|tag| tag.kind.as_deref() == Some(EventKind::Cell.as_str()));
    is_cell.then(|| serde_json::from_str::<CellHeader>(json))
}

/// Events made in the coordinator's own code and tests: their JSON is written here.
impl From<StoredEvent> for IncomingEvent {
    fn from(event: StoredEvent) -> Self {
        let payload_json =
            serde_json::to_string(&event.payload).expect("an event payload always serialises");
        let header = match event.payload {
            JobEventPayload::Cell(cell) => EventHeader::Cell(CellHeader {
                index: cell.index,
                fixture: cell.fixture,
                workload: cell.workload,
                parity: cell.parity,
            }),
            other => EventHeader::Other(other),
        };
        IncomingEvent {
            seq: event.seq,
            at_ms: event.at_ms,
            header,
            payload_json,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use abfleet_core::events::{JobOutcome, LogLevel};

    fn cell_json() -> String {
        let text = include_str!("../../../fixtures/jobs/demo.toml");
        let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/jobs"));
        let spec =
            abfleet_core::spec::JobSpec::from_toml(text, std::path::Path::new("demo.toml"), dir)
                .unwrap();
        let side = || abfleet_core::cell::SideMeasurement {
            status: abfleet_core::cell::SideStatus::Ok,
            times: vec![0.5, 0.51, 0.49],
            cpu_times: vec![0.5; 3],
            warmup_times: vec![0.5],
            scores: Some(abfleet_core::scores::Scores::default()),
            returncode: Some(0),
            error: None,
            stderr_tail: None,
            command: None,
        };
        let cell = abfleet_core::cell::CellResult::evaluate(
            abfleet_core::cell::CellInput {
                index: 3,
                fixture: spec.fixtures[0].name.clone(),
                workload: spec.workloads[3].name.clone(),
                upstream: side(),
                fork: side(),
                load_avg_1min: [0.1, 0.1],
                idle_cores: 1.0,
                host_flags: Vec::new(),
                seed: 3,
                run_order: Vec::new(),
                stop_reason: abfleet_core::paired::StopReason::NotAdaptive,
                overhead_seconds: None,
            },
            &spec,
        );
        serde_json::to_string(&JobEventPayload::Cell(Box::new(cell))).unwrap()
    }

    #[test]
    fn a_cell_event_is_read_as_its_header_and_kept_verbatim() {
        let json = cell_json();
        let event = IncomingEvent::parse(7, 9, json.clone()).unwrap();
        assert_eq!(event.kind(), EventKind::Cell);
        assert_eq!(event.payload_json, json);
        let EventHeader::Cell(header) = &event.header else {
            panic!("{event:?}")
        };
        let JobEventPayload::Cell(whole) = JobEventPayload::from_json(&json).unwrap() else {
            panic!()
        };
        assert_eq!(header.index, whole.index);
        assert_eq!(header.fixture, whole.fixture);
        assert_eq!(header.workload, whole.workload);
        assert_eq!(header.parity, whole.parity);
    }

    #[test]
    fn an_agents_error_text_is_stored_clipped_to_its_limit() {
        let done = JobEventPayload::Done {
            outcome: JobOutcome::Failed,
            error: Some(format!("@maintainers {}", "x".repeat(1 << 20))),
        };
        let json = serde_json::to_string(&done).unwrap();
        let event = IncomingEvent::parse(1, 2, json).unwrap();
        assert!(
            event.payload_json.len() < 5_000,
            "{}",
            event.payload_json.len()
        );
        let EventHeader::Other(JobEventPayload::Done {
            error: Some(error), ..
        }) = &event.header
        else {
            panic!("{event:?}")
        };
        assert_eq!(
            error.chars().count(),
            abfleet_core::stored_text::MAX_ERROR_CHARS
        );
        assert_eq!(
            JobEventPayload::from_json(&event.payload_json).unwrap(),
            event_payload(&event)
        );
    }

    fn event_payload(event: &IncomingEvent) -> JobEventPayload {
        match &event.header {
            EventHeader::Other(payload) => payload.clone(),
            EventHeader::Cell(_) => panic!("a cell"),
        }
    }

    /// The coordinator's own cells (the audited ones) carry the header intake would read
    /// from their JSON.
    #[test]
    fn a_cell_made_here_has_the_header_its_json_gives() {
        let JobEventPayload::Cell(cell) = JobEventPayload::from_json(&cell_json()).unwrap() else {
            panic!()
        };
        let made = IncomingEvent::from(StoredEvent {
            seq: 4,
            at_ms: 5,
            payload: JobEventPayload::Cell(cell),
        });
        let read = IncomingEvent::parse(4, 5, made.payload_json.clone()).unwrap();
        let (EventHeader::Cell(made_header), EventHeader::Cell(read_header)) =
            (&made.header, &read.header)
        else {
            panic!("{made:?} {read:?}")
        };
        assert_eq!(made_header, read_header);
        assert_eq!(made_header.index, 3);
    }

    #[test]
    fn a_cell_whose_tag_is_not_first_is_still_a_cell() {
        let mut value: serde_json::Value = serde_json::from_str(&cell_json()).unwrap();
        let kind = value.as_object_mut().unwrap().remove("kind").unwrap();
        value.as_object_mut().unwrap().insert("kind".into(), kind);
        let json = value.to_string();
        assert!(!json.starts_with(r#"{"kind""#), "{json}");
        let event = IncomingEvent::parse(0, 0, json).unwrap();
        assert!(matches!(event.header, EventHeader::Cell(ref h) if h.index == 3));
    }

    #[test]
    fn other_kinds_are_decoded_whole_and_bad_json_is_refused() {
        let done = serde_json::to_string(&JobEventPayload::Done {
            outcome: JobOutcome::Completed,
            error: None,
        })
        .unwrap();
        let event = IncomingEvent::parse(1, 0, done).unwrap();
        assert!(matches!(
            event.header,
            EventHeader::Other(JobEventPayload::Done { .. })
        ));
        let log = StoredEvent {
            seq: 2,
            at_ms: 0,
            payload: JobEventPayload::Log {
                level: LogLevel::Info,
                line: "x".into(),
            },
        };
        let event = IncomingEvent::from(log);
        assert_eq!(event.kind(), EventKind::Log);
        assert!(event.payload_json.contains(r#""kind":"log""#));
        // A cell without its header fields, a wrong parity, an unknown kind, not JSON.
        let mut wrong_parity: serde_json::Value = serde_json::from_str(&cell_json()).unwrap();
        wrong_parity["parity"] = "great".into();
        for bad in [
            r#"{"kind":"cell","index":1}"#.to_string(),
            wrong_parity.to_string(),
            r#"{"kind":"telepathy"}"#.to_string(),
            "{".to_string(),
        ] {
            assert!(IncomingEvent::parse(0, 0, bad.clone()).is_err(), "{bad}");
        }
    }
}
