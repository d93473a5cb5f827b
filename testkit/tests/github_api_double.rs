//! The GitHub API double checked against what it promises: valid requests get the documented
//! answers, invalid ones are refused as GitHub would and listed as problems, and what a
//! caller creates can be found and updated again.

mod support;

use abfleet_testkit::GitHubApiDouble;
use serde_json::json;
use support::{github, send, GITHUB_HEADERS};

const SHA: &str = "6dcb09b5b57875f334f61aebed695e2e4193db5e";

fn status_path() -> String {
    format!("/repos/o/r/statuses/{SHA}")
}

#[tokio::test]
async fn a_valid_commit_status_is_accepted_with_the_documented_example() {
    let double = GitHubApiDouble::start().await;
    let body = json!({"state": "success", "context": "abfleet/perf", "description": "fork 1.2x faster",
                      "target_url": "https://example.com/runs/1"});
    let answer = github(&double.url(), "POST", &status_path(), Some(body.clone())).await;
    assert_eq!(answer.status, 201, "{}", answer.body);
    let created = answer.json();
    assert_eq!(created["state"], "success");
    assert_eq!(created["context"], "abfleet/perf");
    assert_eq!(created["description"], "fork 1.2x faster");
    assert_eq!(created["target_url"], "https://example.com/runs/1");
    // The rest is the description's example, as it is.
    assert_eq!(created["creator"]["login"], "octocat");
    assert_eq!(created["created_at"], "2012-07-20T01:19:13Z");
    double.assert_every_request_valid();

    let recorded = double.requests_to("repos/create-commit-status");
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].method, "POST");
    assert_eq!(recorded[0].path, status_path());
    assert_eq!(recorded[0].body, Some(body));
    assert_eq!(recorded[0].status, 201);
    assert_eq!(
        recorded[0].header("user-agent"),
        Some("abfleet-testkit-tests")
    );
    assert_eq!(
        double.commit_statuses("o", "r", SHA)[0].context,
        "abfleet/perf"
    );
}

#[tokio::test]
async fn a_status_state_outside_the_enum_is_refused_naming_the_field_and_the_allowed_values() {
    let double = GitHubApiDouble::start().await;
    let answer = github(
        &double.url(),
        "POST",
        &status_path(),
        Some(json!({"state": "passed"})),
    )
    .await;
    assert_eq!(answer.status, 422, "{}", answer.body);
    let refused = answer.json();
    assert_eq!(refused["message"], "Validation Failed");
    assert_eq!(refused["errors"][0]["field"], "state");
    assert_eq!(refused["errors"][0]["code"], "invalid");
    let problems = double.problems();
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].ends_with(
            r#"body.state: "passed" is not one of ["error","failure","pending","success"]"#
        ),
        "{problems:#?}"
    );
    assert!(
        problems[0].contains("(repos/create-commit-status)"),
        "{problems:#?}"
    );
    assert!(double.commit_statuses("o", "r", SHA).is_empty());
}

#[tokio::test]
async fn a_status_without_state_is_refused() {
    let double = GitHubApiDouble::start().await;
    let answer = github(
        &double.url(),
        "POST",
        &status_path(),
        Some(json!({"context": "abfleet/perf"})),
    )
    .await;
    assert_eq!(answer.status, 422, "{}", answer.body);
    assert_eq!(answer.json()["errors"][0]["code"], "missing_field");
    assert!(
        double.problems()[0].ends_with("body.state: is required but missing"),
        "{:#?}",
        double.problems()
    );

    let no_body = github(&double.url(), "POST", &status_path(), None).await;
    assert_eq!(no_body.status, 400);
    assert!(double.problems()[1].ends_with("sends no body, but the operation requires one"));
    let result = std::panic::catch_unwind(|| double.assert_every_request_valid());
    assert!(
        result.is_err(),
        "assert_every_request_valid must panic on problems"
    );
}

