//! Sending one queued alert to its endpoint: the payload as queued, signed for a generic
//! JSON endpoint with a secret; any 2xx is delivered, anything else is a failure the caller
//! retries.

use super::{Endpoint, PayloadFormat};
use crate::outbound::http_client::{url_origin, HttpClient, OutboundRequest};

/// Why an attempt failed: the endpoint's status when it answered, and words for the record.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryFailure {
    pub status: Option<u16>,
    pub message: String,
}

/// The signature header of a generic JSON alert: `sha256=HEX` of HMAC-SHA256 over the body,
/// made by the same `webhook::sign` GitHub's deliveries are checked against, so one
/// verifier serves both.
pub const SIGNATURE_HEADER: &str = "x-abfleet-signature-256";

/// Posts `payload_json` to `endpoint` as delivery `delivery_id` (`X-Abfleet-Delivery`); the
/// status on success.
pub async fn send(
    client: &HttpClient,
    endpoint: &Endpoint,
    payload_json: &str,
    delivery_id: &str,
) -> Result<u16, DeliveryFailure> {
    let body = payload_json.as_bytes().to_vec();
    let mut headers = vec![
        ("content-type".to_string(), "application/json".to_string()),
        (
            "user-agent".to_string(),
            concat!("abfleet/", env!("CARGO_PKG_VERSION")).to_string(),
        ),
        (
            crate::outbound::DELIVERY_HEADER.to_string(),
            delivery_id.to_string(),
        ),
    ];
    if let (PayloadFormat::Json, Some(secret)) = (endpoint.format, &endpoint.secret) {
        headers.push((
            SIGNATURE_HEADER.to_string(),
            crate::webhook::sign(secret, &body),
        ));
    }
    let request = OutboundRequest {
        method: "POST",
        url: endpoint.url.clone(),
        headers,
        body: Some(body),
    };
    match client.send(&request).await {
        Ok(response) if response.is_success() => Ok(response.status),
        Ok(response) => Err(DeliveryFailure {
            status: Some(response.status),
            message: format!(
                "{} answered HTTP {}: {}",
                url_origin(&endpoint.url),
                response.status,
                response.body_excerpt(200)
            ),
        }),
        // The error names the host only: a webhook URL's path is its secret.
        Err(err) => Err(DeliveryFailure {
            status: None,
            message: err.to_string(),
        }),
    }
}
