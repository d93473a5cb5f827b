//! The plaintext web view answers only requests addressed to a loopback name (issue 23):
//! without this, a page on `evil.example` whose name is rebound to 127.0.0.1 (DNS
//! rebinding) could read the web view and `/api/` from the operator's own browser. The
//! browser sends the name it resolved as `Host`, so the web view on a loopback listener
//! refuses every `Host` but `localhost` and loopback addresses with 421 Misdirected Request.
//! The port is not checked: an SSH tunnel (`ssh -L 9000:localhost:8080`) sends its own.

use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;

/// `router` with every request whose `Host` (or absolute-form authority) does not name
/// loopback refused with 421.
pub(crate) fn only_loopback_names(router: Router) -> Router {
    router.layer(axum::middleware::from_fn(refuse_other_names))
}

async fn refuse_other_names(request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()));
    if host.is_some_and(names_loopback) {
        return next.run(request).await;
    }
    (
        StatusCode::MISDIRECTED_REQUEST,
        "this web view answers only to a loopback name (localhost, 127.0.0.1, [::1]); open it \
         by that name, through an SSH tunnel, or behind a proxy that sends `Host: localhost`\n",
    )
        .into_response()
}

/// Whether a `Host` header (`name`, `name:port`, `[v6]`, `[v6]:port`) names loopback.
pub(crate) fn names_loopback(host: &str) -> bool {
    let Ok(authority) = host.parse::<axum::http::uri::Authority>() else {
        return false;
    };
    // Only a bare host and port: no user info.
    authority.as_str() == host
        && !host.contains('@')
        && abfleet_proto::transport::is_loopback_host(authority.host())
}

#[cfg(test)]
mod tests {
    use super::names_loopback;

    #[test]
    fn loopback_names_with_and_without_port_are_accepted() {
        for host in [
            "localhost",
            "LOCALHOST:8080",
            "127.0.0.1",
            "127.0.0.1:9000",
            "127.1.2.3:80",
            "[::1]",
            "[::1]:8080",
        ] {
            assert!(names_loopback(host), "{host}");
        }
    }

    #[test]
    fn other_names_are_refused() {
        for host in [
            "evil.example",
            "evil.example:8080",
            "localhost.evil.example",
            "127.0.0.1.nip.io",
            "10.0.0.1:8080",
            "[::2]:8080",
            "user@localhost",
            "localhost:8080/x",
            "",
            " localhost",
        ] {
            assert!(!names_loopback(host), "{host:?}");
        }
    }
}