#[tokio::test]
async fn an_unknown_path_or_method_is_refused() {
    let double = GitHubApiDouble::start().await;
    let answer = github(
        &double.url(),
        "POST",
        "/repos/o/r/perf-results",
        Some(json!({})),
    )
    .await;
    assert_eq!(answer.status, 404);
    assert_eq!(answer.json()["message"], "Not Found");
    assert_eq!(
        double.problems(),
        vec!["POST /repos/o/r/perf-results is not an operation of the GitHub REST API description"]
    );
    let wrong_method = github(&double.url(), "DELETE", "/repos/o/r/pulls/1", None).await;
    assert_eq!(wrong_method.status, 404);
    assert!(
        double.problems()[1].contains("(that path is an operation for GET, PATCH only)"),
        "{:#?}",
        double.problems()
    );
    assert_eq!(double.requests()[0].operation_id, None);
}

#[tokio::test]
async fn missing_user_agent_authorization_and_accept_are_problems() {
    let double = GitHubApiDouble::start().await;
    let without_agent = [GITHUB_HEADERS[0], GITHUB_HEADERS[2]];
    let body = Some(json!({"state": "pending"}).to_string());
    let answer = send(
        &double.url(),
        "POST",
        &status_path(),
        &without_agent,
        body.clone(),
    )
    .await;
    assert_eq!(answer.status, 403);
    assert!(
        double.problems()[0].contains("no User-Agent header"),
        "{:#?}",
        double.problems()
    );

    let without_token = [GITHUB_HEADERS[0], GITHUB_HEADERS[1]];
    let answer = send(
        &double.url(),
        "POST",
        &status_path(),
        &without_token,
        body.clone(),
    )
    .await;
    assert_eq!(answer.status, 401);
    assert_eq!(answer.json()["message"], "Requires authentication");
    assert!(
        double.problems()[1].contains("no Authorization header"),
        "{:#?}",
        double.problems()
    );

    let basic = [
        GITHUB_HEADERS[0],
        GITHUB_HEADERS[1],
        ("Authorization", "Basic dXNlcjpwYXNz"),
    ];
    assert_eq!(
        send(&double.url(), "POST", &status_path(), &basic, body.clone())
            .await
            .status,
        401
    );

    let without_accept = [GITHUB_HEADERS[1], GITHUB_HEADERS[2]];
    let answer = send(&double.url(), "POST", &status_path(), &without_accept, body).await;
    assert_eq!(
        answer.status, 201,
        "GitHub answers without an Accept header too"
    );
    assert!(
        double.problems()[3].contains("GitHub recommends `Accept: application/vnd.github+json`")
    );
    assert_eq!(double.problems().len(), 4, "{:#?}", double.problems());
}

