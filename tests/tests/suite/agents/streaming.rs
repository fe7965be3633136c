//! Streamed turns: `POST /api/instances/{id}/messages` with `Accept: text/event-stream` and
//! `AgentService.StreamMessage` send the reply as it is written (`delta`), tool steps as
//! they start and end (`tool`), and end with `done`, exactly the synchronous answer; a
//! client that hangs up cancels the turn, which is settled.

use std::time::Duration;

use roost_proto::v1::StreamMessageRequest;
use roost_tests::{
    Api, Backend, SseClient, SseItem, TestAccount, TestServer, each_backend,
    fake_models::{self, FakeModels},
};
use serde_json::{Value, json};

use super::{
    gateway::{agent as gateway_agent, start_gateway},
    money::assert_books_balance,
    start,
};

each_backend!(
    echo_and_process_turns_stream_and_end_with_the_synchronous_answer,
    the_assistant_streams_while_the_upstream_writes,
    a_client_hanging_up_cancels_the_turn_and_settles_it,
    tool_steps_stream_from_the_agents_model_calls,
    a_streamed_turn_over_grpc_ends_with_the_synchronous_answer
);

/// How long one event may take to arrive.
const EVENT: Duration = Duration::from_secs(20);

/// A streamed turn's events, in order, until `done` or `error`.
#[derive(Debug, Default)]
pub(crate) struct Streamed {
    /// Each delta's text.
    pub deltas: Vec<String>,
    /// Each tool event.
    pub tools: Vec<Value>,
    /// The final `done` (or `error`) event's name and data.
    pub end: Option<(String, Value)>,
    /// The event names in order.
    pub order: Vec<String>,
}

impl Streamed {
    /// The reply the deltas make.
    pub fn text(&self) -> String {
        self.deltas.concat()
    }

    /// The `done` event's data (panics on an error).
    #[track_caller]
    pub fn done(&self) -> &Value {
        match &self.end {
            Some((name, data)) if name == "done" => data,
            other => panic!("the turn did not end with done: {other:?} ({self:?})"),
        }
    }
}

/// Opens a streamed turn.
pub(crate) async fn open(api: &Api, id: &str, text: &str) -> SseClient {
    let request = api.post_request(&format!("/api/instances/{id}/messages"), json!({ "text": text }));
    SseClient::open(request).await.unwrap_or_else(|(status, body)| panic!("{status}: {body}"))
}

/// Reads a streamed turn to its end.
pub(crate) async fn read_to_end(mut stream: SseClient) -> Streamed {
    let mut streamed = Streamed::default();
    while let Some(item) = stream.next_event(EVENT).await {
        let SseItem::Event { event, data, .. } = item else { continue };
        let data: Value = serde_json::from_str(&data).unwrap_or_else(|_| panic!("JSON data: {data}"));
        streamed.order.push(event.clone());
        match event.as_str() {
            "delta" => streamed.deltas.push(data["text"].as_str().expect("a delta's text").to_owned()),
            "tool" => streamed.tools.push(data),
            "done" | "error" => {
                streamed.end = Some((event, data));
                break;
            }
            other => panic!("unexpected event {other}: {data}"),
        }
    }
    streamed
}

/// A streamed turn, read to its end.
pub(crate) async fn stream_turn(api: &Api, id: &str, text: &str) -> Streamed {
    read_to_end(open(api, id, text).await).await
}

/// `done` holds the synchronous answer: the same fields, and for the same message to the
/// same agent the same reply, usage and charge.
fn assert_done_is_the_synchronous_answer(done: &Value, sync: &Value) {
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(done), keys(sync), "done: {done}\nsync: {sync}");
    for field in ["reply", "usage", "charged_cents", "charged_nanocents"] {
        assert_eq!(done[field], sync[field], "{field}: done {done} sync {sync}");
    }
}

