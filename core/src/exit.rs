//! The exit codes of `abfleet local` and `abfleet submit --wait`, in one place.

/// Every cell passed the parity gate.
pub const OK: i32 = 0;
/// At least one cell failed the parity gate: a score moved beyond what the spec allows.
pub const PARITY_FAILED: i32 = 1;
/// The command line or the job spec is wrong; nothing ran.
pub const USAGE: i32 = 2;
/// The run could not be carried out: a build failed, a binary crashed, a fixture was
/// missing, an agent was lost. A failed cell of a workload only one tree has does not count
/// (there was no comparison to carry out); it is reported with its reason.
pub const NOT_CARRIED_OUT: i32 = 3;
/// Every cell was carried out and passed parity, but a retuning check failed: the build
/// cannot run natively on a device of the fleet, or a sub-group size is unsupported
/// (docs/retuning.md). Lower precedence than 1 and 3.
pub const TUNING_FAILED: i32 = 4;
/// The run was cancelled (Ctrl-C or `abfleet cancel`).
pub const CANCELLED: i32 = 130;

/// The text `--help` shows.
pub const HELP: &str = "\
Exit codes:
  0    every cell passed the parity gate
  1    the parity gate failed: a score moved beyond max_score_delta (takes precedence over 3)
  2    usage or job-spec error; nothing ran
  3    the run could not be carried out (build failed, binary crashed, fixture missing, agent lost;
       a failed workload that only one tree has is reported but does not count)
  4    a retuning check failed (e.g. no code object for a fleet GPU); see the report's findings
  130  the run was cancelled";
