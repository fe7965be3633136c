//! Evaluations benchmark: what an LLM judge costs ingest (docs/benchmarks.md).
//!
//! `cargo bench -p roost-tests --bench evaluations` runs the real server in this process
//! (release build) with a fake judge upstream ([`roost_tests::fake_judge`]: it answers at
//! once, so what is measured is roost's own work per judged call). It ingests the observe
//! bench's workload (traces of five spans, the first a model call) twice: first with no
//! evaluator, then with one judging 100 % of new calls, and prints both ingest rates and
//! the judged calls per second (while ingest runs, and until the judge has caught up).
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
        "backend {}, 2 phases of {requests} requests of {per_request} spans, {concurrency} clients",
        backend.name()
    );
    let shape = workload::Shape::new(total * 2, per_request, 3_600_000_000_000, true);
    let phase = |first: usize| -> Arc<Vec<Vec<u8>>> {
        Arc::new((first..first + requests).map(|n| workload::traces(n, &shape).encode_to_vec()).collect())
    };

    let (alone, _) = workload::post_traces(&server, phase(0), concurrency).await;
    let alone_rate = total as f64 / alone.as_secs_f64();
    println!("ingest with no evaluator: {total} spans in {:.2} s = {alone_rate:.0} spans/s", alone.as_secs_f64());

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
    let (judged_phase, _) = workload::post_traces(&server, phase(requests), concurrency).await;
    let judged_during = judge.answered();
    let judged_rate = total as f64 / judged_phase.as_secs_f64();
    println!(
        "ingest with an evaluator at 100 %: {total} spans in {:.2} s = {judged_rate:.0} spans/s ({:+.1} %)",
        judged_phase.as_secs_f64(),
        (judged_rate / alone_rate - 1.0) * 100.0
    );
    println!(
        "judged while ingesting: {judged_during} calls = {:.0} calls/s",
        judged_during as f64 / judged_phase.as_secs_f64()
    );
    // The calls of the second phase: one model call per five-span trace.
    let calls = (total / 5) as u64;
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
    let detail = api.get(&format!("/api/v1/evaluators/{id}")).await.ok();
    println!(
        "evaluator: judged {}, failed {}, spent ${:.4}",
        detail["evaluator"]["judged"], detail["evaluator"]["failed"], detail["evaluator"]["spent_usd"]
    );
}
