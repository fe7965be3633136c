//! Evaluations benchmark: what an LLM judge costs ingest (docs/benchmarks.md).
//!
//! `cargo bench -p roost-tests --bench evaluations` runs the real server in this process
//! (release build) with a fake judge upstream ([`roost_tests::fake_judge`]: it answers at
//! once, so what is measured is roost's own work per judged call). It ingests the observe
//! bench's workload (traces of five spans, the first a model call) in four phases of the
//! same size, A B B A: alone, twice beside one evaluator judging 100 % of new calls, then
//! alone again with the evaluator paused (after it has caught up). Each phase writes into a
//! larger store than the one before, which slows ingest by itself; in that order the
//! growth weighs alike on both sides, where a plain "alone, then judged" would charge it
//! all to the judge. It prints every phase's rate, the judged calls per second while
//! ingesting, and until the judge had caught up.
//!
//! Knobs (environment): ROOST_BENCH_SPANS (100000, per phase), ROOST_BENCH_SPANS_PER_REQUEST
//! (500), ROOST_BENCH_CONCURRENCY (8), ROOST_BENCH_BACKEND (sqlite|postgres).

// Benchmark code: a failed unwrap is a broken run.
#![allow(clippy::unwrap_used)]

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use prost::Message;
use roost_server::llm::Upstream;
use roost_tests::{
    TestServer, bench,
    fake_judge::{FakeJudge, JUDGE_MODEL},
    workload,
};
use serde_json::json;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(run());
}

async fn run() {
    let backend = bench::backend();
    let total = bench::knob::<usize>("ROOST_BENCH_SPANS", 100_000);
    let per_request = bench::knob::<usize>("ROOST_BENCH_SPANS_PER_REQUEST", 500);
    let concurrency = bench::knob::<usize>("ROOST_BENCH_CONCURRENCY", 8);
    let judge = FakeJudge::start().await;
    let upstream = judge.base_url();
    let server = TestServer::start_with(backend, move |config| {
        config.hosting.models.openai = Some(Upstream { base_url: upstream, api_key: None });
        config.evaluations_every = Duration::from_millis(50);
    })
    .await;
    let requests = total / per_request;
    println!(
        "backend {}, 4 phases (A B B A) of {requests} requests of {per_request} spans, {concurrency} clients",
        backend.name()
    );
    let shape = workload::Shape::new(total * 4, per_request, 3_600_000_000_000, true);
    let phase = |n: usize| -> Arc<Vec<Vec<u8>>> {
        Arc::new((n * requests..(n + 1) * requests).map(|r| workload::traces(r, &shape).encode_to_vec()).collect())
    };
    let rate = |took: Duration| total as f64 / took.as_secs_f64();
    let report = |name: &str, took: Duration| {
        println!("{name}: {total} spans in {:.2} s = {:.0} spans/s", took.as_secs_f64(), rate(took));
    };

    let (first_alone, _) = workload::post_traces(&server, phase(0), concurrency).await;
    report("A1, no evaluator", first_alone);

    let api = server.api(None);
    let made = api
        .post(
            "/api/v1/evaluators",
            json!({"evaluator": {"name": "bench", "model": JUDGE_MODEL, "prompt": "{{input}}\n{{output}}\nscore: ?",
                "sample_rate": 1.0, "budget_usd": 1_000_000.0}}),
        )
        .await
        .ok();
    let id = made["evaluator"]["id"].as_str().unwrap().to_owned();
    let started = Instant::now();
    let mut judged_ingesting = Duration::ZERO;
    let mut judged_phases = Vec::new();
    for n in [1, 2] {
        let (took, _) = workload::post_traces(&server, phase(n), concurrency).await;
        report(&format!("B{n}, an evaluator at 100 %"), took);
        judged_ingesting += took;
        judged_phases.push(took);
    }
    let judged_during = judge.answered();
    println!(
        "judged while ingesting: {judged_during} calls = {:.0} calls/s",
        judged_during as f64 / judged_ingesting.as_secs_f64()
    );
    // The calls of the two judged phases: one model call per five-span trace.
    let calls = (2 * total / 5) as u64;
    while judge.answered() < calls {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(started.elapsed() < Duration::from_secs(1800), "the judge did not catch up");
    }
    let all = started.elapsed();
    println!(
        "judged all {calls} new calls in {:.2} s = {:.0} calls/s",
        all.as_secs_f64(),
        calls as f64 / all.as_secs_f64()
    );
    // The last batch's judgements are written just after its judge calls answer.
    let detail = loop {
        let detail = api.get(&format!("/api/v1/evaluators/{id}")).await.ok();
        if detail["evaluator"]["judged"].as_u64() >= Some(calls) || started.elapsed() > Duration::from_secs(1800) {
            break detail;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    println!(
        "evaluator: judged {}, failed {}, spent ${:.4}",
        detail["evaluator"]["judged"], detail["evaluator"]["failed"], detail["evaluator"]["spent_usd"]
    );

    api.post(&format!("/api/v1/evaluators/{id}"), json!({"enabled": false})).await.ok();
    let (second_alone, _) = workload::post_traces(&server, phase(3), concurrency).await;
    report("A2, the evaluator paused", second_alone);
    assert_eq!(judge.answered(), calls, "a paused evaluator judged");

    let alone = (rate(first_alone) + rate(second_alone)) / 2.0;
    let judged = (rate(judged_phases[0]) + rate(judged_phases[1])) / 2.0;
    println!(
        "ingest alone (A1, A2 mean) {alone:.0} spans/s, beside the judge (B1, B2 mean) {judged:.0} spans/s: {:+.1} %",
        (judged / alone - 1.0) * 100.0
    );
}
