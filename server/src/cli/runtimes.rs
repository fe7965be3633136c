//! `roost runtimes`: install the packaged runtimes (OpenClaw, Hermes Agent) and see what is
//! installed and in use. An install is picked up by the next `roost serve` start.

use std::process::ExitCode;

use clap::Subcommand;
use serde_json::{Value, json};

use super::{GlobalArgs, accounts::Output};
use crate::runtimes::packaged::{
    Installation, Package,
    install::{Installed, install},
};

#[derive(Debug, Subcommand)]
pub enum RuntimesCommand {
    /// Install a packaged runtime (openclaw or hermes) at a version roost was tested with,
    /// from the package registries into <data-dir>/runtimes/<name>/<version>/, checked
    /// against roost's lock file. Installing what is installed does nothing.
    #[command(disable_version_flag = true)]
    Install {
        /// openclaw or hermes.
        name: String,
        /// A pinned version (default: the newest roost was tested with).
        #[arg(long)]
        version: Option<String>,
    },
    /// What is installed, which version the catalogue offers, and how many agents use it.
    List {
        #[command(flatten)]
        output: Output,
    },
}

/// Runs a runtimes command.
pub async fn runtimes(global: &GlobalArgs, command: RuntimesCommand) -> ExitCode {
    let data_dir = match global.data_dir() {
        Ok(dir) => dir,
        Err(err) => {
            eprintln!("roost: {err}");
            return ExitCode::from(2);
        }
    };
    let runtimes_dir = data_dir.join("runtimes");
    match command {
        RuntimesCommand::Install { name, version } => {
            let Some(package) = Package::parse(&name) else {
                eprintln!("roost: no packaged runtime {name:?}; roost installs openclaw and hermes");
                return ExitCode::from(2);
            };
            let done = tokio::task::spawn_blocking(move || {
                install(package, version.as_deref(), &runtimes_dir, &mut std::io::stdout())
            })
            .await;
            match done {
                Ok(Ok(Installed::Already(at))) => {
                    println!("{} {} is installed in {}", at.package.name(), at.version, at.dir.display());
                    ExitCode::SUCCESS
                }
                Ok(Ok(Installed::Now(_))) => {
                    println!(
                        "a running `roost serve` on this data directory offers it within a second; no restart needed"
                    );
                    ExitCode::SUCCESS
                }
                Ok(Err(err)) => {
                    eprintln!("roost: {err}");
                    ExitCode::FAILURE
                }
                Err(err) => {
                    eprintln!("roost: the install stopped: {err}");
                    ExitCode::FAILURE
                }
            }
        }
        RuntimesCommand::List { output } => {
            // Agents by runtime, when the store can be read (it may not exist yet).
            let agents = match super::accounts::open(global).await {
                Ok(store) => store.live_instances().await.ok().unwrap_or_default(),
                Err(_) => Vec::new(),
            };
            let installs = Installation::all(&runtimes_dir);
            let rows: Vec<Value> = installs
                .iter()
                .map(|i| {
                    // The catalogue offers each package's newest install: the first listed.
                    let offered = installs.iter().find(|other| other.package == i.package) == Some(i);
                    let using = agents.iter().filter(|a| offered && a.runtime == i.package.name());
                    let running = using.clone().filter(|a| a.status == "running").count();
                    json!({
                        "name": i.package.name(),
                        "version": i.version,
                        "dir": i.dir.display().to_string(),
                        "offered": offered,
                        "agents": using.count(),
                        "running": running,
                    })
                })
                .collect();
            output.print(&Value::Array(rows.clone()), || {
                if rows.is_empty() {
                    return format!(
                        "no packaged runtime is installed in {}; install one with `roost runtimes install openclaw` \
                         (or hermes)",
                        runtimes_dir.display()
                    );
                }
                let mut lines = vec![format!(
                    "{:<10} {:<10} {:<8} {:<7} {:<8} DIR",
                    "NAME", "VERSION", "OFFERED", "AGENTS", "RUNNING"
                )];
                for row in &rows {
                    lines.push(format!(
                        "{:<10} {:<10} {:<8} {:<7} {:<8} {}",
                        row["name"].as_str().unwrap_or(""),
                        row["version"].as_str().unwrap_or(""),
                        if row["offered"] == true { "yes" } else { "no" },
                        row["agents"],
                        row["running"],
                        row["dir"].as_str().unwrap_or(""),
                    ));
                }
                lines.join("\n")
            });
            ExitCode::SUCCESS
        }
    }
}
