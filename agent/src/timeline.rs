//! Trace points of what the agent does around its timed runs: a run's start and end (just
//! outside the runner's clock), each event upload and spool write, host samples. They are
//! `trace`-level events of the target [`TARGET`], off unless a subscriber asks for them
//! (a disabled callsite costs a load and a branch), so a test or a benchmark can record the
//! agent's timeline and check that nothing of abfleet's own happens inside a timed run.

/// The `tracing` target of every trace point.
pub const TARGET: &str = "abfleet_timeline";

/// A point in the agent's timeline: `what` happened now.
pub fn mark(what: &'static str) {
    tracing::trace!(target: TARGET, what);
}

/// A point about one file: `what` happened to `path` now (a run's log names the run).
pub fn mark_path(what: &'static str, path: &std::path::Path) {
    tracing::trace!(target: TARGET, what, path = %path.display());
}
