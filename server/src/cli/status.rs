//! `roost status`: asks a running roost (`GET /api/status`) and prints the truth behind the
//! dashboard: the build, the store and its counts, ingest, the health checks, and whether
//! the last empty feature page meant an empty store or a broken one.

use std::{process::ExitCode, time::Duration};

use clap::Args;
use roost_proto::v1::{GetStatusResponse, GetUpdateStatusResponse};

/// Flags of `roost status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Base URL of the running roost.
    #[arg(long, env = "ROOST_URL", default_value = "http://127.0.0.1:8900")]
    url: String,
    /// Print the status as JSON.
    #[arg(long)]
    json: bool,
}

/// Prints the status; exit 1 when roost does not answer or reports a failing check.
pub async fn status(args: StatusArgs) -> ExitCode {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap_or_default();
    let mut request = client.get(format!("{}/api/status", args.url.trim_end_matches('/')));
    // The dashboard's own token, when tokens are required.
    if let Some(token) = std::env::var("SERVICE_API_TOKENS").ok().and_then(|t| t.split(',').next().map(str::to_owned)) {
        request = request.bearer_auth(token.trim());
    }
    let response = match request.send().await {
        Ok(response) => response,
        Err(err) => {
            eprintln!("roost: nothing answers at {}: {err}", args.url);
            return ExitCode::FAILURE;
        }
    };
    if !response.status().is_success() {
        let code = response.status();
        let body = response.text().await.unwrap_or_default();
        eprintln!("roost: {} answered {code}: {body}", args.url);
        return ExitCode::FAILURE;
    }
    let status: GetStatusResponse = match response.json().await {
        Ok(status) => status,
        Err(err) => {
            eprintln!("roost: {} answered something that is not a status: {err}", args.url);
            return ExitCode::FAILURE;
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&status).unwrap_or_default());
    } else {
        print!("{}", render(&status));
    }
    let failing = status.health.as_ref().is_some_and(|h| h.status == "fail");
    if failing { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}

/// The update part of `roost status` (also printed by `roost update`).
pub fn update_lines(u: &GetUpdateStatusResponse) -> String {
    let latest = if u.latest.is_empty() { "not checked yet".to_owned() } else { u.latest.clone() };
    let mut out = format!(
        "update     running {}, latest {latest}{}; {} role, {}\n",
        u.current,
        if u.update_available { " (an update is available)" } else { "" },
        u.role,
        if u.kill_switch {
            "kill switch on (SERVICE_AUTO_UPDATE): nothing installs".to_owned()
        } else if u.auto_update {
            format!("auto-update on, checks every {} s, restart: {}", u.check_every_secs, u.restart)
        } else {
            "auto-update off".to_owned()
        }
    );
    if !u.repository.is_empty() {
        let signatures = if u.public_key.is_empty() {
            "signatures not checked (no --update-public-key)".to_owned()
        } else {
            format!("signed with {}", u.public_key)
        };
        out += &format!("  trusts       {} releases naming {}, {signatures}\n", u.package, u.repository);
    }
    if let Some(check) = &u.last_check {
        out += &format!("  last check   {} {}\n", check.outcome, check.detail);
    }
    if let Some(attempt) = &u.last_attempt {
        out += &format!("  last install {} {}: {}\n", attempt.version, attempt.outcome, first_line(&attempt.detail));
    }
    for held in &u.held {
        out += &format!("  held         {} ({})\n", held.version, held.reason);
    }
    if u.guard_armed {
        out += "  guard        armed: watching the new version for a crash loop\n";
    }
    if let Some(r) = &u.rollback {
        out += &format!("  rolled back  {} -> {} ({}, {} boots)\n", r.from, r.to, r.reason, r.boots);
    }
    out
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

fn render(s: &GetStatusResponse) -> String {
    let mut out = format!("roost {} ({})\n", s.version, s.git_commit);
    if let Some(store) = &s.store {
        let state = if store.reachable { "answers".to_owned() } else { format!("DOES NOT ANSWER: {}", store.error) };
        out += &format!(
            "store      {} at {}, {:.1} MiB, {state}\n           {} spans, {} logs, {} metric points, {} events, {} runs, {} sessions, {} hosted agents\n",
            store.backend,
            store.location,
            store.size_bytes as f64 / 1_048_576.0,
            store.spans,
            store.logs,
            store.metric_points,
            store.events,
            store.runs,
            store.sessions,
            store.hosted_agents
        );
    }
    if let Some(i) = &s.ingest {
        out += &format!(
            "ingest     last minute: {:.1} spans/s, {:.1} logs/s, {:.1} points/s, {:.1} events/s\n           since start: {} spans, {} logs, {} points, {} events\n",
            i.spans_per_sec,
            i.logs_per_sec,
            i.metric_points_per_sec,
            i.events_per_sec,
            i.spans_total,
            i.logs_total,
            i.metric_points_total,
            i.events_total
        );
    }
    if let Some(c) = &s.cluster {
        out += &format!("replica    {}: {}\n", c.replica_id, cluster_line(c));
        for r in &c.replicas {
            let me = if r.id == c.replica_id { ", this one" } else { "" };
            out += &format!("  {} at {}: {} agents{me}\n", r.id, r.addr, r.agents.len());
        }
    }
    if !s.unpriced_models.is_empty() {
        let models: Vec<String> =
            s.unpriced_models.iter().map(|m| format!("{} ({} calls)", m.model, m.calls)).collect();
        out += &format!("unpriced   {}: tokens counted, cost unknown; add them to --price-book\n", models.join(", "));
    }
    if let Some(h) = &s.health {
        out += &format!("health     {}\n", h.status);
        for check in &h.checks {
            out += &format!("  {:<8} {:<4} {}\n", check.name, check.status, check.detail);
        }
    }
    out += &match (&s.last_handler_failure, s.handler_verdict.as_str()) {
        (Some(f), "broken") => format!(
            "pages      BROKEN: the {} page answered empty ({}); the store still does not answer\n",
            f.page, f.error
        ),
        (Some(f), _) => format!(
            "pages      the {} page answered empty once ({}); the store answers now, so that was transient\n",
            f.page, f.error
        ),
        (None, _) => "pages      every feature page answered from the store\n".to_owned(),
    };
    if let Some(u) = &s.update {
        out += &update_lines(u);
    }
    out
}

/// Who runs the cluster-wide workers, from this replica's point of view.
fn cluster_line(c: &roost_proto::v1::ClusterStatus) -> String {
    match (c.leading, c.leader_id.as_str()) {
        (true, _) => {
            format!("leads the cluster-wide workers (retention, crons, alerts, guard; epoch {})", c.leader_epoch)
        }
        (false, "") => {
            "no replica leads the cluster-wide workers right now (the lease is free; one takes it within seconds)"
                .to_owned()
        }
        (false, leader) => format!("the cluster-wide workers run on replica {leader} (epoch {})", c.leader_epoch),
    }
}
