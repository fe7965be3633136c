//! Structured logs on stderr, filtered by `RUST_LOG` (default `info`).

use std::io::IsTerminal;

use tracing_subscriber::{EnvFilter, layer::SubscriberExt, util::SubscriberInitExt};

/// How log lines look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log shippers.
    Json,
}

/// Installs the global subscriber. Safe to call twice (the second call does nothing).
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let registry = tracing_subscriber::registry().with(filter);
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => registry.with(fmt.with_ansi(std::io::stderr().is_terminal())).try_init(),
        LogFormat::Json => registry.with(fmt.json()).try_init(),
    };
}
