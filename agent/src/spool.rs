//! The on-disk spool of events the coordinator has not acknowledged yet: one JSON-lines file
//! per job attempt. An event is on disk before anyone tries to send it, and leaves the spool
//! only when the coordinator said it stored it, so a lost connection or a coordinator
//! restart loses nothing.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpooledEvent {
    pub seq: u64,
    pub at_ms: i64,
    pub payload_json: String,
}

#[derive(Debug)]
pub struct Spool {
    path: PathBuf,
    pending: Vec<SpooledEvent>,
}

impl Spool {
    /// Opens (or creates) the spool file of one attempt, keeping whatever it already holds.
    pub fn open(dir: &Path, job_id: &str, attempt: u32) -> std::io::Result<Spool> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(format!("{job_id}-{attempt}.jsonl"));
        Spool::open_file(path)
    }

    pub fn open_file(path: PathBuf) -> std::io::Result<Spool> {
        let pending = match std::fs::read_to_string(&path) {
            Ok(text) => text
                .lines()
                .filter(|line| !line.trim().is_empty())
                // A torn last line (power loss mid-write) was never sent; it is dropped.
                .filter_map(|line| serde_json::from_str(line).ok())
                .collect(),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(err) => return Err(err),
        };
        Ok(Spool { path, pending })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends an event durably.
    pub fn push(&mut self, event: SpooledEvent) -> std::io::Result<()> {
        let mut line = serde_json::to_string(&event).map_err(std::io::Error::other)?;
        line.push('\n');
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        file.write_all(line.as_bytes())?;
        file.sync_data()?;
        self.pending.push(event);
        Ok(())
    }

    /// Up to `max` unacknowledged events, oldest first.
    pub fn pending(&self, max: usize) -> Vec<SpooledEvent> {
        self.pending.iter().take(max).cloned().collect()
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Drops acknowledged events and rewrites the file (atomically, by rename).
    pub fn acknowledge(&mut self, acked: &[u64]) -> std::io::Result<()> {
        let before = self.pending.len();
        self.pending.retain(|event| !acked.contains(&event.seq));
        if self.pending.len() == before {
            return Ok(());
        }
        self.rewrite()
    }

    /// Forgets everything (the lease was lost: nobody will take these events).
    pub fn discard(&mut self) -> std::io::Result<()> {
        self.pending.clear();
        match std::fs::remove_file(&self.path) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(err),
            _ => Ok(()),
        }
    }

    fn rewrite(&self) -> std::io::Result<()> {
        if self.pending.is_empty() {
            return match std::fs::remove_file(&self.path) {
                Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(err),
                _ => Ok(()),
            };
        }
        let tmp = self.path.with_extension("jsonl.tmp");
        let mut text = String::new();
        for event in &self.pending {
            text.push_str(&serde_json::to_string(event).map_err(std::io::Error::other)?);
            text.push('\n');
        }
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(text.as_bytes())?;
        file.sync_data()?;
        std::fs::rename(tmp, &self.path)
    }
}

/// Spool files left by an earlier agent process: (path, job id, attempt).
pub fn leftovers(dir: &Path) -> Vec<(PathBuf, String, u32)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(stem) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".jsonl"))
        else {
            continue;
        };
        if let Some((job_id, attempt)) = stem.rsplit_once('-') {
            if let Ok(attempt) = attempt.parse() {
                found.push((path.clone(), job_id.to_string(), attempt));
            }
        }
    }
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: u64) -> SpooledEvent {
        SpooledEvent {
            seq,
            at_ms: 1,
            payload_json: format!("{{\"n\":{seq}}}"),
        }
    }

    #[test]
    fn unacknowledged_events_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = Spool::open(dir.path(), "job", 1).unwrap();
        for seq in 0..4 {
            spool.push(event(seq)).unwrap();
        }
        spool.acknowledge(&[0, 2]).unwrap();
        let reopened = Spool::open(dir.path(), "job", 1).unwrap();
        assert_eq!(reopened.pending(10), vec![event(1), event(3)]);
        let found = leftovers(dir.path());
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].1.as_str(), found[0].2), ("job", 1));
    }

    #[test]
    fn a_fully_acknowledged_spool_leaves_no_file_and_a_torn_line_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = Spool::open(dir.path(), "job", 2).unwrap();
        spool.push(event(0)).unwrap();
        spool.acknowledge(&[0]).unwrap();
        assert!(!spool.path().exists());
        spool.push(event(1)).unwrap();
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(spool.path())
            .unwrap();
        file.write_all(b"{\"seq\":2,\"at_").unwrap();
        let reopened = Spool::open(dir.path(), "job", 2).unwrap();
        assert_eq!(reopened.pending(10), vec![event(1)]);
    }
}
