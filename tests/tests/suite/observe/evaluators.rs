//! LLM judges end to end: an evaluator on a fake judge (which answers "score: 0.8") judges
//! its share of new calls, charges its budget exactly, stops when the budget is spent,
//! never judges its own calls, and records failures without retrying them for ever.

use std::time::Duration;

use opentelemetry_proto::tonic::{
    collector::trace::v1::{ExportTraceServiceRequest, trace_service_client::TraceServiceClient},
    common::v1::{AnyValue, KeyValue, any_value::Value as Any},
    resource::v1::Resource,
    trace::v1::{ResourceSpans, ScopeSpans, Span},
};
use roost_server::llm::Upstream;
use roost_tests::{
    Api, Backend, TestServer, each_backend,
    fake_judge::{ANSWER, CALL_NANOCENTS, FAILING_MODEL, FakeJudge, JUDGE_MODEL},
};
use serde_json::{Value, json};

use super::q1;

each_backend!(an_evaluator_judges_its_share_of_new_calls_within_its_budget, judge_failures_are_recorded_and_bounded);

fn text(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(Any::StringValue(value.into())) }),
        ..Default::default()
    }
}

/// `count` model calls, each a trace of its own (`tag` tells batches apart), in `session`.
fn calls(tag: u8, count: usize, session: &str) -> ExportTraceServiceRequest {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    let spans = (0..count)
        .map(|i| {
            let mut trace_id = vec![tag; 16];
            trace_id[..8].copy_from_slice(&(i as u64 + 1).to_be_bytes());
            Span {
                trace_id,
                span_id: (i as u64 + 1).to_be_bytes().to_vec(),
                name: "chat m-app".into(),
                start_time_unix_nano: now,
                end_time_unix_nano: now + 1_000_000,
                attributes: vec![
                    text("gen_ai.operation.name", "chat"),
                    text("gen_ai.request.model", "m-app"),
                    text("session.id", session),
                    text("gen_ai.input.messages", r#"[{"role":"user","parts":[{"type":"text","content":"2+2?"}]}]"#),
                    text("gen_ai.output.messages", r#"[{"role":"assistant","parts":[{"type":"text","content":"4"}]}]"#),
                ],
                ..Default::default()
            }
        })
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource { attributes: vec![text("service.name", "app")], ..Default::default() }),
            scope_spans: vec![ScopeSpans { spans, ..Default::default() }],
            ..Default::default()
        }],
    }
}

async fn start(backend: Backend, judge: &FakeJudge) -> TestServer {
    let upstream = judge.base_url();
    TestServer::start_with(backend, move |config| {
        config.hosting.models.openai = Some(Upstream { base_url: upstream, api_key: Some("sk-operator".into()) });
        config.evaluations_every = Duration::from_millis(50);
    })
    .await
}

async fn ingest(server: &TestServer, request: ExportTraceServiceRequest) {
    TraceServiceClient::new(server.channel().await).export(request).await.expect("export");
}

