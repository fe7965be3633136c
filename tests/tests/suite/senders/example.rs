//! README step 4, run as a newcomer runs it, so it cannot rot: the real binary's
//! `roost fake-model` as the model, examples/python/agent.py (the official OpenAI SDK and
//! its official OpenTelemetry instrumentation, from a venv built from the example's pinned
//! requirements.txt) as the app, and a real roost receiving its telemetry. The session the
//! example prints holds its three model calls, the tool-calling one included, with tokens
//! and a cost.

use std::{
    path::Path,
    process::{Child, Stdio},
    time::{Duration, Instant},
};

use roost_tests::{Backend, TestServer, each_backend, process, roost_binary, tools};
use serde_json::{Value, json};

use super::{Row, cost, int, q1};

each_backend!(the_readme_example_sends_a_session_of_priced_model_calls);

/// The model calls the example makes: the call answered with get_weather, the one carrying
/// its result, the follow-up turn's.
const CALLS: usize = 3;

/// A child process killed (and reaped) when dropped, so a failing test leaves none.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `roost fake-model` on a free loopback port: the child and its OpenAI base URL.
fn start_fake_model() -> (Killed, String) {
    let mut child = std::process::Command::new(roost_binary())
        .args(["fake-model", "--listen", "127.0.0.1:0", "--log-format", "json"])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("roost fake-model starts");
    let addr = process::listening_addresses(&mut child)
        .recv_timeout(Duration::from_secs(30))
        .expect("roost fake-model did not start listening");
    (Killed(child), format!("http://{addr}/v1"))
}

async fn the_readme_example_sends_a_session_of_priced_model_calls(backend: Backend) {
    let server = TestServer::start(backend).await;
    let (_fake_model, base_url) = start_fake_model();

    let example = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace").join("examples/python");
    let venv = tools::venv(
        "example-venv",
        &example.join("requirements.txt"),
        "run `scripts/test --setup-only` (it builds the venv from examples/python/requirements.txt)",
    );
    let mut command = tokio::process::Command::new(venv.join("bin/python"));
    command.arg(example.join("agent.py")).current_dir(&example);
    // The example's own defaults for everything but where roost and the model are.
    for (name, _) in std::env::vars() {
        if name.starts_with("OTEL_") || name.starts_with("OPENAI_") || name == "EXAMPLE_MODEL" {
            command.env_remove(name);
        }
    }
    command.env("OPENAI_BASE_URL", &base_url).env("OTEL_EXPORTER_OTLP_ENDPOINT", server.url("")).kill_on_drop(true);
    let started = Instant::now();
    let output = tokio::time::timeout(Duration::from_secs(120), command.output())
        .await
        .expect("agent.py did not finish within 120 s")
        .expect("start agent.py");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "agent.py failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!("agent.py ran in {:.1} s", started.elapsed().as_secs_f64());
    let session = stdout
        .lines()
        .find_map(|line| line.strip_prefix("session: "))
        .unwrap_or_else(|| panic!("agent.py printed no session: {stdout}"))
        .to_owned();
    assert!(stdout.contains(&format!("/dashboard/sessions/{session}")), "{stdout}");

    // Everything is stored once the example exits (roost answers an export after committing
    // it, and the example shuts its providers down before exiting).
    let api = server.api(None);
    let sessions = q1(&api, "sessions", json!({"session_id": session})).await;
    let [row] = &sessions[..] else { panic!("one session {session}: {sessions:#?}") };
    assert_eq!(row["service"], "my-agent", "{row:#?}");
    assert_eq!(int(row, "spans"), CALLS as i64 + 2, "the calls and the two turns: {row:#?}");
    assert!(int(row, "input_tokens") > 0 && int(row, "output_tokens") > 0, "{row:#?}");
    assert!(cost(row) > 0.0, "priced: {row:#?}");
    assert_eq!(int(row, "unpriced_calls"), 0, "{row:#?}");
    assert!(row["last_model"].as_str().is_some_and(|m| m.starts_with("gpt-4o-mini")), "{row:#?}");

    // The session's model calls, each with tokens and a cost.
    let spans = q1(&api, "spans", json!({"session_id": session})).await;
    let calls: Vec<&Row> = spans.iter().filter(|s| s["operation"] == "chat").collect();
    assert_eq!(calls.len(), CALLS, "{spans:#?}");
    for call in &calls {
        assert_eq!(call["model"], "gpt-4o-mini", "{call:#?}");
        assert!(int(call, "input_tokens") > 0 && int(call, "output_tokens") > 0, "{call:#?}");
        assert!(cost(call) > 0.0, "{call:#?}");
    }
    assert_eq!(spans.iter().filter(|s| s["name"] == "turn").count(), 2, "{spans:#?}");
    let span_cost: f64 = calls.iter().map(|c| cost(c)).sum();
    assert!((span_cost - cost(row)).abs() < 1e-11, "the session's cost is its calls': {span_cost} {row:#?}");

    // Its conversation: the model called get_weather for Paris, got the tool's result and
    // answered from it (the fake model quotes it), then the follow-up.
    let transcript = q1(&api, "transcript", json!({"session_id": session})).await;
    let said: Vec<&Row> = transcript.iter().filter(|r| r["kind"] == "message").collect();
    let asked = said.iter().any(|m| {
        m["role"] == "assistant"
            && m["tool_calls"].as_array().is_some_and(|calls| {
                calls.iter().any(|call| {
                    let arguments = match &call["arguments"] {
                        Value::String(text) => serde_json::from_str(text).unwrap_or(Value::Null),
                        other => other.clone(),
                    };
                    call["name"] == "get_weather" && arguments == json!({"city": "Paris"})
                })
            })
    });
    assert!(asked, "the tool call: {said:#?}");
    let text = |role: &str, needle: &str| {
        said.iter().any(|m| m["role"] == role && m["text"].as_str().is_some_and(|t| t.contains(needle)))
    };
    assert!(text("user", "What is the weather in Paris?"), "{said:#?}");
    assert!(text("tool", "sunny"), "the tool's result: {said:#?}");
    assert!(text("assistant", "The tool answered:"), "the answer after the tool: {said:#?}");
    assert!(text("assistant", "Should I take an umbrella?"), "the follow-up's answer: {said:#?}");
}
