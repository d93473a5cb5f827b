//! Finding a fixture on this host and proving it is the right one: a local path, a URL
//! fetched once into the cache (keyed by sha256), or a generator's output. Sizes and
//! checksums are verified before any timing.
//!
//! What the cells read is what was verified. A path fixture belongs to the operator, who
//! may overwrite it while a job runs (issue 23, case 7: a pinned file rewritten in place,
//! same size, old mtime restored, measured with exit 0 and wrong scores). So a path
//! fixture is copied into the job's own directory (`<work dir>/job-fixtures/`, with
//! `std::fs::copy`, which the kernel may serve as a reflink), the copy is synced, made
//! read-only and hashed, and the cells read the copy: nothing written to the original
//! after the copy reaches a cell, and a copy torn by a write during the copy fails its
//! checksum. [`JobFixtures`] removes the copies when the job ends; the next job clears
//! what a killed agent left. The price is one sequential copy per path fixture and job,
//! paid before timing, and the disk space of the copies while the job runs.
//!
//! URL and generated fixtures live in the agent's own cache (`<work dir>/fixtures/`) and
//! are read in place. A pinned one is verified on every use; its hash is remembered in
//! `verified.json` under a stat key `touch` cannot fake (device, inode, size, modification
//! and change time; nothing sets a change time back), and a file changed within the last
//! two seconds is hashed again every time, since a second write within the same clock tick
//! would leave its stamp unchanged.
//!
//! A URL is fetched with the real `curl` under [`FetchLimits`]: a connect timeout, a stall
//! limit (slower than a floor for a while; a big download that keeps moving is never cut),
//! retries with a doubling delay that resume the `.partial` file (`--continue-at -`), and a
//! partial that turns out wrong (its checksum, or a range the server refuses) deleted and
//! fetched whole once. A failure names the URL and what to do.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use abfleet_core::spec::{FixtureFile, FixtureLocation, FixtureSpec};
use sha2::{Digest, Sha256};

use crate::generator;
use crate::source::hex;

/// The files a cell reads for one fixture.
#[derive(Debug, Clone)]
pub struct PreparedFixture {
    pub reference: PathBuf,
    pub distorted: PathBuf,
}

/// A job's fixtures, prepared and verified, in spec order. The job's private copies of path
/// fixtures live in `private_dir`, removed when this is dropped (when the job ends, however
/// it ends).
#[derive(Debug)]
pub struct JobFixtures {
    prepared: Vec<PreparedFixture>,
    private_dir: PathBuf,
}

impl std::ops::Deref for JobFixtures {
    type Target = [PreparedFixture];

    fn deref(&self) -> &[PreparedFixture] {
        &self.prepared
    }
}

impl Drop for JobFixtures {
    fn drop(&mut self) {
        remove_private_dir(&self.private_dir);
    }
}

/// Removes a job's private copies (read-only files in a writable directory).
fn remove_private_dir(dir: &Path) {
    match std::fs::remove_dir_all(dir) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
            tracing::warn!(dir = %dir.display(), error = %err, "failed to remove the job's fixture copies");
        }
        _ => {}
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    #[error("fixture `{fixture}` {role} `{path}` does not exist on host `{host}`; copy it there, or fix the path in the spec (relative paths resolve against the spec's directory)")]
    Missing {
        fixture: String,
        role: &'static str,
        path: PathBuf,
        host: String,
    },
    #[error("fixture `{fixture}` {role} `{path}` has sha256 {actual}, but the spec expects {expected}; the file is not the one the spec names: fetch the right one, or update sha256 if the change is intended")]
    Checksum {
        fixture: String,
        role: &'static str,
        path: PathBuf,
        expected: String,
        actual: String,
    },
    #[error("fixture `{fixture}` {role} `{path}` is {actual} bytes, but {geometry} needs {expected}; check width, height, bitdepth, pixel_format and frames")]
    Size {
        fixture: String,
        role: &'static str,
        path: PathBuf,
        actual: u64,
        expected: u64,
        geometry: String,
    },
    #[error("failed to fetch fixture `{fixture}` {role} from {url}: {message}")]
    Fetch {
        fixture: String,
        role: &'static str,
        url: String,
        message: String,
    },
    #[error("failed to {what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

/// Prepares and verifies every fixture of a job, path fixtures copied into `private_dir`
/// (emptied first: what a killed agent's job left there goes).
pub fn prepare_for_job(
    fixtures: &[FixtureSpec],
    cache_dir: &Path,
    private_dir: &Path,
    host: &str,
) -> Result<JobFixtures, FixtureError> {
    prepare_for_job_until(fixtures, cache_dir, private_dir, host, None)
}

