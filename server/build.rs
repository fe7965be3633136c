//! Records what `POST /api/version` reports about the build: the git commit, the build time
//! and the target. Reruns only when HEAD or the migrations move, so ordinary rebuilds stay
//! incremental.

use std::{
    env,
    path::Path,
    process::Command,
    time::{SystemTime, UNIX_EPOCH},
};

fn main() {
    let git_dir = Path::new("../.git");
    for watched in ["HEAD", "refs/heads", "packed-refs"] {
        // A missing path would make cargo rerun this script on every build.
        if git_dir.join(watched).exists() {
            println!("cargo:rerun-if-changed={}", git_dir.join(watched).display());
        }
    }
    // `sqlx::migrate!` embeds the migration files, but with any rerun-if-changed line here
    // cargo stops noticing a new file in the directory; watching it makes a new migration
    // rebuild the crate.
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-env-changed=ROOST_GIT_COMMIT");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");

    let commit = env::var("ROOST_GIT_COMMIT")
        .ok()
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_owned());
    // SOURCE_DATE_EPOCH makes reproducible builds reproducible.
    let built = env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()));
    println!("cargo:rustc-env=ROOST_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=ROOST_BUILD_UNIX={built}");
    println!("cargo:rustc-env=ROOST_TARGET={}", env::var("TARGET").unwrap_or_default());
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}
