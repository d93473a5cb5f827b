//! An error with the exit code it should end the process with.

use abfleet_core::exit;

pub struct Failure {
    pub code: i32,
    pub error: anyhow::Error,
}

impl Failure {
    pub fn usage(error: impl Into<anyhow::Error>) -> Failure {
        Failure {
            code: exit::USAGE,
            error: error.into(),
        }
    }

    pub fn infra(error: impl Into<anyhow::Error>) -> Failure {
        Failure {
            code: exit::NOT_CARRIED_OUT,
            error: error.into(),
        }
    }
}

/// Marks a result's error as a usage error (exit 2) or an infrastructure one (exit 3).
pub trait Classify<T> {
    fn usage(self) -> Result<T, Failure>;
    fn infra(self) -> Result<T, Failure>;
}

impl<T, E: Into<anyhow::Error>> Classify<T> for Result<T, E> {
    fn usage(self) -> Result<T, Failure> {
        self.map_err(Failure::usage)
    }

    fn infra(self) -> Result<T, Failure> {
        self.map_err(Failure::infra)
    }
}
