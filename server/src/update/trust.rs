//! Which releases the updater trusts: at each check, only releases of roost's own
//! repository are candidates ([`review`]); right before an install, the chosen version is
//! looked up again and vetted ([`vet`]): still listed, not yanked since the check, still
//! roost's, and, with a public key, signed.
//!
//! A refused version is held like a version whose install failed (for
//! `SERVICE_AUTOUPDATE_RETRY_SECS`; about two minutes when the refusal came from a network
//! error rather than a verdict), and the refusal is recorded with its reason.

use std::time::Duration;

use semver::Version;

use super::{
    identity::{self, REPOSITORY},
    releases::{self, Choice, Hold, Index, Listing, Release},
    signature,
};

/// The releases of a package seen from a running version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Review {
    /// The choice among roost's own releases.
    pub choice: Choice,
    /// The newest release newer than the running one that is not roost's, and why.
    pub refused: Option<(Version, String)>,
}

/// Splits `listing` into roost's releases and the others, and chooses among roost's
/// (see [`releases::choose`]).
pub fn review(listing: &Listing, current: &Version, now_ms: i64, min_age: Duration, holds: &[Hold]) -> Review {
    let mut ours = Vec::new();
    let mut refused: Option<(Version, String)> = None;
    for release in &listing.releases {
        match identity_of(listing, release) {
            Ok(()) => ours.push(release.clone()),
            Err(reason) => {
                let Some(version) = releases::stable_version(release) else { continue };
                if version > *current && refused.as_ref().is_none_or(|(newest, _)| version > *newest) {
                    refused = Some((version, reason));
                }
            }
        }
    }
    Review { choice: releases::choose(current, &ours, now_ms, min_age, holds), refused }
}

/// Whether `release`'s index entry names roost's repository (see [`identity`]).
fn identity_of(listing: &Listing, release: &Release) -> Result<(), String> {
    identity::check(
        REPOSITORY,
        listing.repository.as_deref(),
        release.repository.as_deref(),
        release.trustpub_data.as_ref(),
    )
}

/// Why a version is not installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// A few words for the hold ("another repository", "unsigned", …).
    pub short: &'static str,
    /// The whole reason, for the history.
    pub detail: String,
    /// The verdict could not be reached (the index or the signature could not be
    /// fetched): held briefly, not for the failed-version backoff.
    pub transient: bool,
}

impl Refusal {
    fn verdict(short: &'static str, detail: String) -> Self {
        Self { short, detail, transient: false }
    }

    fn transient(short: &'static str, detail: String) -> Self {
        Self { short, detail, transient: true }
    }
}

/// What [`vet`] checks a release against.
#[derive(Debug, Clone, Copy)]
pub struct Policy<'a> {
    /// The minisign public key releases must be signed with (base64), if any.
    pub public_key: Option<&'a str>,
    /// Where a release's signature is (`{package}`, `{version}` filled in).
    pub signature_url: &'a str,
}

/// Checks, right before installing, that `package` `version` may be installed: a fresh
/// look at the index (a version yanked since the check is refused), roost's repository,
/// and with a public key the signature of its `.crate` file.
pub async fn vet(index: &Index, policy: Policy<'_>, package: &str, version: &str) -> Result<(), Refusal> {
    let listing = index.listing(package).await.map_err(|err| {
        Refusal::transient("could not be checked", format!("the index could not be read before installing: {err}"))
    })?;
    let Some(release) = listing.release(version) else {
        return Err(Refusal::verdict("not listed", format!("{package} {version} is not listed by the index any more")));
    };
    if release.yanked {
        return Err(Refusal::verdict("yanked", format!("{package} {version} was yanked after the check")));
    }
    identity_of(&listing, release)
        .map_err(|reason| Refusal::verdict("another repository", format!("{package} {version}: {reason}")))?;
    let Some(public_key) = policy.public_key else { return Ok(()) };
    let checksum = release.checksum.trim().to_ascii_lowercase();
    if checksum.len() != 64 || !checksum.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Refusal::verdict(
            "no checksum",
            format!("the index lists no SHA-256 checksum for {package} {version}, so no signature can vouch for it"),
        ));
    }
    let url = signature::signature_url(policy.signature_url, package, version);
    let signed = match index.fetch_signature(&url).await {
        Ok(Some(text)) => text,
        Ok(None) => {
            return Err(Refusal::verdict("unsigned", format!("{package} {version} is not signed: nothing at {url}")));
        }
        Err(err) => return Err(Refusal::transient("signature unavailable", format!("its signature: {err}"))),
    };
    let file = index.download(package, version).await.map_err(|err| {
        Refusal::transient("could not be checked", format!("its .crate file could not be downloaded: {err}"))
    })?;
    let served = signature::sha256_hex(&file);
    if served != checksum {
        return Err(Refusal::verdict(
            "checksum mismatch",
            format!("the .crate file served for {package} {version} has SHA-256 {served}; the index lists {checksum}"),
        ));
    }
    signature::verify(public_key, &file, &signed)
        .map_err(|reason| Refusal::verdict("bad signature", format!("{package} {version}: {reason} ({url})")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release(num: &str, repository: Option<&str>) -> Release {
        Release { num: num.into(), repository: repository.map(str::to_owned), ..Release::default() }
    }

    #[test]
    fn only_roosts_releases_are_candidates_and_the_newest_other_is_named() {
        let listing = Listing {
            repository: Some(REPOSITORY.into()),
            releases: vec![
                release("0.3.0", None),
                release("0.4.0", Some("https://github.com/someone/else")),
                release("0.5.0", Some("https://github.com/someone/else")),
                release("0.1.0", Some("https://github.com/someone/else")),
            ],
        };
        let current = Version::new(0, 2, 0);
        let review = review(&listing, &current, 0, Duration::ZERO, &[]);
        assert_eq!(review.choice.install, Some(Version::new(0, 3, 0)));
        assert_eq!(review.choice.latest, Some(Version::new(0, 3, 0)), "a stranger's release is not the latest");
        let (version, reason) = review.refused.unwrap();
        assert_eq!(version, Version::new(0, 5, 0));
        assert!(reason.contains("https://github.com/someone/else"), "{reason}");
    }

    #[test]
    fn a_crate_of_another_repository_offers_nothing() {
        let listing = Listing {
            repository: Some("https://github.com/someone/roost".into()),
            releases: vec![release("0.8.0", None), release("0.9.0-rc.1", None)],
        };
        let review = review(&listing, &Version::new(0, 1, 0), 0, Duration::ZERO, &[]);
        assert_eq!(review.choice, Choice::default());
        assert_eq!(review.refused.map(|(v, _)| v), Some(Version::new(0, 8, 0)), "pre-releases are never candidates");
        let older = review_of(&listing, "0.9.0");
        assert_eq!(older.refused, None, "nothing newer than the running version: nothing refused");
    }

    fn review_of(listing: &Listing, current: &str) -> Review {
        review(listing, &Version::parse(current).unwrap(), 0, Duration::ZERO, &[])
    }
}
