//! Git URLs compared by the repository they name: the milestone spec, a sweep spec and a
//! webhook's payload may spell one repository as `https://github.com/o/r.git`,
//! `git@github.com:O/r`, `ssh://git@github.com:22/o/r/` or a local path, and a trigger must
//! see them as the same.

/// The repository a URL names, for comparing: lowercase, without the scheme, user, port,
/// trailing `/` and `.git`, the scp-like `host:path` written `host/path`
/// (`github.com/o/r`). A local path stays a path.
pub(crate) fn repository_key(url: &str) -> String {
    let url = url.trim().trim_end_matches('/');
    let url = url.strip_suffix(".git").unwrap_or(url);
    let (rest, had_scheme) = match url.split_once("://") {
        Some((_, rest)) => (rest, true),
        None => (url, false),
    };
    // `user@` before the host (never in a local path's first component).
    let first_slash = rest.find('/').unwrap_or(rest.len());
    let rest = match rest[..first_slash].rfind('@') {
        Some(at) => &rest[at + 1..],
        None => rest,
    };
    let first_slash = rest.find('/').unwrap_or(rest.len());
    let key = match rest[..first_slash].split_once(':') {
        // `host:22/path` after a scheme: the port goes.
        Some((host, port)) if had_scheme && port.bytes().all(|b| b.is_ascii_digit()) => {
            format!("{host}{}", &rest[first_slash..])
        }
        // scp-like `host:owner/name`.
        Some((host, path)) if !had_scheme => format!("{host}/{path}{}", &rest[first_slash..]),
        _ => rest.to_string(),
    };
    key.to_lowercase()
}

/// Whether two git URLs name the same repository.
pub(crate) fn same_repository_url(a: &str, b: &str) -> bool {
    repository_key(a) == repository_key(b)
}

/// Whether a git URL names the repository `owner/name` (as a code host's payload names it).
pub(crate) fn names_repository(url: &str, full_name: &str) -> bool {
    let full_name = full_name.trim_matches('/').to_lowercase();
    !full_name.is_empty() && repository_key(url).ends_with(&format!("/{full_name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_repository_spelled_every_way_is_one_key() {
        for url in [
            "https://github.com/Lusoris/vmaf.git",
            "https://github.com/lusoris/vmaf/",
            "http://github.com/lusoris/vmaf",
            "git@github.com:lusoris/vmaf.git",
            "ssh://git@github.com/lusoris/vmaf.git",
            "ssh://git@github.com:22/lusoris/vmaf",
            "https://user@github.com/lusoris/vmaf",
        ] {
            assert_eq!(repository_key(url), "github.com/lusoris/vmaf", "{url}");
        }
        assert_eq!(repository_key("/srv/git/Fork.git"), "/srv/git/fork");
        assert_eq!(repository_key("file:///srv/git/fork"), "/srv/git/fork");
    }

    #[test]
    fn urls_name_the_same_repository_or_another() {
        for (a, b, same) in [
            (
                "https://github.com/lusoris/vmaf.git",
                "https://github.com/Lusoris/vmaf/",
                true,
            ),
            // The milestone spec may name the fork over SSH and the sweep spec over HTTPS.
            (
                "git@github.com:lusoris/vmaf.git",
                "https://github.com/lusoris/vmaf",
                true,
            ),
            (
                "https://github.com/lusoris/vmaf.git",
                "https://github.com/Netflix/vmaf.git",
                false,
            ),
            (
                "https://github.com/lusoris/vmaf",
                "https://gitlab.com/lusoris/vmaf",
                false,
            ),
            ("/srv/git/fork", "/srv/git/fork2", false),
        ] {
            assert_eq!(same_repository_url(a, b), same, "{a} ~ {b}");
        }
    }

    #[test]
    fn a_payloads_full_name_matches_on_whole_components() {
        for (url, full_name, names) in [
            ("https://github.com/Netflix/vmaf.git", "netflix/vmaf", true),
            ("git@github.com:Netflix/vmaf", "Netflix/vmaf", true),
            (
                "ssh://git@github.com:22/netflix/vmaf.git",
                "Netflix/vmaf",
                true,
            ),
            (
                "https://github.com/xNetflix/vmaf.git",
                "Netflix/vmaf",
                false,
            ),
            (
                "https://github.com/Netflix/vmaf-x.git",
                "Netflix/vmaf",
                false,
            ),
            ("https://github.com/Netflix/vmaf.git", "", false),
        ] {
            assert_eq!(
                names_repository(url, full_name),
                names,
                "{url} ~ {full_name}"
            );
        }
    }
}
