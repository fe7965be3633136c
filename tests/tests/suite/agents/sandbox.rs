//! The sandbox, tried from inside by a hostile runtime (tests/runtimes/hostile_agent.py,
//! stdlib Python): it reaches nothing of roost, the host or another account's agent, is
//! held to its limits, and still reaches what it is given (the model gateway with the
//! SDK's variables, its workspace and /tmp, an egress host the operator allowed, which
//! shows in its session). And the modes: no bubblewrap means no process agent boots, and
//! health says why; `off` runs them unconfined. A refused connection is the agent's
//! egress, never an application error: not in health, error rates or alerts (nor, after
//! the upgrade, the refusals stored before).

use std::{path::Path, time::Duration};

use roost_server::{
    llm::Upstream,
    runtimes::Catalogue,
    sandbox::{EgressPolicy, SandboxMode},
};
use roost_tests::{Api, Backend, TestServer, each_backend, fake_models::FakeModels, workspace::Workspace};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::TcpListener,
};

use super::{TEST_CATALOGUE, start};

each_backend!(
    a_hostile_runtime_reaches_nothing_of_roost_the_host_or_another_agent,
    an_agent_past_its_memory_limit_fails_saying_so_and_nothing_else_does,
    refusals_stored_before_stop_counting_as_errors
);

/// The hostile runtime: small limits, so forking and allocating past them is quick.
pub fn catalogue() -> Catalogue {
    let text = format!(
        "{TEST_CATALOGUE}\n{}",
        hostile("hostile", "memory_mb = 96\nmax_processes = 24\ntmp_mb = 4\ndisk_mb = 64")
    );
    Catalogue::from_toml(&text).expect("catalogue")
}

/// A catalogue entry `id` for the hostile runtime with `limits` (TOML lines).
pub fn hostile(id: &str, limits: &str) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("runtimes/hostile_agent.py");
    format!(
        "[[runtime]]\nid = {id:?}\ndriver = \"process\"\nprice_cents_month = 0\nincluded_model = true\n\
         default_model = \"gpt-4o-mini\"\n{limits}\ncommand = [\"python3\", {:?}]\n",
        script.display().to_string()
    )
}

/// Sends the runtime `ask` (JSON); the reply it made, parsed.
pub async fn ask(api: &Api, id: &str, ask: Value) -> Value {
    let reply = api.message(id, &ask.to_string()).await;
    assert_eq!(reply.status, 200, "{ask}: {}", reply.body);
    serde_json::from_str(reply.body["reply"].as_str().unwrap()).unwrap()
}

/// A plain HTTP server on loopback that answers every request with `hello from outside`.
async fn outside_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf).await;
                let body = "hello from outside";
                let answer =
                    format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    port
}

