//! A tiny HTTP/1.1 client for the double's own tests: one request per connection
//! (`Connection: close`) over a raw `TcpStream`, the answer read to its end.

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The headers a well-behaved GitHub client sends.
pub const GITHUB_HEADERS: [(&str, &str); 3] = [
    ("Accept", "application/vnd.github+json"),
    ("User-Agent", "abfleet-testkit-tests"),
    ("Authorization", "Bearer test-token"),
];

/// A status, headers (names lower case) and the body as text.
#[derive(Debug)]
pub struct HttpAnswer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl HttpAnswer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|error| panic!("answer is not JSON ({error}): {:?}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// Sends `method path_and_query` to `base_url` with the usual GitHub headers and a JSON body.
pub async fn github(
    base_url: &str,
    method: &str,
    path_and_query: &str,
    body: Option<Value>,
) -> HttpAnswer {
    send(
        base_url,
        method,
        path_and_query,
        &GITHUB_HEADERS,
        body.map(|body| body.to_string()),
    )
    .await
}

/// Sends one request with exactly `headers` (plus Host, Connection and Content-Length).
pub async fn send(
    base_url: &str,
    method: &str,
    path_and_query: &str,
    headers: &[(&str, &str)],
    body: Option<String>,
) -> HttpAnswer {
    let address = base_url.strip_prefix("http://").expect("an http:// URL");
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("failed to connect to the double");
    let body = body.unwrap_or_default();
    let mut request =
        format!("{method} {path_and_query} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() {
        request.push_str("Content-Type: application/json\r\n");
    }
    request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream
        .write_all(request.as_bytes())
        .await
        .expect("failed to send the request");
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .await
        .expect("failed to read the answer");
    parse_answer(&raw)
}

fn parse_answer(raw: &[u8]) -> HttpAnswer {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .expect("an HTTP answer has a head");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("a status code");
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_string()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(name, value)| name == "transfer-encoding" && value.contains("chunked"));
    let body = if chunked {
        decode_chunked(body)
    } else {
        body.to_string()
    };
    HttpAnswer {
        status,
        headers,
        body,
    }
}

fn decode_chunked(mut rest: &str) -> String {
    let mut body = String::new();
    while let Some((size_line, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size_line.split(';').next().unwrap_or("0").trim(), 16)
            .unwrap_or(0);
        if size == 0 {
            break;
        }
        body.push_str(&after[..size]);
        rest = after[size..].strip_prefix("\r\n").unwrap_or(&after[size..]);
    }
    body
}
