//! Finding a fixture on this host and proving it is the right one: a local path, a URL
//! fetched once into the cache (keyed by sha256), or a generator's output. Sizes and
//! checksums are verified before any timing; a verified file's hash is remembered by
//! (path, size, mtime) so a multi-gigabyte fixture is not re-hashed on every run.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use abfleet_core::spec::{FixtureFile, FixtureLocation, FixtureSpec};
use sha2::{Digest, Sha256};

use crate::generator;
use crate::source::hex;

#[derive(Debug, Clone)]
pub struct PreparedFixture {
    pub reference: PathBuf,
    pub distorted: PathBuf,
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

/// Makes both files of a fixture available and verified.
pub fn prepare(
    fixture: &FixtureSpec,
    cache_dir: &Path,
    host: &str,
) -> Result<PreparedFixture, FixtureError> {
    std::fs::create_dir_all(cache_dir).map_err(|source| FixtureError::Io {
        what: format!("create the fixture cache `{}`", cache_dir.display()),
        source,
    })?;
    Ok(PreparedFixture {
        reference: prepare_file(fixture, &fixture.reference, "reference", cache_dir, host)?,
        distorted: prepare_file(fixture, &fixture.distorted, "distorted", cache_dir, host)?,
    })
}

fn prepare_file(
    fixture: &FixtureSpec,
    file: &FixtureFile,
    role: &'static str,
    cache_dir: &Path,
    host: &str,
) -> Result<PathBuf, FixtureError> {
    let path = match &file.location {
        FixtureLocation::Path(path) => {
            if !path.is_file() {
                return Err(FixtureError::Missing {
                    fixture: fixture.name.clone(),
                    role,
                    path: path.clone(),
                    host: host.to_string(),
                });
            }
            path.clone()
        }
        FixtureLocation::Url(url) => fetch(fixture, role, url, file.sha256.as_deref(), cache_dir)?,
        FixtureLocation::Generate { generator, seed } => {
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
            let dir = cache_dir.join("generated");
            let path = dir.join(name);
            if !path.is_file() {
                std::fs::create_dir_all(&dir).map_err(|source| FixtureError::Io {
                    what: format!("create `{}`", dir.display()),
                    source,
                })?;
                let partial = path.with_extension("partial");
                generator::generate(*generator, *seed, fixture, &partial)
                    .and_then(|()| std::fs::rename(&partial, &path))
                    .map_err(|source| FixtureError::Io {
                        what: format!("generate `{}`", path.display()),
                        source,
                    })?;
            }
            path
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
            path,
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
        let actual = cached_sha256(&path, cache_dir)?;
        if &actual != expected {
            return Err(FixtureError::Checksum {
                fixture: fixture.name.clone(),
                role,
                path,
                expected: expected.clone(),
                actual,
            });
        }
    }
    Ok(path)
}

/// Fetches a URL once into `cache_dir/by-sha256/`, with the real `curl`.
fn fetch(
    fixture: &FixtureSpec,
    role: &'static str,
    url: &str,
    sha256: Option<&str>,
    cache_dir: &Path,
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
        return Ok(path);
    }
    std::fs::create_dir_all(&dir).map_err(|source| FixtureError::Io {
        what: format!("create `{}`", dir.display()),
        source,
    })?;
    let partial = dir.join(format!("{sha256}.partial"));
    let output = std::process::Command::new("curl")
        .args([
            "--fail",
            "--silent",
            "--show-error",
            "--location",
            "--output",
        ])
        .arg(&partial)
        .arg("--")
        .arg(url)
        .output()
        .map_err(|err| {
            fetch_error(format!(
                "cannot run curl ({err}); install curl or use a path fixture"
            ))
        })?;
    if !output.status.success() {
        let _ = std::fs::remove_file(&partial);
        return Err(fetch_error(
            String::from_utf8_lossy(&output.stderr).trim().to_string(),
        ));
    }
    let actual = sha256_file(&partial)?;
    if actual != sha256 {
        let _ = std::fs::remove_file(&partial);
        return Err(FixtureError::Checksum {
            fixture: fixture.name.clone(),
            role,
            path: PathBuf::from(url),
            expected: sha256.to_string(),
            actual,
        });
    }
    std::fs::rename(&partial, &path).map_err(|source| FixtureError::Io {
        what: format!("move `{}` into the cache", partial.display()),
        source,
    })?;
    Ok(path)
}

/// The sha256 of a file, remembered by (path, size, mtime) in `cache_dir/verified.json`.
fn cached_sha256(path: &Path, cache_dir: &Path) -> Result<String, FixtureError> {
    let metadata = std::fs::metadata(path).map_err(|source| FixtureError::Io {
        what: format!("stat `{}`", path.display()),
        source,
    })?;
    let mtime_ns = metadata
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    let key = format!("{}|{}|{}", path.display(), metadata.len(), mtime_ns);
    let index_path = cache_dir.join("verified.json");
    let mut index: BTreeMap<String, String> = std::fs::read_to_string(&index_path)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    if let Some(hash) = index.get(&key) {
        return Ok(hash.clone());
    }
    let hash = sha256_file(path)?;
    index.insert(key, hash.clone());
    if let Ok(text) = serde_json::to_string_pretty(&index) {
        let _ = std::fs::write(&index_path, text);
    }
    Ok(hash)
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
        let prepared = prepare(&fixture(generated(1), generated(2)), &cache, "h").unwrap();
        let sha = sha256_file(&prepared.reference).unwrap();
        let as_path = FixtureFile {
            location: FixtureLocation::Path(prepared.reference.clone()),
            sha256: Some(sha.clone()),
        };
        let as_url = FixtureFile {
            location: FixtureLocation::Url(format!("file://{}", prepared.reference.display())),
            sha256: Some(sha.clone()),
        };
        let again = prepare(&fixture(as_path, as_url), &cache, "h").unwrap();
        assert_eq!(again.distorted, cache.join("by-sha256").join(&sha));
        assert_eq!(sha256_file(&again.distorted).unwrap(), sha);
    }

    #[test]
    fn missing_mismatched_and_wrongly_sized_files_are_named() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = tmp.path().join("cache");
        let missing = FixtureFile {
            location: FixtureLocation::Path(tmp.path().join("nope.yuv")),
            sha256: Some("0".repeat(64)),
        };
        let err = prepare(&fixture(missing, generated(1)), &cache, "bench-3")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("nope.yuv") && err.contains("bench-3") && err.contains("reference"),
            "{err}"
        );

        let mut wrong_sum = generated(1);
        wrong_sum.sha256 = Some("0".repeat(64));
        let err = prepare(&fixture(generated(1), wrong_sum), &cache, "h")
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
        let err = prepare(&fixture(short_file, generated(1)), &cache, "h")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("is 10 bytes") && err.contains("needs 384"),
            "{err}"
        );
    }
}
