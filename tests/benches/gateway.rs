//! Model gateway benchmark (issue 30's targets: overhead p50 < 0.3 ms and p99 < 1 ms at
//! 500 calls/s; first-chunk overhead p99 < 1 ms).
//!
//! `cargo bench -p roost-tests --bench gateway` starts the real server (release build,
//! SQLite unless ROOST_BENCH_BACKEND=postgres) with the fake OpenAI upstream of the test
//! crate, provisions hosted agents of the `gateway` process runtime (the senders venv's
//! Python; `scripts/test --setup-only` builds it), and takes their gateway tokens. Then, in one run and
//! with metering and span recording on (a priced model, credits held and charged per call,
//! a span per call), it times the same Chat Completions request sent to the fake upstream
//! directly and through roost's gateway:
//!
//! - non-streamed, one caller after another, and 64 callers at once (calls/s on 2 cores);
//! - non-streamed at a fixed 500 calls/s (open loop: a call starts every 2 ms whether or
//!   not the last has finished);
//! - streamed: time to the first chunk, one caller after another and at 500 calls/s;
//! - 1,000 streams held open at once (the upstream sends a chunk a minute): the process's
//!   resident memory before and with them.
//!
//! The server, the fake upstream and the clients share this process and its two cores, so
//! each figure is an upper bound of roost's own cost; the overhead is the gateway's figure
//! less the direct one, measured back to back. Knobs: ROOST_BENCH_SECONDS (5 per run),
//! ROOST_BENCH_CONCURRENCY (64), ROOST_BENCH_RATE (500), ROOST_BENCH_STREAMS (1000),
//! ROOST_BENCH_AGENTS (8).

// Benchmark code: a failed unwrap is a broken run.
#![allow(clippy::unwrap_used)]