/// [`prepare_for_job`] for a job that can be cancelled: a download waiting to retry gives up
/// once `cancel` says so (a running `curl` is killed by the job's cancel itself).
pub fn prepare_for_job_until(
    fixtures: &[FixtureSpec],
    cache_dir: &Path,
    private_dir: &Path,
    host: &str,
    cancel: Option<tokio::sync::watch::Receiver<bool>>,
) -> Result<JobFixtures, FixtureError> {
    let limits = FetchLimits {
        cancel,
        ..FetchLimits::default()
    };
    remove_private_dir(private_dir);
    std::fs::create_dir_all(private_dir).map_err(|source| FixtureError::Io {
        what: format!(
            "create the job's fixture directory `{}`",
            private_dir.display()
        ),
        source,
    })?;
    // Made before the first copy, so a failure half-way removes what was copied.
    let mut job = JobFixtures {
        prepared: Vec::with_capacity(fixtures.len()),
        private_dir: private_dir.to_path_buf(),
    };
    for fixture in fixtures {
        job.prepared.push(prepare_with(
            fixture,
            cache_dir,
            private_dir,
            host,
            &limits,
        )?);
    }
    Ok(job)
}

/// Makes both files of a fixture available and verified; a path fixture's files are copied
/// into `private_dir`, and the copies are what is verified and returned.
pub fn prepare(
    fixture: &FixtureSpec,
    cache_dir: &Path,
    private_dir: &Path,
    host: &str,
) -> Result<PreparedFixture, FixtureError> {
    prepare_with(
        fixture,
        cache_dir,
        private_dir,
        host,
        &FetchLimits::default(),
    )
}

fn prepare_with(
    fixture: &FixtureSpec,
    cache_dir: &Path,
    private_dir: &Path,
    host: &str,
    limits: &FetchLimits,
) -> Result<PreparedFixture, FixtureError> {
    for (dir, what) in [
        (cache_dir, "the fixture cache"),
        (private_dir, "the job's fixture directory"),
    ] {
        std::fs::create_dir_all(dir).map_err(|source| FixtureError::Io {
            what: format!("create {what} `{}`", dir.display()),
            source,
        })?;
    }
    let place = Placement {
        fixture,
        cache_dir,
        private_dir,
        host,
        limits,
    };
    Ok(PreparedFixture {
        reference: place.file(&fixture.reference, "reference")?,
        distorted: place.file(&fixture.distorted, "distorted")?,
    })
}

/// Where one fixture's files come from and go.
struct Placement<'a> {
    fixture: &'a FixtureSpec,
    limits: &'a FetchLimits,
    cache_dir: &'a Path,
    private_dir: &'a Path,
    host: &'a str,
}

/// How a file the cells will read gets its hash checked.
enum Verify {
    /// The job's own copy: hashed every time, nothing else writes it.
    Copy,
    /// A file of the agent's cache: through `verified.json`.
    Cached,
    /// Already checked (a URL fixture, by `fetch`).
    Done,
}

impl Placement<'_> {
    /// The verified file of one role (`reference`, `distorted`) that the cells read.
    fn file(&self, file: &FixtureFile, role: &'static str) -> Result<PathBuf, FixtureError> {
        let fixture = self.fixture;
        // `shown` is the file errors name: the operator's, not the job's copy of it.
        let (path, shown, verify) = match &file.location {
            FixtureLocation::Path(original) => {
                if !original.is_file() {
                    return Err(FixtureError::Missing {
                        fixture: fixture.name.clone(),
                        role,
                        path: original.clone(),
                        host: self.host.to_string(),
                    });
                }
                let copy = self.private_dir.join(format!("{}.{role}", fixture.name));
                copy_for_job(original, &copy)?;
                (copy, original.clone(), Verify::Copy)
            }
            FixtureLocation::Url(url) => {
                let path = fetch(
                    fixture,
                    role,
                    url,
                    file.sha256.as_deref(),
                    self.cache_dir,
                    self.limits,
                )?;
                (path.clone(), path, Verify::Done)
            }
            FixtureLocation::Generate { generator, seed } => {
                let path = self.generated(*generator, *seed)?;
                (path.clone(), path, Verify::Cached)
            }
        };
        let actual_size = std::fs::metadata(&path)
            .map_err(|source| FixtureError::Io {
                what: format!("stat `{}`", path.display()),
                source,
            })?
            .len();
        if actual_size != fixture.file_bytes() {
            return Err(FixtureError::Size {
                fixture: fixture.name.clone(),
                role,
                path: shown,
                actual: actual_size,
                expected: fixture.file_bytes(),
                geometry: format!(
                    "{}x{} {} {}-bit × {} frames",
                    fixture.width,
                    fixture.height,
                    fixture.pixel_format.as_str(),
                    fixture.bitdepth,
                    fixture.frames
                ),
            });
        }
        if let Some(expected) = &file.sha256 {
            let actual = match verify {
                Verify::Copy => sha256_file(&path)?,
                Verify::Cached => cached_sha256(&path, self.cache_dir)?,
                Verify::Done => expected.clone(),
            };
            if &actual != expected {
                return Err(FixtureError::Checksum {
                    fixture: fixture.name.clone(),
                    role,
                    path: shown,
                    expected: expected.clone(),
                    actual,
                });
            }
        }
        Ok(path)
    }

    /// A generator's output in `cache_dir/generated/`, generated once.
    fn generated(
        &self,
        generator: abfleet_core::spec::Generator,
        seed: u64,
    ) -> Result<PathBuf, FixtureError> {
        let fixture = self.fixture;
        let name = format!(
            "{}-{}x{}-{}-{}b-{}f-seed{}.yuv",
            generator.name(),
            fixture.width,
            fixture.height,
            fixture.pixel_format.as_str(),
            fixture.bitdepth,
            fixture.frames,
            seed
        );
        let dir = self.cache_dir.join("generated");
        let path = dir.join(name);
        if !path.is_file() {
            std::fs::create_dir_all(&dir).map_err(|source| FixtureError::Io {
                what: format!("create `{}`", dir.display()),
                source,
            })?;
            let partial = path.with_extension("partial");
            generator::generate(generator, seed, fixture, &partial)
                .and_then(|()| std::fs::rename(&partial, &path))
                .map_err(|source| FixtureError::Io {
                    what: format!("generate `{}`", path.display()),
                    source,
                })?;
        }
        Ok(path)
    }
}

