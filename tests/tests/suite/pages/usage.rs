//! The usage page without a browser: totals, per-model and per-day tables, the charts'
//! data block, the period filter, the empty state.

use reqwest::StatusCode;
use roost_tests::{Backend, TestServer, each_backend, pages::Visitor};
use serde_json::{Value, json};

/// One GenAI span of `model` with usage, as OTLP/JSON, `minutes_ago` before now.
pub fn genai_span(trace: u8, n: u8, model: &str, input: i64, output: i64, session: &str) -> Value {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    let start = now - 60_000_000_000;
    json!({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "pages-svc"}}]},
        "scopeSpans": [{"spans": [{
            "traceId": format!("{trace:02x}{}", "ab".repeat(15)),
            "spanId": format!("{n:02x}{}", "cd".repeat(7)),
            "name": format!("chat {model}"),
            "kind": 3,
            "startTimeUnixNano": start.to_string(),
            "endTimeUnixNano": (start + 800_000_000).to_string(),
            "attributes": [
                {"key": "session.id", "value": {"stringValue": session}},
                {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                {"key": "gen_ai.request.model", "value": {"stringValue": model}},
                {"key": "gen_ai.usage.input_tokens", "value": {"intValue": input.to_string()}},
                {"key": "gen_ai.usage.output_tokens", "value": {"intValue": output.to_string()}},
            ],
        }]}],
    }]})
}

/// Posts OTLP/JSON to `path`.
pub async fn post_json(server: &TestServer, path: &str, body: &Value) {
    let response = server.http.post(server.url(path)).json(body).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK, "{}", response.text().await.unwrap());
}

async fn usage_shows_totals_models_days_and_chart_data(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut visitor = Visitor::new(&server);
    let empty = visitor.get("/dashboard/usage").await;
    assert_eq!(empty.status, StatusCode::OK);
    assert!(empty.main_text().contains("No usage in the last 30 days"), "{}", empty.main_text());
    assert!(empty.attrs("#usage-data", "type").is_empty(), "no chart without data");

    post_json(&server, "/v1/traces", &genai_span(1, 1, "gpt-4o-mini", 120_000, 30_000, "s-usage-1")).await;
    post_json(&server, "/v1/traces", &genai_span(2, 2, "claude-sonnet-4-5", 2_000, 500, "s-usage-2")).await;
    let page = visitor.get("/dashboard/usage?days=7").await;
    assert_eq!(page.status, StatusCode::OK);
    let text = page.main_text();
    for expected in ["gpt-4o-mini", "claude-sonnet-4-5", "122.0k in", "Last 7 days", "s-usage-1"] {
        assert!(text.contains(expected), "{expected} in {text}");
    }
    assert_eq!(page.attrs("select[name=days] option[selected]", "value"), ["7"]);
    let backed = page.backed_by();
    assert!(backed.contains(&"GET /api/usage?days=7".to_owned()), "{backed:?}");
    assert!(backed.iter().any(|c| c.contains("\"shape\":\"models\"")), "{backed:?}");
    // The charts' data: every day of the period, one series per model, aligned.
    let data: Value = serde_json::from_str(&page.texts("#usage-data").join("")).unwrap();
    assert_eq!(data["days"].as_array().unwrap().len(), 7);
    let models: Vec<&str> = data["models"].as_array().unwrap().iter().map(|m| m.as_str().unwrap()).collect();
    assert!(models.contains(&"gpt-4o-mini") && models.contains(&"claude-sonnet-4-5"), "{models:?}");
    let i = models.iter().position(|m| *m == "gpt-4o-mini").unwrap();
    assert_eq!(data["tokens"][i][6], 150_000);
    // Both charts are declared for the script, with a text alternative.
    assert_eq!(page.attrs(".chart", "data-metric"), ["cost", "tokens"]);
    // Today is charted by the hour: a point per UTC hour since midnight, from q/1
    // `usage_hourly`, the span in the hour it started.
    let today = visitor.get("/dashboard/usage?days=1").await;
    assert!(today.backed_by().iter().any(|c| c.contains("\"shape\":\"usage_hourly\"")), "{:?}", today.backed_by());
    assert!(today.texts("h2").contains(&"Cost per hour by model".to_owned()), "{:?}", today.texts("h2"));
    let data: Value = serde_json::from_str(&today.texts("#usage-data").join("")).unwrap();
    let hours = data["days"].as_array().unwrap();
    assert!((1..=24).contains(&hours.len()), "{hours:?}");
    assert!(hours.iter().all(|h| h.as_str().unwrap().len() == 13), "YYYY-MM-DDTHH: {hours:?}");
    let models: Vec<&str> = data["models"].as_array().unwrap().iter().map(|m| m.as_str().unwrap()).collect();
    let i = models.iter().position(|m| *m == "gpt-4o-mini").unwrap();
    let used: i64 = data["tokens"][i].as_array().unwrap().iter().map(|t| t.as_i64().unwrap()).sum();
    assert_eq!(used, 150_000, "{data}");
    // A dated release sums under its family, with each release's share of the cost.
    post_json(&server, "/v1/traces", &genai_span(3, 3, "gpt-4o-mini-2024-07-18", 120_000, 30_000, "s-usage-3")).await;
    let page = visitor.get("/dashboard/usage?days=7").await;
    let rows = page.texts("table.bars-table tbody tr td:first-child");
    let family = rows.iter().position(|r| r == "gpt-4o-mini").unwrap_or_else(|| panic!("{rows:?}"));
    assert_eq!(rows[family + 1..family + 3], ["↳ gpt-4o-mini 50 %", "↳ gpt-4o-mini-2024-07-18 50 %"], "{rows:?}");
    assert_eq!(page.texts("table.bars-table tr.sub").len(), 2);
    // A period the page does not offer falls back to 30 days.
    let odd = visitor.get("/dashboard/usage?days=abc").await;
    assert_eq!(odd.status, StatusCode::OK);
    assert_eq!(odd.attrs("select[name=days] option[selected]", "value"), ["30"]);
}

each_backend!(usage_shows_totals_models_days_and_chart_data);
