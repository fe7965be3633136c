//! Streamed turns benchmark (docs/hosting.md#streamed-turns; targets: a streamed turn's
//! first text within 50 ms of the upstream's first token, roost's share of it < 1 ms).
//!
//! `cargo build --release -p roost-server && cargo bench -p roost-tests --bench streamed`
//! runs the real release `roost serve` as a child process (SQLite, metered: the built-in
//! price book prices `gpt-4o-mini`), so its resident memory and CPU time are its own, read
//! from `/proc/<pid>`. This process holds the clients and the fake model upstreams.
//!
//! 1. **assistant** (managed, its model call through roost's model gateway) against a fake
//!    OpenAI upstream that streams slowly: its first token ROOST_BENCH_FIRST_TOKEN_MS (50)
//!    after the request, then a chunk every ROOST_BENCH_CHUNK_MS (5), ROOST_BENCH_CHUNKS
//!    (20) chunks in all; asked without `stream`, it answers after the same time. One agent
//!    takes ROOST_BENCH_TURNS (300) rounds of: a turn streamed over REST SSE, the same over
//!    gRPC `AgentService.StreamMessage`, the same synchronously. Timed: the request to the
//!    first `delta` at the client; the upstream's first token to that delta (roost's relay);
//!    the request to the upstream receiving the call (what roost does before it); roost's
//!    share of the first text (the first delta's time less the upstream's own time to its
//!    first token); the request to `done`; the synchronous reply's total and roost's share
//!    of it (less the upstream's time).
//! 2. **Hermes** (packaged, sandboxed; installed by `scripts/test --setup-only`; skipped with
//!    a message when it is not) behind the scripted model ([`ScriptedModel`], which answers
//!    at once): ROOST_BENCH_HERMES_TURNS (50) rounds of a streamed turn (first delta, how
//!    many deltas, `done`) and a synchronous one. Hermes gives roost its reply as one
//!    delta, so its first delta comes with its whole reply.
//! 3. **Held streams**: ROOST_BENCH_STREAMS (1,000) assistant agents, each with a streamed
//!    turn whose upstream sends its first token and then stalls, so the SSE answer, the
//!    turn and its gateway call stay open. The server's resident memory (VmRSS) with the
//!    agents idle and with the streams open, and its CPU time (utime + stime) over
//!    ROOST_BENCH_IDLE_SECS (16, longer than the SSE keep-alive interval of 15 s) in each
//!    state.
//!
//! Everything shares the machine's cores; the client's clock reads are on the same
//! `Instant` as the fake upstream's, so the differences are exact up to scheduling.

// Benchmark code: a failed unwrap is a broken run.
#![allow(clippy::unwrap_used)]

