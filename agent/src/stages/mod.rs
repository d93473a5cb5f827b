//! The stages a job is made of, each over the shared [`crate::context::JobContext`]:
//! the A/B cells of a CPU generation, a GPU generation's backend job, and the CPU ISA
//! dispatch sweep, and a `[sweep]` spec's retuning sweep of the fork's tunables. `job.rs`
//! sequences them; they never call each other.

pub mod ab_cells;
pub mod backend;
pub mod dispatch_sweep;
pub mod isa_checks;
pub mod sweep;
