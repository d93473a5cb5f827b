//! `?offset=N&limit=N` of the paged lists, read by hand (the listener's axum has no query
//! extractor); a bad value is a 400 that says what is allowed.

use axum::http::StatusCode;

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

#[cfg(test)]
mod tests {
    use super::*;

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
