//! The shared shape of a probe's answer: what was found, or why nothing could be.

use serde::{Deserialize, Serialize};

/// A probe result: the parsed value, or the reason the tool gave nothing usable.
///
/// Absence is an expected state on a bench host (no GPU, no toolkit), not an error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Probe<T> {
    Found(T),
    Absent { reason: String },
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
