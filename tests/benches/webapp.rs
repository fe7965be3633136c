//! Web-app benchmarks: the server time of the signed-in pages
//! (docs/architecture.md#performance-targets, the page target, p99 < 20 ms) for an account with
//! many agents and charges; what a sign-in costs; and that a wrong password and an unknown email
//! cost the same (argon2 against the stored hash, or against the decoy).
//!
//! `cargo bench -p roost-tests --bench webapp` runs the real server in this process
//! (release build) on loopback. Knobs: ROOST_BENCH_BACKEND (sqlite|postgres),
//! ROOST_BENCH_AGENTS (100), ROOST_BENCH_SAMPLES (200).

// Benchmark code: a failed unwrap is a broken run.
#![allow(clippy::unwrap_used)]

use std::time::Instant;

use roost_server::webapp::passwords;
use roost_tests::{
    TestServer,
    bench::{self, percentiles},
    pages::Visitor,
};

fn main() {
    bench::block_on(run());
}

async fn run() {
    let backend = bench::backend();
    let agents = bench::knob::<usize>("ROOST_BENCH_AGENTS", 100);
    let samples = bench::knob::<usize>("ROOST_BENCH_SAMPLES", 200);
    let server = TestServer::start_with(backend, |c| c.webapp.signup_open = true).await;
    println!("backend {}, {agents} agents in one account, {samples} samples per page", backend.name());

    const PASSWORD: &str = "correct horse battery";
    let mut visitor = Visitor::new(&server);
    visitor.get("/signup").await;
    visitor.post_form("/signup", &[("email", "bench@example.com"), ("password", PASSWORD)]).await;
    let account = server.store().await.user_by_email("bench@example.com").await.unwrap().unwrap().account_id;
    server.store().await.add_credits(&account, 10_000_000).await.unwrap();
    visitor.get("/").await;
    let mut first = String::new();
    for n in 0..agents {
        let out = visitor.post_form("/instances", &[("runtime", "echo"), ("brief", &format!("agent {n}"))]).await;
        let to = out.headers()["location"].to_str().unwrap().to_owned();
        if first.is_empty() {
            first = to.split('?').next().unwrap().to_owned();
        }
    }
    for n in 0..50 {
        visitor.post_form(&format!("{first}/message"), &[("text", &format!("message {n}"))]).await;
    }
    for name in ["a", "b", "c"] {
        visitor.post_form("/developers/keys", &[("name", name)]).await;
    }

    for path in ["/", first.as_str(), "/developers", "/billing", "/login"] {
        let mut times = Vec::with_capacity(samples);
        for _ in 0..samples {
            let started = Instant::now();
            let page = visitor.get(path).await;
            times.push(started.elapsed());
            assert_eq!(page.status, 200, "{path}");
        }
        println!("page {path}: {}", percentiles(&mut times));
    }

    // A successful sign-in: argon2 verify plus a session row (failures would hit the brake).
    let mut times = Vec::new();
    for _ in 0..20 {
        let mut fresh = Visitor::new(&server);
        fresh.get("/login").await;
        let started = Instant::now();
        let out = fresh.post_form("/login", &[("email", "bench@example.com"), ("password", PASSWORD)]).await;
        times.push(started.elapsed());
        assert_eq!(out.status(), 303);
    }
    println!("sign-in (POST /login, success): {}", percentiles(&mut times));

    // Wrong password vs unknown email: the same argon2 work.
    let stored = passwords::hash(PASSWORD).await.unwrap();
    let (mut wrong, mut unknown) = (Vec::new(), Vec::new());
    for _ in 0..20 {
        let started = Instant::now();
        assert!(!passwords::verify("wrong password!", Some(stored.clone())).await.expect("a worker"));
        wrong.push(started.elapsed());
        let started = Instant::now();
        assert!(!passwords::verify("wrong password!", None).await.expect("a worker"));
        unknown.push(started.elapsed());
    }
    println!("password check, wrong password: {}", percentiles(&mut wrong));
    println!("password check, unknown email:  {}", percentiles(&mut unknown));
}
