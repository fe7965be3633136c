//! Packaged runtimes benchmark (issue 32): OpenClaw and Hermes Agent as roost hosts them.
//!
//! `scripts/test --setup-only && cargo build --release -p roost-server &&
//! cargo bench -p roost-tests --bench packaged` starts the real server (release build,
//! SQLite unless ROOST_BENCH_BACKEND=postgres) with the runtimes scripts/test installed
//! (`target/agent-runtimes`), each agent in its sandbox, the scripted model behind the
//! gateway, and per runtime:
//!
//! - provisions agents one after another and times `POST /api/provision` to `running`
//!   (each destroyed after its first turn, which is timed too: runtimes load lazily);
//! - sends one agent turns one after another, and the same message straight to the
//!   runtime's own endpoint (its socket, its token, its session), alternating: roost's
//!   overhead is the difference;
//! - reads the resident memory of an idle agent's processes (bubblewrap, relay, runtime
//!   and its workers) and how many such agents fit in a GiB.
//!
//! Knobs: ROOST_BENCH_PROVISIONS (3), ROOST_BENCH_TURNS (30), ROOST_BENCH_RUNTIMES
//! ("openclaw,hermes").

// Benchmark code: a failed unwrap is a broken run.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use roost_server::{
    billing::prices::PriceBook,
    llm::Upstream,
    runtimes::{Catalogue, packaged::Package},
};
use roost_tests::{
    TestServer, bench, fake_agent_model::ScriptedModel, process::runtime_pids, tools, workspace::Workspace,
};
use serde_json::{Value, json};

fn main() {
    bench::block_on(run());
}

const PRICES: &str = "[models.\"gpt-4o-mini\"]\ninput_usd_per_mtok = 10\noutput_usd_per_mtok = 20\n";

async fn run() {
    let backend = bench::backend();
    let provisions = bench::knob::<usize>("ROOST_BENCH_PROVISIONS", 3);
    let turns = bench::knob::<usize>("ROOST_BENCH_TURNS", 30);
    let names = bench::knob::<String>("ROOST_BENCH_RUNTIMES", "openclaw,hermes".to_owned());
    println!("backend {}, {provisions} provisions, {turns} turns per runtime", backend.name());
    for name in names.split(',') {
        let package = Package::parse(name.trim()).unwrap_or_else(|| panic!("no packaged runtime {name}"));
        measure(backend, package, provisions, turns).await;
    }
}

