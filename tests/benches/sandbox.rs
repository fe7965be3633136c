//! Sandbox benchmark (issue 31's targets: provision → running under 100 ms added by the
//! sandbox, turn overhead added p50 under 0.2 ms), and model gateway calls from inside the
//! sandbox against the same calls from an unconfined runtime.
//!
//! `cargo build --release -p roost-server && cargo bench -p roost-tests --bench sandbox`
//! starts the real server four times (release build, SQLite unless
//! ROOST_BENCH_BACKEND=postgres), alternately `--runtime-sandbox off` and `required`, and
//! on each:
//!
//! - provisions the `example` runtime (roost's Python example) one agent after another and
//!   times `POST /api/provision` to `running` (polled every millisecond), destroying each;
//! - sends one agent turns one after another (`POST /api/instances/{id}/message`);
//! - has a runtime (tests/runtimes/hostile_agent.py) make model calls one after another
//!   through the gateway on one keep-alive connection, timed inside the runtime: through
//!   the sandbox's relay and socket, or straight to roost's listener.
//!
//! Both modes run the runtimes on `/usr/bin/python3` (unconfined, a bare `python3` may be
//! a slower shim, e.g. pyenv's). The sandbox's cost is each figure less the unconfined
//! one. The relay runs from the
//! release `roost` binary, hence the build first. Knobs: ROOST_BENCH_PROVISIONS (20),
//! ROOST_BENCH_TURNS (2000), ROOST_BENCH_CALLS (1000).

// Benchmark code: a failed unwrap is a broken run.
#![allow(clippy::unwrap_used)]

use std::{
    path::Path,
    time::{Duration, Instant},
};

use roost_server::{llm::Upstream, sandbox::SandboxMode};
use roost_tests::{TestServer, bench, fake_models::FakeModels};
use serde_json::{Value, json};

fn main() {
    bench::block_on(run());
}

/// What one mode measured.
#[derive(Default)]
struct Figures {
    boots: Vec<Duration>,
    turns: Vec<Duration>,
    calls: Vec<Duration>,
}

async fn run() {
    let backend = bench::backend();
    let provisions = bench::knob::<usize>("ROOST_BENCH_PROVISIONS", 20);
    let turns = bench::knob::<usize>("ROOST_BENCH_TURNS", 2000);
    let calls = bench::knob::<usize>("ROOST_BENCH_CALLS", 1000);
    let fake = FakeModels::start().await;
    fake.forget_requests();
    println!("backend {}, {provisions} provisions, {turns} turns, {calls} model calls per mode", backend.name());
    // Two rounds, alternating: the first server of a run is measurably slower (cold page
    // cache, the machine settling), and alternating gives each mode one of each.
    let (mut sandboxed, mut off) = (Figures::default(), Figures::default());
    for _ in 0..2 {
        for mode in [SandboxMode::Off, SandboxMode::Required] {
            let round = measure(backend, &fake, mode, provisions, turns, calls).await;
            let into = if mode == SandboxMode::Off { &mut off } else { &mut sandboxed };
            into.boots.extend(round.boots);
            into.turns.extend(round.turns);
            into.calls.extend(round.calls);
        }
    }
    compare("provision → running", &mut sandboxed.boots, &mut off.boots);
    compare("turn (POST message → reply)", &mut sandboxed.turns, &mut off.turns);
    compare("model call from the runtime", &mut sandboxed.calls, &mut off.calls);
}

async fn measure(
    backend: roost_tests::Backend,
    fake: &FakeModels,
    mode: SandboxMode,
    provisions: usize,
    turns: usize,
    calls: usize,
) -> Figures {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("runtimes/hostile_agent.py");
    let catalogue = format!(
        "[[runtime]]\nid = \"example\"\ndriver = \"process\"\nprice_cents_month = 0\nincluded_model = true\n\
         default_model = \"example\"\ncommand = [\"/usr/bin/python3\", \"{{runtimes_dir}}/example_agent.py\"]\n\
         [[runtime]]\nid = \"caller\"\ndriver = \"process\"\nprice_cents_month = 0\nincluded_model = true\n\
         default_model = \"gpt-4o-mini\"\nmax_calls_per_turn = 1000000\n\
         max_turn_spend_cents = 1000000\ncommand = [\"/usr/bin/python3\", {:?}]\n",
        script.display().to_string()
    );
    let openai = fake.openai_base_url();
    let server = TestServer::start_with(backend, |config| {
        config.hosting.catalogue = roost_server::runtimes::Catalogue::from_toml(&catalogue).unwrap();
        config.hosting.models.openai = Some(Upstream { base_url: openai, api_key: Some("sk-bench".into()) });
        config.hosting.sandbox.mode = mode;
    })
    .await;
    let account = server.account(1_000_000_000).await;
    let api = server.api(Some(&account));

    let mut boots = Vec::with_capacity(provisions);
    for n in 0..=provisions {
        let started = Instant::now();
        let id = api.provision("example", "bench").await["id"].as_str().unwrap().to_owned();
        loop {
            let view = api.get(&format!("/api/instances/{id}")).await.ok();
            match view["status"].as_str() {
                Some("running") => break,
                Some("failed") => panic!("{view}"),
                _ => tokio::time::sleep(Duration::from_millis(1)).await,
            }
        }
        // The first boot warms the page cache (python3, the relay binary): not counted.
        if n > 0 {
            boots.push(started.elapsed());
        }
        api.post(&format!("/api/instances/{id}/destroy"), json!({})).await.ok();
    }

    let id = api.provision("example", "bench").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    for _ in 0..50 {
        api.message(&id, "warm").await.ok();
    }
    let mut turn_times = Vec::with_capacity(turns);
    for _ in 0..turns {
        let started = Instant::now();
        api.message(&id, "hello").await.ok();
        turn_times.push(started.elapsed());
    }

    let caller = api.provision("caller", "bench").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&caller, "running").await;
    api.message(&caller, &json!({"model_bench": 50}).to_string()).await.ok();
    let reply = api.message(&caller, &json!({"model_bench": calls}).to_string()).await.ok();
    let took: Vec<u64> = serde_json::from_str::<Value>(reply["reply"].as_str().unwrap())
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    let call_times = took.into_iter().map(Duration::from_micros).collect();
    let name = match mode {
        SandboxMode::Required => "sandboxed",
        SandboxMode::Off => "off",
    };
    println!("{name}: measured");
    Figures { boots, turns: turn_times, calls: call_times }
}

/// Prints both modes' percentiles and the difference at p50 and p99.
fn compare(what: &str, sandboxed: &mut [Duration], off: &mut [Duration]) {
    println!("{what}");
    println!("  sandboxed: {}", bench::percentiles(sandboxed));
    println!("  off:       {}", bench::percentiles(off));
    let at = |samples: &[Duration], q: f64| samples[((samples.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    println!(
        "  added by the sandbox: p50 {:+.3} ms, p99 {:+.3} ms",
        at(sandboxed, 0.5) - at(off, 0.5),
        at(sandboxed, 0.99) - at(off, 0.99)
    );
}
