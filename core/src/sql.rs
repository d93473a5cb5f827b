//! How the domain's ids and stored names are SQL values (feature `sql`, the coordinator's
//! store only): an id is its uuid text, a state, parity verdict or event kind its one
//! `as_str` name, read back through the same `FromStr` that every other reader uses. So the
//! store binds `run_id` itself, never `run_id.to_string()`, and a value it cannot read back
//! fails as a conversion error naming what it expected.

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};

use crate::cell::CellParity;
use crate::events::EventKind;
use crate::ids::{AgentId, JobId, RunId};
use crate::lifecycle::{AgentState, JobState, RunState};

/// Reads a text column through `FromStr`; the parse error travels as the cause.
fn from_text<T>(value: ValueRef<'_>) -> FromSqlResult<T>
where
    T: std::str::FromStr,
    T::Err: std::error::Error + Send + Sync + 'static,
{
    value
        .as_str()?
        .parse()
        .map_err(|err| FromSqlError::Other(Box::new(err)))
}

macro_rules! id_column {
    ($($id:ty),*) => {$(
        impl ToSql for $id {
            fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
                Ok(ToSqlOutput::from(self.to_string()))
            }
        }

        impl FromSql for $id {
            fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
                value.as_str()?.parse::<$id>().map_err(|err| {
                    FromSqlError::Other(Box::new(StoredIdError {
                        kind: err.kind,
                        value: err.value,
                    }))
                })
            }
        }
    )*};
}

/// A stored id that is no uuid, said without the parse error's hint to list ids (which
/// helps someone who typed one, not a store that holds one).
#[derive(Debug, thiserror::Error)]
#[error("`{value}` is not a valid {kind} (a uuid)")]
struct StoredIdError {
    kind: &'static str,
    value: String,
}

macro_rules! name_column {
    ($($name:ty),*) => {$(
        impl ToSql for $name {
            fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
                Ok(ToSqlOutput::Borrowed(ValueRef::Text(self.as_str().as_bytes())))
            }
        }

        impl FromSql for $name {
            fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
                from_text(value)
            }
        }
    )*};
}

id_column!(RunId, JobId, AgentId);
name_column!(RunState, JobState, AgentState, CellParity, EventKind);

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::Connection;

    fn round_trip<T: ToSql + FromSql>(value: &T) -> (String, T) {
        let conn = Connection::open_in_memory().unwrap();
        conn.query_row("SELECT ?1, ?1", [value], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .unwrap()
    }

    #[test]
    fn ids_and_names_are_stored_as_their_text_and_read_back() {
        let run = RunId::new_random();
        assert_eq!(round_trip(&run), (run.to_string(), run));
        let agent = AgentId::new_random();
        assert_eq!(round_trip(&agent), (agent.to_string(), agent));
        for state in RunState::ALL {
            assert_eq!(round_trip(&state), (state.as_str().to_string(), state));
        }
        for state in JobState::ALL {
            assert_eq!(round_trip(&state), (state.as_str().to_string(), state));
        }
        for parity in CellParity::ALL {
            assert_eq!(round_trip(&parity), (parity.as_str().to_string(), parity));
        }
    }

    #[test]
    fn a_stored_value_that_does_not_read_back_says_what_it_expected() {
        let conn = Connection::open_in_memory().unwrap();
        let read = |text: &str| -> String {
            match conn.query_row("SELECT ?1", [text], |row| row.get::<_, JobState>(0)) {
                Ok(state) => panic!("`{text}` read as {state:?}"),
                Err(err) => err.to_string(),
            }
        };
        assert!(read("leasd").contains("job state"), "{}", read("leasd"));
        let err = conn
            .query_row("SELECT 'not-a-uuid'", [], |row| row.get::<_, RunId>(0))
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a valid run id"), "{err}");
        assert!(
            !err.contains("abfleet runs"),
            "no hint to list ids for a stored one: {err}"
        );
    }
}
