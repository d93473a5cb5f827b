//! The exit codes of `abfleet local`, `abfleet submit --wait` and `abfleet report`, in one
//! place (5-7 only with `--fail-on`: `fail_on`).

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
/// Opt-in (`--fail-on slower`): otherwise 0, but the fork is significantly slower than
/// upstream on at least one cell.
pub const SLOWER: i32 = 5;
/// Opt-in (`--fail-on regression`): otherwise 0, but a cell regressed against the previous
/// comparable run (speedup shrank, the fork's own time grew, a parity delta grew).
pub const REGRESSION: i32 = 6;
/// Opt-in (`--fail-on stale`): otherwise 0, but a sweep's default configuration is beaten
/// by another that kept parity.
pub const STALE: i32 = 7;
/// `submit --wait` or `watch` stopped following (Ctrl-C) while the run goes on: nothing is
/// decided yet (`abfleet watch RUN` follows it again).
pub const DETACHED: i32 = 8;
/// The run was cancelled (Ctrl-C on `local`, or `abfleet cancel`).
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
  5    only with --fail-on slower: the fork is significantly slower than upstream on a cell
  6    only with --fail-on regression: a cell regressed against the previous comparable run
  7    only with --fail-on stale: a sweep's default is beaten by another configuration
       (5-7 replace a 0 only; the first that applies, in this order)
  8    stopped following (Ctrl-C on submit --wait or watch); the run goes on: `abfleet watch RUN`
  130  the run was cancelled";

#[cfg(test)]
mod tests {
    /// Every exit code, with the words the documents use for it.
    const CODES: [i32; 10] = [
        super::OK,
        super::PARITY_FAILED,
        super::USAGE,
        super::NOT_CARRIED_OUT,
        super::TUNING_FAILED,
        super::SLOWER,
        super::REGRESSION,
        super::STALE,
        super::DETACHED,
        super::CANCELLED,
    ];

    fn read(relative: &str) -> String {
        std::fs::read_to_string(format!("{}/../{relative}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    /// Issue 25: docs/report-format.md's list lacked 4. The `--help` text, the docs'
    /// "Exit code" section and the README name every code, and no other.
    #[test]
    fn help_docs_and_readme_list_every_exit_code_and_no_other() {
        let listed_in_help: Vec<i32> = super::HELP
            .lines()
            .filter_map(|line| line.split_whitespace().next()?.parse().ok())
            .collect();
        assert_eq!(listed_in_help, CODES, "--help");

        let docs = read("docs/report-format.md");
        let section = docs
            .split("\n## Exit code\n")
            .nth(1)
            .and_then(|rest| rest.split("\n## ").next())
            .expect("docs/report-format.md has an `## Exit code` section");
        let mut in_docs: Vec<i32> = section
            .split("**")
            .skip(1)
            .step_by(2)
            .filter_map(|bold| bold.parse().ok())
            .collect();
        in_docs.sort_unstable();
        in_docs.dedup();
        let mut expected = CODES.to_vec();
        expected.sort_unstable();
        assert_eq!(
            in_docs, expected,
            "docs/report-format.md, `## Exit code` in bold"
        );

        let readme = read("README.md");
        let paragraph = readme
            .split("\n\n")
            .find(|p| p.starts_with("Exit codes of"))
            .expect("README.md has an `Exit codes of` paragraph");
        for code in CODES {
            let named = paragraph
                .split(|c: char| !c.is_ascii_digit())
                .any(|number| number == code.to_string());
            assert!(named, "README.md's exit codes lack {code}: {paragraph}");
        }
    }
}
