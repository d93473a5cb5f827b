//! Alerts (`outbound::notify`) from the fleet's side: which to queue when a run finishes or
//! an agent is lost, the delivery of queued ones (one task, `server`, retrying with a
//! doubling backoff), and the record of them attached to a run's report.

use abfleet_core::report::Report;
use abfleet_core::RunId;
use tracing::{error, info, warn};

use std::sync::Arc;

use super::state::Ground;
use super::FleetError;
use super::Stopping;
use crate::outbound::http_client::HttpClient;
use crate::outbound::notify::{self, delivery, Alert, AlertKind};
use crate::store::{Attempt, NewNotification};

/// Alerts tried in one pass of the delivery task.
const DELIVERY_BATCH: u32 = 32;
/// The longest wait between two attempts of one alert.
const MAX_BACKOFF_MS: i64 = 3_600_000;

/// Alerts: which to queue, and their delivery. Owns the delivery task's wake-up and its
/// HTTP clients.
#[derive(Clone)]
pub struct Alerts {
    pub(super) ground: Ground,
    delivery: Arc<AlertDelivery>,
}

impl Alerts {
    pub(super) fn new(ground: Ground) -> Alerts {
        Alerts {
            ground,
            delivery: Default::default(),
        }
    }

    /// Wakes the delivery task: alerts were queued (in the transaction that finished a run).
    pub(super) fn wake_delivery(&self) {
        self.delivery.alert_queued();
    }

    /// Whether any alert endpoint is configured.
    pub fn alerts_configured(&self) -> bool {
        !self.ground.config().notify.endpoints.is_empty()
    }

    /// The rows to queue with the finish of the run `report` is the final report of.
    pub(super) fn finished_run_alerts(&self, report: &Report) -> Vec<NewNotification> {
        if !self.alerts_configured() {
            return Vec::new();
        }
        let alerts = notify::alerts_for_finished_run(
            report,
            self.ground.config().notify.report_url.as_deref(),
        );
        self.rows_for(&alerts)
    }

    fn rows_for(&self, alerts: &[Alert]) -> Vec<NewNotification> {
        let mut rows = Vec::new();
        for alert in alerts {
            let Ok(run_id) = alert.run_id.parse::<RunId>() else {
                continue;
            };
            for endpoint in &self.ground.config().notify.endpoints {
                if !endpoint.wants(alert.kind) {
                    continue;
                }
                rows.push(NewNotification {
                    run_id,
                    endpoint: endpoint.name.clone(),
                    kind: alert.kind.as_str().to_string(),
                    key: alert.key.clone(),
                    summary: alert.summary.clone(),
                    payload_json: notify::payload(endpoint.format, alert).to_string(),
                });
            }
        }
        rows
    }

    /// Queues an "agent lost" alert for the job that agent held: said when it happens. A
    /// failure to queue it is logged, never passed on (the requeue matters more).
    pub(super) async fn alert_agent_lost(
        &self,
        run_id: RunId,
        job_id: abfleet_core::JobId,
        attempt: u32,
        reason: &str,
    ) {
        if !self
            .ground
            .config()
            .notify
            .endpoints
            .iter()
            .any(|e| e.wants(AlertKind::AgentLost))
        {
            return;
        }
        let name = match self.ground.store().runs().run(run_id).await {
            Ok(Some(run)) => run.spec.name.clone(),
            _ => run_id.to_string(),
        };
        let alert = notify::agent_lost_alert(
            &run_id.to_string(),
            &name,
            &job_id.to_string(),
            attempt,
            reason,
            self.ground.config().notify.report_url.as_deref(),
        );
        let rows = self.rows_for(&[alert]);
        match self
            .ground
            .store()
            .notifications()
            .queue_notifications(rows, self.ground.now_ms())
            .await
        {
            Ok(_) => self.delivery.alert_queued(),
            Err(err) => {
                error!(run_id = %run_id, error = %err, "could not queue the agent-lost alert")
            }
        }
    }

    /// Tries every alert that is due once; how many were sent. A failed attempt is retried
    /// after a backoff that doubles from `retry_after` (at most an hour), and given up
    /// (logged as an error) after `max_attempts`.
    pub async fn deliver_due_alerts(&self) -> Result<usize, FleetError> {
        self.deliver_due_alerts_until(&Stopping::never()).await
    }

