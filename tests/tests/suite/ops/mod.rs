//! Operations: `GET /metrics` read by Prometheus' own parsers, and the REST API fuzzed by
//! schemathesis from `GET /openapi.json`.
//!
//! Both tools come from the Python venv target/ops-venv, which `scripts/test` builds from
//! tests/ops/requirements.txt; without it these tests fail, and say so.

mod metrics;
mod schemathesis;

use std::path::{Path, PathBuf};

use roost_tests::tools;

const INSTALL_HINT: &str = "run `scripts/test --setup-only` (it builds the venv once per requirements hash)";

/// tests/ops.
fn ops_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("ops")
}

/// target/ops-venv/bin/`program`, checked installed from tests/ops/requirements.txt.
fn ops_tool(program: &str) -> PathBuf {
    tools::venv("ops-venv", &ops_dir().join("requirements.txt"), INSTALL_HINT).join("bin").join(program)
}