use std::{
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use roost_server::llm::Upstream;
use roost_tests::{TestServer, bench, fake_models::FakeModels, tools};
use serde_json::{Value, json};

/// The model every call names: priced by the built-in book, so managed calls are charged.
const MODEL: &str = "gpt-4o-mini";

fn main() {
    bench::block_on(run());
}

/// Where a call goes: the fake upstream itself, or roost's gateway with an agent's token.
#[derive(Clone)]
struct Target {
    url: String,
    token: Option<String>,
}

async fn run() {
    let backend = bench::backend();
    let seconds = bench::knob::<u64>("ROOST_BENCH_SECONDS", 5);
    let concurrency = bench::knob::<u64>("ROOST_BENCH_CONCURRENCY", 64) as usize;
    let rate = bench::knob::<u64>("ROOST_BENCH_RATE", 500);
    let streams = bench::knob::<u64>("ROOST_BENCH_STREAMS", 1000) as usize;
    let agents = bench::knob::<u64>("ROOST_BENCH_AGENTS", 8) as usize;

    let fake = FakeModels::start().await;
    fake.forget_requests();
    let senders = Path::new(env!("CARGO_MANIFEST_DIR")).join("senders");
    let venv = tools::venv(
        "senders-venv",
        &senders.join("python/requirements.txt"),
        "run `scripts/test --setup-only` (it builds the venv), or the commands in tests/senders/README.md",
    );
    let catalogue = format!(
        "[[runtime]]\nid = \"gateway\"\ndriver = \"process\"\nprice_cents_month = 0\nincluded_model = true\n\
         default_model = \"{MODEL}\"\ncommand = [{:?}, {:?}]\n",
        venv.join("bin/python").display().to_string(),
        senders.join("python/gateway_agent.py").display().to_string(),
    );
    let openai = fake.openai_base_url();
    let per_agent = streams.div_ceil(agents).max(concurrency.div_ceil(agents)) + 1;
    let server = TestServer::start_with(backend, |config| {
        config.hosting.catalogue = roost_server::runtimes::Catalogue::from_toml(&catalogue).unwrap();
        config.hosting.models.openai = Some(Upstream { base_url: openai.clone(), api_key: Some("sk-bench".into()) });
        // Enough calls at once per agent for the open streams.
        config.hosting.models.max_calls_per_agent = per_agent;
    })
    .await;
    let account = server.account(1_000_000_000).await;
    let api = server.api(Some(&account));
    let mut tokens = Vec::with_capacity(agents);
    for _ in 0..agents {
        let id = api.provision("gateway", "bench").await["id"].as_str().unwrap().to_owned();
        api.wait_status(&id, "running").await;
        let env: Value = serde_json::from_str(api.message(&id, "env").await.ok()["reply"].as_str().unwrap()).unwrap();
        tokens.push(env["OPENAI_API_KEY"].as_str().unwrap().to_owned());
    }
    println!(
        "backend {}, {agents} gateway agents, {concurrency} concurrent callers, {seconds} s per run, model {MODEL} \
         (managed, metered)",
        backend.name()
    );

    let direct: Vec<Target> = vec![Target { url: format!("{openai}/chat/completions"), token: None }];
    let gateway: Vec<Target> = tokens
        .iter()
        .map(|token| Target { url: server.url("/llm/v1/chat/completions"), token: Some(token.clone()) })
        .collect();
    // One client per side, as an agent's SDK keeps one: pooled keep-alive connections.
    let client = reqwest::Client::builder().pool_max_idle_per_host(1024).build().unwrap();

    // Warm both paths (connections, the store's statements).
    closed_loop(&client, &direct, 4, 1).await;
    closed_loop(&client, &gateway, 4, 1).await;

    for callers in [1, concurrency] {
        let (mut d, de) = closed_loop(&client, &direct, callers, seconds).await;
        let (mut g, ge) = closed_loop(&client, &gateway, callers, seconds).await;
        compare(&format!("non-streamed, {callers} callers"), &mut d, Some(de), &mut g, Some(ge));
    }
    let mut d = at_rate(&client, &direct, rate, seconds, false).await;
    let mut g = at_rate(&client, &gateway, rate, seconds, false).await;
    compare(&format!("non-streamed, {rate} calls/s"), &mut d, None, &mut g, None);

    let mut d = first_chunks(&client, &direct[0], seconds).await;
    let mut g = first_chunks(&client, &gateway[0], seconds).await;
    compare("streamed, time to first chunk, 1 caller", &mut d, None, &mut g, None);
    let mut d = at_rate(&client, &direct, rate, seconds, true).await;
    let mut g = at_rate(&client, &gateway, rate, seconds, true).await;
    compare(&format!("streamed, time to first chunk, {rate} calls/s"), &mut d, None, &mut g, None);

    held_streams(&client, &fake, &gateway, streams).await;
    let charged = server.sql("SELECT COUNT(*) FROM ledger WHERE kind = 'usage'").await.unwrap();
    let calls = server.sql("SELECT COUNT(*) FROM model_calls").await.unwrap();
    println!("metered: {} model calls recorded, {} usage ledger rows", calls[0], charged[0]);
}

fn request(stream: bool) -> Value {
    json!({"model": MODEL, "stream": stream, "messages": [{"role": "user", "content": "What is the capital of France?"}]})
}

async fn call(client: &reqwest::Client, target: &Target, body: &Value) -> reqwest::Response {
    let mut request = client.post(&target.url).json(body);
    if let Some(token) = &target.token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200, "{}", target.url);
    response
}

/// `callers` workers calling one after another for `seconds`; every call's time.
async fn closed_loop(
    client: &reqwest::Client,
    targets: &[Target],
    callers: usize,
    seconds: u64,
) -> (Vec<Duration>, Duration) {
    let stop = Arc::new(AtomicBool::new(false));
    let body = Arc::new(request(false));
    let workers: Vec<_> = (0..callers)
        .map(|worker| {
            let (client, stop, body) = (client.clone(), stop.clone(), body.clone());
            let target = targets[worker % targets.len()].clone();
            tokio::spawn(async move {
                let mut samples = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    call(&client, &target, &body).await.bytes().await.unwrap();
                    samples.push(started.elapsed());
                }
                samples
            })
        })
        .collect();
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let elapsed = started.elapsed();
    let mut samples = Vec::new();
    for worker in workers {
        samples.extend(worker.await.unwrap());
    }
    (samples, elapsed)
}

