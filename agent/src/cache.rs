//! The agent's disk cache and its size budget (issue 25, "Disks fill"): what under the work
//! dir is a cache entry — a build (`builds/<key16>/`), a git mirror (`git/<key>.git/`), a
//! fixture file (`fixtures/by-sha256/<sha>`, `fixtures/generated/<name>`) —, when each was
//! last used, which ones the running job holds, and the least-recently-used eviction that
//! brings the total under `max_cache_bytes`.
//!
//! Last use is a stamp: a directory entry holds `abfleet-last-used`, a fixture file has a
//! sibling `<name>.last-used`; either holds the time of its last use in milliseconds since
//! the epoch (an entry without one counts from its own modification time). A job stamps and
//! pins every entry it uses ([`JobCache::use_entry`]); the pins go when the job's
//! [`JobCache`] is dropped. Eviction never removes a pinned entry, runs at agent start and
//! after each job (before the agent says it is ready again), never during a job's timed
//! cells. An entry is first renamed into `<work dir>/evicting/` and then deleted, so a kill
//! half-way leaves no half-removed build that a later job could take for a whole one; what
//! is left in `evicting/` goes at the next pass. Sizes are the files' apparent sizes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The stamp inside a build directory or a git mirror.
pub const DIR_STAMP: &str = "abfleet-last-used";
/// The suffix of a fixture file's stamp beside it.
const FILE_STAMP_SUFFIX: &str = ".last-used";
/// Where entries go to be deleted.
const EVICTING_DIR: &str = "evicting";

/// What kind of cached thing an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum EntryKind {
    Build,
    Mirror,
    Fixture,
}

impl EntryKind {
    pub fn name(self) -> &'static str {
        match self {
            EntryKind::Build => "build",
            EntryKind::Mirror => "git mirror",
            EntryKind::Fixture => "fixture",
        }
    }
}

/// One evictable thing in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheEntry {
    pub kind: EntryKind,
    pub path: PathBuf,
    /// Its files' apparent sizes, its stamp included.
    pub bytes: u64,
    /// Milliseconds since the epoch of its last use.
    pub last_used_ms: u64,
}

/// Every cache entry of a work dir (none when the dir has no cache yet).
pub fn scan(work_dir: &Path) -> std::io::Result<Vec<CacheEntry>> {
    let mut entries = Vec::new();
    for (sub, kind) in [("builds", EntryKind::Build), ("git", EntryKind::Mirror)] {
        for path in children(&work_dir.join(sub))? {
            if path.is_dir() && !path.is_symlink() {
                let bytes = tree_bytes(&path)?;
                let last_used_ms =
                    stamp_time(&path.join(DIR_STAMP)).unwrap_or_else(|| modified_ms(&path));
                entries.push(CacheEntry {
                    kind,
                    path,
                    bytes,
                    last_used_ms,
                });
            }
        }
    }
    for sub in ["fixtures/by-sha256", "fixtures/generated"] {
        for path in children(&work_dir.join(sub))? {
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if name.ends_with(FILE_STAMP_SUFFIX) {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path)?;
            if !meta.is_file() {
                continue;
            }
            let stamp = file_stamp(&path);
            let stamp_bytes = std::fs::metadata(&stamp).map_or(0, |m| m.len());
            entries.push(CacheEntry {
                kind: EntryKind::Fixture,
                bytes: meta.len() + stamp_bytes,
                last_used_ms: stamp_time(&stamp).unwrap_or_else(|| modified_ms(&path)),
                path,
            });
        }
    }
    Ok(entries)
}

/// The total size of the cache entries of a work dir.
pub fn total_bytes(entries: &[CacheEntry]) -> u64 {
    entries.iter().map(|e| e.bytes).sum()
}

/// Records that `path` (a build directory, a mirror or a fixture file) is used now.
pub fn stamp(path: &Path) -> std::io::Result<()> {
    stamp_at(path, now_ms())
}

/// [`stamp`] with a given time (tests make old entries with it).
pub fn stamp_at(path: &Path, when_ms: u64) -> std::io::Result<()> {
    let stamp = if path.is_dir() {
        path.join(DIR_STAMP)
    } else {
        file_stamp(path)
    };
    std::fs::write(stamp, when_ms.to_string())
}

