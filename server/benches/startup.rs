//! Start-up and idle footprint of the real `roost` binary
//! (docs/architecture.md#performance-targets: start to `/healthz` < 300 ms, idle memory < 40 MB).
//!
//! `cargo bench -p roost-server --bench startup` (release build). For each run it starts
//! `roost serve` on a free port, times the first 200 from `/healthz` (cold: a new data dir,
//! so migrations run; warm: an existing one), then lets it idle and reads its resident
//! memory from /proc before stopping it with SIGTERM.

use std::{
    io::{Read, Write},
    net::{TcpListener, TcpStream},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

const RUNS: usize = 15;

/// A running `roost serve`; dropping it sends SIGTERM and reaps the process.
struct Roost(Child);

impl Drop for Roost {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.0.id().to_string()]).status();
        let _ = self.0.wait();
    }
}

fn main() {
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    let mut rss = Vec::new();
    for run in 0..RUNS {
        let dir = tempfile::tempdir().expect("temp dir");
        let (roost, elapsed) = start(dir.path());
        cold.push(elapsed);
        if run == 0 {
            std::thread::sleep(Duration::from_secs(2));
            rss.push(roost_tests::bench::rss_kib(roost.0.id()));
        }
        drop(roost);
        let (roost, elapsed) = start(dir.path());
        warm.push(elapsed);
        std::thread::sleep(Duration::from_millis(500));
        rss.push(roost_tests::bench::rss_kib(roost.0.id()));
    }
    report("start to /healthz, new data dir", &mut cold);
    report("start to /healthz, existing data dir", &mut warm);
    rss.sort_unstable();
    println!(
        "idle resident memory: median {:.1} MiB, max {:.1} MiB",
        rss[rss.len() / 2] as f64 / 1024.0,
        rss[rss.len() - 1] as f64 / 1024.0
    );
}

fn start(data_dir: &std::path::Path) -> (Roost, Duration) {
    let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("free port").port();
    let started = Instant::now();
    let roost = Roost(
        Command::new(env!("CARGO_BIN_EXE_roost"))
            .args(["serve", "--addr", &format!("127.0.0.1:{port}")])
            .arg("--data-dir")
            .arg(data_dir)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn roost"),
    );
    while !healthz_ok(port) {
        assert!(started.elapsed() < Duration::from_secs(10), "roost did not answer /healthz within 10 s");
        std::thread::sleep(Duration::from_micros(500));
    }
    (roost, started.elapsed())
}
fn healthz_ok(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let request = format!("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    let mut response = String::new();
    stream.write_all(request.as_bytes()).is_ok()
        && stream.read_to_string(&mut response).is_ok()
        && response.starts_with("HTTP/1.1 200")
}

fn report(what: &str, samples: &mut [Duration]) {
    samples.sort_unstable();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{what}: median {:.1} ms, p90 {:.1} ms, max {:.1} ms ({} runs)",
        ms(samples[samples.len() / 2]),
        ms(samples[samples.len() * 9 / 10]),
        ms(samples[samples.len() - 1]),
        samples.len()
    );
}
