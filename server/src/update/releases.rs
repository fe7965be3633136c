//! The package index and the choice of a release.
//!
//! The index is crates.io's API (`GET {index}/api/v1/crates/{name}`: the crate's
//! `repository`, and `versions` with `num`, `created_at`, `yanked`, `checksum`,
//! `repository`, `trustpub_data`; `GET {index}/api/v1/crates/{name}/{version}/download`:
//! the `.crate` file), or anything that answers like it: a mirror, or a test's local
//! server. One conditional GET per poll: the `ETag` of the last answer goes back as
//! `If-None-Match`, and a 304 reuses the listing already read.

use std::{collections::HashMap, sync::Mutex, time::Duration};

use semver::Version;
use serde::{Deserialize, Serialize};

use super::identity::TrustedPublisher;

/// The largest `.crate` file downloaded to verify its signature (crates.io allows 10 MB).
const MAX_CRATE_BYTES: usize = 50 * 1024 * 1024;
/// The largest signature file read (a minisign signature is under 1 KB).
const MAX_SIGNATURE_BYTES: usize = 16 * 1024;

/// One published version.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Release {
    /// Its version.
    pub num: String,
    /// When it was published (RFC 3339).
    #[serde(default)]
    pub created_at: String,
    /// Withdrawn by its publisher.
    #[serde(default)]
    pub yanked: bool,
    /// The SHA-256 of its `.crate` file, hex: what cargo checks the download against.
    #[serde(default)]
    pub checksum: String,
    /// The repository this version's manifest declared (crates.io records it per version).
    #[serde(default)]
    pub repository: Option<String>,
    /// Who published it, when crates.io's trusted publishing did.
    #[serde(default)]
    pub trustpub_data: Option<TrustedPublisher>,
}

/// What the index says about a package.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// The crate's `repository`.
    pub repository: Option<String>,
    /// Every version.
    pub releases: Vec<Release>,
}

impl Listing {
    /// The release numbered `version`.
    pub fn release(&self, version: &str) -> Option<&Release> {
        self.releases.iter().find(|r| r.num.trim() == version)
    }
}

#[derive(Default, Deserialize)]
struct CrateMeta {
    #[serde(default)]
    repository: Option<String>,
}

#[derive(Deserialize)]
struct CrateAnswer {
    #[serde(rename = "crate", default)]
    krate: CrateMeta,
    versions: Vec<Release>,
}

/// A version held back after a failed or refused install.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    /// The version.
    pub version: String,
    /// Held until, Unix ms.
    pub until_ms: i64,
    /// Why ("not yet on every mirror", "install failed", "rolled back", "refused: …").
    pub reason: String,
}

/// The index client, with the last answer per package for conditional GETs.
pub struct Index {
    http: reqwest::Client,
    base: String,
    cached: Mutex<HashMap<String, (String, Listing)>>,
}

impl Index {
    /// A client of `base` (such as `https://crates.io`).
    pub fn new(base: &str) -> Self {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .user_agent(concat!("roost/", env!("CARGO_PKG_VERSION"), " (self-update)"))
            .build()
            .unwrap_or_default();
        Self { http, base: base.trim_end_matches('/').to_owned(), cached: Mutex::new(HashMap::new()) }
    }

    /// What the index lists for `package`: one GET, conditional when an answer is cached.
    pub async fn listing(&self, package: &str) -> Result<Listing, String> {
        let url = format!("{}/api/v1/crates/{package}", self.base);
        let cached = self.cached.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(package).cloned();
        let mut request = self.http.get(&url);
        if let Some((etag, _)) = &cached {
            request = request.header(reqwest::header::IF_NONE_MATCH, etag);
        }
        let response = request.send().await.map_err(|e| format!("GET {url}: {e}"))?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_MODIFIED
            && let Some((_, listing)) = cached
        {
            return Ok(listing);
        }
        if !status.is_success() {
            return Err(format!("GET {url}: {status}"));
        }
        let etag = response.headers().get(reqwest::header::ETAG).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let answer: CrateAnswer = response.json().await.map_err(|e| format!("GET {url}: unreadable answer: {e}"))?;
        let listing = Listing { repository: answer.krate.repository, releases: answer.versions };
        if let Some(etag) = etag {
            let mut cache = self.cached.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            cache.insert(package.to_owned(), (etag, listing.clone()));
        }
        Ok(listing)
    }