use std::{
    convert::Infallible,
    process::Child,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{
    Json, Router,
    body::{Body, Bytes},
    extract::State,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::post,
};
use futures::StreamExt as _;
use roost_proto::v1::{StreamMessageRequest, agent_service_client::AgentServiceClient};
use roost_server::runtimes::packaged::{Installation, Package};
use roost_tests::{
    Api, SseClient, SseItem, bench,
    fake_agent_model::ScriptedModel,
    process::{create_account, replica_command, serve_replica},
    roost_binary, tools,
};
use serde_json::{Value, json};

/// The model the assistant agents use: priced by the built-in book, so every call is metered.
const MODEL: &str = "gpt-4o-mini";
const TEXT: &str = "What is the capital of France?";

fn main() {
    bench::block_on(run());
}

async fn run() {
    let turns = bench::knob::<usize>("ROOST_BENCH_TURNS", 300);
    let hermes_turns = bench::knob::<usize>("ROOST_BENCH_HERMES_TURNS", 50);
    let streams = bench::knob::<usize>("ROOST_BENCH_STREAMS", 1000);
    let idle = Duration::from_secs(bench::knob::<u64>("ROOST_BENCH_IDLE_SECS", 16));
    let upstream = FakeUpstream::start(
        Duration::from_millis(bench::knob::<u64>("ROOST_BENCH_FIRST_TOKEN_MS", 50)),
        Duration::from_millis(bench::knob::<u64>("ROOST_BENCH_CHUNK_MS", 5)),
        bench::knob::<usize>("ROOST_BENCH_CHUNKS", 20).max(1),
    )
    .await;
    println!(
        "roost {} (release, SQLite), {} cores; upstream: first token after {} ms, then a chunk every {} ms, {} chunks",
        roost_binary().display(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        upstream.first_token.as_millis(),
        upstream.every.as_millis(),
        upstream.chunks,
    );

    let catalogue = format!(
        "[[runtime]]\nid = \"assistant\"\ndriver = \"assistant\"\nprice_cents_month = 0\nincluded_model = true\n\
         default_model = \"{MODEL}\"\n"
    );
    let roost = Roost::start(&catalogue, &upstream.base_url(), 1 + streams.div_ceil(100)).await;
    assistant_turns(&roost, &upstream, turns).await;
    held_streams(&roost, &upstream, streams, idle).await;
    drop(roost);

    hermes(hermes_turns).await;
}

// ---------------------------------------------------------------------------------------
// The real server.

/// `roost serve` (the release binary) on a data directory of its own; killed when dropped.
struct Roost {
    child: Child,
    base: String,
    keys: Vec<String>,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl Roost {
    /// Serves `catalogue` with `upstream` as the managed OpenAI upstream, with `accounts`
    /// accounts of a million dollars each (made before it starts, as an operator would).
    async fn start(catalogue: &str, upstream: &str, accounts: usize) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let db = format!("sqlite://{}", data.join("roost.db").display());
        let bin = roost_binary().display().to_string();
        std::fs::create_dir_all(&data).unwrap();
        std::fs::write(dir.path().join("runtimes.toml"), catalogue).unwrap();
        let keys = (0..accounts).map(|_| create_account(replica_command(&bin, &db, &data), 100_000_000)).collect();
        let runtimes = dir.path().join("runtimes.toml").display().to_string();
        // The runtimes' own warnings are not the bench's: errors only, and where it listens.
        let mut serve = replica_command(&bin, &db, &data);
        serve.env("RUST_LOG", "error,roost_server::serve=info");
        let (child, base) = serve_replica(
            serve,
            10,
            &["--runtimes", &runtimes, "--model-upstream-url", upstream, "--model-upstream-key", "sk-bench"],
        );
        let http = reqwest::Client::builder().timeout(Duration::from_secs(600)).build().unwrap();
        Self { child, base, keys, http, _dir: dir }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn api(&self, account: usize) -> Api {
        Api::new(self.http.clone(), self.base.clone(), Some(self.keys[account].clone()))
    }

    /// Provisions `runtime` on `account` and waits until it runs.
    async fn agent(&self, account: usize, runtime: &str, boot: Duration) -> String {
        let api = self.api(account);
        let id = api.provision(runtime, "Be brief.").await["id"].as_str().unwrap().to_owned();
        api.wait_status_within(&id, "running", boot).await;
        id
    }
}

impl Drop for Roost {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------
// The fake upstream: streams slowly, says when it sent what.

/// When the upstream received the last call and sent its first and last text.
#[derive(Debug, Default, Clone, Copy)]
struct Timing {
    received: Option<Instant>,
    first: Option<Instant>,
    last: Option<Instant>,
}

struct FakeUpstream {
    addr: std::net::SocketAddr,
    first_token: Duration,
    every: Duration,
    chunks: usize,
    /// Streams stop after their first token until the client goes.
    stall: AtomicBool,
    /// Streamed answers being sent.
    open: AtomicUsize,
    timing: Mutex<Timing>,
}

impl FakeUpstream {
    async fn start(first_token: Duration, every: Duration, chunks: usize) -> Arc<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstream = Arc::new(Self {
            addr: listener.local_addr().unwrap(),
            first_token,
            every,
            chunks,
            stall: AtomicBool::new(false),
            open: AtomicUsize::new(0),
            timing: Mutex::new(Timing::default()),
        });
        let app = Router::new().route("/v1/chat/completions", post(completions)).with_state(upstream.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        upstream
    }

    fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The whole reply: what its chunks add up to.
    fn reply(&self) -> String {
        (0..self.chunks).map(piece).collect()
    }

    fn timing(&self) -> Timing {
        *self.timing.lock().unwrap()
    }

    fn mark(&self, at: impl FnOnce(&mut Timing) -> &mut Option<Instant>) {
        *at(&mut self.timing.lock().unwrap()) = Some(Instant::now());
    }
}

fn piece(i: usize) -> String {
    format!("word{i} ")
}

/// Counts a streamed answer as open until its body is dropped.
struct Open(Arc<FakeUpstream>);

impl Open {
    fn new(upstream: Arc<FakeUpstream>) -> Self {
        upstream.open.fetch_add(1, Ordering::SeqCst);
        Self(upstream)
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Which instant a frame's sending marks.
#[derive(Clone, Copy, PartialEq)]
enum Mark {
    None,
    First,
    Last,
}

async fn completions(State(upstream): State<Arc<FakeUpstream>>, body: Bytes) -> Response {
    *upstream.timing.lock().unwrap() = Timing { received: Some(Instant::now()), ..Timing::default() };
    let request: Value = serde_json::from_slice(&body).unwrap_or_default();
    let model = request["model"].clone();
    let usage = json!({"prompt_tokens": 40, "completion_tokens": upstream.chunks,
        "total_tokens": 40 + upstream.chunks});
    if request["stream"] != true {
        tokio::time::sleep(upstream.first_token + upstream.every * (upstream.chunks as u32 - 1)).await;
        upstream.mark(|t| &mut t.last);
        let message = json!({"role": "assistant", "content": upstream.reply()});
        return Json(json!({"id": "chatcmpl-bench", "object": "chat.completion", "created": 1_700_000_000,
            "model": model, "choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "usage": usage}))
        .into_response();
    }
    let chunk = |delta: Value, finish: Value, usage: Value| {
        let chunk = json!({"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1_700_000_000,
            "model": model, "choices": if usage.is_null() {
                json!([{"index": 0, "delta": delta, "finish_reason": finish}])
            } else { json!([]) }, "usage": usage});
        format!("data: {chunk}\n\n")
    };
    // (pause before, frame, what sending it marks)
    let mut frames = vec![(
        upstream.first_token,
        chunk(json!({"role": "assistant", "content": ""}), Value::Null, Value::Null)
            + &chunk(json!({"content": piece(0)}), Value::Null, Value::Null),
        Mark::First,
    )];
    if upstream.stall.load(Ordering::Relaxed) {
        frames.push((Duration::from_secs(3600), String::new(), Mark::None));
    }
    for i in 1..upstream.chunks {
        frames.push((upstream.every, chunk(json!({"content": piece(i)}), Value::Null, Value::Null), Mark::None));
    }
    let mut end = chunk(json!({}), json!("stop"), Value::Null);
    if request.pointer("/stream_options/include_usage") == Some(&json!(true)) {
        end += &chunk(Value::Null, Value::Null, usage);
    }
    end += "data: [DONE]\n\n";
    frames.push((Duration::ZERO, end, Mark::Last));
    let open = Open::new(upstream.clone());
    let body = futures::stream::unfold((frames.into_iter(), open), |(mut frames, open)| async move {
        let (pause, frame, mark) = frames.next()?;
        tokio::time::sleep(pause).await;
        match mark {
            Mark::First => open.0.mark(|t| &mut t.first),
            Mark::Last => open.0.mark(|t| &mut t.last),
            Mark::None => {}
        }
        Some((Ok::<_, Infallible>(Bytes::from(frame)), (frames, open)))
    });
    let headers = [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")];
    (StatusCode::OK, headers, Body::from_stream(body)).into_response()
}

// ---------------------------------------------------------------------------------------
// 1. The assistant: first text, streamed and synchronous turns.

/// One streamed turn as the client saw it.
struct Streamed {
    first_delta: Duration,
    done: Duration,
    deltas: usize,
    text: String,
    done_answer: Value,
}

/// A turn over REST SSE, read to its end; times from `started`.
async fn sse_turn(api: &Api, id: &str, text: &str, started: Instant, events: Duration) -> Streamed {
    let request = api.post_request(&format!("/api/instances/{id}/messages"), json!({ "text": text }));
    let mut stream = SseClient::open(request).await.unwrap_or_else(|(status, body)| panic!("{status}: {body}"));
    let (mut first, mut deltas, mut text) = (None, 0, String::new());
    loop {
        let item = stream.next_event(events).await.expect("the turn's next event in time");
        let at = started.elapsed();
        let SseItem::Event { event, data, .. } = item else { continue };
        let data: Value = serde_json::from_str(&data).unwrap();
        match event.as_str() {
            "delta" => {
                first.get_or_insert(at);
                deltas += 1;
                text.push_str(data["text"].as_str().unwrap());
            }
            "tool" => {}
            "done" => {
                // Read to the end of the answer, so the connection is kept for the next.
                while stream.next(Duration::from_secs(5)).await.is_some() {}
                return Streamed {
                    first_delta: first.expect("a delta before done"),
                    done: at,
                    deltas,
                    text,
                    done_answer: data,
                };
            }
            other => panic!("the turn ended with {other}: {data}"),
        }
    }
}

async fn assistant_turns(roost: &Roost, upstream: &FakeUpstream, turns: usize) {
    let api = roost.api(0);
    let id = roost.agent(0, "assistant", Duration::from_secs(20)).await;
    let channel = tonic::transport::Channel::from_shared(roost.base.clone()).unwrap().connect().await.unwrap();
    let mut grpc = AgentServiceClient::new(channel);
    let bearer: tonic::metadata::MetadataValue<_> = format!("Bearer {}", roost.keys[0]).parse().unwrap();
    let expected = upstream.reply();
    let upstream_first = upstream.first_token;
    let events = Duration::from_secs(30);
    let direct = reqwest::Client::new();
    let direct_url = format!("{}/chat/completions", upstream.base_url());
    let direct_body = json!({"model": MODEL, "stream": true, "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": TEXT}]});

    #[derive(Default)]
    struct Samples {
        first: Vec<Duration>,
        relay: Vec<Duration>,
        before_call: Vec<Duration>,
        share: Vec<Duration>,
        done: Vec<Duration>,
        after_last: Vec<Duration>,
        grpc_first: Vec<Duration>,
        grpc_relay: Vec<Duration>,
        grpc_share: Vec<Duration>,
        grpc_done: Vec<Duration>,
        sync: Vec<Duration>,
        sync_before_call: Vec<Duration>,
        sync_share: Vec<Duration>,
        deltas: Vec<usize>,
        direct_share: Vec<Duration>,
    }
    let mut s = Samples::default();
    let since = |from: Instant, to: Option<Instant>| to.expect("the upstream's mark").saturating_duration_since(from);

    // Warm up: connections, statements, the agent's history.
    for _ in 0..5 {
        sse_turn(&api, &id, TEXT, Instant::now(), events).await;
        api.message(&id, TEXT).await.ok();
    }
    let run = Instant::now();
    for _ in 0..turns {
        // REST SSE.
        let started = Instant::now();
        let turn = sse_turn(&api, &id, TEXT, started, events).await;
        let t = upstream.timing();
        assert_eq!(turn.text, expected);
        assert_eq!(turn.done_answer["reply"], expected.as_str());
        let received = since(started, t.received);
        let first_token = since(started, t.first);
        s.first.push(turn.first_delta);
        s.relay.push(turn.first_delta.saturating_sub(first_token));
        s.before_call.push(received);
        s.share.push(turn.first_delta.saturating_sub(first_token.saturating_sub(received)));
        s.done.push(turn.done);
        s.after_last.push(turn.done.saturating_sub(since(started, t.last)));
        s.deltas.push(turn.deltas);

        // gRPC StreamMessage.
        let started = Instant::now();
        let mut request = tonic::Request::new(StreamMessageRequest { instance_id: id.clone(), text: TEXT.into() });
        request.metadata_mut().insert("authorization", bearer.clone());
        let mut stream = grpc.stream_message(request).await.unwrap().into_inner();
        let (mut first, mut text) = (None, String::new());
        let done = loop {
            let event = stream.message().await.unwrap().expect("an event before the end");
            if let Some(delta) = event.delta {
                first.get_or_insert(started.elapsed());
                text.push_str(&delta.text);
            } else if let Some(done) = event.done {
                assert_eq!(done.reply, expected);
                break started.elapsed();
            }
        };
        assert!(stream.message().await.unwrap().is_none());
        let t = upstream.timing();
        assert_eq!(text, expected);
        let first = first.expect("a delta before done");
        let (received, first_token) = (since(started, t.received), since(started, t.first));
        s.grpc_first.push(first);
        s.grpc_relay.push(first.saturating_sub(first_token));
        s.grpc_share.push(first.saturating_sub(first_token.saturating_sub(received)));
        s.grpc_done.push(done);

        // The same streamed call straight to the upstream, read to its first text: the
        // harness's own share (client, loopback, the fake's server), none of it roost's.
        let started = Instant::now();
        let mut response = direct.post(&direct_url).json(&direct_body).send().await.unwrap();
        let mut first = None;
        while let Some(chunk) = response.chunk().await.unwrap() {
            if first.is_none() && chunk.windows(5).any(|w| w == b"word0") {
                first = Some(started.elapsed());
            }
        }
        let t = upstream.timing();
        let first = first.expect("the upstream's first text");
        let upstream_own = since(started, t.first).saturating_sub(since(started, t.received));
        s.direct_share.push(first.saturating_sub(upstream_own));

        // Synchronous.
        let started = Instant::now();
        let answer = api.message(&id, TEXT).await.ok();
        let total = started.elapsed();
        let t = upstream.timing();
        assert_eq!(answer["reply"], expected.as_str());
        let received = since(started, t.received);
        let upstream_time = since(started, t.last).saturating_sub(received);
        s.sync.push(total);
        s.sync_before_call.push(received);
        s.sync_share.push(total.saturating_sub(upstream_time));
    }
    let elapsed = run.elapsed();
    s.deltas.sort_unstable();

    let at = |samples: &[Duration], q: f64| samples[((samples.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    println!();
    println!(
        "1. assistant (managed, metered, through the model gateway): {turns} rounds of an SSE turn, a gRPC streamed turn \
         and a synchronous turn on one agent, {:.1} s ({} deltas a streamed turn, median)",
        elapsed.as_secs_f64(),
        s.deltas[s.deltas.len() / 2],
    );
    println!("   the upstream's own time to its first token: {} ms", upstream_first.as_millis());
    println!("   REST SSE, request → first delta:                  {}", bench::percentiles(&mut s.first));
    println!("   REST SSE, upstream's first token → first delta:   {}", bench::percentiles(&mut s.relay));
    println!("   REST SSE, request → upstream receives the call:   {}", bench::percentiles(&mut s.before_call));
    println!("   REST SSE, roost's share of the first text:        {}", bench::percentiles(&mut s.share));
    println!("   REST SSE, request → done:                         {}", bench::percentiles(&mut s.done));
    println!("   REST SSE, upstream's last chunk → done:           {}", bench::percentiles(&mut s.after_last));
    println!("   gRPC stream, request → first delta:               {}", bench::percentiles(&mut s.grpc_first));
    println!("   gRPC stream, upstream's first token → first delta: {}", bench::percentiles(&mut s.grpc_relay));
    println!("   gRPC stream, roost's share of the first text:     {}", bench::percentiles(&mut s.grpc_share));
    println!("   gRPC stream, request → done:                      {}", bench::percentiles(&mut s.grpc_done));
    println!("   synchronous, request → reply:                     {}", bench::percentiles(&mut s.sync));
    println!("   synchronous, request → upstream receives the call: {}", bench::percentiles(&mut s.sync_before_call));
    println!("   synchronous, roost's share (less the upstream's):  {}", bench::percentiles(&mut s.sync_share));
    println!(
        "   straight to the upstream (no roost), first text less the upstream's own time: {}",
        bench::percentiles(&mut s.direct_share)
    );
    println!(
        "   roost's share of the first text less that of the harness (difference of medians): {:.2} ms REST, \
         {:.2} ms gRPC",
        at(&s.share, 0.5) - at(&s.direct_share, 0.5),
        at(&s.grpc_share, 0.5) - at(&s.direct_share, 0.5)
    );
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    println!(
        "   target first text within 50 ms of the upstream's first token: p99 {:.2} ms REST, {:.2} ms gRPC, {}",
        at(&s.relay, 0.99),
        at(&s.grpc_relay, 0.99),
        verdict(at(&s.relay, 0.99) < 50.0 && at(&s.grpc_relay, 0.99) < 50.0)
    );
    println!(
        "   target roost's share < 1 ms: p50 {:.2} ms REST, {:.2} ms gRPC; p99 {:.2} / {:.2} ms; p50 {}",
        at(&s.share, 0.5),
        at(&s.grpc_share, 0.5),
        at(&s.share, 0.99),
        at(&s.grpc_share, 0.99),
        verdict(at(&s.share, 0.5) < 1.0 && at(&s.grpc_share, 0.5) < 1.0)
    );
}

// ---------------------------------------------------------------------------------------
// 3. Many reply streams held open.

/// The server's CPU time so far (utime + stime, all threads), in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// The server's share of one core over `window`.
async fn cpu_over(pid: u32, window: Duration) -> f64 {
    let (before, started) = (cpu_ticks(pid), Instant::now());
    tokio::time::sleep(window).await;
    let ticks = cpu_ticks(pid) - before;
    ticks as f64 / rustix::param::clock_ticks_per_second() as f64 / started.elapsed().as_secs_f64()
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

async fn held_streams(roost: &Roost, upstream: &Arc<FakeUpstream>, count: usize, idle: Duration) {
    let pid = roost.pid();
    // Agents on accounts 1.., 100 each, provisioned an account at a time in parallel.
    let started = Instant::now();
    let accounts = count.div_ceil(100);
    let ids: Vec<String> = futures::stream::iter(0..accounts)
        .map(|a| async move {
            let mut ids = Vec::new();
            for _ in 0..100.min(count - a * 100) {
                ids.push(roost.agent(1 + a, "assistant", Duration::from_secs(20)).await);
            }
            ids
        })
        // In account order: agent i is account 1 + i / 100's.
        .buffered(accounts)
        .concat()
        .await;
    println!();
    println!("3. {count} reply streams held open (assistant agents, each with a streamed turn whose upstream stalls)");
    println!("   provisioned {count} assistant agents in {:.1} s", started.elapsed().as_secs_f64());

    tokio::time::sleep(Duration::from_secs(3)).await;
    let (rss_idle, fds_idle) = (bench::rss_kib(pid), open_fds(pid));
    let cpu_idle = cpu_over(pid, idle).await;

    upstream.stall.store(true, Ordering::Relaxed);
    // No client timeout: these streams outlive any.
    let client = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    let started = Instant::now();
    let open: Vec<SseClient> = futures::stream::iter(ids.iter().enumerate())
        .map(|(i, id)| {
            let api = Api::new(client.clone(), roost.base.clone(), Some(roost.keys[1 + i / 100].clone()));
            async move {
                let request = api.post_request(&format!("/api/instances/{id}/messages"), json!({ "text": TEXT }));
                let mut stream = SseClient::open(request).await.unwrap_or_else(|(s, b)| panic!("{s}: {b}"));
                let first = stream.next_event(Duration::from_secs(60)).await.expect("the first delta");
                assert!(matches!(&first, SseItem::Event { event, .. } if event == "delta"), "{first:?}");
                stream
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    let opened = started.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(upstream.open.load(Ordering::SeqCst), count, "every turn's model call is held open");
    let (rss_open, fds_open) = (bench::rss_kib(pid), open_fds(pid));
    let cpu_open = cpu_over(pid, idle).await;
    assert_eq!(upstream.open.load(Ordering::SeqCst), count, "the streams stayed open");

    let mib = |kib: u64| kib as f64 / 1024.0;
    println!("   opened {count} streams (64 at a time, each to its first delta) in {:.1} s", opened.as_secs_f64());
    println!(
        "   server resident memory: {:.1} MiB with the agents idle, {:.1} MiB with the streams open: +{:.1} MiB, \
         {:.1} KiB a stream (its SSE answer, turn and gateway call to the upstream)",
        mib(rss_idle),
        mib(rss_open),
        mib(rss_open.saturating_sub(rss_idle)),
        rss_open.saturating_sub(rss_idle) as f64 / count as f64,
    );
    println!("   server file descriptors: {fds_idle} idle, {fds_open} with the streams open");
    println!(
        "   server CPU over {} s: {:.2} % of a core with the agents idle, {:.2} % with the streams open and idle",
        idle.as_secs(),
        cpu_idle * 100.0,
        cpu_open * 100.0
    );

    // Hanging up cancels every turn and its model call.
    let started = Instant::now();
    drop(open);
    while upstream.open.load(Ordering::SeqCst) > 0 && started.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!(
        "   all {count} clients hung up: {} upstream calls left open after {:.2} s",
        upstream.open.load(Ordering::SeqCst),
        started.elapsed().as_secs_f64()
    );
    upstream.stall.store(false, Ordering::Relaxed);
}

// ---------------------------------------------------------------------------------------
// 2. Hermes.

async fn hermes(turns: usize) {
    println!();
    let package = Package::Hermes;
    let runtimes = tools::workspace_target().join("agent-runtimes/runtimes");
    let dir = package.dir(&runtimes, package.default_version().version);
    let Some(install) = Installation::at(package, &dir) else {
        println!("2. Hermes: skipped, not installed in {} (run `bash scripts/test --setup-only`)", dir.display());
        return;
    };
    let model = ScriptedModel::start().await;
    let roost = Roost::start(&package.catalogue_toml(&install.dir), &model.base_url(), 1).await;
    let api = roost.api(0);
    let started = Instant::now();
    let id = roost.agent(0, package.name(), Duration::from_secs(300)).await;
    let boot = started.elapsed();
    let events = Duration::from_secs(300);
    // The first turns load the runtime's modules.
    for _ in 0..3 {
        api.message(&id, "Hello.").await.ok();
    }
    let (mut first, mut done, mut sync, mut deltas, mut gap) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let run = Instant::now();
    for _ in 0..turns {
        let started = Instant::now();
        let turn = sse_turn(&api, &id, "Hello.", started, events).await;
        assert_eq!(turn.text, turn.done_answer["reply"].as_str().unwrap());
        first.push(turn.first_delta);
        done.push(turn.done);
        gap.push(turn.done - turn.first_delta);
        deltas.push(turn.deltas);

        let started = Instant::now();
        let answer = api.message(&id, "Hello.").await.ok();
        assert!(answer["reply"].is_string(), "{answer}");
        sync.push(started.elapsed());
    }
    deltas.sort_unstable();
    println!(
        "2. Hermes (packaged, sandboxed, the scripted model answering at once behind the gateway): provision → running \
         {:.2} s, then {turns} rounds of a streamed (SSE) and a synchronous turn in {:.1} s",
        boot.as_secs_f64(),
        run.elapsed().as_secs_f64()
    );
    println!(
        "   deltas a streamed turn: {} to {} (Hermes gives its reply as one delta, so the first delta is the whole reply)",
        deltas[0],
        deltas[deltas.len() - 1]
    );
    println!("   streamed, request → first delta: {}", bench::percentiles(&mut first));
    println!("   streamed, first delta → done:    {}", bench::percentiles(&mut gap));
    println!("   streamed, request → done:        {}", bench::percentiles(&mut done));
    println!("   synchronous, request → reply:    {}", bench::percentiles(&mut sync));
}
