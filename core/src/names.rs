//! The one error for text that names no variant of a domain enum stored by name (run and job
//! states, event kinds, parity verdicts): each such enum has one `as_str` and one `FromStr`,
//! and this is what its `FromStr` returns.

/// `text` is not one of the names of `what`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not a {what}; expected one of {expected}")]
pub struct UnknownName {
    pub what: &'static str,
    pub text: String,
    pub expected: String,
}

impl UnknownName {
    /// `text` is none of `names` (the `as_str` of every variant).
    pub fn new(what: &'static str, text: &str, names: &[&str]) -> UnknownName {
        UnknownName {
            what,
            text: text.to_string(),
            expected: names.join(", "),
        }
    }

    /// The variant of `all` whose name (`as_str`) is `text`; else the error listing the names.
    pub fn parse<T: Copy, const N: usize>(
        what: &'static str,
        text: &str,
        all: [T; N],
        as_str: fn(T) -> &'static str,
    ) -> Result<T, UnknownName> {
        all.into_iter()
            .find(|variant| as_str(*variant) == text)
            .ok_or_else(|| UnknownName::new(what, text, &all.map(as_str)))
    }
}

#[cfg(test)]
mod tests {
    use crate::cell::CellParity;
    use crate::events::{EventKind, JobEventPayload, JobOutcome, LogLevel};
    use crate::lifecycle::{AgentState, JobState, RunState};

    #[test]
    fn every_stored_name_parses_back_to_its_variant() {
        for state in RunState::ALL {
            assert_eq!(state.as_str().parse::<RunState>(), Ok(state));
        }
        for state in JobState::ALL {
            assert_eq!(state.as_str().parse::<JobState>(), Ok(state));
        }
        for state in AgentState::ALL {
            assert_eq!(state.as_str().parse::<AgentState>(), Ok(state));
        }
        for kind in EventKind::ALL {
            assert_eq!(kind.as_str().parse::<EventKind>(), Ok(kind));
        }
        for parity in CellParity::ALL {
            assert_eq!(parity.as_str().parse::<CellParity>(), Ok(parity));
        }
    }

    #[test]
    fn an_unknown_name_is_refused_with_the_names_expected() {
        let err = "paused".parse::<RunState>().unwrap_err().to_string();
        assert_eq!(
            err,
            "`paused` is not a run state; expected one of queued, running, done, failed, cancelled"
        );
        assert!(
            "Leased".parse::<JobState>().is_err(),
            "names are case-sensitive"
        );
        let err = "asleep".parse::<AgentState>().unwrap_err().to_string();
        assert!(err.contains("asleep") && err.contains("drained"), "{err}");
    }

    /// The store keeps these names next to JSON that serde wrote: they must be the same words.
    #[test]
    fn stored_names_match_what_serde_writes() {
        for parity in CellParity::ALL {
            assert_eq!(
                serde_json::to_value(parity).unwrap(),
                serde_json::json!(parity.as_str())
            );
        }
        let payloads = [
            JobEventPayload::Log {
                level: LogLevel::Info,
                line: "x".into(),
            },
            JobEventPayload::Done {
                outcome: JobOutcome::Completed,
                error: None,
            },
        ];
        for payload in payloads {
            let json = serde_json::to_value(&payload).unwrap();
            assert_eq!(json["kind"], payload.kind().as_str());
        }
    }
}