async fn a_hostile_runtime_reaches_nothing_of_roost_the_host_or_another_agent(backend: Backend) {
    let fake = FakeModels::start().await;
    let outside = outside_server().await;
    let openai = fake.openai_base_url();
    let server = start(backend, move |config| {
        config.hosting.catalogue = catalogue();
        config.hosting.models.openai = Some(Upstream { base_url: openai, api_key: Some("sk-roost".into()) });
        // The one private destination the operator lets agents reach.
        config.hosting.sandbox.egress = EgressPolicy::new(&[format!("127.0.0.1:{outside}")], &[], true).unwrap();
    })
    .await;
    // Another account's agent, with a file in its workspace.
    let stranger = server.account(1_000).await;
    let stranger_api = server.api(Some(&stranger));
    let other = stranger_api.provision("example", "other").await["id"].as_str().unwrap().to_owned();
    stranger_api.wait_status(&other, "running").await;
    assert_eq!(
        stranger_api.message(&other, "keep notes.md the vault code").await.ok()["reply"],
        "[other] kept notes.md"
    );

    let account = server.account(1_000).await;
    let api = server.api(Some(&account));
    let id = api.provision("hostile", "break out").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;

    let data_dir = &server.config.data_dir;
    assert!(data_dir.join("secret.key").exists(), "the key it will try to read is there");
    let targets = json!({
        "secret_key": data_dir.join("secret.key"),
        "database": data_dir.join("roost.db"),
        "other_workspace": data_dir.join("agents").join(&other),
        "roost_port": server.bound.port(),
    });
    let report = ask(&api, &id, json!({"probe": targets})).await;
    let report = report.as_object().unwrap();
    let escapes = [
        "secret_key",
        "database",
        "other_workspace",
        "other_workspace_file",
        "home",
        "shadow",
        "processes",
        "roost_listener",
        "roost_query",
        "dashboard_via_gateway",
        "postgres",
        "metadata_direct",
        "metadata_via_proxy",
        "private_via_proxy",
        "loopback_via_proxy",
        "localhost_via_proxy",
        "write_usr",
        "write_root",
        "write_runtimes",
        "unshare_user",
        "ptrace",
        "mount",
        "proc_sys_write",
        "proc_sysrq_write",
        "io_uring",
        "socket_vsock",
        "socket_netlink",
        "socket_packet",
        "swap_gateway_socket",
        "plant_agent_socket",
        "plant_old_agent_socket",
        "directory_fds",
    ];
    for escape in escapes {
        let outcome = report[escape].as_str().unwrap();
        assert!(outcome.starts_with("blocked: "), "{escape}: {outcome}");
    }
    assert!(report["dashboard_via_gateway"].as_str().unwrap().contains("404"), "{report:?}");
    assert!(report["metadata_via_proxy"].as_str().unwrap().contains("403"), "{report:?}");
    assert_eq!(report["no_new_privs"], "1");
    assert_eq!(report["capabilities"], "0000000000000000");
    assert_eq!(report["seccomp"], "2", "a seccomp filter");
    assert!(report["workspace_writable"].as_str().unwrap().starts_with("REACHED"), "{report:?}");
    assert!(report["tmp_writable"].as_str().unwrap().starts_with("REACHED"), "{report:?}");

    // What it is given works: the model, with the SDK's variables, through roost.
    let answer = ask(&api, &id, json!({"model": "hello"})).await;
    assert_eq!(answer, json!(format!("REACHED: {}", roost_tests::fake_models::REPLY)), "{answer}");
    // An egress host the operator allowed, through the proxy.
    let url = format!("http://127.0.0.1:{outside}/hello");
    let fetched = ask(&api, &id, json!({"egress": url})).await;
    assert!(fetched.as_str().unwrap().contains("hello from outside"), "{fetched}");

    // Its limits hold: processes.
    let forks = ask(&api, &id, json!({"fork": 200})).await.as_i64().unwrap();
    assert!((1..24).contains(&forks), "forked {forks} of at most 24 tasks");

    // Every egress connection, allowed or refused, is in its session.
    let dashboard = server.api(None);
    let mut egress = Vec::new();
    for _ in 0..100 {
        let spans = crate::observe::q1(&dashboard, "spans", json!({"session_id": id, "limit": 200})).await;
        egress = spans
            .into_iter()
            .filter(|s| s["name"].as_str().is_some_and(|n| n.starts_with("egress ")))
            .collect::<Vec<_>>();
        if egress.len() >= 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let named = |name: &str| egress.iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("{name}: {egress:?}"));
    let allowed = named(&format!("egress 127.0.0.1:{outside}"));
    assert_eq!(allowed["attributes"]["roost.egress.outcome"], "allowed", "{allowed:?}");
    assert!(allowed["attributes"]["roost.egress.bytes_received"].as_i64().unwrap() > 0, "{allowed:?}");
    let metadata = named("egress 169.254.169.254:80");
    assert_eq!(metadata["attributes"]["roost.egress.outcome"], "refused", "{metadata:?}");
    named("egress 10.0.0.1:443");

    // roost kept serving, the other agent too, and nothing was written outside.
    assert_eq!(server.http.get(server.url("/healthz")).send().await.unwrap().status(), 200);
    assert_eq!(stranger_api.message(&other, "recall notes.md").await.ok()["reply"], "[other] the vault code");
    assert!(!Path::new("/usr/roost-was-here").exists() && !Path::new("/roost-was-here").exists());
    let workspace = Workspace::of(data_dir, &id);
    assert!(workspace.exists("probe.txt"), "its workspace is its own");

    // A pause stops it gracefully: SIGTERM reaches the runtime through the relay.
    api.post(&format!("/api/instances/{id}/pause"), json!({})).await.ok();
    let marker = workspace.read("stopped-by-sigterm");
    assert_eq!(marker.ok().as_deref(), Some("SIGTERM"), "the runtime was sent SIGTERM");
}

