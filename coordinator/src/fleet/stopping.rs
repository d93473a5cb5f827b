//! `Stopping`: the word a stopping coordinator gives its outbound tasks (alert delivery, pull
//! request answers). They start no new send once it is given, finish and record the one in
//! flight, and return; the server bounds how long it waits for them (`OUTBOUND_GRACE`), so
//! a SIGTERM does not cut a delivery whose repeat after the restart would arrive twice.

use tokio::sync::watch;

/// A receiver of the stop word; `Stopping::never()` for a pass run by hand.
#[derive(Clone)]
pub struct Stopping(watch::Receiver<bool>);

/// The sender: `stop()` once, when the coordinator begins to stop.
pub struct StopOutbound(watch::Sender<bool>);

impl StopOutbound {
    pub fn new() -> (StopOutbound, Stopping) {
        let (sender, receiver) = watch::channel(false);
        (StopOutbound(sender), Stopping(receiver))
    }

    pub fn stop(&self) {
        self.0.send_replace(true);
    }
}

impl Stopping {
    /// One that is never told to stop.
    pub fn never() -> Stopping {
        let (_, receiver) = watch::channel(false);
        Stopping(receiver)
    }

    pub fn is_set(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once the stop word is given (never, for `never()`).
    pub async fn wait(&mut self) {
        if self.0.wait_for(|stop| *stop).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
