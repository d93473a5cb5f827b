//! How much free text abfleet keeps from others (docs/security.md, "Length limits"): a
//! reason or a note an operator gives (a revocation's, a cancellation's, a trigger's) is
//! refused past [`MAX_REASON_CHARS`]; what arrives without a person to tell (an agent's
//! error text or log line, a pull request's title in a trigger note) is clipped to its
//! limit where it is stored, with a mark that says how much was cut.

/// A reason or a note: a revocation's, a cancellation's, a trigger's.
pub const MAX_REASON_CHARS: usize = 1_000;
/// One error text or log line an agent sends (a build's, a side's, a job's).
pub const MAX_ERROR_CHARS: usize = 4_000;
/// The tail of a log an agent sends with a failure (a build log's, a binary's stderr).
pub const MAX_TAIL_CHARS: usize = 16_000;

/// Clips `text` to `max_chars` characters (the mark that says so included); whether it was
/// clipped.
pub fn clip(text: &mut String, max_chars: usize) -> bool {
    let total = text.chars().count();
    if total <= max_chars {
        return false;
    }
    // The mark is ASCII and at most this long.
    let mark = |cut: usize| format!("… [{cut} more characters clipped]");
    let keep = max_chars.saturating_sub(mark(total).chars().count());
    let end = text
        .char_indices()
        .nth(keep)
        .map_or(text.len(), |(at, _)| at);
    text.truncate(end);
    text.push_str(&mark(total - keep));
    true
}

/// Clips an optional text; whether it was clipped.
pub fn clip_option(text: &mut Option<String>, max_chars: usize) -> bool {
    text.as_mut().is_some_and(|text| clip(text, max_chars))
}

/// `Ok` when `text` (an operator's `what`) is within `max_chars`; otherwise what to do.
pub fn check_length(what: &str, text: &str, max_chars: usize) -> Result<(), String> {
    let count = text.chars().count();
    if count <= max_chars {
        Ok(())
    } else {
        Err(format!(
            "{what} is {count} characters, over the limit of {max_chars}; shorten it (put the long story in a linked document)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_text_is_clipped_to_its_limit_with_a_mark_and_a_short_one_is_kept() {
        let mut short = "fine".to_string();
        assert!(!clip(&mut short, 10));
        assert_eq!(short, "fine");
        let mut long = "é".repeat(5_000);
        assert!(clip(&mut long, 1_000));
        assert_eq!(long.chars().count(), 1_000);
        assert!(long.starts_with("éé"), "{long}");
        let kept = long.chars().take_while(|c| *c == 'é').count();
        assert!(
            long.ends_with(&format!("… [{} more characters clipped]", 5_000 - kept)),
            "{long}"
        );
    }

    #[test]
    fn an_operators_text_over_the_limit_is_refused_naming_it() {
        assert!(check_length("the reason", "lost laptop", MAX_REASON_CHARS).is_ok());
        let err = check_length("the reason", &"x".repeat(1_000_001), MAX_REASON_CHARS).unwrap_err();
        assert!(
            err.contains("1000001 characters, over the limit of 1000"),
            "{err}"
        );
    }
}