/// A call every `1/rate` s for `seconds`, each on its own task: every call's time, or the
/// time to its first chunk when `stream` (the rest is read all the same).
async fn at_rate(client: &reqwest::Client, targets: &[Target], rate: u64, seconds: u64, stream: bool) -> Vec<Duration> {
    let body = Arc::new(request(stream));
    let mut ticks = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut calls = Vec::new();
    for i in 0..(rate * seconds) as usize {
        ticks.tick().await;
        let (client, body, target) = (client.clone(), body.clone(), targets[i % targets.len()].clone());
        calls.push(tokio::spawn(async move {
            let started = Instant::now();
            let mut response = call(&client, &target, &body).await;
            response.chunk().await.unwrap();
            let first = started.elapsed();
            while response.chunk().await.unwrap().is_some() {}
            if stream { first } else { started.elapsed() }
        }));
    }
    let mut samples = Vec::with_capacity(calls.len());
    for one in calls {
        samples.push(one.await.unwrap());
    }
    samples
}

/// Streamed calls one after another: the time to each one's first chunk (the rest is read).
async fn first_chunks(client: &reqwest::Client, target: &Target, seconds: u64) -> Vec<Duration> {
    let body = request(true);
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut samples = Vec::new();
    while Instant::now() < until {
        let started = Instant::now();
        let mut response = call(client, target, &body).await;
        let first = response.chunk().await.unwrap();
        samples.push(started.elapsed());
        assert!(first.is_some_and(|c| c.starts_with(b"data: ")));
        while response.chunk().await.unwrap().is_some() {}
    }
    samples
}

/// Opens `count` streams through the gateway that the upstream keeps open, and reports the
/// process's resident memory before and with them.
async fn held_streams(client: &reqwest::Client, fake: &FakeModels, gateway: &[Target], count: usize) {
    let before = bench::rss_kib("self") as f64 / 1024.0;
    // A chunk a minute: every stream stays open once its first chunk is through.
    fake.set_delay(60_000);
    let body = request(true);
    let mut open = Vec::with_capacity(count);
    let started = Instant::now();
    for i in 0..count {
        let mut response = call(client, &gateway[i % gateway.len()], &body).await;
        assert!(response.chunk().await.unwrap().is_some());
        open.push(response);
    }
    let opened = started.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let with = bench::rss_kib("self") as f64 / 1024.0;
    println!(
        "{count} streams open through the gateway (opened in {:.1} s): resident memory {before:.1} MiB before, \
         {with:.1} MiB with them ({:.1} KiB a stream, server, upstream and clients together)",
        opened.as_secs_f64(),
        (with - before) * 1024.0 / count as f64
    );
    fake.set_delay(0);
    drop(open);
}

/// Prints the direct and gateway figures and the gateway's overhead at p50 and p99.
fn compare(
    what: &str,
    direct: &mut [Duration],
    direct_elapsed: Option<Duration>,
    gateway: &mut [Duration],
    gateway_elapsed: Option<Duration>,
) {
    direct.sort_unstable();
    gateway.sort_unstable();
    let at = |s: &[Duration], q: f64| s[((s.len() - 1) as f64 * q) as usize].as_secs_f64() * 1000.0;
    let rate = |s: &[Duration], e: Option<Duration>| {
        e.map(|e| format!(", {:.0} calls/s", s.len() as f64 / e.as_secs_f64())).unwrap_or_default()
    };
    println!(
        "{what}: direct p50 {:.3} ms, p99 {:.3} ms ({} calls{}); gateway p50 {:.3} ms, p99 {:.3} ms ({} calls{}); \
         overhead p50 {:.3} ms, p99 {:.3} ms",
        at(direct, 0.5),
        at(direct, 0.99),
        direct.len(),
        rate(direct, direct_elapsed),
        at(gateway, 0.5),
        at(gateway, 0.99),
        gateway.len(),
        rate(gateway, gateway_elapsed),
        at(gateway, 0.5) - at(direct, 0.5),
        at(gateway, 0.99) - at(direct, 0.99),
    );
}
