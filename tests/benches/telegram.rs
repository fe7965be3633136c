//! Telegram channel benchmark (docs/architecture.md#performance-targets: message → reply sent,
//! echo runtime, p99 < 200 ms after getUpdates returns). One echo agent with a bot on the suite's
//! fake Bot API; messages one at a time, each from its own chat (so the one-message-a-second
//! pacing per chat never applies), at most 20 a second (a bot sends at most 25 a second:
//! faster, the bench would measure that limit's waits, not the channel). Two figures:
//! - **after getUpdates**: from the moment the fake's long poll returned the message to the
//!   moment roost's sendMessage reached the fake: inbox write, turn, turn record, reply;
//! - **end to end**: from the message being queued at the fake to the reply, which adds
//!   waking the long poll and the HTTP round trips.
//!
//! `cargo bench -p roost-tests --bench telegram` (release build; the server runs in this
//! process). Knobs: ROOST_BENCH_BACKEND (sqlite|postgres), ROOST_BENCH_SAMPLES (500, at
//! most 990), ROOST_BENCH_RATE (messages a second, 20).

// Benchmark code: a failed unwrap is a broken run.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use roost_tests::{
    TestServer,
    bench::{self, percentiles},
    fake_telegram::FakeTelegram,
};
use serde_json::json;

/// Messages before the measured ones (connections, caches, the first poll).
const WARM_UP: usize = 10;

fn main() {
    bench::block_on(run());
}

async fn run() {
    let backend = bench::backend();
    let samples = bench::knob::<usize>("ROOST_BENCH_SAMPLES", 500).clamp(1, 1000 - WARM_UP);
    let every = Duration::from_secs_f64(1.0 / bench::knob::<f64>("ROOST_BENCH_RATE", 20.0).max(0.1));
    let fake = FakeTelegram::start().await;
    let token = fake.bot(4_000_001, "bench_bot");
    let server = TestServer::start_with(backend, |c| c.hosting.telegram_api_base = fake.base.clone()).await;
    let account = server.account(1_000_000).await;
    let api = server.api(Some(&account));
    let id = api.provision("echo", "bench").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    let chats: Vec<i64> = (1..=(WARM_UP + samples) as i64).collect();
    let allowed = chats.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
    let config = json!({"MESSAGING_BOT_TOKEN": token, "MESSAGING_ALLOWED_CHAT_IDS": allowed});
    api.post(&format!("/api/instances/{id}/config"), config).await.ok();
    api.wait_status(&id, "running").await;
    println!(
        "backend {}, echo runtime, {samples} messages one at a time, one every {} ms (+{WARM_UP} warm-up)",
        backend.name(),
        every.as_millis()
    );

    let mut end_to_end = Vec::with_capacity(samples);
    for (n, chat) in chats.iter().enumerate() {
        let started = Instant::now();
        fake.say(&token, *chat, &format!("ping {n}"));
        while fake.messages_to(*chat).is_empty() {
            assert!(started.elapsed() < Duration::from_secs(30), "no reply to chat {chat}");
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        if n >= WARM_UP {
            end_to_end.push(started.elapsed());
        }
        tokio::time::sleep(every.saturating_sub(started.elapsed())).await;
    }
    let mut after_poll: Vec<Duration> = fake.reply_latencies().into_iter().skip(WARM_UP).collect();
    println!("after getUpdates returns: {}", percentiles(&mut after_poll));
    println!("end to end (queued at the fake → reply): {}", percentiles(&mut end_to_end));
    let turns =
        api.get(&format!("/api/instances/{id}/activity?limit=500")).await.ok()["turns"].as_array().unwrap().len();
    println!("turns recorded (last 500 shown): {turns}");
}