/// Which entries an eviction removes, in order: unpinned ones, least recently used first
/// (ties by path), until the total is at most `max_bytes`. Pure.
pub fn choose(entries: &[CacheEntry], max_bytes: u64, pinned: impl Fn(&Path) -> bool) -> Choice {
    let mut total = total_bytes(entries);
    let before_bytes = total;
    let mut candidates: Vec<&CacheEntry> = entries.iter().filter(|e| !pinned(&e.path)).collect();
    candidates.sort_by(|a, b| (a.last_used_ms, &a.path).cmp(&(b.last_used_ms, &b.path)));
    let mut remove = Vec::new();
    for entry in candidates {
        if total <= max_bytes {
            break;
        }
        total -= entry.bytes;
        remove.push(entry.clone());
    }
    let pinned_bytes = entries
        .iter()
        .filter(|e| pinned(&e.path))
        .map(|e| e.bytes)
        .sum();
    Choice {
        before_bytes,
        after_bytes: total,
        remove,
        pinned_bytes,
    }
}

/// What an eviction does (or would do).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub before_bytes: u64,
    pub after_bytes: u64,
    pub remove: Vec<CacheEntry>,
    /// What the running job holds: never removed.
    pub pinned_bytes: u64,
}

impl Choice {
    /// Still over `max_bytes` after removing all that may go: what is left is pinned.
    pub fn over_budget(&self, max_bytes: u64) -> bool {
        self.after_bytes > max_bytes
    }
}

/// Whether an eviction removes what it chooses or only says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvictMode {
    Remove,
    DryRun,
}

/// Removes what [`choose`] picks from the work dir's cache (nothing in a dry run). An
/// entry that cannot be removed is reported in `failed` and counted as still there.
pub fn evict(
    work_dir: &Path,
    max_bytes: u64,
    pins: &Pins,
    mode: EvictMode,
) -> std::io::Result<Eviction> {
    let dry_run = mode == EvictMode::DryRun;
    if !dry_run {
        clear_evicting(work_dir);
    }
    let entries = scan(work_dir)?;
    let mut choice = choose(&entries, max_bytes, |path| pins.is_pinned(path));
    let mut failed = Vec::new();
    if !dry_run {
        for entry in &choice.remove {
            if let Err(err) = remove_entry(work_dir, entry) {
                failed.push((entry.path.clone(), err.to_string()));
                choice.after_bytes += entry.bytes;
            }
        }
        choice
            .remove
            .retain(|e| !failed.iter().any(|(p, _)| p == &e.path));
    }
    Ok(Eviction {
        entries: entries.len(),
        choice,
        failed,
    })
}

/// What [`evict`] did.
#[derive(Debug, Clone)]
pub struct Eviction {
    /// How many entries the cache had.
    pub entries: usize,
    pub choice: Choice,
    /// Entries chosen but not removed, and why.
    pub failed: Vec<(PathBuf, String)>,
}

/// Renames an entry out of the cache, then deletes it.
fn remove_entry(work_dir: &Path, entry: &CacheEntry) -> std::io::Result<()> {
    let evicting = work_dir.join(EVICTING_DIR);
    std::fs::create_dir_all(&evicting)?;
    let name = entry
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let parked = evicting.join(format!(
        "{}-{}-{name}",
        std::process::id(),
        PARKED.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::rename(&entry.path, &parked)?;
    if entry.kind == EntryKind::Fixture {
        let _ = std::fs::remove_file(file_stamp(&entry.path));
    }
    remove_all(&parked)
}

static PARKED: AtomicU64 = AtomicU64::new(0);

/// Deletes what an interrupted eviction left in `evicting/`.
fn clear_evicting(work_dir: &Path) {
    let dir = work_dir.join(EVICTING_DIR);
    if dir.exists() {
        if let Err(err) = remove_all(&dir) {
            tracing::warn!(dir = %dir.display(), error = %err, "cannot delete what an earlier eviction left");
        }
    }
}

/// Deletes a file or a tree; a tree with read-only directories (a build can leave them) is
/// made writable and tried again.
fn remove_all(path: &Path) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(path)?;
    if !meta.is_dir() {
        return std::fs::remove_file(path);
    }
    match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::PermissionDenied => {
            make_dirs_writable(path);
            std::fs::remove_dir_all(path)
        }
        Err(err) => Err(err),
    }
}

