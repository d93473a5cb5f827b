//! What the coordinator sends out on its own: alerts to webhooks (`notify`) over the one
//! HTTP client it has (`http_client`).

pub mod http_client;
pub mod notify;
