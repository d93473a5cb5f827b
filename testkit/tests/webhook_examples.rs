//! GitHub's recorded webhook payloads, as the events abfleet reacts to will use them.

use abfleet_testkit::{webhook_example, webhook_examples};

#[test]
fn a_published_release_has_its_tag_name() {
    let release = webhook_example("release", Some("published"));
    assert_eq!(release["action"], "published");
    assert!(release["release"]["tag_name"].is_string(), "{release}");
    assert_eq!(
        webhook_example("release", Some("prereleased"))["release"]["prerelease"],
        true
    );
}

#[test]
fn an_opened_pull_request_has_its_head_sha() {
    let opened = webhook_example("pull_request", Some("opened"));
    assert!(
        opened["pull_request"]["head"]["sha"].is_string(),
        "{opened}"
    );
    for action in ["synchronize", "labeled"] {
        assert_eq!(
            webhook_example("pull_request", Some(action))["action"],
            action
        );
    }
    assert!(webhook_example("pull_request", Some("labeled"))["label"]["name"].is_string());
}

#[test]
fn push_and_tag_creation_payloads_are_there() {
    let pushes = webhook_examples("push");
    assert!(!pushes.is_empty());
    assert!(pushes
        .iter()
        .all(|push| push["ref"].is_string() && push.get("action").is_none()));
    let created = webhook_example("create", None);
    assert_eq!(created["ref_type"], "tag");
    assert!(webhook_examples("no_such_event").is_empty());
}

#[test]
#[should_panic(expected = "its recorded payloads have actions:")]
fn an_action_without_a_recording_names_those_there_are() {
    webhook_example("release", Some("exploded"));
}
