//! CPU burn benchmark: one agent burning every core it can get must leave roost and the
//! other agents responsive (target: roost's `/healthz` and another agent's turn p99 within
//! 3× idle).
//!
//! `cargo build --release -p roost-server && cargo bench -p roost-tests --bench burn`
//! starts the real server (release build, SQLite unless ROOST_BENCH_BACKEND=postgres) with
//! three agents: a `burner` (the hostile runtime, tests/runtimes/hostile_agent.py, allowed
//! 600 processes), a bystander process agent (roost's Python example) and an `echo` agent.
//! It times, one after another every 5 ms, `GET /healthz`, a turn of the bystander and a
//! turn of the echo agent: first idle, then while the burner runs 8 busy loops and 500
//! sleeping processes (ROOST_BENCH_BURNERS, ROOST_BENCH_SLEEPERS), and prints each
//! figure's p50 and p99 both ways and their ratio. Knob: ROOST_BENCH_SAMPLES (500 each).

// Benchmark code: a failed unwrap is a broken run.
#![allow(clippy::unwrap_used)]

use std::{
    path::Path,
    time::{Duration, Instant},
};

use roost_tests::{Api, TestServer, bench};
use serde_json::json;

fn main() {
    bench::block_on(run());
}

/// One phase's samples.
#[derive(Default)]
struct Figures {
    healthz: Vec<Duration>,
    process_turn: Vec<Duration>,
    echo_turn: Vec<Duration>,
}

async fn run() {
    let backend = bench::backend();
    let samples = bench::knob::<usize>("ROOST_BENCH_SAMPLES", 500);
    let burners = bench::knob::<usize>("ROOST_BENCH_BURNERS", 8);
    let sleepers = bench::knob::<usize>("ROOST_BENCH_SLEEPERS", 500);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("runtimes/hostile_agent.py");
    let catalogue = format!(
        "[[runtime]]\nid = \"echo\"\ndriver = \"echo\"\nprice_cents_month = 0\nincluded_model = true\n\
         default_model = \"echo\"\n\
         [[runtime]]\nid = \"example\"\ndriver = \"process\"\nprice_cents_month = 0\nincluded_model = true\n\
         default_model = \"example\"\ncommand = [\"/usr/bin/python3\", \"{{runtimes_dir}}/example_agent.py\"]\n\
         disk_mb = 64\n\
         [[runtime]]\nid = \"burner\"\ndriver = \"process\"\nprice_cents_month = 0\nincluded_model = true\n\
         default_model = \"gpt-4o-mini\"\nmemory_mb = 1024\nmax_processes = 600\ndisk_mb = 64\n\
         command = [\"/usr/bin/python3\", {:?}]\n",
        script.display().to_string()
    );
    let server = TestServer::start_with(backend, |config| {
        config.hosting.catalogue = roost_server::runtimes::Catalogue::from_toml(&catalogue).unwrap();
    })
    .await;
    let account = server.account(1_000_000_000).await;
    let api = server.api(Some(&account));
    let mut ids = Vec::new();
    for runtime in ["echo", "example", "burner"] {
        let id = api.provision(runtime, "bench").await["id"].as_str().unwrap().to_owned();
        api.wait_status(&id, "running").await;
        ids.push(id);
    }
    let (echo, example, burner) = (&ids[0], &ids[1], &ids[2]);
    println!(
        "backend {}, {samples} samples each, {} cores; load: {burners} busy loops and {sleepers} sleeping processes",
        backend.name(),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );

    measure(&server, &api, echo, example, samples / 5).await;
    let mut idle = measure(&server, &api, echo, example, samples).await;
    let started = api.message(burner, &json!({"burn": {"cpus": burners, "processes": sleepers}}).to_string()).await;
    println!("burner started {} processes", started.ok()["reply"]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut burning = measure(&server, &api, echo, example, samples).await;

    compare("GET /healthz", &mut idle.healthz, &mut burning.healthz);
    compare("another process agent's turn", &mut idle.process_turn, &mut burning.process_turn);
    compare("an echo agent's turn", &mut idle.echo_turn, &mut burning.echo_turn);
    api.post(&format!("/api/instances/{burner}/destroy"), json!({})).await.ok();
}

/// `samples` of each figure, one request every 5 ms.
async fn measure(server: &TestServer, api: &Api, echo: &str, example: &str, samples: usize) -> Figures {
    let mut figures = Figures::default();
    let healthz = server.url("/healthz");
    for _ in 0..samples {
        let started = Instant::now();
        assert_eq!(server.http.get(&healthz).send().await.unwrap().status(), 200);
        figures.healthz.push(started.elapsed());
        let started = Instant::now();
        api.message(example, "hello").await.ok();
        figures.process_turn.push(started.elapsed());
        let started = Instant::now();
        api.message(echo, "hello").await.ok();
        figures.echo_turn.push(started.elapsed());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    figures
}

/// Prints a figure idle and under load, and their ratio at p50 and p99.
fn compare(what: &str, idle: &mut [Duration], burning: &mut [Duration]) {
    println!("{what}");
    println!("  idle:    {}", bench::percentiles(idle));
    println!("  burning: {}", bench::percentiles(burning));
    let at = |samples: &[Duration], q: f64| samples[((samples.len() - 1) as f64 * q) as usize].as_secs_f64();
    println!(
        "  under load: p50 ×{:.2}, p99 ×{:.2} (target: p99 within ×3)",
        at(burning, 0.5) / at(idle, 0.5),
        at(burning, 0.99) / at(idle, 0.99)
    );
}
