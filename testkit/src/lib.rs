//! Test-only doubles of GitHub for abfleet's tests (a dev-dependency; never a dependency of
//! a shipped crate). There is no GitHub in tests, so this crate brings the next best real
//! thing: GitHub's own published REST API description and its recorded webhook payloads,
//! pinned as npm packages in `tools/npm/package.json`.
//!
//! # The npm files
//!
//! Read from `<workspace>/tools/npm/node_modules/` (or `$ABFLEET_NPM_DIR/node_modules/`):
//! `@octokit/openapi/generated/api.github.com.json` (23.0.2) and
//! `@octokit/webhooks-examples/api.github.com/index.json` (7.6.1). `scripts/test` installs
//! them when missing; by hand: `npm ci --prefix tools/npm`. A missing file panics saying so:
//! no test skips for want of it.
//!
//! # `GitHubApiDouble`
//!
//! ```no_run
//! # async fn example() {
//! use abfleet_testkit::GitHubApiDouble;
//! let github = GitHubApiDouble::start().await; // http://127.0.0.1:PORT
//! // … point the client under test at github.url() and let it post …
//! assert_eq!(github.requests_to("repos/create-commit-status").len(), 1);
//! github.assert_every_request_valid();
//! # }
//! ```
//!
//! Every request is recorded ([`RecordedRequest`]) and checked against the description:
//! - method and path against the path templates (a `{param}` is one non-empty segment, or
//!   several where the operation marks it `x-multi-segment`; the template with the most
//!   literal segments wins). None: "METHOD PATH is not an operation of the GitHub REST API
//!   description", answered 404;
//! - path parameters against their schemas (a bad one: 404), query parameters known and of
//!   their type (unknown, repeated, missing required or mistyped: 422);
//! - headers: a `User-Agent` (else 403, as GitHub), `Authorization: Bearer …` or `token …`
//!   (else 401), an `Accept` of `application/vnd.github…` or `application/json` (else a
//!   problem, answered normally, as GitHub would);
//! - a JSON body against the operation's `requestBody` schema, `$ref`s resolved as met (no
//!   body where one is required, or not JSON: 400; breaks the schema: 422 with GitHub's
//!   `{"message": "Validation Failed", "errors": [...]}`). Problems read like
//!   `body.state: "passed" is not one of ["error","failure","pending","success"]`.
//!
//! A valid request is answered with the operation's lowest documented 2xx status and its
//! documented example (no body for a 204), except for the stateful overlay, which starts
//! from the same examples and overwrites what it remembers: issue comments (create, list,
//! get, update), pull requests (create — 422 when an open one has the same head and base —,
//! list with `state`/`head`/`base`, get, update), commit statuses (create, list, combined)
//! and issue labels (add). Lists page with `per_page`/`page` and GitHub's `Link` header.
//! [`GitHubApiDouble::fail_next`] and [`GitHubApiDouble::rate_limit_next`] make an
//! operation fail on purpose.
//!
//! Not checked: `format` and `pattern` (no regex engine here), `readOnly`/`writeOnly`,
//! `discriminator`, `not`, response bodies, non-JSON request bodies (raw uploads, markdown
//! text), and header or cookie parameters (GitHub's description declares none).
//!
//! # Webhook payloads
//!
//! [`webhook_example`]`("release", Some("published"))` and [`webhook_examples`]`("push")`
//! give GitHub's recorded deliveries.
#![forbid(unsafe_code)]

mod api_double;
mod description;
mod documented_response;
mod github_errors;
mod npm_files;
mod overlay;
mod parameters;
mod path_template;
mod rendered;
mod request_check;
mod schema;
#[cfg(test)]
mod self_check_tests;
mod state;
mod webhooks;

pub use api_double::{GitHubApiDouble, RecordedRequest};
pub use npm_files::{npm_dir, NPM_DIR_ENV};
pub use state::{CommitStatus, IssueComment, PullRequest, DEFAULT_LOGIN};
pub use webhooks::{webhook_example, webhook_examples};

/// How long reading, parsing and indexing GitHub's REST API description took in this
/// process (it loads it now if nothing did yet).
pub fn description_load_time() -> std::time::Duration {
    description::description().load_time
}
