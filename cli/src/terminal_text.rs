//! Text that came from elsewhere (an agent's inventory, a PR title, a spec, a coordinator's
//! error) made safe to print on the operator's terminal (issue 23): every control character
//! and bidirectional override is shown escaped (`\u{1b}`), so a hostname cannot clear the
//! screen, ring the bell, move the cursor, retitle the window or reorder what is shown.
//! [`visible`] keeps line breaks and tabs (a document, a report, a build log);
//! [`visible_cell`] escapes them too (a table cell, a progress line).

use std::borrow::Cow;

/// `text` with every character a terminal would act on, except `\n` and `\t`, shown escaped.
pub fn visible(text: &str) -> Cow<'_, str> {
    escape_where(text, |c| !matches!(c, '\n' | '\t') && acts_on_terminal(c))
}

/// `text` as one line: every character a terminal would act on, `\n` and `\t` included,
/// shown escaped.
pub fn visible_cell(text: &str) -> Cow<'_, str> {
    escape_where(text, acts_on_terminal)
}

/// C0 and C1 controls (ESC, BEL, CR, backspace, CSI …), DEL, and the Unicode marks that
/// reorder or hide text (bidirectional embeddings, overrides and isolates).
fn acts_on_terminal(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn escape_where(text: &str, escaped: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(&escaped) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if escaped(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_shown_not_sent() {
        let hostname = "bench\u{1b}[2J\u{7}\r-7\u{9b}31m\u{202e}txt.exe";
        let shown = visible(hostname);
        assert_eq!(
            shown,
            "bench\\u{1b}[2J\\u{7}\\u{d}-7\\u{9b}31m\\u{202e}txt.exe"
        );
        assert!(!shown.chars().any(acts_on_terminal));
        assert_eq!(visible_cell(hostname), shown);
    }

    #[test]
    fn line_breaks_stay_in_documents_and_leave_cells() {
        assert_eq!(visible("a\nb\tc\rd"), "a\nb\tc\\u{d}d");
        assert_eq!(visible_cell("a\nb\tc"), "a\\u{a}b\\u{9}c");
    }

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        let text = "bench-7 · x86_64 — 1.03x [0.99–1.05]";
        assert!(matches!(visible(text), Cow::Borrowed(t) if t == text));
        assert!(matches!(visible_cell(text), Cow::Borrowed(t) if t == text));
    }
}
