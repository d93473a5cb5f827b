//! The agent-wide switch that keeps event uploads (and the spool writes that follow them)
//! out of timed runs. A stage that times something holds a [`Hushed`] guard for the whole
//! cell (warm-ups and every timed run); every uploader of the agent — the running job's and
//! those re-sending an earlier process's spools — does its I/O only under an
//! [`UploadPermit`], which it cannot get while any guard is held. Taking a guard waits for
//! the permits out: an upload already in flight finishes (or, past [`HUSH_GRACE`], is
//! dropped, its events left in the spool to be sent again) before the cell's first run.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

/// How long an upload in flight may go on once a cell wants quiet; then it is dropped
/// (the coordinator ignores events it already stored when they come again).
pub const HUSH_GRACE: Duration = Duration::from_secs(3);

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct GateState {
    /// Guards held: while any is, no permit is given.
    hushers: u32,
    /// Permits held: uploads (and the spool upkeep that follows them) in progress.
    in_flight: u32,
}

/// One per agent process, shared by every event sink.
#[derive(Clone)]
pub struct UploadGate {
    state: Arc<watch::Sender<GateState>>,
}

impl Default for UploadGate {
    fn default() -> Self {
        UploadGate::new()
    }
}

impl UploadGate {
    pub fn new() -> UploadGate {
        UploadGate {
            state: Arc::new(watch::channel(GateState::default()).0),
        }
    }

    /// Quiet until the guard is dropped: returns once no upload is in flight, and no new
    /// one starts while the guard is held.
    pub async fn hush(&self) -> Hushed {
        self.state.send_modify(|s| s.hushers += 1);
        let guard = Hushed {
            state: self.state.clone(),
        };
        let mut changes = self.state.subscribe();
        // No permit is given from here on, so `in_flight` only goes down.
        let _ = changes.wait_for(|s| s.in_flight == 0).await;
        guard
    }

    /// Waits until no guard is held, then takes a permit (atomically with that check, so a
    /// guard taken meanwhile waits for this permit).
    pub async fn permit(&self) -> UploadPermit {
        let mut changes = self.state.subscribe();
        loop {
            let mut granted = false;
            self.state.send_if_modified(|s| {
                if s.hushers == 0 {
                    s.in_flight += 1;
                    granted = true;
                }
                granted
            });
            if granted {
                return UploadPermit {
                    state: self.state.clone(),
                };
            }
            let _ = changes.wait_for(|s| s.hushers == 0).await;
        }
    }

    /// Resolves once some stage wants quiet (at once if one already does).
    pub async fn hush_requested(&self) {
        let mut changes = self.state.subscribe();
        let _ = changes.wait_for(|s| s.hushers > 0).await;
    }

    /// Whether a stage wants quiet now (the tests' view; the uploader waits on
    /// `hush_requested` instead).
    #[cfg(test)]
    fn is_hushed(&self) -> bool {
        self.state.borrow().hushers > 0
    }
}

/// Held while a cell is timed; dropping it lets uploads go again.
#[must_use = "the agent is quiet only while the guard is held"]
pub struct Hushed {
    state: Arc<watch::Sender<GateState>>,
}

impl Drop for Hushed {
    fn drop(&mut self) {
        self.state.send_modify(|s| s.hushers -= 1);
    }
}

/// Held by an uploader while it sends a batch and applies its acknowledgement.
pub struct UploadPermit {
    state: Arc<watch::Sender<GateState>>,
}

impl Drop for UploadPermit {
    fn drop(&mut self) {
        self.state.send_modify(|s| s.in_flight -= 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_hush_waits_for_the_upload_in_flight_and_blocks_new_ones() {
        let gate = UploadGate::new();
        let permit = gate.permit().await;
        let hushing = tokio::spawn({
            let gate = gate.clone();
            async move { gate.hush().await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!hushing.is_finished(), "the hush must wait for the permit");
        assert!(gate.is_hushed());
        drop(permit);
        let hushed = tokio::time::timeout(Duration::from_secs(5), hushing)
            .await
            .expect("the hush returns once the upload is done")
            .unwrap();
        let next = tokio::spawn({
            let gate = gate.clone();
            async move { gate.permit().await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!next.is_finished(), "no upload starts while hushed");
        drop(hushed);
        let _permit = tokio::time::timeout(Duration::from_secs(5), next)
            .await
            .expect("uploads go again once the guard is dropped")
            .unwrap();
        assert!(!gate.is_hushed());
    }

    #[tokio::test]
    async fn guards_nest_and_a_hush_request_is_seen_at_once() {
        let gate = UploadGate::new();
        let outer = gate.hush().await;
        let inner = gate.hush().await;
        tokio::time::timeout(Duration::from_secs(1), gate.hush_requested())
            .await
            .unwrap();
        drop(inner);
        assert!(gate.is_hushed(), "the outer guard still holds");
        drop(outer);
        assert!(!gate.is_hushed());
        tokio::time::timeout(Duration::from_secs(1), gate.permit())
            .await
            .unwrap();
    }
}