#[tokio::test]
async fn parameters_are_checked_against_their_schemas() {
    let double = GitHubApiDouble::start().await;
    let answer = github(&double.url(), "GET", "/repos/o/r/issues/abc/comments", None).await;
    assert_eq!(answer.status, 404);
    assert!(
        double.problems()[0].ends_with(r#"path parameter issue_number: "abc" is not an integer"#)
    );

    let answer = github(
        &double.url(),
        "GET",
        "/repos/o/r/pulls?state=merged&colour=red",
        None,
    )
    .await;
    assert_eq!(answer.status, 422);
    let problems = double.problems();
    assert!(
        problems[1].contains(r#"query parameter "colour" is not a parameter of this operation"#),
        "{problems:#?}"
    );
    assert!(
        problems[2]
            .ends_with(r#"query parameter state: "merged" is not one of ["open","closed","all"]"#),
        "{problems:#?}"
    );

    // `ref` is x-multi-segment: a branch ref spans segments.
    let answer = github(
        &double.url(),
        "GET",
        "/repos/o/r/commits/heads/main/status?per_page=10",
        None,
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(
        double.requests()[2].operation_id.as_deref(),
        Some("repos/get-combined-status-for-ref")
    );
    assert_eq!(double.problems().len(), 3);
}

#[tokio::test]
async fn a_comment_is_created_listed_and_updated() {
    let double = GitHubApiDouble::start().await;
    let url = double.url();
    let listed = github(&url, "GET", "/repos/o/r/issues/7/comments", None).await;
    assert_eq!(listed.status, 200);
    assert_eq!(listed.json(), json!([]), "none of the example's comments");

    let created = github(
        &url,
        "POST",
        "/repos/o/r/issues/7/comments",
        Some(json!({"body": "first"})),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let created = created.json();
    let id = created["id"].as_u64().expect("an id");
    assert_eq!(created["body"], "first");
    assert_eq!(
        created["html_url"],
        format!("https://github.com/o/r/issues/7#issuecomment-{id}")
    );
    assert_eq!(
        created["user"]["login"], "octocat",
        "the example's other fields stay"
    );

    let listed = github(&url, "GET", "/repos/o/r/issues/7/comments", None)
        .await
        .json();
    assert_eq!(listed.as_array().map(Vec::len), Some(1));
    assert_eq!(listed[0]["id"], id);
    assert_eq!(listed[0]["body"], "first");
    assert_eq!(
        github(&url, "GET", "/repos/o/r/issues/8/comments", None)
            .await
            .json(),
        json!([])
    );

    let path = format!("/repos/o/r/issues/comments/{id}");
    let updated = github(&url, "PATCH", &path, Some(json!({"body": "second"}))).await;
    assert_eq!(updated.status, 200, "{}", updated.body);
    assert_eq!(updated.json()["body"], "second");

    let listed = github(&url, "GET", "/repos/o/r/issues/7/comments", None)
        .await
        .json();
    assert_eq!(listed.as_array().map(Vec::len), Some(1));
    assert_eq!(listed[0]["id"], id);
    assert_eq!(listed[0]["body"], "second");
    assert_eq!(
        github(&url, "GET", &path, None).await.json()["body"],
        "second"
    );

    let missing = github(
        &url,
        "PATCH",
        "/repos/o/r/issues/comments/1",
        Some(json!({"body": "x"})),
    )
    .await;
    assert_eq!(missing.status, 404);
    assert_eq!(double.issue_comments("o", "r", 7).len(), 1);
    double.assert_every_request_valid();
}

#[tokio::test]
async fn lists_page_with_per_page_and_a_link_header() {
    let double = GitHubApiDouble::start().await;
    let url = double.url();
    for body in ["a", "b", "c"] {
        github(
            &url,
            "POST",
            "/repos/o/r/issues/1/comments",
            Some(json!({"body": body})),
        )
        .await;
    }
    let first = github(&url, "GET", "/repos/o/r/issues/1/comments?per_page=2", None).await;
    assert_eq!(first.json().as_array().map(Vec::len), Some(2));
    let link = first.header("link").expect("a Link header");
    assert!(
        link.contains(r#"/repos/o/r/issues/1/comments?per_page=2&page=2>; rel="next""#),
        "{link}"
    );
    let second = github(
        &url,
        "GET",
        "/repos/o/r/issues/1/comments?per_page=2&page=2",
        None,
    )
    .await
    .json();
    assert_eq!(second[0]["body"], "c");
    double.assert_every_request_valid();
}

#[tokio::test]
async fn a_pull_request_is_created_found_by_head_and_updated() {
    let double = GitHubApiDouble::start().await;
    let url = double.url();
    let body = json!({"title": "docs: benchmarks", "head": "abfleet-docs", "base": "main", "body": "numbers"});
    let created = github(&url, "POST", "/repos/o/r/pulls", Some(body.clone())).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let created = created.json();
    let number = created["number"].as_u64().expect("a number");
    assert_eq!(created["head"]["ref"], "abfleet-docs");
    assert_eq!(created["head"]["label"], "o:abfleet-docs");
    assert_eq!(created["base"]["ref"], "main");
    assert_eq!(created["state"], "open");

    let again = github(&url, "POST", "/repos/o/r/pulls", Some(body)).await;
    assert_eq!(
        again.status, 422,
        "an open pull request for that head exists"
    );
    assert_eq!(
        again.json()["errors"][0]["message"],
        "A pull request already exists for o:abfleet-docs."
    );

    let found = github(
        &url,
        "GET",
        "/repos/o/r/pulls?head=o:abfleet-docs&state=open",
        None,
    )
    .await
    .json();
    assert_eq!(found.as_array().map(Vec::len), Some(1));
    assert_eq!(found[0]["number"], number);
    let other = github(
        &url,
        "GET",
        "/repos/o/r/pulls?head=o:other&state=open",
        None,
    )
    .await
    .json();
    assert_eq!(other, json!([]));
    let closed = github(
        &url,
        "GET",
        "/repos/o/r/pulls?head=o%3Aabfleet-docs&state=closed",
        None,
    )
    .await
    .json();
    assert_eq!(closed, json!([]));

    let path = format!("/repos/o/r/pulls/{number}");
    let updated = github(
        &url,
        "PATCH",
        &path,
        Some(json!({"title": "docs: new numbers", "body": "more"})),
    )
    .await;
    assert_eq!(updated.status, 200, "{}", updated.body);
    assert_eq!(updated.json()["title"], "docs: new numbers");
    let fetched = github(&url, "GET", &path, None).await.json();
    assert_eq!(fetched["title"], "docs: new numbers");
    assert_eq!(fetched["body"], "more");
    assert_eq!(
        github(&url, "GET", "/repos/o/r/pulls/999", None)
            .await
            .status,
        404
    );
    assert_eq!(double.pull_requests("o", "r")[0].title, "docs: new numbers");
    double.assert_every_request_valid();
}

#[tokio::test]
async fn a_bare_branch_head_filter_and_a_missing_title_are_problems() {
    let double = GitHubApiDouble::start().await;
    let url = double.url();
    let untitled = github(
        &url,
        "POST",
        "/repos/o/r/pulls",
        Some(json!({"head": "b", "base": "main"})),
    )
    .await;
    assert_eq!(untitled.status, 422);
    github(
        &url,
        "POST",
        "/repos/o/r/pulls",
        Some(json!({"title": "t", "head": "b", "base": "main"})),
    )
    .await;
    let found = github(&url, "GET", "/repos/o/r/pulls?head=b", None)
        .await
        .json();
    assert_eq!(found, json!([]));
    let problems = double.problems();
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(
        problems[0].contains("body.title is required unless `issue` is given"),
        "{problems:#?}"
    );
    assert!(
        problems[1].contains(r#"head="b" is not `OWNER:BRANCH`"#),
        "{problems:#?}"
    );
}

#[tokio::test]
async fn statuses_are_listed_newest_first_and_combined() {
    let double = GitHubApiDouble::start().await;
    let url = double.url();
    for (state, context) in [
        ("pending", "abfleet/perf"),
        ("success", "abfleet/perf"),
        ("failure", "abfleet/parity"),
    ] {
        let answer = github(
            &url,
            "POST",
            &status_path(),
            Some(json!({"state": state, "context": context})),
        )
        .await;
        assert_eq!(answer.status, 201);
    }
    let listed = github(
        &url,
        "GET",
        &format!("/repos/o/r/commits/{SHA}/statuses"),
        None,
    )
    .await
    .json();
    let states: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|status| status["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["failure", "success", "pending"]);
    let combined = github(
        &url,
        "GET",
        &format!("/repos/o/r/commits/{SHA}/status"),
        None,
    )
    .await
    .json();
    assert_eq!(combined["state"], "failure");
    assert_eq!(combined["total_count"], 2);
    assert_eq!(combined["sha"], SHA);
    let none = github(&url, "GET", "/repos/o/r/commits/0000/status", None)
        .await
        .json();
    assert_eq!(
        (none["state"].as_str(), none["total_count"].as_u64()),
        (Some("pending"), Some(0))
    );
    double.assert_every_request_valid();
}

#[tokio::test]
async fn labels_are_added_and_returned_as_label_objects() {
    let double = GitHubApiDouble::start().await;
    let url = double.url();
    let added = github(
        &url,
        "POST",
        "/repos/o/r/issues/3/labels",
        Some(json!({"labels": ["performance"]})),
    )
    .await;
    assert_eq!(added.status, 200, "{}", added.body);
    let added = github(
        &url,
        "POST",
        "/repos/o/r/issues/3/labels",
        Some(json!({"labels": [{"name": "docs"}]})),
    )
    .await;
    let labels = added.json();
    let names: Vec<&str> = labels
        .as_array()
        .unwrap()
        .iter()
        .map(|label| label["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["performance", "docs"]);
    assert!(
        labels[0]["color"].is_string(),
        "the example's other fields stay"
    );
    double.assert_every_request_valid();

    // The description's schema has only the object form, though its prose mentions a bare array.
    let bare = github(
        &url,
        "POST",
        "/repos/o/r/issues/3/labels",
        Some(json!(["bug"])),
    )
    .await;
    assert_eq!(bare.status, 422);
    assert!(
        double.problems()[0].contains("matches none of oneOf's 1 alternatives"),
        "{:#?}",
        double.problems()
    );
    assert_eq!(double.issue_labels("o", "r", 3), ["performance", "docs"]);
}

#[tokio::test]
async fn fail_next_fails_an_operation_on_purpose_then_recovers() {
    let double = GitHubApiDouble::start().await;
    let url = double.url();
    double.fail_next("repos/create-commit-status", 502, 2);
    let body = json!({"state": "success"});
    assert_eq!(
        github(&url, "POST", &status_path(), Some(body.clone()))
            .await
            .status,
        502
    );
    assert_eq!(
        github(&url, "POST", &status_path(), Some(body.clone()))
            .await
            .status,
        502
    );
    assert!(
        double.commit_statuses("o", "r", SHA).is_empty(),
        "a failed request changes nothing"
    );
    assert_eq!(
        github(&url, "POST", &status_path(), Some(body.clone()))
            .await
            .status,
        201
    );

    double.rate_limit_next("issues/create-comment", 1, 7);
    let limited = github(
        &url,
        "POST",
        "/repos/o/r/issues/1/comments",
        Some(json!({"body": "x"})),
    )
    .await;
    assert_eq!(limited.status, 403);
    assert_eq!(limited.header("retry-after"), Some("7"));
    let statuses: Vec<u16> = double
        .requests()
        .iter()
        .map(|request| request.status)
        .collect();
    assert_eq!(statuses, [502, 502, 201, 403]);
    double.assert_every_request_valid();
}

#[tokio::test]
async fn any_other_operation_answers_its_documented_example() {
    let double = GitHubApiDouble::start().await;
    let answer = github(&double.url(), "GET", "/repos/o/r/releases/latest", None).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.json()["tag_name"], "v1.0.0");
    let deleted = github(
        &double.url(),
        "DELETE",
        "/repos/o/r/issues/comments/5",
        None,
    )
    .await;
    assert_eq!((deleted.status, deleted.body.as_str()), (204, ""));
    double.assert_every_request_valid();
}

#[test]
#[should_panic(expected = "is not an operationId")]
fn an_unknown_operation_id_is_refused() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let double = runtime.block_on(GitHubApiDouble::start());
    double.fail_next("repos/create-status", 502, 1);
}

#[test]
fn the_description_loads_once_and_quickly_enough() {
    let load_time = abfleet_testkit::description_load_time();
    eprintln!("GitHub's REST API description read, parsed and indexed in {load_time:?}");
    assert!(load_time.as_secs() < 30, "{load_time:?}");
}
