//! `abfleet bench`: abfleet's own cost, measured in-process (docs/performance.md). Each
//! benchmark prints a small table and one JSON line (`{"bench": NAME, …}`) and exits 0
//! whether or not a target is met: figures are read and recorded, never asserted on.

pub mod agent_cpu;
pub mod fleet;
pub mod parse;
pub mod report;
pub mod rerun;
pub mod runner;
pub mod store;
mod summary;
mod synthetic;

/// How much of a dead child's log a bench's error shows.
const LOG_TAIL_BYTES: u64 = 4096;
