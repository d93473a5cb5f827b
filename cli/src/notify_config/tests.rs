use std::os::unix::fs::PermissionsExt;

use super::*;
use crate::config::ConfigFile;

fn write(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

fn notify_of(dir: &Path, toml: &str) -> Result<NotifyConfig, Vec<String>> {
    let path = write(
        dir,
        "coordinator.toml",
        &format!("[coordinator]\n{toml}"),
        0o644,
    );
    let file = ConfigFile::load(&path).map_err(|err| vec![err.to_string()])?;
    file.notify.expect("a [notify] table").load()
}

#[test]
fn two_endpoints_load_with_their_secrets_read_from_private_files_relative_to_the_config() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "slack-url",
        "https://hooks.slack.example/services/T0/B0/XYZ\n",
        0o600,
    );
    write(dir.path(), "alert-secret", "s3cret\n", 0o400);
    let config = notify_of(
        dir.path(),
        r#"
[notify]
report_url = "https://abfleet.example:8443"
retry_after_seconds = 0.5
[[notify.endpoint]]
name = "ops-slack"
format = "slack"
url_file = "slack-url"
events = ["parity_failure", "agent_lost"]
[[notify.endpoint]]
name = "dashboard"
format = "json"
url = "http://127.0.0.1:9/hook"
secret_file = "alert-secret"
"#,
    )
    .unwrap();
    assert_eq!(
        config.report_url.as_deref(),
        Some("https://abfleet.example:8443")
    );
    assert_eq!(config.retry_after, Duration::from_millis(500));
    assert_eq!(config.max_attempts, NotifyConfig::default().max_attempts);
    let [slack, json] = config.endpoints.as_slice() else {
        panic!("{:?}", config.endpoints)
    };
    assert_eq!(slack.url, "https://hooks.slack.example/services/T0/B0/XYZ");
    assert_eq!(
        slack.events,
        [AlertKind::ParityFailure, AlertKind::AgentLost]
    );
    assert_eq!(
        (json.format, json.secret.as_deref()),
        (PayloadFormat::Json, Some(b"s3cret".as_slice()))
    );
    assert!(json.events.is_empty(), "every alert");
}

#[test]
fn a_secret_others_may_read_is_refused_saying_how_to_fix_it() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "slack-url",
        "https://hooks.slack.example/services/SECRET",
        0o644,
    );
    let problems = notify_of(
        dir.path(),
        "[notify]\n[[notify.endpoint]]\nname = \"ops\"\nformat = \"slack\"\nurl_file = \"slack-url\"\n",
    )
    .unwrap_err();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("may be read by others (mode 644)")
            && problems[0].contains("chmod 600"),
        "{problems:?}"
    );
}

#[test]
fn every_bad_endpoint_is_named_and_a_url_is_never_repeated_past_its_host() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "secret", "x", 0o600);
    let problems = notify_of(
        dir.path(),
        r#"
[notify]
report_url = "abfleet.example"
[[notify.endpoint]]
name = "a b"
format = "xml"
url = "http://hooks.example.com/services/SECRET-PATH"
[[notify.endpoint]]
name = "slacky"
format = "slack"
url = "https://hooks.example.com/x"
secret_file = "secret"
events = ["parity", "slowdown"]
[[notify.endpoint]]
name = "twice"
format = "json"
[[notify.endpoint]]
name = "slacky"
format = "json"
url = "https://a.example/x"
"#,
    )
    .unwrap_err();
    let all = problems.join("\n");
    for expected in [
        "`report_url` `abfleet.example` is not an http(s) URL",
        "`name` must be letters, digits",
        "`format` `xml` is not `json` or `slack`",
        "plain http:// is allowed to loopback only",
        "`secret_file` signs generic JSON alerts",
        "`parity` is not an alert; use one of parity_failure",
        "`twice`: needs `url`, or `url_file`",
        "`slacky`: the name is used twice",
    ] {
        assert!(all.contains(expected), "missing `{expected}` in:\n{all}");
    }
    assert!(!all.contains("SECRET-PATH"), "{all}");
}

#[test]
fn an_unknown_key_in_notify_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let err = notify_of(dir.path(), "[notify]\nreport_uri = \"https://x.example\"\n").unwrap_err();
    assert!(err.join(" ").contains("report_uri"), "{err:?}");
}
