//! A real `roost` process under test: following what it logs.

use std::{
    io::{BufRead as _, BufReader},
    process::Child,
    sync::mpsc,
};

use serde_json::Value;

/// Follows the JSON log a `roost` child (spawned with `--log-format json` and stderr
/// piped) writes: each address it logs as "listening" is sent on the receiver (a
/// re-exec'd daemon logs another), and every other line is echoed to the test's output, so
/// a failing test shows what roost said.
pub fn listening_addresses(child: &mut Child) -> mpsc::Receiver<String> {
    let stderr = child.stderr.take().expect("roost's stderr is piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            match serde_json::from_str::<Value>(&line) {
                Ok(event) if event["fields"]["message"] == "listening" => {
                    let _ = tx.send(event["fields"]["addr"].as_str().unwrap_or_default().to_owned());
                }
                _ => eprintln!("roost: {line}"),
            }
        }
    });
    rx
}
