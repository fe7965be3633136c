//! The `roost` command line. Every flag also reads a `ROOST_*` environment variable.

mod accounts;
mod backup;
mod fake_model;
mod runtimes;
mod serve;
mod status;
mod update;

use std::{path::PathBuf, process::ExitCode};

use clap::{Args, Parser, Subcommand};

use crate::{
    ServeConfig, logging,
    logging::LogFormat,
    store::{DatabaseUrl, StoreOptions},
};

/// roost hosts always-on AI agents and observes agent activity.
#[derive(Debug, Parser)]
#[command(name = "roost", version, about, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: Command,
}

/// Options every command understands.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// roost's own directory: the default SQLite store, update state, rollback records.
    /// Defaults to ~/.roost.
    #[arg(long, env = "ROOST_DATA_DIR", global = true, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// The store: sqlite://PATH or postgres://USER@HOST/DB. Defaults to
    /// sqlite://<data-dir>/roost.db.
    #[arg(long, env = "ROOST_DATABASE_URL", global = true, value_name = "URL", hide_env_values = true)]
    database_url: Option<String>,
    /// Most database connections (PostgreSQL) or SQLite readers.
    #[arg(long, env = "ROOST_DATABASE_MAX_CONNECTIONS", global = true, default_value_t = 16)]
    database_max_connections: u32,
    /// Log line format; the level comes from RUST_LOG (default info).
    #[arg(long, env = "ROOST_LOG_FORMAT", global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve gRPC, gRPC-web and HTTP (REST, dashboard APIs) on one address.
    Serve(serve::ServeArgs),
    /// Run as a node: serve, and push everything ingested to an upstream roost.
    Daemon(serve::DaemonArgs),
    /// Create and list accounts (operators).
    #[command(subcommand)]
    Accounts(accounts::AccountsCommand),
    /// Create, list and revoke API keys (operators).
    #[command(subcommand)]
    Keys(accounts::KeysCommand),
    /// Add credits to an account (operators).
    #[command(subcommand)]
    Credits(accounts::CreditsCommand),
    /// Add web-app users to accounts, with one-time invite links (operators).
    #[command(subcommand)]
    Users(accounts::UsersCommand),
    /// Install packaged runtimes (OpenClaw, Hermes Agent) and list what is installed.
    #[command(subcommand)]
    Runtimes(runtimes::RuntimesCommand),
    /// Ask a running roost how it is: store, ingest, health checks, failing pages, updates.
    Status(status::StatusArgs),
    /// Check the package index and install the newest release now.
    Update(update::UpdateCommandArgs),
    /// Copy the SQLite store (and the data directory's key and update files) into one
    /// file, while `roost serve` runs.
    Backup(backup::BackupArgs),
    /// Restore a backup into a data directory no `roost serve` is running on.
    Restore(backup::RestoreArgs),
    /// Serve an offline, deterministic OpenAI-compatible model (Chat Completions) for
    /// trying roost without a model account: README step 4 and examples/python use it.
    FakeModel(fake_model::FakeModelArgs),
    /// The relay roost runs as the first process of an agent's sandbox (internal).
    #[command(hide = true)]
    SandboxRelay(crate::sandbox::relay::RelayArgs),
    /// What a root roost runs between forking an agent's sandbox and bubblewrap: the
    /// agent's disk, then its own unprivileged uid (internal).
    #[command(hide = true)]
    SandboxEnter(crate::sandbox::enter::EnterArgs),
}

impl GlobalArgs {
    /// The data directory: the flag, else `~/.roost`.
    pub fn data_dir(&self) -> Result<PathBuf, String> {
        match &self.data_dir {
            Some(dir) => Ok(dir.clone()),
            None => std::env::home_dir()
                .map(|home| home.join(".roost"))
                .ok_or_else(|| "cannot find the home directory; pass --data-dir".to_owned()),
        }
    }

    /// Settings from the global options, before any command's own.
    pub fn serve_config(&self) -> Result<ServeConfig, String> {
        let mut config = ServeConfig::with_data_dir(self.data_dir()?);
        if let Some(url) = &self.database_url {
            config.database_url = url.parse::<DatabaseUrl>()?;
        }
        config.store = StoreOptions { max_connections: self.database_max_connections, ..StoreOptions::default() };
        Ok(config)
    }
}

/// Runs the command line; the process's exit code: 0 done, 1 failed, 2 bad usage.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // Inside a sandbox: no logging set-up, no multi-threaded runtime, nothing of roost's.
    match cli.command {
        Command::SandboxRelay(args) => return crate::sandbox::relay::main(args),
        Command::SandboxEnter(args) => return crate::sandbox::enter::main(args),
        _ => {}
    }
    let level = match cli.command {
        Command::Serve(_) | Command::Daemon(_) | Command::FakeModel(_) => logging::LevelFilter::INFO,
        _ => logging::LevelFilter::WARN,
    };
    logging::init(cli.global.log_format, level);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("roost: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => serve::run(&cli.global, args).await,
            Command::Daemon(args) => serve::daemon(&cli.global, args).await,
            Command::Accounts(command) => accounts::accounts(&cli.global, command).await,
            Command::Keys(command) => accounts::keys(&cli.global, command).await,
            Command::Credits(command) => accounts::credits(&cli.global, command).await,
            Command::Users(command) => accounts::users(&cli.global, command).await,
            Command::Status(args) => status::status(args).await,
            Command::Runtimes(command) => runtimes::runtimes(&cli.global, command).await,
            Command::Update(args) => update::update(&cli.global, args).await,
            Command::Backup(args) => backup::backup(&cli.global, args).await,
            Command::Restore(args) => backup::restore(&cli.global, args).await,
            Command::FakeModel(args) => fake_model::run(args).await,
            Command::SandboxRelay(_) | Command::SandboxEnter(_) => unreachable!("handled before the runtime starts"),
        }
    })
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// Every flag's environment variable is documented in docs/configuration.md's table.
    #[test]
    fn the_configuration_docs_list_every_flag() {
        let docs = include_str!("../../../docs/configuration.md");
        let mut missing = Vec::new();
        let root = Cli::command();
        let mut commands = vec![&root];
        let mut i = 0;
        while i < commands.len() {
            commands.extend(commands[i].get_subcommands());
            i += 1;
        }
        for command in commands {
            for arg in command.get_arguments() {
                if let Some(env) = arg.get_env() {
                    let env = env.to_string_lossy();
                    if !docs.contains(&format!("`{env}`")) {
                        missing.push(env.into_owned());
                    }
                }
            }
        }
        assert!(missing.is_empty(), "docs/configuration.md does not document {missing:?}");
    }

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }
}
