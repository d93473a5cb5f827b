//! `abfleet agent gc`: the agent's cache eviction (`abfleet_agent::cache`) run by hand on a
//! work dir, under the work dir's lock so it never runs beside a live agent; prints what it
//! removes (or, with `--dry-run`, would remove) and the sizes before and after.

use std::path::Path;

use abfleet_agent::cache::{self, show_bytes};
use abfleet_agent::work_dir_lock::WorkDirLock;
use abfleet_agent::AgentError;

use crate::failure::{Classify, Failure};
use crate::terminal_text::visible_cell;

pub fn gc(work_dir: &Path, max_cache_bytes: Option<u64>, dry_run: bool) -> Result<i32, Failure> {
    let Some(max_bytes) = max_cache_bytes else {
        return Err(anyhow::anyhow!(
            "`abfleet agent gc` needs a budget; give --max-cache-bytes (e.g. `20G`), or --config with the agent's file when its [agent] table sets max_cache_bytes"
        ))
        .usage();
    };
    if !work_dir.is_dir() {
        return Err(anyhow::anyhow!(
            "the work dir `{}` does not exist; give the agent's --work-dir",
            work_dir.display()
        ))
        .usage();
    }
    let _lock = match WorkDirLock::acquire(work_dir) {
        Ok(lock) => lock,
        Err(AgentError::WorkDirLocked { pid, .. }) => {
            return Err(anyhow::anyhow!(
                "an agent (pid {pid}) holds the work dir `{}`; it evicts by itself at start and after each job when it has a budget (--max-cache-bytes or max_cache_bytes), so give it one and restart it, or stop it before `abfleet agent gc`",
                work_dir.display()
            ))
            .usage();
        }
        Err(err) => return Err(err).infra(),
    };
    // No job runs: nothing is pinned.
    let mode = if dry_run {
        cache::EvictMode::DryRun
    } else {
        cache::EvictMode::Remove
    };
    let eviction = cache::evict(work_dir, max_bytes, &cache::Pins::default(), mode)
        .map_err(|err| {
            anyhow::anyhow!(
                "failed to read the cache in `{}`: {err}",
                work_dir.display()
            )
        })
        .infra()?;
    let choice = &eviction.choice;
    println!(
        "cache of `{}`: {} ({} bytes), budget {} ({max_bytes} bytes)",
        visible_cell(&work_dir.display().to_string()),
        show_bytes(choice.before_bytes),
        choice.before_bytes,
        show_bytes(max_bytes),
    );
    let verb = if dry_run { "would remove" } else { "removed" };
    for entry in &choice.remove {
        println!(
            "{verb} {} `{}` ({}, last used {})",
            entry.kind.name(),
            visible_cell(&entry.path.display().to_string()),
            show_bytes(entry.bytes),
            abfleet_core::report::format_utc(entry.last_used_ms as i64),
        );
    }
    for (path, error) in &eviction.failed {
        eprintln!(
            "cannot remove `{}`: {error}; delete it by hand or fix its permissions",
            visible_cell(&path.display().to_string())
        );
    }
    let after = if dry_run { "would be" } else { "is now" };
    println!(
        "{verb} {} of {} entries; the cache {after} {} ({} bytes)",
        choice.remove.len(),
        eviction.entries,
        show_bytes(choice.after_bytes),
        choice.after_bytes
    );
    Ok(if eviction.failed.is_empty() {
        0
    } else {
        abfleet_core::exit::NOT_CARRIED_OUT
    })
}
