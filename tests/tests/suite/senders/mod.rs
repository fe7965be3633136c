//! Real senders end to end: GenAI instrumentation libraries (tests/senders/python,
//! tests/senders/node) run as child processes against [`FakeOpenAi`] and export OTLP/HTTP
//! protobuf to a real roost; the coding agents, which cannot run here, are their documented
//! OTLP/JSON (tests/senders/fixtures). Everything is asserted through REST: q/1 and
//! `/api/usage`. tests/senders/CAPTURED.md says what each library sends.
//!
//! The Python venv (target/senders-venv) and tests/senders/node/node_modules come from
//! `scripts/test`'s set-up (tests/senders/README.md); without them these tests fail, and
//! say so.

mod agents;
mod example;
mod libraries;

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use roost_tests::{Api, TestServer, fake_openai::FakeOpenAi, tools};
use serde_json::{Map, Value};

pub use crate::observe::q1;

/// A q/1 row.
pub type Row = Map<String, Value>;

/// tests/senders.
pub fn senders_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("senders")
}

const INSTALL_HINT: &str = "run `scripts/test --setup-only` (it builds the venv and the Node modules), or \
                            the commands in tests/senders/README.md";

/// The program that runs a driver.
#[derive(Debug, Clone, Copy)]
pub enum Runtime {
    /// target/senders-venv/bin/python, from tests/senders/python.
    Python,
    /// node, from tests/senders/node.
    Node,
}

impl Runtime {
    fn command(self, script: &str) -> tokio::process::Command {
        let senders = senders_dir();
        let mut command = match self {
            Self::Python => {
                let venv = tools::venv("senders-venv", &senders.join("python/requirements.txt"), INSTALL_HINT);
                let mut command = tokio::process::Command::new(venv.join("bin/python"));
                command.current_dir(senders.join("python"));
                command
            }
            Self::Node => {
                let node = senders.join("node");
                tools::require_fresh(
                    "tests/senders/node/node_modules",
                    &node.join("node_modules/.package-lock.sha256"),
                    &node.join("package-lock.json"),
                    INSTALL_HINT,
                );
                let mut command = tokio::process::Command::new("node");
                command.current_dir(node);
                command
            }
        };
        command.arg(script);
        command
    }
}

/// Runs a driver against `openai` and `roost`, and waits for it to exit 0 (everything it
/// exported is then stored: roost answers an export only after committing it).
pub async fn run_driver(runtime: Runtime, script: &str, openai: &FakeOpenAi, roost: &TestServer) {
    let mut command = runtime.command(script);
    // The drivers configure their exporters from these two; nothing else of the
    // environment's OpenTelemetry settings may redirect or reshape what they send.
    for name in [
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_SERVICE_NAME",
        "OTEL_RESOURCE_ATTRIBUTES",
        "OTEL_SEMCONV_STABILITY_OPT_IN",
        "OTEL_SDK_DISABLED",
    ] {
        command.env_remove(name);
    }
    command
        .env("OPENAI_BASE_URL", openai.base_url())
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", roost.url(""))
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .unwrap_or_else(|_| panic!("{script} did not finish within 60 s"))
        .unwrap_or_else(|e| panic!("start {script}: {e}"));
    assert!(
        output.status.success(),
        "{script} failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Reads a fixture of tests/senders/fixtures with its times moved to the last minute:
/// every `*UnixNano` keeps its offset from the fixture's earliest one, which becomes now
/// less 60 s (so the data is today's, and within every default time window).
pub fn fixture(name: &str) -> Value {
    let path = senders_dir().join("fixtures").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let mut value: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()));
    let mut earliest = u64::MAX;
    visit_times(&mut value, &mut |ns| earliest = earliest.min(*ns));
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    let base = now - 60_000_000_000;
    visit_times(&mut value, &mut |ns| *ns = *ns - earliest + base);
    value
}

fn visit_times(value: &mut Value, f: &mut impl FnMut(&mut u64)) {
    match value {
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                if key.ends_with("UnixNano") {
                    if let Some(mut ns) = item.as_str().and_then(|s| s.parse::<u64>().ok()) {
                        f(&mut ns);
                        *item = Value::String(ns.to_string());
                    }
                } else {
                    visit_times(item, f);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| visit_times(item, f)),
        _ => {}
    }
}

/// POSTs an OTLP/JSON body to `path` (`/v1/logs`, `/v1/metrics`); asserts 200 with
/// nothing rejected.
pub async fn post_json(server: &TestServer, path: &str, body: &Value) {
    let resp = crate::observe::post_otlp(server, path, "application/json", serde_json::to_vec(body).unwrap()).await;
    assert_eq!(resp.status(), 200, "POST {path}");
    let answer: Value = resp.json().await.unwrap();
    let partial = &answer["partialSuccess"];
    for rejected in ["rejectedLogRecords", "rejectedDataPoints", "rejectedSpans"] {
        assert!(partial[rejected].as_i64().unwrap_or(0) == 0, "POST {path}: {answer}");
    }
}

/// `/api/usage`'s row for the model `family` (the model itself or a dated variant of it).
pub async fn usage_model(api: &Api, family: &str) -> Option<Value> {
    let usage = api.get("/api/usage?days=1").await.ok();
    assert_eq!(usage["warning"], "", "{usage}");
    usage["models"].as_array().unwrap().iter().find(|m| m["model"].as_str().unwrap().starts_with(family)).cloned()
}

/// A row's integer field, 0 when null or absent.
pub fn int(row: &Row, field: &str) -> i64 {
    row.get(field).and_then(Value::as_i64).unwrap_or(0)
}

/// A row's cost, 0 when null or absent.
pub fn cost(row: &Row) -> f64 {
    row.get("cost_usd").and_then(Value::as_f64).unwrap_or(0.0)
}

/// Asserts `actual` is `expected` US dollars (to the nanocent).
#[track_caller]
pub fn assert_usd(actual: f64, expected: f64, context: &dyn std::fmt::Debug) {
    assert!((actual - expected).abs() < 1e-11, "cost {actual} != {expected}: {context:?}");
}

/// What a price-book entry charges, in US dollars: `input` counts every prompt token,
/// `cache_read` of them at the cache price (prices per million tokens).
pub fn priced(input: i64, cache_read: i64, output: i64, (input_usd, cache_usd, output_usd): (f64, f64, f64)) -> f64 {
    ((input - cache_read) as f64 * input_usd + cache_read as f64 * cache_usd + output as f64 * output_usd) / 1e6
}
