//! What an agent tells the coordinator about a job, in order: the payloads of the numbered
//! event stream. The coordinator stores them verbatim and builds reports from them.

use serde::{Deserialize, Serialize};

use crate::calibration::Calibration;
use crate::cell::CellResult;
use crate::inventory::Inventory;
use crate::spec::SourceSpec;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    Upstream,
    Fork,
}

impl Side {
    pub const BOTH: [Side; 2] = [Side::Upstream, Side::Fork];

    pub fn name(self) -> &'static str {
        match self {
            Side::Upstream => "upstream",
            Side::Fork => "fork",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum JobEventPayload {
    /// The job started on this host.
    Started {
        host: Inventory,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        calibration: Option<Box<Calibration>>,
    },
    /// Where the run stands; `current_cell` while timing.
    Progress {
        phase: String,
        message: String,
        cells_done: u32,
        cells_total: u32,
        current_cell: Option<String>,
    },
    Log {
        level: LogLevel,
        line: String,
    },
    /// A side's source is fixed to an exact revision.
    SourceResolved {
        side: Side,
        source: SourceSpec,
        /// The resolved commit hash (git) or content hash (path).
        resolved: String,
    },
    Build(BuildRecord),
    Cell(Box<CellResult>),
    /// A retuning check's result on this host (docs/retuning.md).
    Finding(Box<crate::finding::Finding>),
    /// A retuning check that did not run here, and why (never an error).
    CheckSkipped(crate::finding::SkippedCheck),
    /// A timed cell of the fork alone on a GPU backend.
    BackendCell(Box<crate::backend_cell::BackendCell>),
    /// A retuning sweep's measurements on this host (docs/sweeps.md), sent once at its end.
    Sweep(Box<crate::sweep::SweepOutcome>),
    /// The last event of an attempt; sent only after every earlier event was acknowledged.
    Done {
        outcome: JobOutcome,
        error: Option<String>,
    },
}

/// What kind of event a payload is, as the store names it (the same names as the payload's
/// serde `kind` tag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Started,
    Progress,
    Log,
    SourceResolved,
    Build,
    Cell,
    Finding,
    CheckSkipped,
    BackendCell,
    Sweep,
    Done,
}

impl EventKind {
    pub const ALL: [EventKind; 11] = [
        EventKind::Started,
        EventKind::Progress,
        EventKind::Log,
        EventKind::SourceResolved,
        EventKind::Build,
        EventKind::Cell,
        EventKind::Finding,
        EventKind::CheckSkipped,
        EventKind::BackendCell,
        EventKind::Sweep,
        EventKind::Done,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Started => "started",
            EventKind::Progress => "progress",
            EventKind::Log => "log",
            EventKind::SourceResolved => "source_resolved",
            EventKind::Build => "build",
            EventKind::Cell => "cell",
            EventKind::Finding => "finding",
            EventKind::CheckSkipped => "check_skipped",
            EventKind::BackendCell => "backend_cell",
            EventKind::Sweep => "sweep",
            EventKind::Done => "done",
        }
    }
}

impl std::str::FromStr for EventKind {
    type Err = crate::names::UnknownName;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        crate::names::UnknownName::parse("event kind", text, EventKind::ALL, EventKind::as_str)
    }
}

impl JobEventPayload {
    /// The free text an agent sent, clipped to the limits of `stored_text` (a cell's too);
    /// whether anything was clipped.
    pub fn clip_texts(&mut self) -> bool {
        use crate::stored_text::{clip, clip_option, MAX_ERROR_CHARS, MAX_TAIL_CHARS};
        match self {
            JobEventPayload::Progress { message, .. } => clip(message, MAX_ERROR_CHARS),
            JobEventPayload::Log { line, .. } => clip(line, MAX_ERROR_CHARS),
            JobEventPayload::Build(build) => {
                let error = clip_option(&mut build.error, MAX_ERROR_CHARS);
                clip_option(&mut build.log_tail, MAX_TAIL_CHARS) | error
            }
            JobEventPayload::Cell(cell) => cell.clip_texts(),
            JobEventPayload::BackendCell(cell) => clip_option(&mut cell.reason, MAX_ERROR_CHARS),
            JobEventPayload::Done { error, .. } => clip_option(error, MAX_ERROR_CHARS),
            _ => false,
        }
    }

    /// Parses a payload from its JSON. A cell event (nearly all of a job's events, and the
    /// big ones) whose tag comes first, as serde writes it, is decoded straight into its
    /// [`CellResult`](crate::cell::CellResult): the `kind` key is then an unknown field,
    /// ignored, and serde's buffering of an internally tagged enum's whole content — most of
    /// a coordinator's ingest time (docs/performance.md) — is skipped. Anything else, or a
    /// cell that does not decode that way, takes the general path and its error.
    pub fn from_json(json: &str) -> serde_json::Result<Self> {
        const CELL_FIRST: &str = r#"{"kind":"cell","#;
        if json.starts_with(CELL_FIRST) {
            if let Ok(cell) = serde_json::from_str::<crate::cell::CellResult>(json) {
                return Ok(JobEventPayload::Cell(Box::new(cell)));
            }
        }
        serde_json::from_str(json)
    }

    pub fn kind(&self) -> EventKind {
        match self {
            JobEventPayload::Started { .. } => EventKind::Started,
            JobEventPayload::Progress { .. } => EventKind::Progress,
            JobEventPayload::Log { .. } => EventKind::Log,
            JobEventPayload::SourceResolved { .. } => EventKind::SourceResolved,
            JobEventPayload::Build(_) => EventKind::Build,
            JobEventPayload::Cell(_) => EventKind::Cell,
            JobEventPayload::Finding(_) => EventKind::Finding,
            JobEventPayload::CheckSkipped(_) => EventKind::CheckSkipped,
            JobEventPayload::BackendCell(_) => EventKind::BackendCell,
            JobEventPayload::Sweep(_) => EventKind::Sweep,
            JobEventPayload::Done { .. } => EventKind::Done,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogLevel {
    Info,
    Warn,
    Error,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobOutcome {
    /// Every cell was measured (whatever parity said).
    Completed,
    /// The job could not be carried out (bad fixture, failed fetch, …); see `error`.
    Failed,
    Cancelled,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuildRecord {
    pub side: Side,
    pub status: BuildStatus,
    /// The cache key: resolved source, recipe and toolchain fingerprint.
    pub cache_key: String,
    pub toolchain: String,
    pub seconds: f64,
    pub log_path: String,
    /// The end of the build log when the build failed.
    pub log_tail: Option<String>,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BuildStatus {
    Built,
    Cached,
    Failed,
}
