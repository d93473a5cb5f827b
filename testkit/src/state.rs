//! What the double remembers between requests, so a caller can find and update what it
//! created: issue comments, pull requests, commit statuses and issue labels, per repository.
//! Owner and repository names compare case-insensitively, as GitHub's do.

/// A comment made with `issues/create-comment`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssueComment {
    pub owner: String,
    pub repo: String,
    pub issue_number: u64,
    pub id: u64,
    pub body: String,
    /// The login of whoever wrote it: the identity of the token that made it, or the
    /// author a test planted it as (`plant_comment`).
    pub author: String,
}

/// A pull request made with `pulls/create`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    pub owner: String,
    pub repo: String,
    pub number: u64,
    pub id: u64,
    /// `OWNER:BRANCH`, as `pulls/list`'s `head` filter takes it.
    pub head_label: String,
    pub head_ref: String,
    pub base_ref: String,
    pub title: String,
    pub body: Option<String>,
    /// `open` or `closed`.
    pub state: String,
    pub draft: bool,
    /// What `head.sha` answers instead of the documented example (`set_pull_head`).
    pub head_sha: Option<String>,
}

/// A status made with `repos/create-commit-status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitStatus {
    pub owner: String,
    pub repo: String,
    pub sha: String,
    pub id: u64,
    /// `error`, `failure`, `pending` or `success`.
    pub state: String,
    pub context: String,
    pub description: Option<String>,
    pub target_url: Option<String>,
}

/// Everything remembered.
#[derive(Debug, Default)]
pub(crate) struct GitHubState {
    last_id: u64,
    /// Issue and pull request numbers per repository (they share one sequence on GitHub).
    last_numbers: Vec<(String, String, u64)>,
    pub(crate) comments: Vec<IssueComment>,
    pub(crate) pull_requests: Vec<PullRequest>,
    pub(crate) statuses: Vec<CommitStatus>,
    /// (owner, repo, issue number, label name), in the order added.
    pub(crate) labels: Vec<(String, String, u64, String)>,
    /// (token, login): who a token is (`users/get-authenticated`, a comment's author).
    pub(crate) logins: Vec<(String, String)>,
}

/// Who a token is when a test did not say: the documented example user's login.
pub const DEFAULT_LOGIN: &str = "octocat";

/// Whether `(owner, repo)` names the same repository as the record's.
pub(crate) fn same_repository(
    owner: &str,
    repo: &str,
    other_owner: &str,
    other_repo: &str,
) -> bool {
    owner.eq_ignore_ascii_case(other_owner) && repo.eq_ignore_ascii_case(other_repo)
}

impl GitHubState {
    /// The login of `token` (`DEFAULT_LOGIN` for a token no test named).
    pub(crate) fn login_of(&self, token: &str) -> String {
        self.logins
            .iter()
            .find(|(known, _)| known == token)
            .map_or_else(|| DEFAULT_LOGIN.to_string(), |(_, login)| login.clone())
    }

    /// A new id, unique across every kind of record (GitHub's are large; so are these).
    pub(crate) fn next_id(&mut self) -> u64 {
        self.last_id += 1;
        1_000_000 + self.last_id
    }

    /// The repository's next issue or pull request number, from 1.
    pub(crate) fn next_number(&mut self, owner: &str, repo: &str) -> u64 {
        let existing = self
            .last_numbers
            .iter_mut()
            .find(|(known_owner, known_repo, _)| {
                same_repository(owner, repo, known_owner, known_repo)
            });
        match existing {
            Some((_, _, last)) => {
                *last += 1;
                *last
            }
            None => {
                self.last_numbers
                    .push((owner.to_string(), repo.to_string(), 1));
                1
            }
        }
    }

    /// The label names of an issue or pull request, in the order added.
    pub(crate) fn labels_on(&self, owner: &str, repo: &str, issue_number: u64) -> Vec<String> {
        self.labels
            .iter()
            .filter(|(label_owner, label_repo, number, _)| {
                *number == issue_number && same_repository(owner, repo, label_owner, label_repo)
            })
            .map(|(_, _, _, name)| name.clone())
            .collect()
    }

    /// Adds labels an issue does not have yet.
    pub(crate) fn add_labels(
        &mut self,
        owner: &str,
        repo: &str,
        issue_number: u64,
        names: &[String],
    ) {
        for name in names {
            let known = self.labels_on(owner, repo, issue_number);
            if !known.iter().any(|known| known.eq_ignore_ascii_case(name)) {
                self.labels.push((
                    owner.to_string(),
                    repo.to_string(),
                    issue_number,
                    name.clone(),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_count_per_repository_and_ids_are_unique() {
        let mut state = GitHubState::default();
        assert_eq!(state.next_number("o", "r"), 1);
        assert_eq!(state.next_number("O", "R"), 2);
        assert_eq!(state.next_number("o", "other"), 1);
        let first = state.next_id();
        assert_ne!(first, state.next_id());
    }

    #[test]
    fn a_label_is_added_once() {
        let mut state = GitHubState::default();
        state.add_labels("o", "r", 3, &["perf".to_string(), "docs".to_string()]);
        state.add_labels("o", "r", 3, &["Perf".to_string()]);
        assert_eq!(state.labels_on("o", "r", 3), vec!["perf", "docs"]);
        assert!(state.labels_on("o", "r", 4).is_empty());
    }
}
