//! The on-disk spool of events the coordinator has not acknowledged yet: one JSON-lines file
//! per job attempt. An event is on disk before anyone tries to send it, and leaves the spool
//! only when the coordinator said it stored it, so a lost connection or a coordinator
//! restart loses nothing. A write that fails (the work dir's disk is full) still keeps the
//! event in memory, so it is sent, and cuts the file back to its last whole line, so a torn
//! line never sits between good ones; the caller fails the job loudly (see `sink`).
//!
//! Acknowledging costs no I/O: acknowledged events leave the memory at once and the file at
//! the next [`Spool::upkeep`], which the uploader runs outside timed runs and only once the
//! acknowledged lines are at least [`COMPACT_MIN_BYTES`] and half the file (or all of it:
//! the file is removed). Until then a crash leaves acknowledged events in the file, which
//! are sent again and ignored by the coordinator (it keys events by job, attempt and
//! sequence number); every unacknowledged one is always there. Rewriting only when the
//! acknowledged part is at least half the file keeps the rewrites linear in what was
//! acknowledged, even after a long outage (a rewrite per acknowledged batch was quadratic).

use std::collections::{HashSet, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Acknowledged lines below this many bytes stay in the file (they are sent again after a
/// crash, and ignored): a rewrite for less is not worth its fsync.
pub const COMPACT_MIN_BYTES: u64 = 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpooledEvent {
    pub seq: u64,
    pub at_ms: i64,
    pub payload_json: String,
}

#[derive(Debug)]
pub struct Spool {
    path: PathBuf,
    /// Unacknowledged events, oldest first, each with the bytes of its line in the file
    /// (0 when its write failed).
    pending: VecDeque<(SpooledEvent, u64)>,
    /// The file's length as this process knows it.
    file_bytes: u64,
    /// Bytes of acknowledged lines still in the file.
    acked_bytes: u64,
}

impl Spool {
    /// Opens (or creates) the spool file of one attempt, keeping whatever it already holds.
    pub fn open(dir: &Path, job_id: &str, attempt: u32) -> std::io::Result<Spool> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(format!("{job_id}-{attempt}.jsonl"));
        Spool::open_file(path)
    }

    pub fn open_file(path: PathBuf) -> std::io::Result<Spool> {
        let (pending, file_bytes) = match std::fs::read(&path) {
            Ok(bytes) => {
                // A torn last line (power loss mid-write) was never sent; it is dropped, and
                // cut off the file, so the next append starts a line of its own. (Bytes, not
                // text: a line torn inside a character is not UTF-8.)
                let whole = bytes
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |newline| newline + 1);
                if whole < bytes.len() {
                    let file = std::fs::OpenOptions::new().write(true).open(&path)?;
                    file.set_len(whole as u64)?;
                    file.sync_data()?;
                }
                let pending = bytes[..whole]
                    .split_inclusive(|&b| b == b'\n')
                    .filter_map(|line| {
                        let event = serde_json::from_slice(line.trim_ascii()).ok()?;
                        Some((event, line.len() as u64))
                    })
                    .collect();
                (pending, whole as u64)
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => (VecDeque::new(), 0),
            Err(err) => return Err(err),
        };
        Ok(Spool {
            path,
            pending,
            file_bytes,
            acked_bytes: 0,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends an event durably. The event is kept (in memory, and so sent) even when the
    /// write fails; the error says it is not on disk. A failed write is cut back off the
    /// file, so later appends follow the last whole line.
    pub fn push(&mut self, event: SpooledEvent) -> std::io::Result<()> {
        let line = serde_json::to_string(&event).map_err(std::io::Error::other);
        self.pending.push_back((event, 0));
        let mut line = line?;
        line.push('\n');
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        let good_len = file.metadata()?.len();
        let written = file
            .write_all(line.as_bytes())
            .and_then(|()| file.sync_data());
        crate::timeline::mark_path("spool.fsync", &self.path);
        if let Err(err) = written {
            // Disk full mid-line: drop the torn part, or the next append would glue a good
            // line onto it and a reader would lose both.
            let _ = file.set_len(good_len);
            let _ = file.sync_data();
            self.file_bytes = good_len;
            return Err(err);
        }
        self.file_bytes = good_len + line.len() as u64;
        if let Some((_, bytes)) = self.pending.back_mut() {
            *bytes = line.len() as u64;
        }
        Ok(())
    }

    /// Up to `max` unacknowledged events, oldest first.
    pub fn pending(&self, max: usize) -> Vec<SpooledEvent> {
        self.pending
            .iter()
            .take(max)
            .map(|(event, _)| event.clone())
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Drops acknowledged events from memory; no I/O (the file catches up in [`upkeep`]).
    ///
    /// [`upkeep`]: Spool::upkeep
    pub fn acknowledge(&mut self, acked: &[u64]) {
        let mut acked: HashSet<u64> = acked.iter().copied().collect();
        // The coordinator acknowledges the oldest events first: a prefix, usually all of it.
        while let Some((event, _)) = self.pending.front() {
            if !acked.remove(&event.seq) {
                break;
            }
            let (_, bytes) = self.pending.pop_front().expect("front exists");
            self.acked_bytes += bytes;
        }
        if !acked.is_empty() {
            let mut freed = 0;
            self.pending.retain(|(event, bytes)| {
                let keep = !acked.contains(&event.seq);
                if !keep {
                    freed += bytes;
                }
                keep
            });
            self.acked_bytes += freed;
        }
    }

    /// Whether [`upkeep`](Spool::upkeep) has work: the file holds only acknowledged events,
    /// or its acknowledged part is large enough to rewrite.
    pub fn needs_upkeep(&self) -> bool {
        if self.pending.is_empty() {
            return self.file_bytes > 0;
        }
        self.acked_bytes >= COMPACT_MIN_BYTES && self.acked_bytes * 2 >= self.file_bytes
    }

    /// Removes the file when every event is acknowledged, else rewrites it (atomically, by
    /// rename) with the unacknowledged events only.
    pub fn upkeep(&mut self) -> std::io::Result<()> {
        if self.pending.is_empty() {
            crate::timeline::mark_path("spool.remove", &self.path);
            return match std::fs::remove_file(&self.path) {
                Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(err),
                _ => {
                    self.file_bytes = 0;
                    self.acked_bytes = 0;
                    Ok(())
                }
            };
        }
        crate::timeline::mark_path("spool.compact", &self.path);
        let tmp = self.path.with_extension("jsonl.tmp");
        let mut text = String::new();
        let mut lengths = Vec::with_capacity(self.pending.len());
        for (event, _) in &self.pending {
            let before = text.len();
            text.push_str(&serde_json::to_string(event).map_err(std::io::Error::other)?);
            text.push('\n');
            lengths.push((text.len() - before) as u64);
        }
        let written = std::fs::File::create(&tmp).and_then(|mut file| {
            file.write_all(text.as_bytes())?;
            file.sync_data()
        });
        if let Err(err) = written {
            // The old file still holds every pending event (and some acknowledged ones, which
            // the coordinator ignores when re-sent); the half-written copy only takes space.
            let _ = std::fs::remove_file(&tmp);
            return Err(err);
        }
        std::fs::rename(tmp, &self.path)?;
        for ((_, bytes), length) in self.pending.iter_mut().zip(lengths) {
            *bytes = length;
        }
        self.file_bytes = text.len() as u64;
        self.acked_bytes = 0;
        Ok(())
    }

    /// Puts events `first..=last` back at the front of the queue when the file still holds
    /// each of them (acknowledged lines stay in it until [`upkeep`](Spool::upkeep)): the
    /// coordinator asked for them again (its store was restored from an older copy).
    /// `false`, and nothing changed, when any of them is gone or already queued.
    pub fn recover(&mut self, first: u64, last: u64) -> std::io::Result<bool> {
        if first > last || self.pending.front().is_some_and(|(e, _)| e.seq <= last) {
            return Ok(false);
        }
        let bytes = match std::fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(err) => return Err(err),
        };
        let mut found: Vec<(SpooledEvent, u64)> = bytes
            .split_inclusive(|&b| b == b'\n')
            .filter(|line| line.ends_with(b"\n"))
            .filter_map(|line| {
                let event: SpooledEvent = serde_json::from_slice(line.trim_ascii()).ok()?;
                (first..=last)
                    .contains(&event.seq)
                    .then_some((event, line.len() as u64))
            })
            .collect();
        found.sort_by_key(|(event, _)| event.seq);
        found.dedup_by_key(|(event, _)| event.seq);
        if found.len() as u64 != last - first + 1 {
            return Ok(false);
        }
        for (event, bytes) in found.into_iter().rev() {
            self.acked_bytes = self.acked_bytes.saturating_sub(bytes);
            self.pending.push_front((event, bytes));
        }
        Ok(true)
    }

    /// Replaces the queued event `seq` with `payload_json` (in memory; the file keeps the
    /// old line until [`upkeep`](Spool::upkeep)): an event the coordinator will never take
    /// is sent as a note saying so, so the attempt's sequence stays whole.
    pub fn replace(&mut self, seq: u64, payload_json: String) {
        if let Some((event, _)) = self.pending.iter_mut().find(|(e, _)| e.seq == seq) {
            event.payload_json = payload_json;
        }
    }

    /// Forgets everything (the lease was lost: nobody will take these events).
    pub fn discard(&mut self) -> std::io::Result<()> {
        self.pending.clear();
        self.file_bytes = 0;
        self.acked_bytes = 0;
        match std::fs::remove_file(&self.path) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(err),
            _ => Ok(()),
        }
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
pub(crate) mod tests {
    use super::*;

    fn event(seq: u64) -> SpooledEvent {
        SpooledEvent {
            seq,
            at_ms: 1,
            payload_json: format!("{{\"n\":{seq}}}"),
        }
    }

    #[test]
    fn events_the_coordinator_asks_for_again_come_back_from_the_file_while_it_holds_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = Spool::open(dir.path(), "job", 1).unwrap();
        for seq in 0..5 {
            spool.push(event(seq)).unwrap();
        }
        spool.acknowledge(&[0, 1, 2, 3]);
        assert_eq!(spool.pending(10), vec![event(4)]);
        // A restored coordinator lacks 2 and 3: they are queued again, in order, first.
        assert!(spool.recover(2, 3).unwrap());
        assert_eq!(spool.pending(10), vec![event(2), event(3), event(4)]);
        // Already queued, or asked for past what is queued: nothing changes.
        assert!(!spool.recover(3, 4).unwrap());
        assert_eq!(spool.len(), 3);
        // Once the file is gone (everything acknowledged and tidied), they are lost.
        spool.acknowledge(&[2, 3, 4]);
        spool.upkeep().unwrap();
        assert!(!spool.recover(2, 3).unwrap());
        assert!(spool.is_empty());
    }

    #[test]
    fn a_replaced_event_goes_in_place_of_the_one_the_coordinator_will_not_take() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = Spool::open(dir.path(), "job", 1).unwrap();
        spool.push(event(0)).unwrap();
        spool.push(event(1)).unwrap();
        spool.replace(0, "{\"note\":true}".to_string());
        let pending = spool.pending(10);
        assert_eq!(pending[0].seq, 0);
        assert_eq!(pending[0].payload_json, "{\"note\":true}");
        assert_eq!(pending[1], event(1));
    }

    #[test]
    fn unacknowledged_events_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = Spool::open(dir.path(), "job", 1).unwrap();
        for seq in 0..4 {
            spool.push(event(seq)).unwrap();
        }
        spool.acknowledge(&[0, 2]);
        assert_eq!(spool.pending(10), vec![event(1), event(3)]);
        // Acknowledging wrote nothing: a crash now sends 0 and 2 again (the coordinator
        // ignores them), and never loses 1 or 3.
        let reopened = Spool::open(dir.path(), "job", 1).unwrap();
        assert_eq!(reopened.pending(10), (0..4).map(event).collect::<Vec<_>>());
        assert!(!spool.needs_upkeep(), "a few small acknowledged lines stay");
        spool.upkeep().unwrap();
        let reopened = Spool::open(dir.path(), "job", 1).unwrap();
        assert_eq!(reopened.pending(10), vec![event(1), event(3)]);
        let found = leftovers(dir.path());
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].1.as_str(), found[0].2), ("job", 1));
    }

    /// A real, tiny tmpfs, so writes fail with ENOSPC for real. Needs root (mount); `None`
    /// (and the reason printed) otherwise.
    pub(crate) struct Tmpfs {
        pub(crate) dir: tempfile::TempDir,
    }

    impl Tmpfs {
        pub(crate) fn mount(size: &str) -> Option<Tmpfs> {
            let dir = tempfile::tempdir().unwrap();
            let status = std::process::Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
                .arg(dir.path())
                .status();
            match status {
                Ok(status) if status.success() => Some(Tmpfs { dir }),
                other => {
                    eprintln!("skipped: cannot mount a tmpfs (it needs root): {other:?}");
                    None
                }
            }
        }

        /// Fills the file system up with a file, leaving about `left` bytes.
        pub(crate) fn fill(&self, left: u64) -> PathBuf {
            let filler = self.dir.path().join("filler");
            let mut file = std::fs::File::create(&filler).unwrap();
            let chunk = [0u8; 4096];
            while file.write_all(&chunk).is_ok() {}
            let full = file.metadata().unwrap().len();
            file.set_len(full.saturating_sub(left)).unwrap();
            filler
        }
    }

    impl Drop for Tmpfs {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount")
                .arg(self.dir.path())
                .status();
        }
    }

    fn big_event(seq: u64) -> SpooledEvent {
        SpooledEvent {
            seq,
            at_ms: 1,
            payload_json: format!("{{\"n\":{seq},\"pad\":\"{}\"}}", "x".repeat(3000)),
        }
    }

    /// Issue 11: a failed spool write dropped the event (and burned its seq) and could leave
    /// a torn line that glued onto the next append.
    #[test]
    fn a_full_disk_keeps_the_event_in_memory_and_leaves_no_torn_line() {
        let Some(fs) = Tmpfs::mount("64k") else {
            return;
        };
        let mut spool = Spool::open(&fs.dir.path().join("spool"), "job", 1).unwrap();
        let filler = fs.fill(16 * 1024);
        let mut failed = None;
        for seq in 0..40 {
            if let Err(err) = spool.push(big_event(seq)) {
                failed = Some((seq, err));
                break;
            }
        }
        let (failed_seq, err) = failed.expect("a 64 KiB tmpfs must fill up");
        assert_eq!(err.raw_os_error(), Some(28), "{err}");
        assert!(
            failed_seq > 0,
            "some events must fit before the disk is full"
        );
        // Every event is still pending, the one that failed included.
        let pending = spool.pending(usize::MAX);
        assert_eq!(pending.len() as u64, failed_seq + 1);
        assert_eq!(pending.last().unwrap(), &big_event(failed_seq));
        // The file holds whole lines only: the torn part was cut off.
        let text = std::fs::read_to_string(spool.path()).unwrap();
        assert!(text.ends_with('\n'), "a torn line was left in the spool");
        assert_eq!(text.lines().count() as u64, failed_seq);
        // Space comes back; later appends land on whole lines and a reader sees all of them.
        std::fs::remove_file(filler).unwrap();
        spool.push(big_event(100)).unwrap();
        spool.push(big_event(101)).unwrap();
        let reopened = Spool::open(&fs.dir.path().join("spool"), "job", 1).unwrap();
        let seqs: Vec<u64> = reopened.pending(usize::MAX).iter().map(|e| e.seq).collect();
        let mut expected: Vec<u64> = (0..failed_seq).collect();
        expected.extend([100, 101]);
        assert_eq!(seqs, expected);
    }

    /// Issue 15: every acknowledged batch rewrote the whole spool (and fsynced it), so
    /// draining a spool after a long outage cost time quadratic in its size.
    #[test]
    fn draining_a_long_spool_rewrites_it_a_few_times_and_never_loses_a_pending_event() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = Spool::open(dir.path(), "job", 4).unwrap();
        let total = 2000u64;
        for seq in 0..total {
            spool.push(big_event(seq)).unwrap();
        }
        let pushed_bytes = std::fs::metadata(spool.path()).unwrap().len();
        let (mut rewrites, mut rewritten_bytes) = (0, 0);
        let mut next = 0;
        while next < total {
            let batch: Vec<u64> = (next..(next + 64).min(total)).collect();
            next += batch.len() as u64;
            spool.acknowledge(&batch);
            if spool.needs_upkeep() {
                spool.upkeep().unwrap();
                rewrites += 1;
                rewritten_bytes += std::fs::metadata(spool.path()).map_or(0, |m| m.len());
            }
            // A crash at any point: every unacknowledged event is in the file.
            if next % 640 == 0 {
                let reopened = Spool::open(dir.path(), "job", 4).unwrap();
                let seqs: Vec<u64> = reopened.pending(usize::MAX).iter().map(|e| e.seq).collect();
                assert!(
                    (next..total).all(|seq| seqs.contains(&seq)),
                    "an unacknowledged event is missing after {next} acknowledged"
                );
            }
        }
        assert!(spool.is_empty());
        assert!(!spool.path().exists(), "the drained spool is removed");
        // 2000 events of ~3 KB are ~6 MB: a rewrite each time half of the file is
        // acknowledged, each rewriting at most what was acknowledged since.
        assert!(rewrites <= 6, "{rewrites} rewrites");
        assert!(
            rewritten_bytes <= pushed_bytes,
            "{rewritten_bytes} bytes rewritten for {pushed_bytes} spooled"
        );
    }

    #[test]
    fn a_torn_last_line_is_cut_off_so_the_next_append_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = Spool::open(dir.path(), "job", 3).unwrap();
        spool.push(event(0)).unwrap();
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(spool.path())
            .unwrap();
        // Torn inside a multi-byte character: not even UTF-8.
        file.write_all(b"{\"seq\":1,\"at_ms\":1,\"payload_json\":\"\xc3")
            .unwrap();
        let mut reopened = Spool::open(dir.path(), "job", 3).unwrap();
        assert_eq!(reopened.pending(10), vec![event(0)]);
        reopened.push(event(1)).unwrap();
        let again = Spool::open(dir.path(), "job", 3).unwrap();
        assert_eq!(again.pending(10), vec![event(0), event(1)]);
    }

    #[test]
    fn a_fully_acknowledged_spool_leaves_no_file_and_a_torn_line_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = Spool::open(dir.path(), "job", 2).unwrap();
        spool.push(event(0)).unwrap();
        spool.acknowledge(&[0]);
        assert!(spool.needs_upkeep(), "an all-acknowledged file is removed");
        spool.upkeep().unwrap();
        assert!(!spool.path().exists());
        assert!(!spool.needs_upkeep());
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