/// Copies an operator's fixture into the job's directory: synced (its write-back does not
/// land in a timed run) and read-only (a cell's command cannot change it either).
fn copy_for_job(original: &Path, copy: &Path) -> Result<(), FixtureError> {
    use std::os::unix::fs::PermissionsExt;
    let copied = std::fs::copy(original, copy)
        .and_then(|_| std::fs::File::open(copy)?.sync_all())
        .and_then(|()| std::fs::set_permissions(copy, std::fs::Permissions::from_mode(0o444)));
    copied.map_err(|source| FixtureError::Io {
        what: format!(
            "copy `{}` into the job's directory `{}` (is the work dir's disk full?)",
            original.display(),
            copy.parent().unwrap_or(copy).display()
        ),
        source,
    })
}

/// How a URL fixture is downloaded.
#[derive(Debug, Clone)]
pub(crate) struct FetchLimits {
    /// curl's `--connect-timeout`.
    pub connect_timeout_s: u32,
    /// A transfer slower than this many bytes a second for `stall_s` seconds is stalled
    /// (`--speed-limit`, `--speed-time`): given up, then tried again.
    pub stall_bytes_per_s: u32,
    pub stall_s: u32,
    /// Tries after the first; the delay before each doubles from `retry_delay`.
    pub retries: u32,
    pub retry_delay: std::time::Duration,
    /// The job's cancel: no retry starts once it is set.
    pub cancel: Option<tokio::sync::watch::Receiver<bool>>,
}

impl FetchLimits {
    fn cancelled(&self) -> bool {
        self.cancel.as_ref().is_some_and(|cancel| *cancel.borrow())
    }

    /// Waits `delay`, or less when the job is cancelled meanwhile; whether it was.
    fn wait_unless_cancelled(&self, delay: std::time::Duration) -> bool {
        let until = std::time::Instant::now() + delay;
        while std::time::Instant::now() < until {
            if self.cancelled() {
                return true;
            }
            let left = until.saturating_duration_since(std::time::Instant::now());
            std::thread::sleep(left.min(std::time::Duration::from_millis(100)));
        }
        self.cancelled()
    }
}

impl Default for FetchLimits {
    fn default() -> Self {
        FetchLimits {
            connect_timeout_s: 30,
            stall_bytes_per_s: 1024,
            stall_s: 60,
            retries: 4,
            retry_delay: std::time::Duration::from_secs(2),
            cancel: None,
        }
    }
}

/// What to do when a download fails for good.
const FETCH_ADVICE: &str = "check the URL and this host's network, or put the file on this host and use a path fixture (`path = ...` with its sha256)";

