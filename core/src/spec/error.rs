//! What can go wrong reading a spec, in either form. Every message names the file (or, for
//! the JSON form, the key) and says what to do.

use std::path::PathBuf;

/// What can go wrong reading a spec. Every message names the file and says what to do.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    // Not `source`: the message says the cause once (a chain printed it twice).
    #[error("failed to read job spec `{path}`: {cause}; check the path")]
    Read {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("job spec `{path}` is not valid: {message}\nhint: the keys are documented in docs/job-spec.md")]
    Syntax { path: PathBuf, message: String },
    #[error("job spec `{path}`: {message}")]
    Invalid { path: PathBuf, message: String },
    /// A spec's JSON form (a submission, a stored run, an agent's offer) breaks an invariant
    /// of a validated spec. It has no file; the message names the key, and the reader's
    /// caller (serde's error, then the coordinator or agent) says where it came from.
    #[error("{message}")]
    Json { message: String },
}

/// serde's message for a spec key or value, in the spec's words (issue 39): an unknown key
/// gets the nearest valid one ("did you mean `runs`?"); a number of the wrong kind is
/// described, not named by its Rust type (`expected u32`).
pub(crate) fn explained(message: &str) -> String {
    let mut out = message
        .replace(
            "expected u32",
            "expected a whole number, 0 or more (at most 4294967295)",
        )
        .replace("expected u64", "expected a whole number, 0 or more")
        .replace("expected u8", "expected a whole number from 0 to 255")
        .replace("expected i32", "expected a whole number")
        .replace("expected f64", "expected a number");
    if let Some(meant) = nearest_expected(message) {
        out.push_str(&format!("\ndid you mean `{meant}`?"));
    }
    out
}

/// The expected key nearest the unknown one of serde's "unknown field `X`, expected one of
/// `a`, `b`" (at most two edits, or one name within the other).
fn nearest_expected(message: &str) -> Option<&str> {
    let rest = message.split("unknown field `").nth(1)?;
    let (unknown, rest) = rest.split_once('`')?;
    let expected = rest.split_once("expected ")?.1;
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|key| (edit_distance(unknown, key), key))
        .filter(|(distance, key)| {
            *distance <= 2
                || (unknown.len() >= 3 && (key.contains(unknown) || unknown.contains(key)))
        })
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, key)| key)
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let current = row[j + 1];
            row[j + 1] = (previous + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(current + 1);
            previous = current;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_gets_the_key_meant_and_a_wrong_number_is_described() {
        let typo = "unknown field `runz`, expected one of `warmup`, `runs`, `threads`, `max_runs`";
        assert!(
            explained(typo).ends_with("\ndid you mean `runs`?"),
            "{}",
            explained(typo)
        );
        let far = "unknown field `colour`, expected one of `warmup`, `runs`";
        assert_eq!(explained(far), far);
        assert_eq!(
            explained("invalid value: integer `-3`, expected u32"),
            "invalid value: integer `-3`, expected a whole number, 0 or more (at most 4294967295)"
        );
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