async fn an_agent_past_its_memory_limit_fails_saying_so_and_nothing_else_does(backend: Backend) {
    let server = start(backend, |config| config.hosting.catalogue = catalogue()).await;
    let account = server.account(1_000).await;
    let api = server.api(Some(&account));
    let echo = api.provision("echo", "bystander").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&echo, "running").await;
    let id = api.provision("hostile", "greedy").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;

    let greedy = api.message(&id, &json!({"allocate_mb": 512}).to_string()).await;
    greedy.err(502, "runtime_failed");
    let failed = api.wait_status(&id, "failed").await;
    let detail = failed["status_detail"].as_str().unwrap();
    assert!(detail.contains("killed for memory") && detail.contains("96 MiB"), "{detail}");
    assert_eq!(api.message(&echo, "still here").await.ok()["reply"], "[bystander] still here");
    // It can be resumed, within its limit.
    api.post(&format!("/api/instances/{id}/resume"), json!({})).await.ok();
    api.wait_status(&id, "running").await;
    assert_eq!(ask(&api, &id, json!({"allocate_mb": 8})).await, "allocated 8 MiB");
}

/// What an agent's runtime tries and the sandbox refuses (here: GitHub, as Hermes' boot
/// did, under `--egress-default deny`, and the metadata service) shows as the agent's
/// egress, and is no application error: the runtime's health stays ok with no errors, its
/// session counts none, and an `error_rate` alert does not fire. Before, each refusal was
/// an error span: two refusals beside one model call made the runtime "erroring" in health
/// and fired the alert.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_is_the_agents_egress_not_an_application_error() {
    let fake = FakeModels::start().await;
    let openai = fake.openai_base_url();
    let server = start(Backend::Sqlite, move |config| {
        config.hosting.catalogue = catalogue();
        config.hosting.models.openai = Some(Upstream { base_url: openai, api_key: Some("sk-roost".into()) });
        config.hosting.sandbox.egress = EgressPolicy::new(&[], &[], false).unwrap();
        config.alerts_every = Duration::from_millis(200);
    })
    .await;
    let account = server.account(1_000).await;
    let api = server.api(Some(&account));
    let id = api.provision("hostile", "phone home").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    // Refused by the rules (403), or, where this host resolves no names, as unresolvable
    // (502): a refusal either way.
    for url in ["http://github.com/", "http://169.254.169.254/latest/meta-data/"] {
        let outcome = ask(&api, &id, json!({ "egress": url })).await;
        assert!(outcome.as_str().unwrap().starts_with("blocked: "), "{url}: {outcome}");
    }
    let answer = ask(&api, &id, json!({"model": "hello"})).await;
    assert!(answer.as_str().unwrap().starts_with("REACHED"), "{answer}");

    // Shown as its egress, refused, with why.
    let dashboard = server.api(None);
    let mut egress = Vec::new();
    for _ in 0..100 {
        let spans = crate::observe::q1(&dashboard, "spans", json!({"session_id": id, "limit": 200})).await;
        egress = spans.into_iter().filter(|s| s["name"].as_str().is_some_and(|n| n.starts_with("egress "))).collect();
        if egress.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(egress.len(), 2, "{egress:?}");
    for span in &egress {
        assert_eq!(span["attributes"]["roost.egress.outcome"], "refused", "{span:?}");
        assert!(span["attributes"]["roost.egress.refused"].as_str().is_some_and(|why| !why.is_empty()), "{span:?}");
    }
    assert!(egress.iter().any(|s| s["name"] == "egress github.com:80"), "{egress:?}");

    // Health: the runtime is ok, with no errors; so is its session.
    let health = crate::observe::q1(&dashboard, "health", json!({})).await;
    let hostile = health.iter().find(|r| r["service"] == "hostile").unwrap_or_else(|| panic!("{health:?}"));
    assert_eq!((&hostile["status"], &hostile["errors"]), (&json!("ok"), &json!(0)), "{hostile:?}");
    assert_eq!(hostile["error_rate"].as_f64(), Some(0.0), "{hostile:?}");
    let sessions = crate::observe::q1(&dashboard, "sessions", json!({"session_id": id})).await;
    assert_eq!(sessions[0]["errors"], 0, "{sessions:?}");

    // An error-rate alert at 1% does not fire. The sentinel, a token alert the model call is
    // past, fires in the same check as the error rate is measured.
    let errors =
        dashboard.post("/api/alerts", json!({"kind": "error_rate", "threshold": 0.01, "window_secs": 600})).await;
    let errors = errors.ok()["id"].as_str().unwrap().to_owned();
    let sentinel =
        dashboard.post("/api/alerts", json!({"kind": "token_spike", "threshold": 1.0, "window_secs": 600})).await;
    let sentinel = sentinel.ok()["id"].as_str().unwrap().to_owned();
    let mut alerts = Value::Null;
    for _ in 0..150 {
        alerts = dashboard.get("/api/alerts").await.ok();
        if alerts["active"].as_array().unwrap().iter().any(|a| a["rule_id"] == sentinel.as_str()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(alerts["active"].as_array().unwrap().iter().any(|a| a["rule_id"] == sentinel.as_str()), "{alerts}");
    for list in ["active", "history"] {
        let fired = alerts[list].as_array().unwrap().iter().find(|a| a["rule_id"] == errors.as_str());
        assert!(fired.is_none(), "{list}: {fired:?}");
    }
    // Nor is a refusal listed among the errors.
    assert!(egress.iter().all(|s| s["status"] != "error"), "{egress:?}");
    let failed = crate::observe::q1(&dashboard, "spans", json!({"session_id": id, "errors_only": true})).await;
    assert!(failed.is_empty(), "{failed:?}");
}

/// A store an earlier roost kept, with two refused connections recorded as error spans
/// (as it recorded them) beside a real error: after the upgrade (migration 0038) the
/// refusals are no errors, in the spans or in the figures made from them, and the real
/// one still is.
async fn refusals_stored_before_stop_counting_as_errors(backend: Backend) {
    let at =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as i64 - 60_000_000_000;
    let day = roost_server::time::utc_day(at);
    // (trace, name, scope, kind, status message): two of roost's egress records, one failed call.
    let spans = [
        ("1a", "egress github.com:443", "roost.model_gateway", 3, "github.com:443 is not allowed"),
        ("1b", "egress openrouter.ai:443", "roost.model_gateway", 3, "openrouter.ai:443 is not allowed"),
        ("1c", "chat gpt-4o-mini", "roost.model_gateway", 3, "upstream 529 overloaded"),
    ];
    let mut inserts = vec![
        format!(
            "INSERT INTO services (service, first_ns, last_ns, spans, errors, logs, log_errors, metric_points) \
                 VALUES ('hermes', {at}, {at}, 3, 3, 0, 0, 0)"
        ),
        format!(
            "INSERT INTO sessions (session_id, agent_id, service, first_ns, last_ns, spans, events, logs, errors, \
             input_tokens, output_tokens, cost_nanocents, last_model) \
             VALUES ('ins_before', 'ins_before', 'hermes', {at}, {at}, 3, 0, 0, 3, 0, 0, 0, '')"
        ),
        format!(
            "INSERT INTO activity_daily (day, spans, span_errors, logs, log_errors, metric_points, events, runs, \
             input_tokens, output_tokens, cost_nanocents) VALUES ('{day}', 3, 3, 0, 0, 0, 0, 0, 0, 0, 0)"
        ),
    ];
    for (seq, (trace, name, scope, kind, message)) in spans.iter().enumerate() {
        let trace_id = trace.repeat(16);
        let seq = 1_000_000 + seq as i64;
        inserts.push(format!(
            "INSERT INTO traces (trace_id, start_ns, end_ns, spans, errors, root_name, service, session_id, \
             input_tokens, output_tokens, cost_nanocents, seq) \
             VALUES ('{trace_id}', {at}, {at}, 1, 1, '{name}', 'hermes', 'ins_before', 0, 0, 0, {seq})"
        ));
        inserts.push(format!(
            "INSERT INTO spans (trace_id, span_id, parent_span_id, name, kind, start_ns, end_ns, status_code, \
             status_message, service, resource_id, scope, session_id, attributes, node_id, trace_seq) \
             VALUES ('{trace_id}', '{}', '', '{name}', {kind}, {at}, {at}, 2, '{message}', 'hermes', 0, '{scope}', \
             'ins_before', '{{\"session.id\":\"ins_before\"}}', '', {seq})",
            "5b".repeat(8)
        ));
    }
    // The binary before ran migrations 0001 to 0037.
    let (url, _store) = roost_tests::sql::store_made_before(backend, 37, &inserts).await;
    let server = TestServer::start_with(backend, |config| config.database_url = url.clone()).await;

    let dashboard = server.api(None);
    let stored = crate::observe::q1(&dashboard, "spans", json!({"session_id": "ins_before"})).await;
    let status = |name: &str| {
        let span = stored.iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("{name}: {stored:?}"));
        (span["status"].as_str().unwrap().to_owned(), span["status_message"].as_str().unwrap().to_owned())
    };
    assert_eq!(status("egress github.com:443"), ("unset".to_owned(), String::new()));
    assert_eq!(status("egress openrouter.ai:443"), ("unset".to_owned(), String::new()));
    assert_eq!(status("chat gpt-4o-mini"), ("error".to_owned(), "upstream 529 overloaded".to_owned()));

    let health = crate::observe::q1(&dashboard, "health", json!({})).await;
    let hermes = health.iter().find(|r| r["service"] == "hermes").unwrap_or_else(|| panic!("{health:?}"));
    assert_eq!((&hermes["spans"], &hermes["errors"]), (&json!(3), &json!(1)), "{hermes:?}");
    let sessions = crate::observe::q1(&dashboard, "sessions", json!({"session_id": "ins_before"})).await;
    assert_eq!(sessions[0]["errors"], 1, "{sessions:?}");
    let days = crate::observe::q1(&dashboard, "aggregates", json!({"days": 2})).await;
    let today = days.iter().find(|d| d["day"] == day.as_str()).unwrap_or_else(|| panic!("{days:?}"));
    assert_eq!(today["span_errors"], 1, "{today:?}");
    let errors =
        server.sql("SELECT CAST(SUM(errors) AS BIGINT) FROM traces WHERE session_id = 'ins_before'").await.unwrap();
    assert_eq!(errors, [1]);
}

/// Health's `sandbox` check, from the dashboard API.
async fn sandbox_check(server: &TestServer) -> Value {
    let health = server.api(None).get("/api/health").await.ok();
    health["checks"].as_array().unwrap().iter().find(|c| c["name"] == "sandbox").cloned().expect("a sandbox check")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_bubblewrap_no_process_agent_boots_and_health_says_why() {
    let server = start(Backend::Sqlite, |config| {
        config.hosting.sandbox.bwrap = Some("/nonexistent/bwrap".into());
    })
    .await;
    let check = sandbox_check(&server).await;
    assert_eq!(check["status"], "fail", "{check}");
    assert!(check["detail"].as_str().unwrap().starts_with("sandbox unavailable: bubblewrap is not at"), "{check}");
    let account = server.account(1_000).await;
    let api = server.api(Some(&account));
    let id = api.provision("example", "confined or nothing").await["id"].as_str().unwrap().to_owned();
    let failed = api.wait_status(&id, "failed").await;
    assert!(failed["status_detail"].as_str().unwrap().starts_with("sandbox unavailable: "), "{failed}");
    // Agents that run inside roost are not affected.
    let echo = api.provision("echo", "fine").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&echo, "running").await;
    assert_eq!(api.message(&echo, "hi").await.ok()["reply"], "[fine] hi");
}

/// A root roost that cannot give its agents unprivileged uids of their own (here: the range
/// holds a host account, `nobody`) boots no process agent, and says what to set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_uid_range_holding_a_host_account_keeps_process_agents_from_booting() {
    if !rustix::process::geteuid().is_root() {
        return eprintln!("skipped: agents' uids are roost's own when it is not root");
    }
    let server = start(Backend::Sqlite, |config| {
        config.hosting.sandbox.uids = "65534:1".parse().unwrap();
    })
    .await;
    let check = sandbox_check(&server).await;
    assert_eq!(check["status"], "fail", "{check}");
    let detail = check["detail"].as_str().unwrap();
    assert!(detail.contains("holds the host account") && detail.contains("--agent-uids"), "{check}");
    let account = server.account(1_000).await;
    let api = server.api(Some(&account));
    let id = api.provision("example", "root or nothing").await["id"].as_str().unwrap().to_owned();
    let failed = api.wait_status(&id, "failed").await;
    assert!(failed["status_detail"].as_str().unwrap().contains("--agent-uids"), "{failed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_sandbox_off_process_agents_run_unconfined_and_health_warns() {
    let server = start(Backend::Sqlite, |config| config.hosting.sandbox.mode = SandboxMode::Off).await;
    let check = sandbox_check(&server).await;
    assert_eq!(check["status"], "warn", "{check}");
    let account = server.account(1_000).await;
    let api = server.api(Some(&account));
    let id = api.provision("example", "loose").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    let env: Value = serde_json::from_str(api.message(&id, "env").await.ok()["reply"].as_str().unwrap()).unwrap();
    assert_eq!(env["otlp_endpoint"], server.url(""), "unconfined, it reaches roost's own listener");
}