/// Waits until the worker has made a pass that read `id`'s settings after this call: a
/// pass that began before a change judges with what it read then. Twice, a span that is no
/// model call is stored and the cursor awaited past it; the second is read by a pass that
/// began after the first was (see `worker`'s pass: the settings, then the spans).
async fn fresh_pass(server: &TestServer, id: &str) {
    for marker in [0xf1_u8, 0xf2] {
        let mut request = calls(marker, 1, "marker");
        for span in &mut request.resource_spans[0].scope_spans[0].spans {
            span.attributes.retain(|kv| kv.key == "session.id");
        }
        ingest(server, request).await;
        let newest = server.sql("SELECT MAX(id) FROM spans").await.unwrap()[0];
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while server.sql(&format!("SELECT cursor FROM evaluators WHERE id = '{id}'")).await.unwrap()[0] < newest {
            assert!(tokio::time::Instant::now() < deadline, "no pass read the marker");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Waits until the evaluator has looked at every stored span and has nothing pending
/// (while it may judge); its detail.
async fn settled(server: &TestServer, api: &Api, id: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let cursor = server.sql(&format!("SELECT cursor FROM evaluators WHERE id = '{id}'")).await.unwrap()[0];
        let newest =
            server.sql("SELECT COALESCE(MAX(id), 0) FROM spans WHERE service <> 'roost-evaluations'").await.unwrap()[0];
        let pending = server
            .sql(&format!("SELECT COUNT(*) FROM judgements WHERE evaluator_id = '{id}' AND status = 'pending'"))
            .await
            .unwrap()[0];
        // Read after the counts: once they say it is settled, this is its final state.
        let detail = api.get(&format!("/api/v1/evaluators/{id}")).await.ok();
        let judging = detail["evaluator"]["status"] == "active";
        if cursor >= newest && (pending == 0 || !judging) {
            return detail;
        }
        assert!(tokio::time::Instant::now() < deadline, "the evaluator did not settle: {detail}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn an_evaluator_judges_its_share_of_new_calls_within_its_budget(backend: Backend) {
    let judge = FakeJudge::start().await;
    let server = start(backend, &judge).await;
    let api = server.api(None);
    // Calls stored before the evaluator exists are not its.
    ingest(&server, calls(1, 5, "before")).await;

    let prompt = "Question and answer:\n{{input}}\n---\n{{output}}\nGrade the answer from 0 to 1 as `score: N`.";
    let base = json!({"name": "correctness", "model": JUDGE_MODEL, "prompt": prompt, "sample_rate": 0.1,
        "budget_nanocents": 1_000_000_000_000_i64});
    for (change, code) in [
        (json!({"model": "m-unpriced"}), "unpriced_model"),
        (json!({"prompt": "no placeholder"}), "invalid_argument"),
        (json!({"budget_nanocents": 0}), "invalid_argument"),
        (json!({"sample_rate": 2.0}), "invalid_argument"),
        (json!({"output": "vibes"}), "invalid_argument"),
        (json!({"output": "category"}), "invalid_argument"),
        (json!({"name": ""}), "invalid_argument"),
        (json!({"colour": "red"}), "invalid_argument"),
    ] {
        let mut body = base.clone();
        body.as_object_mut().unwrap().extend(change.as_object().unwrap().clone());
        api.post("/api/v1/evaluators", json!({"evaluator": body})).await.err(400, code);
    }
    assert_eq!(server.sql("SELECT COUNT(*) FROM evaluators").await.unwrap(), [0]);
    let created = api.post("/api/v1/evaluators", json!({"evaluator": base})).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let evaluator = created.ok()["evaluator"].clone();
    let id = evaluator["id"].as_str().unwrap().to_owned();
    assert_eq!((evaluator["status"].as_str(), evaluator["output"].as_str()), (Some("active"), Some("number")));

    // 1,000 new calls: about a tenth are judged.
    for batch in 0..10 {
        ingest(&server, calls(10 + batch, 100, "s-new")).await;
    }
    let detail = settled(&server, &api, &id).await;
    let judged = detail["evaluator"]["judged"].as_i64().unwrap();
    assert!((70..=130).contains(&judged), "10 % ± 3 % of 1,000: {judged}");
    assert_eq!(judge.answered(), judged as u64, "one judge call per judged call");
    assert_eq!(detail["evaluator"]["failed"], 0, "{detail}");
    // The budget is charged exactly: the calls' price, and the sum of the judgements.
    let spent = detail["evaluator"]["spent_nanocents"].as_i64().unwrap();
    assert_eq!(spent, judged * CALL_NANOCENTS);
    let summed = server
        .sql(&format!("SELECT CAST(SUM(cost_nanocents) AS BIGINT) FROM judgements WHERE evaluator_id = '{id}'"))
        .await
        .unwrap();
    assert_eq!(summed, [spent]);
    // Each grade is an `eval` score on its call, by this evaluator.
    let scores = q1(&api, "scores", json!({"evaluator_id": id})).await;
    assert_eq!(scores.len(), 1, "{scores:?}");
    assert_eq!((scores[0]["name"].as_str(), scores[0]["scores"].as_i64()), (Some("correctness"), Some(judged)));
    assert_eq!(scores[0]["mean"].as_f64(), Some(0.8));
    let one = &q1(&api, "score_list", json!({"evaluator_id": id, "limit": 1})).await[0];
    assert_eq!(
        (one["source"].as_str(), one["target"].as_str(), one["model"].as_str()),
        (Some("eval"), Some("span"), Some("m-app"))
    );
    assert_eq!(one["comment"], ANSWER);
    // Calls from before it existed were not taken; its judge calls are spans of their own,
    // which it never takes.
    let before = server
        .sql(&format!("SELECT COUNT(*) FROM judgements WHERE trace_id LIKE '%{}'", "01".repeat(8)))
        .await
        .unwrap();
    assert_eq!(before, [0]);
    let judge_spans = q1(&api, "spans", json!({"service": "roost-evaluations", "limit": 1000})).await;
    assert_eq!(judge_spans.len() as i64, judged);
    assert_eq!(judge_spans[0]["attributes"]["roost.evaluator.id"], id.as_str(), "{:?}", judge_spans[0]);
    let own = server
        .sql("SELECT COUNT(*) FROM judgements j JOIN spans s ON s.trace_id = j.trace_id WHERE s.service = 'roost-evaluations'")
        .await
        .unwrap();
    assert_eq!(own, [0], "a judge never evaluates its own calls");

    // A budget with room for two and a half more calls: it judges three, then stops, and
    // says so.
    let budget = spent + CALL_NANOCENTS * 5 / 2;
    let updated = api
        .post(&format!("/api/v1/evaluators/{id}"), json!({"budget_nanocents": budget, "sample_rate": 1.0}))
        .await
        .ok();
    assert_eq!(updated["evaluator"]["sample_rate"], 1.0);
    fresh_pass(&server, &id).await;
    ingest(&server, calls(30, 50, "s-more")).await;
    let detail = settled(&server, &api, &id).await;
    let evaluator = &detail["evaluator"];
    assert_eq!(evaluator["judged"].as_i64(), Some(judged + 3), "{detail}");
    assert_eq!(evaluator["spent_nanocents"].as_i64(), Some(spent + 3 * CALL_NANOCENTS));
    assert_eq!(evaluator["status"], "budget_spent");
    assert!(evaluator["status_detail"].as_str().unwrap().contains("budget"), "{evaluator}");
    assert_eq!(judge.answered(), (judged + 3) as u64);
    // Nothing more is judged while the budget is spent.
    ingest(&server, calls(31, 10, "s-more")).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(judge.answered(), (judged + 3) as u64);
    // Paused and deleted; its scores stay.
    let paused = api.post(&format!("/api/v1/evaluators/{id}"), json!({"enabled": false})).await.ok();
    assert_eq!(paused["evaluator"]["status"], "paused");
    let listed = api.get("/api/v1/evaluators").await.ok();
    assert_eq!(listed["evaluators"].as_array().map(Vec::len), Some(1));
    api.delete_path(&format!("/api/v1/evaluators/{id}")).await.ok();
    api.get(&format!("/api/v1/evaluators/{id}")).await.err(404, "not_found");
    assert_eq!(q1(&api, "scores", json!({"evaluator_id": id})).await[0]["scores"].as_i64(), Some(judged + 3));
}

async fn judge_failures_are_recorded_and_bounded(backend: Backend) {
    let judge = FakeJudge::start().await;
    let server = start(backend, &judge).await;
    let api = server.api(None);
    // A judge whose upstream is down: each call gets 3 attempts, then is failed; nothing
    // is charged.
    let down = api
        .post(
            "/api/v1/evaluators",
            json!({"evaluator": {"name": "down", "model": FAILING_MODEL, "prompt": "{{output}}",
                "filter": {"session_id": "s-down"}, "budget_usd": 1.0}}),
        )
        .await
        .ok()["evaluator"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // A judge whose answer names none of the categories: failed at once, and charged.
    let unreadable = api
        .post(
            "/api/v1/evaluators",
            json!({"evaluator": {"name": "tone", "model": JUDGE_MODEL, "prompt": "{{output}}", "output": "category",
                "categories": ["friendly", "rude"], "filter": {"session_id": "s-tone"}, "budget_usd": 1.0}}),
        )
        .await
        .ok()["evaluator"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    ingest(&server, calls(40, 2, "s-down")).await;
    ingest(&server, calls(41, 2, "s-tone")).await;

    let detail = settled(&server, &api, &down).await;
    assert_eq!((detail["evaluator"]["failed"].as_i64(), detail["evaluator"]["judged"].as_i64()), (Some(2), Some(0)));
    assert_eq!(detail["evaluator"]["spent_nanocents"], 0);
    for judgement in detail["judgements"].as_array().unwrap() {
        assert_eq!(
            (judgement["status"].as_str(), judgement["attempts"].as_i64()),
            (Some("failed"), Some(3)),
            "{judgement}"
        );
        assert!(judgement["error"].as_str().unwrap().contains("500"), "{judgement}");
    }
    assert_eq!(judge.failed(), 6, "3 attempts per call, no more");

    let detail = settled(&server, &api, &unreadable).await;
    assert_eq!(detail["evaluator"]["failed"].as_i64(), Some(2), "{detail}");
    assert_eq!(detail["evaluator"]["spent_nanocents"].as_i64(), Some(2 * CALL_NANOCENTS), "answered calls are paid");
    for judgement in detail["judgements"].as_array().unwrap() {
        assert_eq!((judgement["status"].as_str(), judgement["attempts"].as_i64()), (Some("failed"), Some(1)));
        assert!(judgement["error"].as_str().unwrap().contains("names none of"), "{judgement}");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!((judge.failed(), judge.answered()), (6, 2), "nothing is retried once failed");
}
