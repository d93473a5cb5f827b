//! The page shell every page shares: the document, its inline style sheet, the header.

use maud::{html, Markup, DOCTYPE};

/// What frames a page's body.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shell {
    /// The web view's links (runs, fleet, JSON); report.html has none.
    pub nav: bool,
    /// Reload the page this often (the runs and fleet lists; the run page is live instead).
    pub refresh_seconds: Option<u32>,
}

impl Shell {
    pub(crate) const REPORT_FILE: Shell = Shell {
        nav: false,
        refresh_seconds: None,
    };
    pub(crate) const LIVE_PAGE: Shell = Shell {
        nav: true,
        refresh_seconds: None,
    };
    pub(crate) const LIST_PAGE: Shell = Shell {
        nav: true,
        refresh_seconds: Some(15),
    };
}

/// A whole document: `title`, inline CSS, `body`. Nothing is loaded from elsewhere.
pub(crate) fn page(title: &str, shell: Shell, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                @if let Some(seconds) = shell.refresh_seconds {
                    meta http-equiv="refresh" content=(seconds);
                }
                title { (title) }
                style { (maud::PreEscaped(STYLE)) }
            }
            body {
                @if shell.nav {
                    nav {
                        a href="/" { "Runs" }
                        " · "
                        a href="/fleet" { "Fleet" }
                        " · "
                        a href="/history" { "History" }
                        " · "
                        a href="/api/runs" { "JSON" }
                    }
                }
                main { (body) }
            }
        }
    }
}

const STYLE: &str = r#"
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1b1b1b;
  margin: 0; background: #fafafa; }
main { max-width: 1100px; margin: 0 auto; padding: 1.2rem 1.5rem 3rem; background: #fff; }
nav { max-width: 1100px; margin: 0 auto; padding: .6rem 1.5rem; background: #263238; }
nav a { color: #eceff1; text-decoration: none; font-weight: 600; }
h1 { font-size: 1.45rem; margin: .2rem 0 .6rem; }
h2 { font-size: 1.2rem; margin: 2rem 0 .6rem; border-bottom: 2px solid #eceff1; padding-bottom: .2rem; }
h3 { font-size: 1.05rem; margin: 1.4rem 0 .5rem; }
code, .mono { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: .92em; }
dl.header { display: grid; grid-template-columns: max-content 1fr; gap: .25rem 1rem; margin: .5rem 0 1rem; }
dl.header dt { font-weight: 600; color: #455a64; }
dl.header dd { margin: 0; overflow-wrap: anywhere; }
table { border-collapse: collapse; margin: .4rem 0 .8rem; width: 100%; font-size: .93rem; }
th, td { border: 1px solid #cfd8dc; padding: .3rem .5rem; text-align: left; vertical-align: top; }
th { background: #eceff1; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.parity-fail td { background: #ffebee; }
tr.absent td { color: #616161; font-style: italic; }
.badge { display: inline-block; padding: .1rem .55rem; border-radius: .8rem; font-weight: 700; font-size: .9rem; }
.badge.ok { background: #e8f5e9; color: #1b5e20; }
.badge.fail { background: #ffebee; color: #b71c1c; }
.badge.neutral { background: #eceff1; color: #37474f; }
.fail-text { color: #b71c1c; font-weight: 600; }
figure { margin: .6rem 0 1.2rem; }
figure svg { width: 100%; height: auto; display: block; }
figcaption { font-size: .88rem; color: #455a64; margin-top: .3rem; }
ul.legend { list-style: none; padding: 0; display: flex; flex-wrap: wrap; gap: .4rem 1.2rem; font-size: .88rem; }
ul.legend li::before { content: ""; display: inline-block; width: .9rem; height: .9rem;
  background: var(--swatch); margin-right: .35rem; vertical-align: -.1rem; }
.note { background: #fff8e1; border-left: 4px solid #ffb300; padding: .5rem .8rem; margin: .8rem 0; }
.problems { background: #ffebee; border-left: 4px solid #d50000; padding: .5rem .8rem; margin: .8rem 0; }
.progress { width: 100%; height: 1.1rem; }
.muted { color: #616161; }
pre { background: #f5f5f5; padding: .6rem; overflow-x: auto; font-size: .85rem; }
"#;
