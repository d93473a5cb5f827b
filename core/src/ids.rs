//! Identifier newtypes. Every id on the wire and in the store is one of these, never a bare
//! string, so a job id cannot be passed where a run id is expected.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// An id string that is not a uuid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{value}` is not a valid {kind} (expected a uuid such as 6f1c2a8e-…); list them with `abfleet {list_command}`")]
pub struct ParseIdError {
    pub kind: &'static str,
    pub value: String,
    pub list_command: &'static str,
}

macro_rules! uuid_id {
    ($name:ident, $kind:literal, $list:literal) => {
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub Uuid);

        impl $name {
            pub fn new_random() -> Self {
                Self(Uuid::new_v4())
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl FromStr for $name {
            type Err = ParseIdError;
            fn from_str(value: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(value.trim())
                    .map($name)
                    .map_err(|_| ParseIdError {
                        kind: $kind,
                        value: value.to_string(),
                        list_command: $list,
                    })
            }
        }
    };
}

uuid_id!(RunId, "run id", "runs");
uuid_id!(JobId, "job id", "runs");
uuid_id!(AgentId, "agent id", "agents");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_through_their_text_form() {
        let id = RunId::new_random();
        assert_eq!(id.to_string().parse::<RunId>().unwrap(), id);
    }

    #[test]
    fn a_bad_id_says_what_it_expected_and_where_to_look() {
        let err = "not-a-uuid".parse::<AgentId>().unwrap_err();
        let text = err.to_string();
        assert!(text.contains("not a valid agent id"), "{text}");
        assert!(text.contains("abfleet agents"), "{text}");
    }
}
