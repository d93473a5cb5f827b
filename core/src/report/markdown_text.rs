//! A supplied string (a spec's or a workload's name, a PR title or trigger note, a hostname,
//! a CPU model, a reason, a tool's message) written into Markdown (issue 23): report.md,
//! the fork's docs section and the comparisons are rendered by GitHub and by docs sites,
//! which pass raw HTML through, so `<img src=x onerror=…>` in a PR title was markup. Every
//! writer of a supplied string goes through [`text`] (running text and table cells) or
//! [`code`] (a name in a code span), which leave no `<`, `>` or `&` that markup would read,
//! no `|` or line break that ends a table cell, no `[`…`]` that makes a link or an image,
//! and no control character; or through [`code_block`] (a build log), whose fence the text
//! cannot close. Backticks in running text are left alone: the messages abfleet writes
//! quote names in code spans, and a stray one only changes how text looks (a `<` is an
//! entity either way). An `@name` gets a zero-width space after its `@` (as an entity), so
//! GitHub pings nobody (issue 38). Free text that is not abfleet's own sentence — an agent's
//! error, a tool's message — goes through [`prose`], which also escapes Markdown's emphasis,
//! heading and code marks, so it shows as written.

/// `supplied` as Markdown inline text, also safe as a table cell: `<`, `>` and `&` as
/// entities; `\`, `|`, `[`, `]` escaped; line breaks and tabs as spaces; other control
/// characters and bidirectional overrides as U+FFFD.
pub fn text(supplied: &str) -> String {
    inline(supplied, false)
}

/// [`text`]; with `marks`, Markdown's emphasis, heading and code marks escaped too.
fn inline(supplied: &str, marks: bool) -> String {
    let mut out = String::with_capacity(supplied.len());
    let mut chars = supplied.chars().peekable();
    let mut previous: Option<char> = None;
    while let Some(c) = chars.next() {
        // GitHub reads `@name` as a mention after a space or punctuation, not inside a word
        // (`kernel@sm_120`, `user@host`).
        let starts_mention = c == '@'
            && previous.is_none_or(|p| !(p.is_alphanumeric() || p == '_' || p == '`'))
            && chars.peek().is_some_and(char::is_ascii_alphanumeric);
        previous = Some(c);
        match c {
            '@' if starts_mention => out.push_str("@&#8203;"),
            '*' | '_' | '~' | '`' | '#' | '!' if marks => {
                out.push('\\');
                out.push(c);
            }
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\\' | '|' | '[' | ']' => {
                out.push('\\');
                out.push(c);
            }
            '\n' | '\r' | '\t' => out.push(' '),
            c if is_hidden_control(c) => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// `supplied` (an agent's error, a tool's message) as Markdown inline text that shows as
/// written: [`text`], with `*`, `_`, `~`, `` ` ``, `#` and `!` escaped too.
pub fn prose(supplied: &str) -> String {
    inline(supplied, true)
}

/// `supplied` as a code span (`` `name` ``) when a code span shows it as written and no
/// renderer could read markup in it (an `&` is fine: a code span decodes no entity);
/// otherwise as [`text`], which shows it as written outside one (inside a code span an
/// entity or a `\|` would show as typed).
pub fn code(supplied: &str) -> String {
    let plain = !supplied.is_empty()
        && !supplied.starts_with(' ')
        && !supplied.ends_with(' ')
        && !supplied
            .chars()
            .any(|c| matches!(c, '<' | '>' | '`' | '|' | '\\') || is_hidden_control(c));
    if plain {
        format!("`{supplied}`")
    } else {
        text(supplied)
    }
}

/// `supplied` (a build log's tail) as a fenced code block, whose content Markdown never
/// reads as markup: the fence is longer than any run of backticks inside, so the text cannot
/// close it; control characters but line breaks and tabs (a compiler's colours) as U+FFFD.
pub fn code_block(supplied: &str) -> String {
    let mut longest_run = 0;
    let mut run = 0;
    for c in supplied.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest_run = longest_run.max(run);
    }
    let fence = "`".repeat((longest_run + 1).max(3));
    let body: String = supplied
        .chars()
        .map(|c| match c {
            '\n' | '\t' => c,
            c if is_hidden_control(c) => '\u{fffd}',
            c => c,
        })
        .collect();
    format!("{fence}\n{body}\n{fence}\n")
}

/// A control character, or a Unicode mark that reorders or hides text (bidirectional
/// embeddings, overrides and isolates): what no supplied text may bring to a reader raw.
pub fn is_hidden_control(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    const TITLE: &str = "<img src=x onerror=alert(1)>|x";

    #[test]
    fn html_and_table_breakers_become_text() {
        assert_eq!(text(TITLE), "&lt;img src=x onerror=alert(1)&gt;\\|x");
        assert_eq!(code(TITLE), text(TITLE));
        assert_eq!(text("a & b\nc\r\td"), "a &amp; b c  d");
        assert_eq!(
            text("![x](https://evil.example) `x` a\\|b"),
            "!\\[x\\](https://evil.example) `x` a\\\\\\|b"
        );
        assert_eq!(text("bench\u{1b}[2J\u{7}"), "bench\u{fffd}\\[2J\u{fffd}");
    }

    #[test]
    fn a_mention_pings_nobody_and_markdown_in_prose_shows_as_written() {
        assert_eq!(text("cc @maintainers"), "cc @&#8203;maintainers");
        assert_eq!(text("a @ b, x@"), "a @ b, x@");
        assert_eq!(text("psnr@sm_120 me@host"), "psnr@sm_120 me@host");
        assert_eq!(text("(@team)"), "(@&#8203;team)");
        assert_eq!(
            prose("**boom** _x_ ~~y~~ `z` # h ![i](u) @team"),
            "\\*\\*boom\\*\\* \\_x\\_ \\~\\~y\\~\\~ \\`z\\` \\# h \\!\\[i\\](u) @&#8203;team"
        );
    }

    #[test]
    fn a_log_cannot_close_its_code_block() {
        assert_eq!(code_block("cc -O2\nerror"), "```\ncc -O2\nerror\n```\n");
        assert_eq!(
            code_block("```\n<img src=x>\n\u{1b}[31m"),
            "````\n```\n<img src=x>\n\u{fffd}[31m\n````\n"
        );
    }

    #[test]
    fn a_plain_name_keeps_its_code_span() {
        assert_eq!(code("bbb_4k"), "`bbb_4k`");
        assert_eq!(
            code("x86_64:skylake (recorded)"),
            "`x86_64:skylake (recorded)`"
        );
        assert_eq!(
            code("cd /w && vmaf -o 'out.json'"),
            "`cd /w && vmaf -o 'out.json'`"
        );
        assert_eq!(code("a`b"), "a`b");
        assert_eq!(code("a|b"), "a\\|b");
        assert_eq!(code(""), "");
    }
}