/// Downloads `url` into `partial`, resuming what is there, retrying under `limits`.
/// `Ok(true)` when some of the file came from an earlier try (a resume).
fn download(url: &str, partial: &Path, limits: &FetchLimits) -> Result<bool, String> {
    let mut resumed = false;
    let mut started_over = false;
    let mut failures = 0u32;
    loop {
        resumed |= std::fs::metadata(partial).is_ok_and(|m| m.len() > 0);
        let mut curl = std::process::Command::new("curl");
        curl.args(["--fail", "--silent", "--show-error", "--location"])
            .arg("--connect-timeout")
            .arg(limits.connect_timeout_s.to_string())
            .arg("--speed-limit")
            .arg(limits.stall_bytes_per_s.to_string())
            .arg("--speed-time")
            .arg(limits.stall_s.to_string())
            .args([
                "--write-out",
                "%{http_code}",
                "--continue-at",
                "-",
                "--output",
            ])
            .arg(partial)
            .arg("--")
            .arg(url);
        let output = crate::runner::output(&mut curl)
            .map_err(|err| format!("cannot run curl ({err}); install curl, or put the file on this host and use a path fixture"))?;
        if output.status.success() {
            return Ok(resumed);
        }
        let error = String::from_utf8_lossy(&output.stderr).trim().to_string();
        // Killed (the job was cancelled): no retry.
        let Some(exit) = output.status.code() else {
            return Err(format!("curl was stopped ({error})"));
        };
        let http: u16 = String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse()
            .unwrap_or(0);
        // The server refuses the partial's range (416), or cannot resume (33): start over, once.
        if (http == 416 || exit == 33) && !started_over {
            tracing::warn!(
                url,
                http,
                exit,
                "the server cannot resume the partial download; fetching it whole"
            );
            let _ = std::fs::remove_file(partial);
            started_over = true;
            resumed = false;
            continue;
        }
        // A client error other than a timeout or a rate limit will not change on a retry.
        let permanent = (400..500).contains(&http) && http != 408 && http != 429;
        if permanent || failures >= limits.retries {
            let tries = failures + 1;
            return Err(format!(
                "{error} (after {tries} {}); {FETCH_ADVICE}",
                if tries == 1 { "try" } else { "tries" }
            ));
        }
        let delay = limits.retry_delay * 2u32.saturating_pow(failures.min(5));
        tracing::warn!(url, exit, http, %error, retry_in_ms = delay.as_millis() as u64, "a fixture download failed; retrying (it resumes)");
        if limits.wait_unless_cancelled(delay) {
            return Err("the job was cancelled while the download waited to retry".into());
        }
        failures += 1;
    }
}

/// Fetches a URL once into `cache_dir/by-sha256/`, with the real `curl`.
fn fetch(
    fixture: &FixtureSpec,
    role: &'static str,
    url: &str,
    sha256: Option<&str>,
    cache_dir: &Path,
    limits: &FetchLimits,
) -> Result<PathBuf, FixtureError> {
    let fetch_error = |message: String| FixtureError::Fetch {
        fixture: fixture.name.clone(),
        role,
        url: url.to_string(),
        message,
    };
    let sha256 =
        sha256.ok_or_else(|| fetch_error("a URL fixture needs a sha256 in the spec".into()))?;
    let dir = cache_dir.join("by-sha256");
    let path = dir.join(sha256);
    if path.is_file() {
        if cached_sha256(&path, cache_dir)? == sha256 {
            return Ok(path);
        }
        tracing::warn!(path = %path.display(), url, "a cached fixture no longer has its sha256; fetching it again");
        let _ = std::fs::remove_file(&path);
    }
    std::fs::create_dir_all(&dir).map_err(|source| FixtureError::Io {
        what: format!("create `{}`", dir.display()),
        source,
    })?;
    let partial = dir.join(format!("{sha256}.partial"));
    let mut fetched_whole = false;
    loop {
        let resumed = download(url, &partial, limits).map_err(&fetch_error)?;
        let actual = sha256_file(&partial)?;
        if actual == sha256 {
            break;
        }
        let _ = std::fs::remove_file(&partial);
        if !resumed || fetched_whole {
            return Err(FixtureError::Checksum {
                fixture: fixture.name.clone(),
                role,
                path: PathBuf::from(url),
                expected: sha256.to_string(),
                actual,
            });
        }
        // What an earlier try left may be of another version of the file: once, from scratch.
        tracing::warn!(
            url,
            "a resumed download has the wrong sha256; fetching it whole again"
        );
        fetched_whole = true;
    }
    // Read-only: nothing the agent runs writes its own cache.
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o444));
    }
    std::fs::rename(&partial, &path).map_err(|source| FixtureError::Io {
        what: format!("move `{}` into the cache", partial.display()),
        source,
    })?;
    Ok(path)
}

/// The sha256 of a file of the agent's cache, remembered in `cache_dir/verified.json` by
/// its [`StatKey`].
fn cached_sha256(path: &Path, cache_dir: &Path) -> Result<String, FixtureError> {
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    cached_sha256_at(path, cache_dir, now_ns)
}

/// A file changed this recently may change again within the same clock tick, unseen by its
/// stamp: it is hashed every time and not remembered (git's "racy" files).
const RACY_WITHIN_NS: i128 = 2_000_000_000;

/// [`cached_sha256`] at `now_ns`.
fn cached_sha256_at(path: &Path, cache_dir: &Path, now_ns: i128) -> Result<String, FixtureError> {
    let key = StatKey::of(path)?;
    let index_path = cache_dir.join("verified.json");
    let mut index: BTreeMap<String, String> = std::fs::read_to_string(&index_path)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    let text_key = key.to_string();
    if let Some(hash) = index.get(&text_key) {
        return Ok(hash.clone());
    }
    let hash = sha256_file(path)?;
    // Hashed, then stat'ed again: a file written meanwhile is not remembered.
    if StatKey::of(path)? == key && !key.racy_at(now_ns) {
        // One entry per path: the stamps of its earlier contents go.
        let earlier = format!("{}|", path.display());
        index.retain(|known, _| !known.starts_with(&earlier));
        index.insert(text_key, hash.clone());
        if let Ok(text) = serde_json::to_string_pretty(&index) {
            let _ = std::fs::write(&index_path, text);
        }
    }
    Ok(hash)
}

