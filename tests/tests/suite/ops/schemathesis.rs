//! Schemathesis fuzzes every REST operation of `GET /openapi.json` against the real server,
//! on SQLite and on PostgreSQL, calling with an account key (the dashboard is open to
//! loopback callers): any 5xx, or an answer that does not match the document's schema for
//! its status (SSE events included), fails the test. The document itself must load and
//! validate as OpenAPI 3.1 for schemathesis to start.
//!
//! Phases: coverage (schema-derived edge cases: boundaries, missing and wrong-typed fields,
//! unknown properties) and fuzzing (a bounded number of generated examples per operation,
//! from a fixed seed so a failure reproduces). `POST /api/control/restart` is left out:
//! it restarts the server under test.

use std::time::Duration;

use roost_tests::{Backend, TestServer, each_backend};

each_backend!(schemathesis_finds_no_server_error_or_schema_mismatch);

/// Generated examples per operation in the fuzzing phase.
const MAX_EXAMPLES: &str = "20";
/// The fuzzing phase's seed.
const SEED: &str = "20261124";

async fn schemathesis_finds_no_server_error_or_schema_mismatch(backend: Backend) {
    let server = TestServer::start(backend).await;
    let account = server.account(1_000_000).await;
    // An agent, so operations on the account's agents meet one.
    server.api(Some(&account)).provision("echo", "fuzzed").await;
    let work = tempfile::tempdir().unwrap();
    let mut command = tokio::process::Command::new(super::ops_tool("schemathesis"));
    command
        .current_dir(work.path())
        .arg("--no-color")
        .arg("--config-file")
        .arg(super::ops_dir().join("schemathesis.toml"))
        .arg("run")
        .arg(server.url("/openapi.json"))
        .args(["--header", &format!("Authorization: Bearer {}", account.key)])
        .args(["--checks", "not_a_server_error,response_schema_conformance"])
        .args(["--phases", "coverage,fuzzing"])
        .args(["--max-examples", MAX_EXAMPLES, "--seed", SEED, "--no-shrink"])
        .args(["--exclude-path", "/api/control/restart"])
        .args(["--workers", "2", "--request-timeout", "10"])
        .args(["--output-truncate", "false"])
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(240), command.output())
        .await
        .expect("schemathesis did not finish within 240 s")
        .expect("start schemathesis");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let summary = stdout.lines().filter(|l| l.contains("generated") || l.contains("Selected:")).collect::<Vec<_>>();
    println!("schemathesis on {backend:?}: {}", summary.join("; "));
    assert!(
        output.status.success(),
        "schemathesis failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}
