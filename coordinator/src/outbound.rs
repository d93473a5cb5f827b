//! What the coordinator sends out on its own: alerts to webhooks (`notify`), results to the
//! pull request that asked for them (`github`), over the one HTTP client it has
//! (`http_client`), with secrets read from private files (`secret_file`).

pub mod github;
pub mod http_client;
pub mod notify;
pub mod secret_file;

/// The header every outbound delivery carries (alerts, commit statuses, comments): an id
/// that is the same on every retry of that delivery, a restart's too, so a receiver drops
/// what it already has (docs/operations.md, "Deliveries").
pub const DELIVERY_HEADER: &str = "X-Abfleet-Delivery";
