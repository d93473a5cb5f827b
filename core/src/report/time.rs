//! UTC timestamps as text, by the `time` crate.

/// `2026-12-02T17:26:45Z` for Unix milliseconds (whole seconds, as the reports show them);
/// an instant outside years 0000-9999, which no clock gives, as `unix-ms:N`.
pub fn format_utc(unix_ms: i64) -> String {
    match time::OffsetDateTime::from_unix_timestamp(unix_ms.div_euclid(1000)) {
        Ok(at) if (0..=9999).contains(&at.year()) => format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
            at.year(),
            u8::from(at.month()),
            at.day(),
            at.hour(),
            at.minute(),
            at.second()
        ),
        _ => format!("unix-ms:{unix_ms}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_utc(1_788_365_205_000), "2026-09-02T16:06:45Z");
        assert_eq!(format_utc(951_782_400_000), "2000-02-29T00:00:00Z");
        // Before the epoch, milliseconds round down to the second as before.
        assert_eq!(format_utc(-1), "1969-12-31T23:59:59Z");
        assert_eq!(format_utc(i64::MAX), format!("unix-ms:{}", i64::MAX));
    }
}
