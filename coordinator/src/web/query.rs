//! `?offset=N&limit=N` of the paged lists and `?generation=KEY&workload=W` of a history,
//! read by hand (the listener's axum has no query extractor); a bad value is a 400 that
//! says what is allowed.

use axum::http::StatusCode;

use crate::fleet::HistoryQuery;

/// Runs or agents per page unless `limit` says otherwise, and the most it may say.
pub(super) const DEFAULT_LIMIT: u32 = 25;
pub(super) const MAX_LIMIT: u32 = 200;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PageQuery {
    pub offset: u64,
    pub limit: u32,
}

pub(super) fn page_query(raw: Option<&str>) -> Result<PageQuery, (StatusCode, String)> {
    let mut page = PageQuery {
        offset: 0,
        limit: DEFAULT_LIMIT,
    };
    for pair in raw.unwrap_or_default().split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let bad = || {
            (
                StatusCode::BAD_REQUEST,
                format!("`{key}={value}` is not a page: use offset=N (0 or more) and limit=N (1 to {MAX_LIMIT})"),
            )
        };
        match key {
            "offset" => page.offset = value.parse().map_err(|_| bad())?,
            "limit" => {
                page.limit = value
                    .parse()
                    .ok()
                    .filter(|l| (1..=MAX_LIMIT).contains(l))
                    .ok_or_else(bad)?
            }
            _ => {
                return Err((
                    StatusCode::BAD_REQUEST,
                    format!("unknown query parameter `{key}`; the lists take offset and limit"),
                ))
            }
        }
    }
    Ok(page)
}

/// `?generation=KEY&workload=W[&fixture=F][&name=SPEC][&limit=N]`, percent-decoded. A
/// missing generation or workload is left empty: the page shows its form, the API says
/// what to add.
pub(super) fn history_query(raw: Option<&str>) -> Result<HistoryQuery, (StatusCode, String)> {
    let mut query = HistoryQuery::default();
    for pair in raw.unwrap_or_default().split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = percent_decode(value).ok_or_else(|| {
            (
                StatusCode::BAD_REQUEST,
                format!("`{key}`'s value is not percent-encoded UTF-8"),
            )
        })?;
        let text = || Some(value.clone()).filter(|v| !v.is_empty());
        match key {
            "generation" => query.generation = value.clone(),
            "workload" => query.workload = value.clone(),
            "fixture" => query.fixture = text(),
            "name" => query.name = text(),
            "limit" => {
                query.limit = value.parse().ok().filter(|l| *l >= 1).ok_or_else(|| {
                    (
                        StatusCode::BAD_REQUEST,
                        format!("`limit={value}` is not a number of runs (1 or more)"),
                    )
                })?
            }
            _ => {
                return Err((
                    StatusCode::BAD_REQUEST,
                    format!("unknown query parameter `{key}`; a history takes generation, workload, fixture, name and limit"),
                ))
            }
        }
    }
    Ok(query)
}

/// A query value with `+` as space and `%XX` as that byte; `None` when it is not UTF-8 or
/// a `%` is not followed by two hex digits.
fn percent_decode(value: &str) -> Option<String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_history_query_is_percent_decoded_and_unknown_keys_refused() {
        let query = history_query(Some(
            "generation=cpu%2Fx86-64-v4%2Fzen4&workload=float_ssim&fixture=&name=m+1&limit=5",
        ))
        .unwrap();
        assert_eq!(query.generation, "cpu/x86-64-v4/zen4");
        assert_eq!(query.workload, "float_ssim");
        assert_eq!(query.fixture, None, "an empty fixture is every fixture");
        assert_eq!(query.name.as_deref(), Some("m 1"));
        assert_eq!(query.limit, 5);
        assert!(history_query(Some("generation=%ZZ")).is_err());
        assert!(history_query(Some("generation=%C3")).is_err(), "not UTF-8");
        assert!(history_query(Some("limit=0")).is_err());
        let (status, message) = history_query(Some("sort=date")).unwrap_err();
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(message.contains("generation, workload"), "{message}");
    }

    #[test]
    fn reads_offset_and_limit_and_refuses_the_rest() {
        assert_eq!(
            page_query(Some("offset=50&limit=10")).unwrap(),
            PageQuery {
                offset: 50,
                limit: 10
            }
        );
        assert_eq!(page_query(None).unwrap().limit, DEFAULT_LIMIT);
        assert!(page_query(Some("limit=0")).is_err());
        assert!(page_query(Some("limit=100000")).is_err());
        assert!(page_query(Some("offset=-1")).is_err());
        let (status, message) = page_query(Some("sort=name")).unwrap_err();
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(message.contains("offset and limit"), "{message}");
    }
}