fn make_dirs_writable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    if let Ok(children) = std::fs::read_dir(dir) {
        for child in children.flatten() {
            if child.file_type().is_ok_and(|t| t.is_dir()) {
                make_dirs_writable(&child.path());
            }
        }
    }
}

/// The entries of the running job, shared by the agent (which evicts) and the job (which
/// pins). A path pinned twice stays pinned until both let go.
#[derive(Debug, Clone, Default)]
pub struct Pins(Arc<Mutex<BTreeMap<PathBuf, usize>>>);

impl Pins {
    pub fn is_pinned(&self, path: &Path) -> bool {
        self.lock().contains_key(path)
    }

    /// Every pinned path.
    pub fn pinned(&self) -> Vec<PathBuf> {
        self.lock().keys().cloned().collect()
    }

    fn pin(&self, path: &Path) {
        *self.lock().entry(path.to_path_buf()).or_default() += 1;
    }

    fn unpin(&self, path: &Path) {
        let mut pins = self.lock();
        if let Some(count) = pins.get_mut(path) {
            *count -= 1;
            if *count == 0 {
                pins.remove(path);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<PathBuf, usize>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The agent's cache: its work dir, budget, the running job's pins and the size measured
/// at the last pass. Cloned into each job.
#[derive(Debug, Clone)]
pub struct AgentCache {
    work_dir: PathBuf,
    max_bytes: Option<u64>,
    pins: Pins,
    /// `u64::MAX` until measured.
    measured_bytes: Arc<AtomicU64>,
}

impl AgentCache {
    pub fn new(work_dir: &Path, max_bytes: Option<u64>) -> AgentCache {
        AgentCache {
            work_dir: work_dir.to_path_buf(),
            max_bytes,
            pins: Pins::default(),
            measured_bytes: Arc::new(AtomicU64::new(u64::MAX)),
        }
    }

    pub fn max_bytes(&self) -> Option<u64> {
        self.max_bytes
    }

    /// The cache's size at the last pass, when there was one.
    pub fn measured_bytes(&self) -> Option<u64> {
        match self.measured_bytes.load(Ordering::Relaxed) {
            u64::MAX => None,
            bytes => Some(bytes),
        }
    }

    /// A job's handle: what it uses is stamped and pinned until it is dropped.
    pub fn for_job(&self) -> JobCache {
        JobCache {
            cache: self.clone(),
            held: Mutex::new(Vec::new()),
        }
    }

    /// Measures the cache and, with a budget, evicts down to it (pinned entries stay). Logs
    /// what went, and a warning when what is left is pinned and still over the budget.
    /// Blocking: call it off the async runtime.
    pub fn pass(&self) {
        let bytes = match self.max_bytes {
            Some(max_bytes) => {
                match evict(&self.work_dir, max_bytes, &self.pins, EvictMode::Remove) {
                    Ok(eviction) => {
                        log_eviction(&eviction, max_bytes);
                        eviction.choice.after_bytes
                    }
                    Err(err) => {
                        tracing::warn!(work_dir = %self.work_dir.display(), error = %err, "cannot read the cache to evict from it");
                        return;
                    }
                }
            }
            None => match scan(&self.work_dir) {
                Ok(entries) => total_bytes(&entries),
                Err(err) => {
                    tracing::warn!(work_dir = %self.work_dir.display(), error = %err, "cannot measure the cache");
                    return;
                }
            },
        };
        self.measured_bytes.store(bytes, Ordering::Relaxed);
    }

    /// [`AgentCache::pass`] off the async runtime.
    pub async fn pass_blocking(&self) {
        let cache = self.clone();
        let _ = tokio::task::spawn_blocking(move || cache.pass()).await;
    }
}

fn log_eviction(eviction: &Eviction, max_bytes: u64) {
    let choice = &eviction.choice;
    for entry in &choice.remove {
        tracing::info!(kind = entry.kind.name(), path = %entry.path.display(), bytes = entry.bytes, "evicted from the cache (least recently used)");
    }
    for (path, error) in &eviction.failed {
        tracing::warn!(path = %path.display(), %error, "cannot evict from the cache; delete it by hand or fix its permissions");
    }
    if choice.over_budget(max_bytes) {
        tracing::warn!(
            cache_bytes = choice.after_bytes,
            max_cache_bytes = max_bytes,
            pinned_bytes = choice.pinned_bytes,
            "the cache is over its budget and what is left is in use by the running job (or cannot be removed); raise max_cache_bytes (--max-cache-bytes) above one job's builds, mirrors and fixtures"
        );
    }
}

/// A job's use of the cache: each entry it uses is stamped and pinned, until this is dropped.
#[derive(Debug)]
pub struct JobCache {
    cache: AgentCache,
    held: Mutex<Vec<PathBuf>>,
}

impl JobCache {
    /// Stamps `path` as used now and pins it for the rest of the job. A stamp that cannot be
    /// written only makes the entry look older.
    pub fn use_entry(&self, path: &Path) {
        if let Err(err) = stamp(path) {
            tracing::debug!(path = %path.display(), error = %err, "cannot stamp a cache entry's last use");
        }
        self.cache.pins.pin(path);
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(path.to_path_buf());
    }

    /// The agent's cache this job belongs to.
    pub fn agent_cache(&self) -> &AgentCache {
        &self.cache
    }
}

impl Drop for JobCache {
    fn drop(&mut self) {
        let held = std::mem::take(&mut *self.held.lock().unwrap_or_else(|p| p.into_inner()));
        for path in held {
            self.cache.pins.unpin(&path);
        }
    }
}

/// A size in bytes as an operator writes it: `1073741824`, or with a suffix `K`, `M`, `G`, `T`
/// (powers of 1024; `KiB`, `GB`, … read the same).
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (digits, suffix) = trimmed.split_at(split);
    let bad = || {
        format!("`{text}` is not a size; write bytes (`21474836480`) or a number with K, M, G or T (`20G`, `500M`)")
    };
    let number: u64 = digits.parse().map_err(|_| bad())?;
    let shift = match suffix.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        _ => return Err(bad()),
    };
    number
        .checked_mul(1u64 << shift)
        .ok_or_else(|| format!("`{text}` is too large"))
}

/// A size for people: `1.5 GiB`, `300 B`.
pub fn show_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

fn children(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    match std::fs::read_dir(dir) {
        Ok(read) => {
            let mut paths = Vec::new();
            for child in read {
                paths.push(child?.path());
            }
            paths.sort();
            Ok(paths)
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(err) => Err(err),
    }
}

/// The apparent size of every file under `dir` (symlinks not followed).
fn tree_bytes(dir: &Path) -> std::io::Result<u64> {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let read = match std::fs::read_dir(&dir) {
            Ok(read) => read,
            // A directory the agent cannot read still holds what it holds; skip it.
            Err(err) if err.kind() == std::io::ErrorKind::PermissionDenied => continue,
            Err(err) => return Err(err),
        };
        for child in read {
            let child = child?;
            let meta = child.metadata()?;
            if meta.is_dir() {
                stack.push(child.path());
            } else {
                total += meta.len();
            }
        }
    }
    Ok(total)
}

fn file_stamp(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(FILE_STAMP_SUFFIX);
    path.with_file_name(name)
}

fn stamp_time(stamp: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(stamp).ok()?;
    text.trim()
        .parse()
        .ok()
        .or_else(|| Some(modified_ms(stamp)))
}

fn modified_ms(path: &Path) -> u64 {
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A work dir with a build, a mirror and a fixture of known sizes and last uses.
    fn work_dir() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let w = tmp.path();
        for (dir, bytes, when) in [
            ("builds/aaaa", 1000, 100),
            ("builds/bbbb", 1000, 300),
            ("git/cccc.git", 500, 200),
        ] {
            std::fs::create_dir_all(w.join(dir).join("src")).unwrap();
            std::fs::write(w.join(dir).join("src/blob"), vec![0u8; bytes]).unwrap();
            stamp_at(&w.join(dir), when).unwrap();
        }
        std::fs::create_dir_all(w.join("fixtures/by-sha256")).unwrap();
        let fixture = w.join("fixtures/by-sha256/dddd");
        std::fs::write(&fixture, vec![0u8; 700]).unwrap();
        stamp_at(&fixture, 400).unwrap();
        // Neither an entry nor counted: a job's copies are not the cache.
        std::fs::create_dir_all(w.join("job-fixtures")).unwrap();
        std::fs::write(w.join("job-fixtures/x"), vec![0u8; 5000]).unwrap();
        tmp
    }

    #[test]
    fn the_scan_finds_builds_mirrors_and_fixtures_with_their_sizes_and_last_use() {
        let tmp = work_dir();
        let entries = scan(tmp.path()).unwrap();
        let found: Vec<(EntryKind, String, u64)> = entries
            .iter()
            .map(|e| {
                let name = e.path.file_name().unwrap().to_string_lossy().into_owned();
                (e.kind, name, e.last_used_ms)
            })
            .collect();
        assert_eq!(
            found,
            [
                (EntryKind::Build, "aaaa".into(), 100),
                (EntryKind::Build, "bbbb".into(), 300),
                (EntryKind::Mirror, "cccc.git".into(), 200),
                (EntryKind::Fixture, "dddd".into(), 400),
            ]
        );
        // The stamps ("100" … "400": three bytes each) count too.
        assert_eq!(total_bytes(&entries), 1000 + 1000 + 500 + 700 + 4 * 3);
    }

    #[test]
    fn the_least_recently_used_go_first_until_the_total_fits() {
        let tmp = work_dir();
        let entries = scan(tmp.path()).unwrap();
        let names = |choice: &Choice| -> Vec<String> {
            choice
                .remove
                .iter()
                .map(|e| e.path.file_name().unwrap().to_string_lossy().into_owned())
                .collect()
        };
        let total = total_bytes(&entries);
        assert!(names(&choose(&entries, total, |_| false)).is_empty());
        // 1 byte over: the oldest alone.
        assert_eq!(names(&choose(&entries, total - 1, |_| false)), ["aaaa"]);
        // Room for the newest two only.
        let choice = choose(&entries, 703 + 1003, |_| false);
        assert_eq!(names(&choice), ["aaaa", "cccc.git"]);
        assert_eq!(choice.after_bytes, 703 + 1003);
        assert!(!choice.over_budget(703 + 1003));
        // Nothing fits: everything goes.
        assert_eq!(names(&choose(&entries, 0, |_| false)).len(), 4);
    }

    #[test]
    fn a_pinned_entry_is_never_chosen_even_when_it_is_the_oldest_and_over_budget() {
        let tmp = work_dir();
        let entries = scan(tmp.path()).unwrap();
        let pins = Pins::default();
        let cache = AgentCache {
            pins: pins.clone(),
            ..AgentCache::new(tmp.path(), Some(0))
        };
        let job = cache.for_job();
        let oldest = tmp.path().join("builds/aaaa");
        job.use_entry(&oldest);
        assert!(pins.is_pinned(&oldest));
        // Using it stamped it now: it is no longer the oldest either.
        let now = scan(tmp.path()).unwrap();
        assert!(now.iter().find(|e| e.path == oldest).unwrap().last_used_ms > 400);
        let choice = choose(&entries, 0, |p| pins.is_pinned(p));
        assert!(choice.remove.iter().all(|e| e.path != oldest), "{choice:?}");
        assert_eq!(choice.remove.len(), 3);
        assert_eq!(choice.pinned_bytes, 1003);
        assert!(choice.over_budget(0), "what is left is pinned and over");

        // The real eviction leaves it on disk and removes the rest, stamps included.
        let eviction = evict(tmp.path(), 0, &pins, EvictMode::Remove).unwrap();
        assert!(eviction.failed.is_empty(), "{:?}", eviction.failed);
        assert!(oldest.join("src/blob").is_file());
        assert!(!tmp.path().join("builds/bbbb").exists());
        assert!(!tmp.path().join("git/cccc.git").exists());
        assert!(!tmp.path().join("fixtures/by-sha256/dddd").exists());
        assert!(!tmp
            .path()
            .join("fixtures/by-sha256/dddd.last-used")
            .exists());
        assert!(std::fs::read_dir(tmp.path().join(EVICTING_DIR))
            .unwrap()
            .next()
            .is_none());

        // The job ends: its pins go, and the next pass may take the build.
        drop(job);
        assert!(pins.pinned().is_empty());
        cache.pass();
        assert!(!oldest.exists());
        assert_eq!(cache.measured_bytes(), Some(0));
    }

    #[test]
    fn a_path_pinned_by_two_holders_stays_pinned_until_both_let_go() {
        let tmp = work_dir();
        let cache = AgentCache::new(tmp.path(), Some(0));
        let path = tmp.path().join("git/cccc.git");
        let (first, second) = (cache.for_job(), cache.for_job());
        first.use_entry(&path);
        second.use_entry(&path);
        drop(first);
        assert!(cache.pins.is_pinned(&path));
        drop(second);
        assert!(!cache.pins.is_pinned(&path));
    }

    #[test]
    fn a_dry_run_removes_nothing() {
        let tmp = work_dir();
        let before = scan(tmp.path()).unwrap();
        let eviction = evict(tmp.path(), 0, &Pins::default(), EvictMode::DryRun).unwrap();
        assert_eq!(eviction.choice.remove.len(), 4);
        assert_eq!(scan(tmp.path()).unwrap(), before);
    }

    /// Set in the child process the test below starts as an unprivileged user.
    const EVICT_AS_CHILD: &str = "ABFLEET_TEST_EVICT_WORK_DIR";

    /// A build tree with a read-only directory (what some builds leave) is still evicted.
    /// Root ignores permission bits, so as root the eviction runs in a child process of this
    /// test binary as `nobody` (uid 65534), owning the tree: without the agent's chmod the
    /// removal fails there as on a bench host.
    #[test]
    fn an_entry_with_read_only_directories_is_still_removed() {
        use std::os::unix::fs::PermissionsExt;
        use std::os::unix::process::CommandExt;
        if let Some(dir) = std::env::var_os(EVICT_AS_CHILD) {
            let eviction = evict(Path::new(&dir), 0, &Pins::default(), EvictMode::Remove).unwrap();
            assert!(eviction.failed.is_empty(), "{:?}", eviction.failed);
            assert!(scan(Path::new(&dir)).unwrap().is_empty());
            return;
        }
        let tmp = work_dir();
        let locked = tmp.path().join("builds/aaaa/src");
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).unwrap();
        let uid = std::process::Command::new("id").arg("-u").output().unwrap();
        if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
            let eviction = evict(tmp.path(), 0, &Pins::default(), EvictMode::Remove).unwrap();
            assert!(eviction.failed.is_empty(), "{:?}", eviction.failed);
            assert!(scan(tmp.path()).unwrap().is_empty());
            return;
        }
        let nobody = 65534;
        let chown = std::process::Command::new("chown")
            .args(["-R", &format!("{nobody}:{nobody}")])
            .arg(tmp.path())
            .status()
            .unwrap();
        assert!(chown.success());
        let child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "cache::tests::an_entry_with_read_only_directories_is_still_removed",
                "--nocapture",
            ])
            .env(EVICT_AS_CHILD, tmp.path())
            .uid(nobody)
            .gid(nobody)
            .output()
            .unwrap();
        assert!(
            child.status.success(),
            "the eviction as uid {nobody}: {}{}",
            String::from_utf8_lossy(&child.stdout),
            String::from_utf8_lossy(&child.stderr)
        );
        assert!(scan(tmp.path()).unwrap().is_empty());
    }

    #[test]
    fn sizes_read_as_bytes_or_with_a_suffix_and_bad_ones_say_how_to_write_them() {
        assert_eq!(parse_bytes("1234").unwrap(), 1234);
        assert_eq!(parse_bytes("20G").unwrap(), 20 << 30);
        assert_eq!(parse_bytes("500M").unwrap(), 500 << 20);
        assert_eq!(parse_bytes("64 KiB").unwrap(), 64 << 10);
        assert_eq!(parse_bytes("2tb").unwrap(), 2 << 40);
        for bad in ["", "G", "12X", "-5", "1.5G"] {
            let err = parse_bytes(bad).unwrap_err();
            assert!(err.contains("`20G`"), "{bad}: {err}");
        }
        assert!(parse_bytes("99999999999T").is_err());
        assert_eq!(show_bytes(300), "300 B");
        assert_eq!(show_bytes(3 << 29), "1.5 GiB");
    }
}