async fn measure(backend: roost_tests::Backend, package: Package, provisions: usize, turns: usize) {
    let install = tools::installed_runtime(package);
    let model = ScriptedModel::start().await;
    let catalogue = package.catalogue_toml(&install.dir);
    let upstream = model.base_url();
    let server = TestServer::start_with(backend, |config| {
        config.hosting.catalogue = Catalogue::from_toml(&catalogue).unwrap();
        config.hosting.prices = PriceBook::from_toml(PRICES).unwrap();
        config.hosting.models.openai = Some(Upstream { base_url: upstream, api_key: Some("sk-bench".into()) });
        config.hosting.turn_timeout = Duration::from_secs(300);
    })
    .await;
    let account = server.account(1_000_000_000).await;
    let api = server.api(Some(&account));
    let name = package.name();
    let turn = |id: String, text: &'static str| {
        let api = api.clone();
        async move {
            let reply = api
                .post_with_timeout(
                    &format!("/api/instances/{id}/messages"),
                    json!({"text": text}),
                    Duration::from_secs(300),
                )
                .await
                .expect("a turn in time")
                .ok();
            assert!(reply["reply"].is_string(), "{reply}");
        }
    };

    let (mut boots, mut firsts) = (Vec::new(), Vec::new());
    for _ in 0..provisions {
        let started = Instant::now();
        let id = api.provision(name, "bench").await["id"].as_str().unwrap().to_owned();
        api.wait_status_within(&id, "running", Duration::from_secs(300)).await;
        boots.push(started.elapsed());
        let started = Instant::now();
        turn(id.clone(), "Hello.").await;
        firsts.push(started.elapsed());
        api.post(&format!("/api/instances/{id}/destroy"), json!({})).await.ok();
    }

    let id = api.provision(name, "bench").await["id"].as_str().unwrap().to_owned();
    api.wait_status_within(&id, "running", Duration::from_secs(300)).await;
    for _ in 0..3 {
        turn(id.clone(), "Hello.").await;
    }
    // Idle: what the agent holds between turns.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rss_kib: u64 = runtime_pids(&id).iter().map(bench::rss_kib).sum();

    let direct = Direct::of(&server, package, &id);
    let (mut through, mut alone) = (Vec::new(), Vec::new());
    for _ in 0..turns {
        let started = Instant::now();
        turn(id.clone(), "Hello.").await;
        through.push(started.elapsed());
        let started = Instant::now();
        direct.turn("Hello.").await;
        alone.push(started.elapsed());
    }
    println!("{name}");
    println!("  provision → running: {}", bench::percentiles(&mut boots));
    println!("  first turn:          {}", bench::percentiles(&mut firsts));
    println!("  later turns, through roost: {}", bench::percentiles(&mut through));
    println!("  later turns, runtime alone: {}", bench::percentiles(&mut alone));
    let at = |samples: &[Duration], q: f64| samples[((samples.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    println!(
        "  roost's overhead on a turn: p50 {:+.2} ms, p99 {:+.2} ms",
        at(&through, 0.5) - at(&alone, 0.5),
        at(&through, 0.99) - at(&alone, 0.99)
    );
    let mib = rss_kib as f64 / 1024.0;
    println!("  idle RSS per agent: {mib:.0} MiB ({:.1} agents per GiB)", 1024.0 / mib);
    server.stop().await.unwrap();
}

/// The runtime's own chat endpoint, reached as roost reaches it: its sandbox's socket,
/// the boot's token (read from its configuration or its environment), the agent's session.
struct Direct {
    client: reqwest::Client,
    token: String,
    package: Package,
    session: String,
}

impl Direct {
    fn of(server: &TestServer, package: Package, id: &str) -> Self {
        // This boot's socket directory: `<data-dir>/sandbox/<id>.<random>`.
        let sockets = std::fs::read_dir(server.config.data_dir.join("sandbox"))
            .unwrap()
            .flatten()
            .map(|entry| entry.path())
            .find(|path| path.file_name().unwrap().to_string_lossy().starts_with(&format!("{id}.")))
            .expect("the agent's socket directory");
        let client = reqwest::Client::builder().unix_socket(sockets.join("agent.sock")).build().unwrap();
        let token = match package {
            Package::OpenClaw => {
                let config = Workspace::of(&server.config.data_dir, id).read(".openclaw/openclaw.json").unwrap();
                let config: Value = serde_json::from_str(&config).unwrap();
                config["gateway"]["auth"]["token"].as_str().unwrap().to_owned()
            }
            Package::Hermes => runtime_pids(id)
                .iter()
                .find_map(|pid| {
                    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
                    environ.split(|b| *b == 0).find_map(|var| {
                        std::str::from_utf8(var).ok()?.strip_prefix("API_SERVER_KEY=").map(str::to_owned)
                    })
                })
                .expect("Hermes' API key in its environment"),
        };
        Self { client, token, package, session: format!("roost-{id}") }
    }

    async fn turn(&self, text: &str) {
        let (model, user) = match self.package {
            Package::OpenClaw => ("openclaw/default", Some(self.session.clone())),
            Package::Hermes => ("hermes-agent", None),
        };
        let mut body = json!({"model": model, "messages": [{"role": "user", "content": text}], "stream": false});
        if let Some(user) = user {
            body["user"] = user.into();
        }
        let mut request = self.client.post("http://agent/v1/chat/completions").bearer_auth(&self.token).json(&body);
        if self.package == Package::Hermes {
            request = request.header("X-Hermes-Session-Id", &self.session);
        }
        let answer: Value = request.send().await.unwrap().json().await.unwrap();
        assert!(answer["choices"][0]["message"]["content"].is_string(), "{answer}");
    }
}