async fn echo_and_process_turns_stream_and_end_with_the_synchronous_answer(backend: Backend) {
    let server = start(backend, |_| {}).await;
    let account = server.account(5_000).await;
    let api = server.api(Some(&account));

    // echo streams word by word.
    let echo = api.provision("echo", "Echo").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&echo, "running").await;
    let streamed = stream_turn(&api, &echo, "hello streaming world").await;
    assert_eq!(streamed.deltas, ["[Echo]", " hello", " streaming", " world"], "{streamed:?}");
    let done = streamed.done();
    assert_eq!(done["reply"], "[Echo] hello streaming world");
    assert_eq!(streamed.text(), done["reply"].as_str().unwrap());
    let sync = api.message(&echo, "hello streaming world").await.ok();
    assert_done_is_the_synchronous_answer(done, &sync);
    assert_ne!(done["turn_id"], sync["turn_id"]);

    // The process runtime answers its own event stream: text arrives while it still works.
    let example = api.provision("example", "Ex").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&example, "running").await;
    let mut stream = open(&api, &example, "sleep:1500 finally done").await;
    let first = stream.next_event(EVENT).await.expect("a first delta");
    let SseItem::Event { event, data, .. } = &first else { panic!("{first:?}") };
    assert_eq!((event.as_str(), data.as_str()), ("delta", r#"{"text":"[Ex] "}"#));
    assert!(stream.next_event(Duration::from_millis(300)).await.is_none(), "nothing more while the runtime sleeps");
    let rest = read_to_end(stream).await;
    let done = rest.done();
    assert_eq!(done["reply"], "[Ex] finally done");
    assert_eq!(format!("[Ex] {}", rest.text()), "[Ex] finally done");
    let sync = api.message(&example, "sleep:1500 finally done").await.ok();
    assert_done_is_the_synchronous_answer(done, &sync);
    assert!(done["duration_ms"].as_i64().unwrap() >= 1_500, "{done}");

    // A runtime failing mid-stream ends it with the synchronous call's error body.
    let failed = stream_turn(&api, &example, "crash").await;
    let (name, error) = failed.end.clone().unwrap();
    assert_eq!((name.as_str(), error["code"].as_str()), ("error", Some("runtime_failed")), "{failed:?}");

    // What is refused before the turn starts is a plain error answer, as for the
    // synchronous call.
    let stranger = server.account(0).await;
    let refused = SseClient::open(
        server.api(Some(&stranger)).post_request(&format!("/api/instances/{echo}/messages"), json!({"text": "hi"})),
    )
    .await
    .expect_err("not the stranger's agent");
    assert_eq!((refused.0, refused.1["code"].as_str()), (404, Some("not_found")));
    let empty = SseClient::open(api.post_request(&format!("/api/instances/{echo}/messages"), json!({"text": ""})))
        .await
        .expect_err("an empty message");
    assert_eq!(empty.0, 400);

    // Both turns are in the agent's activity, as any other turn.
    let activity = api.get(&format!("/api/instances/{echo}/activity")).await.ok();
    let turns = activity["turns"].as_array().unwrap();
    assert!(turns.iter().any(|t| t["id"] == done_turn(&streamed) && t["status"] == "completed"), "{activity}");
}

fn done_turn(streamed: &Streamed) -> Value {
    streamed.done()["turn_id"].clone()
}

/// An assistant agent of [`FakeModels`] whose stream pauses `delay_ms` between chunks.
async fn assistant(backend: Backend, fake: &FakeModels) -> (TestServer, TestAccount, String) {
    let server = start_gateway(backend, fake, |_| {}).await;
    let account = server.account(10_000).await;
    let api = server.api(Some(&account));
    let created = api.post("/api/provision", json!({"runtime": "assistant-free", "brief": "Be brief."})).await.ok();
    let id = created["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    api.post(&format!("/api/instances/{id}/config"), json!({"model": "gpt-4o-mini"})).await.ok();
    api.wait_status(&id, "running").await;
    (server, account, id)
}

async fn the_assistant_streams_while_the_upstream_writes(backend: Backend) {
    let fake = FakeModels::start().await;
    let (server, account, id) = assistant(backend, &fake).await;
    let api = server.api(Some(&account));
    let sync = api.message(&id, "What is the capital of France?").await.ok();
    assert_eq!(sync["reply"], fake_models::REPLY);

    fake.set_delay(150);
    let mut stream = open(&api, &id, "What is the capital of France?").await;
    let first = stream.next_event(EVENT).await.expect("a first delta");
    assert!(matches!(&first, SseItem::Event { event, .. } if event == "delta"), "{first:?}");
    assert_eq!(fake.open_streams(), 1, "the first text arrived while the upstream was still writing");
    let rest = read_to_end(stream).await;
    let SseItem::Event { data, .. } = first else { unreachable!() };
    let first: Value = serde_json::from_str(&data).unwrap();
    assert_eq!(format!("{}{}", first["text"].as_str().unwrap(), rest.text()), fake_models::REPLY);
    assert!(rest.deltas.len() > 2, "many deltas: {rest:?}");
    assert_done_is_the_synchronous_answer(rest.done(), &sync);
    assert!(rest.done()["charged_nanocents"].as_i64().unwrap() > 0, "the streamed call is charged");
    assert_books_balance(&server, &account).await;
}

async fn a_client_hanging_up_cancels_the_turn_and_settles_it(backend: Backend) {
    // A process runtime: the turn stops, is recorded as cancelled, and the agent takes the
    // next message at once.
    let server = start(backend, |_| {}).await;
    let account = server.account(5_000).await;
    let api = server.api(Some(&account));
    let example = api.provision("example", "Ex").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&example, "running").await;
    let mut stream = open(&api, &example, "sleep:30000 never").await;
    assert!(stream.next_event(EVENT).await.is_some(), "the first delta");
    drop(stream);
    let cancelled = wait_for_turn(&api, &example, "sleep:30000 never").await;
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    assert!(cancelled["error"].as_str().unwrap().contains("hung up"), "{cancelled}");
    let next = api.message(&example, "next").await.ok();
    assert_eq!(next["reply"], "[Ex] next", "the agent is free again");

    // An assistant: the upstream call is cancelled too, and what was spent is settled.
    let fake = FakeModels::start().await;
    let (server, account, id) = assistant(backend, &fake).await;
    let api = server.api(Some(&account));
    fake.set_delay(400);
    let mut stream = open(&api, &id, "Tell me slowly.").await;
    assert!(stream.next_event(EVENT).await.is_some(), "the first delta");
    drop(stream);
    let cancelled = wait_for_turn(&api, &id, "Tell me slowly.").await;
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    for _ in 0..100 {
        if fake.open_streams() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(fake.open_streams(), 0, "the upstream call was dropped");
    assert_books_balance(&server, &account).await;
    fake.set_delay(0);
    assert_eq!(api.message(&id, "Again?").await.ok()["reply"], fake_models::REPLY);
}

/// The agent's turn for `text` once it is over (polls its activity).
async fn wait_for_turn(api: &Api, id: &str, text: &str) -> Value {
    for _ in 0..200 {
        let activity = api.get(&format!("/api/instances/{id}/activity")).await.ok();
        let found = activity["turns"].as_array().unwrap().iter().find(|t| t["text"] == text).cloned();
        if let Some(turn) = found.filter(|t| t["status"] != "running") {
            return turn;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the turn for {text:?} was not recorded");
}

async fn tool_steps_stream_from_the_agents_model_calls(backend: Backend) {
    let fake = FakeModels::start().await;
    let server = start_gateway(backend, &fake, |_| {}).await;
    let account = server.account(10_000).await;
    let api = server.api(Some(&account));
    let id = gateway_agent(&api).await;
    for command in ["openai-tool", "openai-tool-stream", "anthropic-tool"] {
        let streamed = stream_turn(&api, &id, command).await;
        let reply = streamed.done()["reply"].as_str().unwrap().to_owned();
        assert_eq!(streamed.text(), reply, "a runtime that does not stream gives its reply as one delta");
        assert_eq!(streamed.order, ["tool", "tool", "delta", "done"], "{command}: {streamed:?}");
        let (started, finished) = (&streamed.tools[0], &streamed.tools[1]);
        assert_eq!(started["name"], "get_weather", "{command}: {started}");
        assert_eq!(started["finished"], false);
        assert!(started["arguments"].as_str().unwrap().contains("Paris"), "{started}");
        assert_eq!((finished["id"].clone(), finished["finished"].clone()), (started["id"].clone(), json!(true)));
        assert!(!finished["result"].as_str().unwrap().is_empty(), "{finished}");
        assert!(finished["duration_ms"].as_i64().is_some(), "{finished}");
    }
    assert_books_balance(&server, &account).await;
}

async fn a_streamed_turn_over_grpc_ends_with_the_synchronous_answer(backend: Backend) {
    let server = start(backend, |_| {}).await;
    let account = server.account(5_000).await;
    let api = server.api(Some(&account));
    let echo = api.provision("echo", "G").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&echo, "running").await;
    let mut agents = server.agents(&account.key).await;
    let request = StreamMessageRequest { instance_id: echo.clone(), text: "over grpc".into() };
    let mut stream = agents.stream_message(request).await.expect("the stream opens").into_inner();
    let mut text = String::new();
    let mut done = None;
    while let Some(event) = stream.message().await.expect("no error mid-stream") {
        assert!(done.is_none(), "done is the last event");
        if let Some(delta) = event.delta {
            text.push_str(&delta.text);
        }
        done = done.or(event.done);
    }
    let done = done.expect("a done event");
    assert_eq!((done.reply.as_str(), text.as_str()), ("[G] over grpc", "[G] over grpc"));
    let sync = api.message(&echo, "over grpc").await.ok();
    assert_eq!(sync["reply"], done.reply.as_str());

    // Errors before the turn are the call's status.
    let missing = StreamMessageRequest { instance_id: "ins_missing".into(), text: "hi".into() };
    let status = agents.stream_message(missing).await.expect_err("no such agent");
    assert_eq!(status.code(), tonic::Code::NotFound);
}
