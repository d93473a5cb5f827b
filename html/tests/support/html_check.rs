//! HTML as a browser's parser reads it: html5ever's tree builder with exact errors. Shared by
//! the html crate's tests (report.html from a stored report) and the cli's (report.html of
//! real runs, the web view's pages served by a real coordinator).

use html5ever::tendril::TendrilSink;
use html5ever::tree_builder::TreeBuilderOpts;
use html5ever::{parse_document, ParseOpts};
use markup5ever_rcdom::RcDom;

/// Parses `html` as a browser would; returns the document and every parse error.
pub fn parse(html: &str) -> (RcDom, Vec<String>) {
    let opts = ParseOpts {
        tree_builder: TreeBuilderOpts {
            exact_errors: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let dom = parse_document(RcDom::default(), opts).one(html);
    let errors = dom.errors.borrow().iter().map(|e| e.to_string()).collect();
    (dom, errors)
}