    /// The `.crate` file of `package` at `version`, as the registry serves it (crates.io
    /// redirects to its static host; redirects are followed).
    pub async fn download(&self, package: &str, version: &str) -> Result<Vec<u8>, String> {
        let url = format!("{}/api/v1/crates/{package}/{version}/download", self.base);
        let response = self.http.get(&url).send().await.map_err(|e| format!("GET {url}: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("GET {url}: {}", response.status()));
        }
        read_capped(response, MAX_CRATE_BYTES).await.map_err(|e| format!("GET {url}: {e}"))
    }

    /// The text at `url` (a release signature); `Ok(None)` when it is not there (404).
    pub async fn fetch_signature(&self, url: &str) -> Result<Option<String>, String> {
        let response = self.http.get(url).send().await.map_err(|e| format!("GET {url}: {e}"))?;
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !response.status().is_success() {
            return Err(format!("GET {url}: {}", response.status()));
        }
        let bytes = read_capped(response, MAX_SIGNATURE_BYTES).await.map_err(|e| format!("GET {url}: {e}"))?;
        Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
    }
}

/// The body of `response`, refused past `max` bytes (an index is not trusted to be small).
async fn read_capped(mut response: reqwest::Response, max: usize) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > max {
            return Err(format!("larger than {max} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// What the index offers relative to the running version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Choice {
    /// The newest stable, non-yanked release, whatever its age.
    pub latest: Option<Version>,
    /// The newest release to install now: newer than the running one, old enough, not held.
    pub install: Option<Version>,
}

/// Picks from `releases` for a node running `current` (seed: "Update worker behaviour",
/// step 2). Pre-releases and yanked versions are never picked; with a minimum age the node
/// tracks the newest release at least that old.
pub fn choose(current: &Version, releases: &[Release], now_ms: i64, min_age: Duration, holds: &[Hold]) -> Choice {
    let min_age_ms = i64::try_from(min_age.as_millis()).unwrap_or(i64::MAX);
    let stable = releases.iter().filter_map(|r| Some((stable_version(r)?, published_ms(&r.created_at))));
    let mut choice = Choice::default();
    for (version, published) in stable {
        if choice.latest.as_ref().is_none_or(|l| version > *l) {
            choice.latest = Some(version.clone());
        }
        let old_enough = min_age_ms == 0 || published.is_some_and(|p| now_ms.saturating_sub(p) >= min_age_ms);
        let held = holds.iter().any(|h| h.until_ms > now_ms && h.version == version.to_string());
        if version > *current && old_enough && !held && choice.install.as_ref().is_none_or(|i| version > *i) {
            choice.install = Some(version);
        }
    }
    choice
}

/// The version of a release that may be installed: not yanked, not a pre-release.
pub fn stable_version(release: &Release) -> Option<Version> {
    if release.yanked {
        return None;
    }
    Version::parse(release.num.trim()).ok().filter(|v| v.pre.is_empty())
}

/// When a release was published, Unix ms.
fn published_ms(created_at: &str) -> Option<i64> {
    let ts: prost_types::Timestamp = created_at.trim().parse().ok()?;
    Some(ts.seconds.saturating_mul(1000) + i64::from(ts.nanos) / 1_000_000)
}

/// Whether an install failed because the index listed a version before the registry or
/// its mirrors served it: that clears up in minutes, so the hold is short.
pub fn is_propagation_lag(output: &str) -> bool {
    let output = output.to_ascii_lowercase();
    ["could not find", "failed to select a version", "no matching package", "not found in registry"]
        .iter()
        .any(|needle| output.contains(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000_000;
    const HOUR: i64 = 3_600_000;

    fn release(num: &str, age_hours: i64, yanked: bool) -> Release {
        let ts = prost_types::Timestamp { seconds: (NOW - age_hours * HOUR) / 1000, nanos: 0 };
        Release { num: num.into(), created_at: ts.to_string(), yanked, ..Release::default() }
    }

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn picks_the_newest_stable_unyanked_newer_release() {
        let releases = [
            release("0.1.0", 100, false),
            release("0.3.0", 1, true),
            release("0.2.1", 2, false),
            release("0.4.0-beta.1", 1, false),
            release("0.2.0", 3, false),
        ];
        let choice = choose(&v("0.1.0"), &releases, NOW, Duration::ZERO, &[]);
        assert_eq!(choice, Choice { latest: Some(v("0.2.1")), install: Some(v("0.2.1")) });
        assert_eq!(choose(&v("0.2.1"), &releases, NOW, Duration::ZERO, &[]).install, None);
        assert_eq!(choose(&v("0.9.0"), &releases, NOW, Duration::ZERO, &[]).install, None, "never a downgrade");
    }

    #[test]
    fn the_minimum_age_tracks_latest_minus_the_window() {
        let releases = [release("0.2.0", 30, false), release("0.3.0", 10, false), release("0.4.0", 1, false)];
        let day = Duration::from_secs(24 * 3600);
        let choice = choose(&v("0.1.0"), &releases, NOW, day, &[]);
        assert_eq!(choice, Choice { latest: Some(v("0.4.0")), install: Some(v("0.2.0")) });
        let five_hours = Duration::from_secs(5 * 3600);
        assert_eq!(choose(&v("0.1.0"), &releases, NOW, five_hours, &[]).install, Some(v("0.3.0")));
    }

    #[test]
    fn a_held_version_is_skipped_but_newer_ones_are_not() {
        let releases = [release("0.2.0", 3, false), release("0.3.0", 1, false)];
        let hold = |version: &str, until_ms: i64| Hold { version: version.into(), until_ms, reason: "x".into() };
        let held = [hold("0.3.0", NOW + 1)];
        assert_eq!(choose(&v("0.1.0"), &releases, NOW, Duration::ZERO, &held).install, Some(v("0.2.0")));
        let expired = [hold("0.3.0", NOW)];
        assert_eq!(choose(&v("0.1.0"), &releases, NOW, Duration::ZERO, &expired).install, Some(v("0.3.0")));
        let older_held = [hold("0.2.0", NOW + HOUR)];
        assert_eq!(choose(&v("0.1.0"), &releases, NOW, Duration::ZERO, &older_held).install, Some(v("0.3.0")));
    }

    #[test]
    fn crates_io_timestamps_parse() {
        assert!(published_ms("2024-03-01T12:00:00.123456+00:00").is_some());
        assert!(published_ms("2024-03-01T12:00:00Z").is_some());
        assert_eq!(published_ms("yesterday"), None);
    }

    #[test]
    fn propagation_lag_is_told_from_real_failures() {
        assert!(is_propagation_lag("error: could not find `roost` in registry `crates-io` with version `=0.3.0`"));
        assert!(!is_propagation_lag("error: failed to compile `roost v0.3.0`"));
    }
}
