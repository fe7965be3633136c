//! `roost update`: check the package index and install the newest release now, with
//! progress and a clear result.
//!
//! It installs whatever the node's auto_update flag says (an explicit command is consent)
//! and ignores the minimum age, but honours the kill switch: `SERVICE_AUTO_UPDATE=off` means
//! nothing installs on this node. It never offers a downgrade, and when the running build
//! is newer than every release because it was built from a source checkout, it says so
//! instead of calling the release a downgrade (the seed's false-downgrade case).

use std::{path::PathBuf, process::ExitCode};

use clap::Args;
use tokio_util::sync::CancellationToken;

use super::{GlobalArgs, serve::UpdateArgs};
use crate::update::{Restart, Role, Updater, service::status};

/// Flags of `roost update`.
#[derive(Debug, Args)]
pub struct UpdateCommandArgs {
    #[command(flatten)]
    update: UpdateArgs,
    /// Only check; install nothing.
    #[arg(long)]
    check: bool,
}

/// Checks and installs; exit 0 when up to date or installed, 1 when something failed.
pub async fn update(global: &GlobalArgs, args: UpdateCommandArgs) -> ExitCode {
    let mut settings = args.update.settings(Role::Dashboard);
    // This command never restarts anything: a running roost restarts itself when it
    // installs, and is told below when it has to be restarted by hand.
    settings.restart = Restart::NextStart;
    if settings.kill_switch && !args.check {
        eprintln!("roost: SERVICE_AUTO_UPDATE is set to switch updates off on this node; unset it to update");
        return ExitCode::FAILURE;
    }
    let data_dir = match global.data_dir() {
        Ok(dir) => dir,
        Err(err) => {
            eprintln!("roost: {err}");
            return ExitCode::from(2);
        }
    };
    let current = settings.version.clone();
    println!("roost {current}: checking {} for {}...", settings.index_url, settings.package);
    let updater = Updater::new(settings, data_dir, CancellationToken::new());
    let outcome = updater.check(false, true).await;
    if outcome.check.outcome == "failed" {
        eprintln!("roost: the check failed: {}", outcome.check.detail);
        return ExitCode::FAILURE;
    }
    println!("{}", outcome.check.detail);
    let Some(version) = outcome.candidate else {
        if outcome.check.outcome == "refused" {
            // A stranger's release under the package's name: worth a failed exit.
            eprintln!("roost: nothing installed: the newer release is not roost's (see above)");
            return ExitCode::FAILURE;
        }
        let latest = updater.state().await.latest;
        if let (Ok(current), Ok(latest_v)) = (semver::Version::parse(&current), semver::Version::parse(&latest))
            && latest_v < current
        {
            match source_checkout() {
                Some(root) => println!(
                    "This roost ({current}) was built from the source checkout at {}; it is newer than the latest \
                     release {latest}, which is not a downgrade to install. To follow releases, install one \
                     (`cargo install {}`) and run it from outside the checkout.",
                    root.display(),
                    crate::update::settings::DEFAULT_PACKAGE
                ),
                None => println!("This roost ({current}) is newer than the latest release ({latest}); nothing to do."),
            }
        } else {
            println!("Up to date.");
        }
        return ExitCode::SUCCESS;
    };
    if args.check {
        println!("Run `roost update` to install {version}.");
        return ExitCode::SUCCESS;
    }
    let package = updater.package_of(&updater.state().await);
    println!("installing {package} {version} (this can take minutes)...");
    let event = updater.install(&package, &version).await;
    if event.outcome == "refused" {
        eprintln!("roost: {}; nothing installed", event.detail);
    } else if event.outcome != "ok" {
        eprintln!("roost: the install failed: {}", event.detail);
    }
    if event.outcome != "ok" {
        let held = status(&updater).await.held.into_iter().find(|h| h.version == version);
        if let Some(held) = held {
            eprintln!("roost: {version} is held back ({}); newer releases are still considered", held.reason);
        }
        return ExitCode::FAILURE;
    }
    println!("Installed {package} {version}. Restart roost to run it (`roost serve`/`roost daemon`, or its service).");
    ExitCode::SUCCESS
}

/// The root of the roost source checkout this binary was built in or is run from, if any.
fn source_checkout() -> Option<PathBuf> {
    let is_workspace = |dir: &std::path::Path| {
        std::fs::read_to_string(dir.join("Cargo.toml")).is_ok_and(|toml| toml.contains("[workspace]"))
            && dir.join("server").join("Cargo.toml").exists()
    };
    // target/{debug,release}/roost inside a checkout.
    let exe = std::env::current_exe().ok()?;
    let from_exe = exe.ancestors().find(|dir| dir.file_name().is_some_and(|n| n == "target")).and_then(|t| t.parent());
    if let Some(root) = from_exe.filter(|root| is_workspace(root)) {
        return Some(root.to_path_buf());
    }
    let cwd = std::env::current_dir().ok()?;
    cwd.ancestors().find(|dir| is_workspace(dir)).map(PathBuf::from)
}
