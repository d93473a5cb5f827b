//! GitHub's recorded webhook payloads (`@octokit/webhooks-examples`' `api.github.com/
//! index.json`: a list of events, each with its `name`, `actions` and `examples`), read once
//! per process.

use std::sync::OnceLock;

use serde_json::Value;

use crate::npm_files::{read_npm_file, WEBHOOK_EXAMPLES};

/// Every recorded payload of `event` (`release`, `push`, `pull_request`…), in the package's
/// order; empty when the package has no such event.
pub fn webhook_examples(event: &str) -> Vec<Value> {
    find_event(event)
        .and_then(|definition| definition["examples"].as_array())
        .cloned()
        .unwrap_or_default()
}

/// The first recorded payload of `event` whose `action` is `action` (any payload when
/// `None`). Panics naming the events or actions there are when none matches.
pub fn webhook_example(event: &str, action: Option<&str>) -> Value {
    let Some(definition) = find_event(event) else {
        panic!(
            "no webhook event {event:?} in {WEBHOOK_EXAMPLES}; its events: {}",
            event_names().join(", ")
        );
    };
    let examples = definition["examples"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let found = examples
        .iter()
        .find(|example| action.is_none_or(|action| example["action"] == action));
    match found {
        Some(example) => example.clone(),
        None => {
            let mut actions: Vec<&str> = examples
                .iter()
                .filter_map(|example| example["action"].as_str())
                .collect();
            actions.sort_unstable();
            actions.dedup();
            panic!(
                "no recorded {event:?} webhook with action {action:?}; its recorded payloads have \
                 actions: {} (the event declares: {})",
                if actions.is_empty() {
                    "none".to_string()
                } else {
                    actions.join(", ")
                },
                definition["actions"]
            );
        }
    }
}

fn definitions() -> &'static [Value] {
    static DEFINITIONS: OnceLock<Vec<Value>> = OnceLock::new();
    DEFINITIONS.get_or_init(|| {
        let bytes = read_npm_file(WEBHOOK_EXAMPLES);
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|error| panic!("failed to parse {WEBHOOK_EXAMPLES}: {error}"))
    })
}

fn find_event(event: &str) -> Option<&'static Value> {
    definitions()
        .iter()
        .find(|definition| definition["name"] == event)
}

fn event_names() -> Vec<&'static str> {
    definitions()
        .iter()
        .filter_map(|definition| definition["name"].as_str())
        .collect()
}
