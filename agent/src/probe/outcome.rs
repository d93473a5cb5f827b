//! The shared shape of a probe's answer: what was found, or why nothing could be.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A probe result: the parsed value, or the reason the tool gave nothing usable.
///
/// Absence is an expected state on a bench host (no GPU, no toolkit), not an error.
/// In JSON: `{"status": "found", "value": ...}` or `{"status": "absent", "reason": "..."}`.
#[derive(Debug, Clone, PartialEq)]
pub enum Probe<T> {
    Found(T),
    Absent { reason: String },
}

// Not `#[serde(tag = "status")]` on `Probe` itself: an internally tagged newtype variant
// cannot hold a sequence, so every `Probe<Vec<Gpu>>` that found GPUs failed to serialize
// and the agent's `Inventory.hardware` silently became `None` on GPU hosts.
impl<T: Serialize> Serialize for Probe<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(tag = "status", rename_all = "snake_case")]
        enum Repr<'a, T> {
            Found { value: &'a T },
            Absent { reason: &'a str },
        }
        match self {
            Probe::Found(value) => Repr::Found { value },
            Probe::Absent { reason } => Repr::Absent { reason },
        }
        .serialize(serializer)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Probe<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(tag = "status", rename_all = "snake_case")]
        enum Repr<T> {
            Found { value: T },
            Absent { reason: String },
        }
        Ok(match Repr::deserialize(deserializer)? {
            Repr::Found { value } => Probe::Found(value),
            Repr::Absent { reason } => Probe::Absent { reason },
        })
    }
}

impl<T> Probe<T> {
    pub fn absent(reason: impl Into<String>) -> Self {
        Probe::Absent {
            reason: reason.into(),
        }
    }

    pub fn found(&self) -> Option<&T> {
        match self {
            Probe::Found(value) => Some(value),
            Probe::Absent { .. } => None,
        }
    }

    pub fn is_absent(&self) -> bool {
        matches!(self, Probe::Absent { .. })
    }

    /// The absence reason, if any.
    pub fn absent_reason(&self) -> Option<&str> {
        match self {
            Probe::Found(_) => None,
            Probe::Absent { reason } => Some(reason),
        }
    }
}

/// Splits a `key : value` line at its first colon, trimming both sides.
pub(crate) fn key_value(line: &str) -> Option<(&str, &str)> {
    let (key, value) = line.split_once(':')?;
    Some((key.trim(), value.trim()))
}

/// The leading number of a value such as `81920 MiB` or `500.00 W`.
pub(crate) fn leading_number(value: &str) -> Option<f64> {
    let end = value
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(value.len());
    value[..end].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_found_list_serializes_and_round_trips() {
        // Regression: with `#[serde(tag = "status")]` on the enum this was an error
        // ("cannot serialize tagged newtype variant Probe::Found containing a sequence").
        let found: Probe<Vec<u32>> = Probe::Found(vec![8, 16, 32]);
        let json = serde_json::to_value(&found).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"status": "found", "value": [8, 16, 32]})
        );
        assert_eq!(
            serde_json::from_value::<Probe<Vec<u32>>>(json).unwrap(),
            found
        );

        let absent: Probe<Vec<u32>> = Probe::absent("`rocminfo` is not installed");
        let json = serde_json::to_value(&absent).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"status": "absent", "reason": "`rocminfo` is not installed"})
        );
        assert_eq!(
            serde_json::from_value::<Probe<Vec<u32>>>(json).unwrap(),
            absent
        );
    }
}
