//! What a failed call on either link (agent or control) says, without tonic: a
//! [`LinkErrorKind`] to branch on, the status code's name for the logs, and the peer's words.

/// What a caller tells apart in a failed call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkErrorKind {
    /// The coordinator refuses the caller's certificate.
    Unauthenticated,
    /// The coordinator does not know this agent, or no longer holds the attempt.
    FailedPrecondition,
    NotFound,
    InvalidArgument,
    /// Too large (a message over the coordinator's limit).
    OutOfRange,
    /// The connection failed or the coordinator stopped answering (gRPC `Unavailable` or
    /// `Unknown`: a refused connection, a reset, keep-alive pings unanswered).
    Unreachable,
    /// The coordinator answered something this build cannot read (another abfleet
    /// version's report, progress or id).
    Unreadable,
    /// Anything else: an internal error, a timeout, …
    Other,
}

/// A failed call or a broken session.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code}: {message}")]
pub struct LinkError {
    kind: LinkErrorKind,
    /// The status code's name, for the logs.
    code: String,
    message: String,
}

impl LinkError {
    pub fn kind(&self) -> LinkErrorKind {
        self.kind
    }

    /// The coordinator's (or the transport's) words, without the code.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// An answer that does not decode into the domain type it should be.
    pub(crate) fn unreadable(message: impl Into<String>) -> LinkError {
        LinkError {
            kind: LinkErrorKind::Unreadable,
            code: "Unreadable".to_string(),
            message: message.into(),
        }
    }
}

/// The coordinator's answer that does not make a domain value: it names the field and asks
/// whether the two ends are the same abfleet.
impl From<crate::WireError> for LinkError {
    fn from(err: crate::WireError) -> Self {
        match err {
            // Already says so.
            crate::WireError::BadDocument { .. } => LinkError::unreadable(err.to_string()),
            _ => LinkError::unreadable(format!(
                "{err}; is the coordinator from another abfleet version?"
            )),
        }
    }
}

impl From<tonic::Status> for LinkError {
    fn from(status: tonic::Status) -> Self {
        let kind = match status.code() {
            tonic::Code::Unauthenticated => LinkErrorKind::Unauthenticated,
            tonic::Code::FailedPrecondition => LinkErrorKind::FailedPrecondition,
            tonic::Code::NotFound => LinkErrorKind::NotFound,
            tonic::Code::InvalidArgument => LinkErrorKind::InvalidArgument,
            tonic::Code::OutOfRange => LinkErrorKind::OutOfRange,
            tonic::Code::Unavailable | tonic::Code::Unknown => LinkErrorKind::Unreachable,
            _ => LinkErrorKind::Other,
        };
        LinkError {
            kind,
            code: format!("{:?}", status.code()),
            message: status.message().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_map_to_the_kinds_callers_branch_on() {
        for (code, kind) in [
            (tonic::Code::Unauthenticated, LinkErrorKind::Unauthenticated),
            (
                tonic::Code::FailedPrecondition,
                LinkErrorKind::FailedPrecondition,
            ),
            (tonic::Code::NotFound, LinkErrorKind::NotFound),
            (tonic::Code::InvalidArgument, LinkErrorKind::InvalidArgument),
            (tonic::Code::OutOfRange, LinkErrorKind::OutOfRange),
            (tonic::Code::Unavailable, LinkErrorKind::Unreachable),
            (tonic::Code::Unknown, LinkErrorKind::Unreachable),
            (tonic::Code::Internal, LinkErrorKind::Other),
            (tonic::Code::DeadlineExceeded, LinkErrorKind::Other),
        ] {
            let err = LinkError::from(tonic::Status::new(code, "the words"));
            assert_eq!(err.kind(), kind, "{code:?}");
            assert_eq!(err.message(), "the words");
            assert_eq!(err.to_string(), format!("{code:?}: the words"));
        }
    }

    #[test]
    fn an_answer_that_does_not_decode_is_unreadable_and_asks_about_versions() {
        let bad_id = crate::parse_id::<abfleet_core::RunId>("run_id", "nope").unwrap_err();
        let err = LinkError::from(bad_id);
        assert_eq!(err.kind(), LinkErrorKind::Unreadable);
        assert!(
            err.message().contains("run_id") && err.message().contains("another abfleet version"),
            "{err}"
        );
        let document = crate::WireError::BadDocument {
            field: "report_json",
            message: "eof".into(),
        };
        let err = LinkError::from(document);
        assert_eq!(
            err.message().matches("another abfleet version").count(),
            1,
            "said once: {err}"
        );
    }
}