    /// [`Self::deliver_due_alerts`], starting no send once `stopping` says so (a send in
    /// flight finishes and is recorded).
    async fn deliver_due_alerts_until(&self, stopping: &Stopping) -> Result<usize, FleetError> {
        let config = &self.ground.config().notify;
        let due = self
            .ground
            .store()
            .notifications()
            .due_notifications(self.ground.now_ms(), DELIVERY_BATCH)
            .await?;
        let mut sent = 0;
        for alert in due {
            if stopping.is_set() {
                break;
            }
            let attempt = match config.endpoints.iter().find(|e| e.name == alert.endpoint) {
                None => Attempt::Failed {
                    status: None,
                    error: format!(
                        "the endpoint `{}` is no longer in [notify]; not sent",
                        alert.endpoint
                    ),
                    retry_at_ms: None,
                },
                Some(endpoint) => match self.endpoint_client(endpoint) {
                    Err(err) => Attempt::Failed {
                        status: None,
                        error: err,
                        retry_at_ms: None,
                    },
                    Ok(client) => {
                        let delivery_id =
                            notify::delivery_id(&alert.run_id, &alert.kind, &alert.key);
                        let outcome =
                            delivery::send(&client, endpoint, &alert.payload_json, &delivery_id)
                                .await;
                        let tries = alert.attempts + 1;
                        match outcome {
                            Ok(status) => Attempt::Sent { status },
                            Err(failure) => {
                                let retry_at_ms = (tries < config.max_attempts).then(|| {
                                    let base = config.retry_after.as_millis() as i64;
                                    let wait = base
                                        .saturating_mul(1 << (tries - 1).min(20))
                                        .min(MAX_BACKOFF_MS);
                                    self.ground.now_ms() + wait
                                });
                                Attempt::Failed {
                                    status: failure.status,
                                    error: failure.message,
                                    retry_at_ms,
                                }
                            }
                        }
                    }
                },
            };
            match &attempt {
                Attempt::Sent { status } => {
                    sent += 1;
                    info!(run_id = %alert.run_id, endpoint = %alert.endpoint, kind = %alert.kind, status, "alert sent");
                }
                Attempt::Failed {
                    error: message,
                    retry_at_ms: Some(_),
                    ..
                } => {
                    warn!(run_id = %alert.run_id, endpoint = %alert.endpoint, kind = %alert.kind, attempt = alert.attempts + 1, error = %message, "alert not delivered; retrying");
                }
                Attempt::Failed {
                    error: message,
                    retry_at_ms: None,
                    ..
                } => {
                    error!(run_id = %alert.run_id, endpoint = %alert.endpoint, kind = %alert.kind, attempts = alert.attempts + 1, error = %message, "alert given up");
                }
            }
            self.ground
                .store()
                .notifications()
                .record_notification_attempt(alert.id, attempt, self.ground.now_ms())
                .await?;
        }
        Ok(sent)
    }

    /// Delivers alerts until `stopping`: when one is queued, and when a retry is due. A send
    /// in flight when it stops is finished and recorded (the caller bounds the wait).
    pub async fn run_alert_delivery(&self, mut stopping: Stopping) {
        loop {
            if stopping.is_set() {
                return;
            }
            if let Err(err) = self.deliver_due_alerts_until(&stopping).await {
                error!(error = %err, "alert delivery failed; trying again shortly");
            }
            let wait = match self
                .ground
                .store()
                .notifications()
                .next_notification_due_ms()
                .await
            {
                Ok(Some(due)) => (due - self.ground.now_ms()).clamp(0, 60_000) as u64,
                Ok(None) => 60_000,
                Err(_) => 5_000,
            };
            tokio::select! {
                () = self.delivery.wake.notified() => {}
                () = tokio::time::sleep(std::time::Duration::from_millis(wait.max(10))) => {}
                () = stopping.wait() => return,
            }
        }
    }

    fn endpoint_client(&self, endpoint: &notify::Endpoint) -> Result<HttpClient, String> {
        self.delivery
            .client_for(endpoint, self.ground.config().notify.timeout)
    }
}

/// The delivery task's own state: its wake-up when an alert is queued, and one HTTP client
/// per endpoint (its own CA, if any), made when first needed. Taken only here.
#[derive(Default)]
struct AlertDelivery {
    wake: tokio::sync::Notify,
    clients: std::sync::Mutex<std::collections::HashMap<String, HttpClient>>,
}

impl AlertDelivery {
    /// Wakes the delivery task: an alert was queued.
    pub(super) fn alert_queued(&self) {
        self.wake.notify_one();
    }

    fn client_for(
        &self,
        endpoint: &notify::Endpoint,
        timeout: std::time::Duration,
    ) -> Result<HttpClient, String> {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(client) = clients.get(&endpoint.name) {
            return Ok(client.clone());
        }
        let client = HttpClient::new(endpoint.ca_pem.as_deref(), timeout).map_err(|err| {
            format!(
                "no HTTP client for endpoint `{}`: {err}; fix its ca_file in [notify] and restart",
                endpoint.name
            )
        })?;
        clients.insert(endpoint.name.clone(), client.clone());
        Ok(client)
    }
}
