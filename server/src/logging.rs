//! Structured logs on stderr, filtered by `RUST_LOG` (default `info`), and roost's own
//! lines at info and above on the log stream (`/api/logs`) whatever `RUST_LOG` says.

use std::io::IsTerminal;

pub use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::{EnvFilter, Layer as _, layer::SubscriberExt, util::SubscriberInitExt};

use crate::streams::own_logs::OwnLogs;

/// How log lines look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log shippers.
    Json,
}

/// Installs the global subscriber, at `default` when `RUST_LOG` is unset: `info` for the
/// server, `warn` for one-shot CLI commands (their output is what they print, not the
/// store's start-up lines). Safe to call twice (the second call does nothing).
pub fn init(format: LogFormat, default: LevelFilter) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default.to_string()));
    let registry = tracing_subscriber::registry().with(OwnLogs.with_filter(LevelFilter::INFO));
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => registry.with(fmt.with_ansi(std::io::stderr().is_terminal()).with_filter(filter)).try_init(),
        LogFormat::Json => registry.with(fmt.json().with_filter(filter)).try_init(),
    };
}

/// Installs a subscriber that only feeds the log stream (tests that do not want stderr
/// output). Does nothing when a subscriber is already installed.
pub fn init_stream_only() {
    let _ = tracing_subscriber::registry().with(OwnLogs.with_filter(LevelFilter::INFO)).try_init();
}
