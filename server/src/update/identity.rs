//! Whose release a package index offers: the updater installs only releases whose index
//! metadata names roost's own repository.
//!
//! A package name proves nothing (the crates.io name `roost` belongs to an unrelated
//! project, and an unclaimed name goes to whoever publishes first), so before a release is
//! chosen or installed, every repository its index entry names must be [`REPOSITORY`]:
//!
//! - the crate's `repository` (crates.io: the one of its latest publish),
//! - the version's own `repository` (crates.io records it per version),
//! - the repository of `trustpub_data`, when crates.io says the version was published by
//!   trusted publishing (that one is written by crates.io from the CI's identity token,
//!   not by the publisher).
//!
//! At least one must be given; a release naming none is refused too. Two URLs name the
//! same repository when they are equal after [`normalise`]: only the scheme's and host's
//! case, one trailing `/` and one trailing `.git` are ignored. Nothing looser: another
//! host, owner or repository, an `http://` URL, a port, a query or a path of different
//! case is another repository.
//!
//! The `repository` a publisher declares is not authenticated: a stranger could claim
//! roost's. This check keeps out an unrelated project that happens to own the name; a
//! release signature (`--update-public-key`, see [`super::signature`]) is what proves a
//! release is roost's.

use serde::Deserialize;

/// roost's repository, compiled in from the workspace's `repository` key.
pub const REPOSITORY: &str = env!("CARGO_PKG_REPOSITORY");

/// crates.io's `versions[].trustpub_data`: who published a version by trusted publishing.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, Deserialize)]
pub struct TrustedPublisher {
    /// "github", "gitlab", …
    #[serde(default)]
    pub provider: String,
    /// GitHub: `owner/repo`.
    #[serde(default)]
    pub repository: Option<String>,
    /// GitLab: `group/project`.
    #[serde(default)]
    pub project_path: Option<String>,
}

/// `url` with the case of its scheme and host folded and one trailing `/` and `.git`
/// removed; `None` when it is not an `https://` URL.
pub fn normalise(url: &str) -> Option<String> {
    let url = url.trim();
    let (scheme, rest) = url.split_once("://")?;
    if !scheme.eq_ignore_ascii_case("https") {
        return None;
    }
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    if host.is_empty() {
        return None;
    }
    let path = path.strip_suffix('/').unwrap_or(path);
    let path = path.strip_suffix(".git").unwrap_or(path);
    Some(format!("https://{}/{path}", host.to_ascii_lowercase()))
}

/// Whether `url` names `repository`.
pub fn same_repository(url: &str, repository: &str) -> bool {
    matches!((normalise(url), normalise(repository)), (Some(a), Some(b)) if a == b)
}

/// `owner/repo` of a GitHub repository URL.
fn github_path(repository: &str) -> Option<String> {
    let normal = normalise(repository)?;
    normal.strip_prefix("https://github.com/").map(str::to_owned)
}

/// Checks that a release's index entry names `repository` and nothing else: `crate_repo`
/// (the crate's), `version_repo` (the version's) and `publisher` (trusted publishing).
/// `Err` says why not, for the history and the logs.
pub fn check(
    repository: &str,
    crate_repo: Option<&str>,
    version_repo: Option<&str>,
    publisher: Option<&TrustedPublisher>,
) -> Result<(), String> {
    let declared: Vec<&str> =
        [crate_repo, version_repo].into_iter().flatten().filter(|r| !r.trim().is_empty()).collect();
    if declared.is_empty() {
        return Err(format!("its index entry names no repository (roost's is {repository})"));
    }
    if let Some(other) = declared.iter().find(|r| !same_repository(r, repository)) {
        return Err(format!("its index entry names the repository {other}, not roost's {repository}"));
    }
    if let Some(publisher) = publisher {
        let named = match publisher.provider.as_str() {
            "github" => publisher.repository.clone().map(|r| format!("https://github.com/{r}")),
            _ => None,
        };
        let ours = github_path(repository);
        let matches = named.as_deref().and_then(github_path).is_some_and(|path| Some(path) == ours);
        if !matches {
            let who = named
                .or_else(|| publisher.project_path.clone().map(|p| format!("{} {p}", publisher.provider)))
                .unwrap_or_else(|| publisher.provider.clone());
            return Err(format!("it was published by trusted publishing from {who}, not from roost's {repository}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOST: &str = "https://github.com/roost-dev/roost";

    #[test]
    fn the_compiled_in_repository_is_the_workspace_one() {
        assert_eq!(REPOSITORY, ROOST);
    }

    #[test]
    fn only_spelling_differences_of_the_same_url_match() {
        for same in [
            ROOST,
            "https://github.com/roost-dev/roost/",
            "https://github.com/roost-dev/roost.git",
            "https://github.com/roost-dev/roost.git/",
            "HTTPS://GitHub.COM/roost-dev/roost",
            " https://github.com/roost-dev/roost ",
        ] {
            assert!(same_repository(same, ROOST), "{same}");
        }
        for other in [
            "https://github.com/roost-dev/roost-pro",
            "https://github.com/Roost-Dev/roost",
            "https://github.com/someone/roost",
            "https://github.com/roost-dev/roost/tree/main",
            "https://github.com/roost-dev/roost//",
            "http://github.com/roost-dev/roost",
            "git://github.com/roost-dev/roost",
            "https://github.com:443/roost-dev/roost",
            "https://user@github.com/roost-dev/roost",
            "https://gitlab.com/roost-dev/roost",
            "https://github.com.evil.example/roost-dev/roost",
            "https://github.com/roost-dev/roost?x=1",
            "github.com/roost-dev/roost",
            "",
        ] {
            assert!(!same_repository(other, ROOST), "{other}");
        }
    }

    #[test]
    fn every_repository_the_entry_names_must_be_roosts() {
        assert!(check(ROOST, Some(ROOST), Some(ROOST), None).is_ok());
        assert!(check(ROOST, Some(ROOST), None, None).is_ok(), "old versions carry no repository of their own");
        assert!(check(ROOST, None, Some("https://github.com/roost-dev/roost.git"), None).is_ok());
        let none = check(ROOST, None, None, None).unwrap_err();
        assert!(none.contains("names no repository"), "{none}");
        assert!(check(ROOST, Some(""), None, None).is_err());
        let other = check(ROOST, Some("https://github.com/x/roost"), Some(ROOST), None).unwrap_err();
        assert!(other.contains("https://github.com/x/roost") && other.contains(ROOST), "{other}");
        assert!(check(ROOST, Some(ROOST), Some("https://github.com/x/roost"), None).is_err());
    }

    #[test]
    fn a_trusted_publisher_must_be_roosts_repository() {
        let github = |repo: &str| TrustedPublisher {
            provider: "github".into(),
            repository: Some(repo.into()),
            project_path: None,
        };
        assert!(check(ROOST, Some(ROOST), None, Some(&github("roost-dev/roost"))).is_ok());
        let err = check(ROOST, Some(ROOST), None, Some(&github("mallory/roost"))).unwrap_err();
        assert!(err.contains("https://github.com/mallory/roost"), "{err}");
        let gitlab = TrustedPublisher {
            provider: "gitlab".into(),
            repository: None,
            project_path: Some("roost-dev/roost".into()),
        };
        let err = check(ROOST, Some(ROOST), None, Some(&gitlab)).unwrap_err();
        assert!(err.contains("gitlab roost-dev/roost"), "{err}");
    }
}
