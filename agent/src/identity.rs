//! The agent's id: a uuid made on first start and kept in the work directory, so a host keeps
//! its identity (and its history at the coordinator) across restarts.

use std::path::Path;

use abfleet_core::AgentId;

use crate::error::AgentError;

const FILE_NAME: &str = "agent-id";

pub fn load_or_create(work_dir: &Path) -> Result<AgentId, AgentError> {
    let path = work_dir.join(FILE_NAME);
    match std::fs::read_to_string(&path) {
        Ok(text) => text.trim().parse().map_err(|_| AgentError::Io {
            what: format!(
                "read the agent id in `{}` (it is not a uuid; delete the file to get a new id)",
                path.display()
            ),
            source: std::io::Error::from(std::io::ErrorKind::InvalidData),
        }),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            let id = AgentId::new_random();
            std::fs::create_dir_all(work_dir).map_err(|source| AgentError::Io {
                what: format!("create the work directory `{}`", work_dir.display()),
                source,
            })?;
            std::fs::write(&path, format!("{id}\n")).map_err(|source| AgentError::Io {
                what: format!("write `{}`", path.display()),
                source,
            })?;
            Ok(id)
        }
        Err(source) => Err(AgentError::Io {
            what: format!("read `{}`", path.display()),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let first = load_or_create(dir.path()).unwrap();
        let second = load_or_create(dir.path()).unwrap();
        assert_eq!(first, second);
    }

    #[test]
    fn a_damaged_id_file_says_how_to_recover() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE_NAME), "garbage").unwrap();
        let err = load_or_create(dir.path()).unwrap_err().to_string();
        assert!(err.contains("delete the file"), "{err}");
    }
}