/// What a file's bytes are known by: its path and where it lives (device, inode), its size
/// and its modification and change times. A write changes the change time, and so does
/// setting the modification time back (`touch -d`, `utimensat`); a file replaced by a
/// rename has another inode.
#[derive(Debug, Clone, PartialEq, Eq)]
struct StatKey {
    path: PathBuf,
    device: u64,
    inode: u64,
    size: u64,
    modified_ns: i128,
    changed_ns: i128,
}

impl StatKey {
    fn of(path: &Path) -> Result<StatKey, FixtureError> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).map_err(|source| FixtureError::Io {
            what: format!("stat `{}`", path.display()),
            source,
        })?;
        Ok(StatKey {
            path: path.to_path_buf(),
            device: meta.dev(),
            inode: meta.ino(),
            size: meta.len(),
            modified_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            changed_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
        })
    }

    fn racy_at(&self, now_ns: i128) -> bool {
        now_ns - self.modified_ns.max(self.changed_ns) < RACY_WITHIN_NS
    }
}

impl std::fmt::Display for StatKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}|dev={}|ino={}|size={}|mtime={}|ctime={}",
            self.path.display(),
            self.device,
            self.inode,
            self.size,
            self.modified_ns,
            self.changed_ns
        )
    }
}

pub fn sha256_file(path: &Path) -> Result<String, FixtureError> {
    let mut file = std::fs::File::open(path).map_err(|source| FixtureError::Io {
        what: format!("open `{}`", path.display()),
        source,
    })?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buffer).map_err(|source| FixtureError::Io {
            what: format!("read `{}`", path.display()),
            source,
        })?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use abfleet_core::spec::{Generator, PixelFormat};

    fn fixture(reference: FixtureFile, distorted: FixtureFile) -> FixtureSpec {
        FixtureSpec {
            name: "tiny".into(),
            width: 16,
            height: 8,
            bitdepth: 8,
            pixel_format: PixelFormat::Yuv420,
            frames: 2,
            reference,
            distorted,
        }
    }

    fn generated(seed: u64) -> FixtureFile {
        FixtureFile {
            location: FixtureLocation::Generate {
                generator: Generator::MovingPattern,
                seed,
            },
            sha256: None,
        }
    }

    #[test]
    fn generated_path_and_url_fixtures_are_found_and_verified() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = tmp.path().join("cache");
        let job = tmp.path().join("job");
        let prepared = prepare(&fixture(generated(1), generated(2)), &cache, &job, "h").unwrap();
        let sha = sha256_file(&prepared.reference).unwrap();
        let as_path = FixtureFile {
            location: FixtureLocation::Path(prepared.reference.clone()),
            sha256: Some(sha.clone()),
        };
        let as_url = FixtureFile {
            location: FixtureLocation::Url(format!("file://{}", prepared.reference.display())),
            sha256: Some(sha.clone()),
        };
        let again = prepare(&fixture(as_path, as_url), &cache, &job, "h").unwrap();
        assert_eq!(again.distorted, cache.join("by-sha256").join(&sha));
        assert_eq!(sha256_file(&again.distorted).unwrap(), sha);
        // The path fixture is read from the job's own copy.
        assert_eq!(again.reference, job.join("tiny.reference"));
        assert_eq!(sha256_file(&again.reference).unwrap(), sha);
    }

    #[test]
    fn missing_mismatched_and_wrongly_sized_files_are_named() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = tmp.path().join("cache");
        let missing = FixtureFile {
            location: FixtureLocation::Path(tmp.path().join("nope.yuv")),
            sha256: Some("0".repeat(64)),
        };
        let err = prepare(
            &fixture(missing, generated(1)),
            &cache,
            &tmp.path().join("job"),
            "bench-3",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("nope.yuv") && err.contains("bench-3") && err.contains("reference"),
            "{err}"
        );

        let mut wrong_sum = generated(1);
        wrong_sum.sha256 = Some("0".repeat(64));
        let err = prepare(
            &fixture(generated(1), wrong_sum),
            &cache,
            &tmp.path().join("job"),
            "h",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("distorted") && err.contains("expects 0000"),
            "{err}"
        );

        let short = tmp.path().join("short.yuv");
        std::fs::write(&short, [0u8; 10]).unwrap();
        let short_file = FixtureFile {
            location: FixtureLocation::Path(short),
            sha256: Some("0".repeat(64)),
        };
        let err = prepare(
            &fixture(short_file, generated(1)),
            &cache,
            &tmp.path().join("job"),
            "h",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("is 10 bytes") && err.contains("needs 384"),
            "{err}"
        );
    }

    fn write_in_place(path: &Path, bytes: &[u8]) {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        file.write_all(bytes).unwrap();
        file.sync_all().unwrap();
    }

    fn pinned_path(path: &Path) -> FixtureFile {
        FixtureFile {
            location: FixtureLocation::Path(path.to_path_buf()),
            sha256: Some(sha256_file(path).unwrap()),
        }
    }

    /// Overwrites `path` in place with `bytes` (the same size) and sets its modification
    /// time back, as `touch -d` or a careful copy tool would: only its change time tells.
    fn overwrite_keeping_mtime(path: &Path, bytes: &[u8]) {
        let before = std::fs::metadata(path).unwrap();
        write_in_place(path, bytes);
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(before.modified().unwrap())
            .unwrap();
        let after = std::fs::metadata(path).unwrap();
        assert_eq!(after.len(), before.len());
        assert_eq!(after.modified().unwrap(), before.modified().unwrap());
    }

    /// Waits until the file system's clock has moved past `path`'s change time, so that a
    /// write now gives it another one (the kernel's timestamps move in coarse ticks).
    fn wait_for_a_new_change_time(path: &Path, scratch: &Path) {
        use std::os::unix::fs::MetadataExt;
        let changed = |p: &Path| {
            let meta = std::fs::metadata(p).unwrap();
            (meta.ctime(), meta.ctime_nsec())
        };
        let then = changed(path);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            std::fs::write(scratch, "tick").unwrap();
            if changed(scratch) > then {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the clock did not move"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Issue 23, case 7: a pinned path fixture overwritten in place (same size, the old
    /// mtime restored) after it was verified was measured, with exit 0 and wrong scores.
    /// The cells read the job's verified copy; the next job refuses the changed file.
    #[test]
    fn a_path_fixture_changed_after_verification_never_reaches_a_cell() {
        let tmp = tempfile::tempdir().unwrap();
        let (cache, job) = (tmp.path().join("cache"), tmp.path().join("job"));
        let original = tmp.path().join("reference.yuv");
        let verified_bytes = vec![7u8; 384];
        std::fs::write(&original, &verified_bytes).unwrap();
        let spec = fixture(pinned_path(&original), generated(2));
        let prepared = prepare_for_job(std::slice::from_ref(&spec), &cache, &job, "h").unwrap();
        let read_by_cells = prepared[0].reference.clone();
        assert_ne!(read_by_cells, original);

        // Mid-job, the operator rewrites the fixture.
        overwrite_keeping_mtime(&original, &[9u8; 384]);
        assert_eq!(
            std::fs::read(&read_by_cells).unwrap(),
            verified_bytes,
            "a cell would read bytes that were never verified"
        );

        // The next job hashes its own copy again: the change is refused, naming the file.
        drop(prepared);
        let err = prepare_for_job(&[spec], &cache, &job, "h")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("has sha256") && err.contains(&original.display().to_string()),
            "{err}"
        );
        assert!(
            !job.exists(),
            "a failed preparation leaves no copies behind"
        );
    }

    #[test]
    fn a_jobs_fixture_copies_are_removed_when_it_ends_and_at_the_next_start() {
        let tmp = tempfile::tempdir().unwrap();
        let (cache, job) = (tmp.path().join("cache"), tmp.path().join("job"));
        let original = tmp.path().join("distorted.yuv");
        std::fs::write(&original, [3u8; 384]).unwrap();
        let spec = fixture(generated(1), pinned_path(&original));
        let prepared = prepare_for_job(std::slice::from_ref(&spec), &cache, &job, "h").unwrap();
        assert!(prepared[0].distorted.starts_with(&job) && prepared[0].distorted.is_file());
        drop(prepared);
        assert!(!job.exists());
        // What a killed agent's job left behind goes when the next job prepares.
        std::fs::create_dir_all(&job).unwrap();
        std::fs::write(job.join("left-by-a-killed-agent"), "x").unwrap();
        let prepared = prepare_for_job(&[spec], &cache, &job, "h").unwrap();
        assert!(!job.join("left-by-a-killed-agent").exists());
        assert!(prepared[0].distorted.is_file());
    }

    /// Issue 23, case 7: the cache of verified hashes was keyed by (path, size, mtime), so
    /// a file rewritten with its old mtime restored passed with the old hash.
    #[test]
    fn the_verified_cache_hashes_again_a_file_whose_mtime_was_set_back() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = tmp.path().join("cache");
        std::fs::create_dir_all(&cache).unwrap();
        let file = tmp.path().join("f.yuv");
        std::fs::write(&file, [1u8; 384]).unwrap();
        let first = sha256_file(&file).unwrap();
        let remembered = || {
            std::fs::read_to_string(cache.join("verified.json"))
                .map(|text| serde_json::from_str::<BTreeMap<String, String>>(&text).unwrap())
                .unwrap_or_default()
        };
        // Just written: hashed, not remembered (a second write in the same tick is unseen).
        assert_eq!(cached_sha256(&file, &cache).unwrap(), first);
        assert!(remembered().is_empty(), "{:?}", remembered());

        let settled_ns = i128::MAX / 2;
        assert_eq!(cached_sha256_at(&file, &cache, settled_ns).unwrap(), first);
        assert_eq!(remembered().values().collect::<Vec<_>>(), vec![&first]);

        wait_for_a_new_change_time(&file, &tmp.path().join("scratch"));
        overwrite_keeping_mtime(&file, &[2u8; 384]);
        let second = sha256_file(&file).unwrap();
        assert_ne!(first, second);
        assert_eq!(
            cached_sha256_at(&file, &cache, settled_ns).unwrap(),
            second,
            "the cache passed the old hash for new bytes"
        );
        assert_eq!(
            remembered().values().collect::<Vec<_>>(),
            vec![&second],
            "one entry per path"
        );
    }

    /// A tiny HTTP/1.1 server on loopback for `fetch`'s tests: it serves `body` at
    /// `/file`, honours `Range: bytes=N-` with a 206, answers 404 elsewhere, and misbehaves
    /// as `mode` says. Each request's head is recorded.
    struct TestServer {
        url: String,
        requests: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
        stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    }

    #[derive(Clone, Copy)]
    enum Misbehave {
        /// The first response is cut after half its body (the connection dropped).
        DropFirst,
        /// Every response sends its headers and 10 bytes, then nothing for two minutes
        /// (unless the test ends), then the rest.
        Stall,
    }

    impl TestServer {
        fn start(body: Vec<u8>, mode: Misbehave) -> TestServer {
            use std::io::{BufRead, BufReader, Write};
            use std::sync::atomic::Ordering;
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let url = format!("http://{}/file", listener.local_addr().unwrap());
            let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let (seen, stopped) = (requests.clone(), stop.clone());
            let body = std::sync::Arc::new(body);
            std::thread::spawn(move || {
                for (n, stream) in listener.incoming().enumerate() {
                    let Ok(mut stream) = stream else { return };
                    let (seen, stopped, body) = (seen.clone(), stopped.clone(), body.clone());
                    // A thread per connection: a stalled one holds up no other.
                    std::thread::spawn(move || {
                        let mut reader = BufReader::new(stream.try_clone().unwrap());
                        let mut head = String::new();
                        loop {
                            let mut line = String::new();
                            if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                                break;
                            }
                            head.push_str(&line);
                        }
                        seen.lock().unwrap().push(head.clone());
                        if !head.starts_with("GET /file ") {
                            let _ = stream.write_all(
                            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        );
                            return;
                        }
                        let from: usize = head
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("range: bytes=")
                                    .map(String::from)
                            })
                            .and_then(|r| r.trim().trim_end_matches('-').parse().ok())
                            .unwrap_or(0);
                        let rest = &body[from..];
                        let status = if from > 0 {
                            format!(
                            "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {from}-{}/{}\r\n",
                            body.len() - 1,
                            body.len()
                        )
                        } else {
                            "HTTP/1.1 200 OK\r\n".to_string()
                        };
                        let _ = stream.write_all(
                        format!(
                            "{status}Content-Length: {}\r\nAccept-Ranges: bytes\r\nConnection: close\r\n\r\n",
                            rest.len()
                        )
                        .as_bytes(),
                    );
                        match mode {
                            Misbehave::DropFirst if n == 0 => {
                                let _ = stream.write_all(&rest[..rest.len() / 2]);
                                // Dropped here: the client sees the connection close mid-body.
                            }
                            Misbehave::Stall => {
                                let _ = stream.write_all(&rest[..10]);
                                let _ = stream.flush();
                                for _ in 0..2400 {
                                    if stopped.load(Ordering::Relaxed) {
                                        return;
                                    }
                                    std::thread::sleep(std::time::Duration::from_millis(50));
                                }
                                let _ = stream.write_all(&rest[10..]);
                            }
                            _ => {
                                let _ = stream.write_all(rest);
                            }
                        }
                    });
                }
            });
            TestServer {
                url,
                requests,
                stop,
            }
        }

        fn requests(&self) -> Vec<String> {
            self.requests.lock().unwrap().clone()
        }
    }

    impl Drop for TestServer {
        fn drop(&mut self) {
            self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    fn quick_limits() -> FetchLimits {
        FetchLimits {
            connect_timeout_s: 5,
            stall_bytes_per_s: 1000,
            stall_s: 1,
            retries: 2,
            retry_delay: std::time::Duration::from_millis(10),
            cancel: None,
        }
    }

    fn body() -> Vec<u8> {
        (0..200_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect()
    }

    fn url_fixture() -> FixtureSpec {
        fixture(generated(1), generated(2))
    }

    /// Issue 25: a download cut mid-body is resumed (the server sees a Range request), not
    /// started over, and the cached file has the spec's sha256.
    #[test]
    fn a_dropped_download_resumes_and_ends_with_the_right_sha256() {
        let tmp = tempfile::tempdir().unwrap();
        let body = body();
        let sha = hex(&Sha256::digest(&body));
        let server = TestServer::start(body.clone(), Misbehave::DropFirst);
        let path = fetch(
            &url_fixture(),
            "reference",
            &server.url,
            Some(&sha),
            tmp.path(),
            &quick_limits(),
        )
        .unwrap();
        assert_eq!(path, tmp.path().join("by-sha256").join(&sha));
        assert_eq!(sha256_file(&path).unwrap(), sha);
        let requests = server.requests();
        assert_eq!(requests.len(), 2, "{requests:#?}");
        assert!(
            requests[1].contains(&format!("Range: bytes={}-", body.len() / 2)),
            "the second request resumes where the first stopped: {requests:#?}"
        );
        assert!(!tmp
            .path()
            .join("by-sha256")
            .join(format!("{sha}.partial"))
            .exists());
    }

    /// A partial of another file (a resume that ends with the wrong sha256) is deleted and
    /// the file fetched whole, once.
    #[test]
    fn a_wrong_partial_is_deleted_and_the_file_fetched_whole_once() {
        let tmp = tempfile::tempdir().unwrap();
        let body = body();
        let sha = hex(&Sha256::digest(&body));
        let dir = tmp.path().join("by-sha256");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{sha}.partial")), vec![0xAA; 1000]).unwrap();
        let server = TestServer::start(body.clone(), Misbehave::DropFirst);
        let path = fetch(
            &url_fixture(),
            "reference",
            &server.url,
            Some(&sha),
            tmp.path(),
            &quick_limits(),
        )
        .unwrap();
        assert_eq!(sha256_file(&path).unwrap(), sha);
        let requests = server.requests();
        assert!(requests[0].contains("Range: bytes=1000-"), "{requests:#?}");
        assert!(
            !requests.last().unwrap().contains("Range:"),
            "the last fetch is whole: {requests:#?}"
        );
    }

    #[test]
    fn a_dead_url_fails_naming_the_url_and_what_to_do() {
        let tmp = tempfile::tempdir().unwrap();
        let server = TestServer::start(body(), Misbehave::DropFirst);
        let missing = server.url.replace("/file", "/gone");
        let err = fetch(
            &url_fixture(),
            "reference",
            &missing,
            Some(&"0".repeat(64)),
            tmp.path(),
            &quick_limits(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains(&missing) && err.contains("404"), "{err}");
        assert!(err.contains("use a path fixture"), "{err}");
        assert_eq!(server.requests().len(), 1, "a 404 is not retried");

        // Nothing listens: retried, then named.
        let refused = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            format!("http://{}/file", listener.local_addr().unwrap())
        };
        let err = fetch(
            &url_fixture(),
            "reference",
            &refused,
            Some(&"0".repeat(64)),
            tmp.path(),
            &quick_limits(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains(&refused) && err.contains("after 3 tries"),
            "{err}"
        );
        assert!(
            err.contains("check the URL and this host's network"),
            "{err}"
        );
    }

    /// A server that stops sending is given up after the stall limit (here 1 s under
    /// 1000 bytes/s; the server would send the rest only after two minutes, so without the
    /// limit the fetch would succeed).
    #[test]
    fn a_stalled_download_is_given_up_naming_the_url() {
        let tmp = tempfile::tempdir().unwrap();
        let body = body();
        let sha = hex(&Sha256::digest(&body));
        let server = TestServer::start(body, Misbehave::Stall);
        let limits = FetchLimits {
            retries: 1,
            ..quick_limits()
        };
        let err = fetch(
            &url_fixture(),
            "reference",
            &server.url,
            Some(&sha),
            tmp.path(),
            &limits,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains(&server.url) && err.contains("after 2 tries"),
            "{err}"
        );
        let requests = server.requests();
        assert_eq!(requests.len(), 2, "{requests:#?}");
        assert!(
            requests[1].contains("Range: bytes=10-"),
            "the retry resumes: {requests:#?}"
        );
    }

    /// A cancelled job's download does not retry (the cancel kills a running curl; a retry
    /// waiting to start would otherwise run whole).
    #[test]
    fn a_cancelled_jobs_download_starts_no_retry() {
        let tmp = tempfile::tempdir().unwrap();
        let body = body();
        let sha = hex(&Sha256::digest(&body));
        let server = TestServer::start(body, Misbehave::Stall);
        let (cancel, cancelled) = tokio::sync::watch::channel(false);
        cancel.send_replace(true);
        let limits = FetchLimits {
            cancel: Some(cancelled),
            ..quick_limits()
        };
        let err = fetch(
            &url_fixture(),
            "reference",
            &server.url,
            Some(&sha),
            tmp.path(),
            &limits,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("cancelled"), "{err}");
        assert_eq!(server.requests().len(), 1, "{:#?}", server.requests());
    }
}
