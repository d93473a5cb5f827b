//! The 1-minute load average, read around every cell (the fork records it as a confounder).

/// The 1-minute load average from `/proc/loadavg`, or NaN where the OS has none.
pub fn one_minute() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| parse(&text))
        .unwrap_or(f64::NAN)
}

fn parse(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_the_first_field() {
        assert_eq!(super::parse("0.52 0.58 0.59 1/189 12345\n"), Some(0.52));
        assert_eq!(super::parse(""), None);
    }

    #[test]
    fn reads_the_live_value_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(super::one_minute() >= 0.0);
        }
    }
}
