//! The MCP server at `/mcp`, driven by rmcp's own client over Streamable HTTP: the seed's
//! flow, the same answers as REST for missing, bad and foreign keys, progress while a turn
//! runs, the query tools' dashboard rule, the Host allow-list, and `/skill.md`.

use std::{collections::BTreeSet, time::Duration};

use rmcp::{
    ClientHandler, RoleClient, ServiceExt,
    model::{CallToolRequestParams, ClientRequest, ProgressNotificationParam, Request},
    service::{NotificationContext, PeerRequestOptions, RunningService},
};
use roost_tests::{Backend, TestAccount, TestServer, each_backend, fake_telegram::FakeTelegram};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use crate::agents::start;

each_backend!(
    seed_flow_over_mcp,
    keys_and_errors_answer_as_rest_does,
    progress_is_reported_while_a_turn_runs,
    query_tools_answer_dashboard_callers_only,
    skills_page_counts_routes_and_tools,
    a_chat_is_paired_over_mcp,
);

/// A client that forwards progress notifications to the test.
#[derive(Clone)]
pub(crate) struct Client {
    progress: mpsc::UnboundedSender<ProgressNotificationParam>,
}

impl ClientHandler for Client {
    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        let _ = self.progress.send(params);
    }
}

pub(crate) type Session = RunningService<RoleClient, Client>;

/// Connects with `bearer` (an API key or a dashboard token).
pub(crate) async fn connect(
    server: &TestServer,
    bearer: &str,
) -> (Session, mpsc::UnboundedReceiver<ProgressNotificationParam>) {
    try_connect(server, Some(bearer)).await.expect("MCP handshake")
}

async fn try_connect(
    server: &TestServer,
    bearer: Option<&str>,
) -> Result<(Session, mpsc::UnboundedReceiver<ProgressNotificationParam>), String> {
    use rmcp::transport::{StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig};
    let mut config = StreamableHttpClientTransportConfig::with_uri(server.url("/mcp"));
    if let Some(bearer) = bearer {
        config = config.auth_header(bearer);
    }
    let (tx, rx) = mpsc::unbounded_channel();
    let session = Client { progress: tx }
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .map_err(|e| format!("{e:?}"))?;
    Ok((session, rx))
}

/// A tool's outcome: `Ok(structured content)` or `Err(structured error)`, with the text.
pub(crate) async fn call(session: &Session, tool: &str, args: Value) -> (Result<Value, Value>, String) {
    let mut params = CallToolRequestParams::new(tool.to_owned());
    params.arguments = Some(as_object(args));
    let result = session.call_tool(params).await.expect("tools/call answered");
    let text = result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect::<Vec<_>>().join("");
    let content = result.structured_content.clone().unwrap_or(Value::Null);
    if result.is_error == Some(true) { (Err(content), text) } else { (Ok(content), text) }
}

async fn ok(session: &Session, tool: &str, args: Value) -> Value {
    match call(session, tool, args.clone()).await {
        (Ok(content), _) => content,
        (Err(err), _) => panic!("{tool}({args}) failed: {err}"),
    }
}

/// Asserts a tool error with REST's code and status.
async fn fails(session: &Session, tool: &str, args: Value, status: u16, code: &str) -> Value {
    match call(session, tool, args.clone()).await {
        (Err(err), text) => {
            assert_eq!((err["status"].as_u64(), err["code"].as_str()), (Some(u64::from(status)), Some(code)), "{err}");
            assert!(text.contains(code), "the readable text names the code: {text}");
            err
        }
        (Ok(content), _) => panic!("{tool}({args}) should fail with {code}, got {content}"),
    }
}

fn as_object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

async fn wait_status(session: &Session, id: &str, status: &str) -> Value {
    for _ in 0..400 {
        let agent = ok(session, "get_agent", json!({"instance_id": id})).await;
        if agent["status"] == status {
            return agent;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("agent {id} never became {status}");
}

/// `get_channel` shows a stranger's chat waiting; `pair_channel` approves its code (a wrong
/// one is 404, as over REST), and the chat is then allowed.
async fn a_chat_is_paired_over_mcp(backend: Backend) {
    let fake = FakeTelegram::start().await;
    let token = fake.bot(8201, "mcp_bot");
    let server = TestServer::start_with(backend, |c| c.hosting.telegram_api_base = fake.base.clone()).await;
    let account = server.account(5_000).await;
    let (session, _) = connect(&server, &account.key).await;
    let id =
        ok(&session, "create_agent", json!({"runtime": "echo", "brief": "b"})).await["id"].as_str().unwrap().to_owned();
    wait_status(&session, &id, "running").await;
    ok(&session, "configure_agent", json!({"instance_id": id, "MESSAGING_BOT_TOKEN": token})).await;
    wait_status(&session, &id, "running").await;
    fake.say(&token, 55, "hi");
    let mut code = None;
    for _ in 0..400 {
        code = fake
            .messages_to(55)
            .first()
            .and_then(|m| m.split_whitespace().find(|w| w.len() == 9 && w.as_bytes()[4] == b'-').map(str::to_owned));
        if code.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let code = code.expect("a pairing code");
    let channel = ok(&session, "get_channel", json!({"instance_id": id})).await;
    assert_eq!(channel["pending_pairings"][0]["chat_id"], 55, "{channel}");
    fails(&session, "pair_channel", json!({"instance_id": id, "code": "AAAA-AAAA"}), 404, "not_found").await;
    let (paired, text) = call(&session, "pair_channel", json!({"instance_id": id, "code": code})).await;
    assert_eq!(paired.unwrap()["allowed_chat_ids"], json!([55]));
    assert!(text.contains("Chat 55 may now talk"), "{text}");
}

async fn seed_flow_over_mcp(backend: Backend) {
    let server = start(backend, |_| {}).await;
    let account = server.account(5_000).await;
    let (session, _) = connect(&server, &account.key).await;

    let info = session.peer_info().expect("server info");
    assert_eq!(info.server_info.as_ref().map(|i| i.name.as_str()), Some("roost"));
    let tools = session.list_all_tools().await.unwrap();
    let names: BTreeSet<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    let expected = [
        "list_runtimes",
        "create_agent",
        "send_message",
        "rate_turn",
        "get_activity",
        "configure_agent",
        "pause_agent",
        "resume_agent",
        "destroy_agent",
        "list_agents",
        "get_agent",
        "get_channel",
        "pair_channel",
        "list_files",
        "read_file",
        "query",
        "list_sessions",
        "create_dataset",
        "add_dataset_items",
        "list_datasets",
        "get_dataset",
        "run_experiment",
        "get_experiment",
        "list_experiments",
        "cancel_experiment",
    ];
    assert_eq!(names, expected.into_iter().collect());
    let create = tools.iter().find(|t| t.name == "create_agent").unwrap();
    assert!(create.description.as_deref().unwrap_or_default().contains("credits"));
    assert_eq!(create.input_schema["required"], json!(["runtime", "brief"]));
    assert!(create.input_schema["properties"]["brief"]["description"].as_str().unwrap().contains("memory"));

    let runtimes = ok(&session, "list_runtimes", json!({})).await;
    assert!(runtimes["runtimes"].as_array().unwrap().iter().any(|r| r["id"] == "echo"));

    let (created, text) = call(&session, "create_agent", json!({"runtime": "echo", "brief": "Be kind."})).await;
    let created = created.unwrap();
    assert_eq!((created["status"].as_str(), created["charged_cents"].as_i64()), (Some("provisioning"), Some(0)));
    let id = created["id"].as_str().unwrap().to_owned();
    assert!(text.contains(&id) && text.contains("get_agent"), "{text}");
    wait_status(&session, &id, "running").await;

    let (turn, text) = call(&session, "send_message", json!({"instance_id": id, "text": "hello"})).await;
    let turn = turn.unwrap();
    assert_eq!(turn["reply"], "[Be kind.] hello");
    assert_eq!(text, "[Be kind.] hello", "the readable text of a turn is the reply");

    let configured = ok(&session, "configure_agent", json!({"instance_id": id, "agent_brief": "Be brief."})).await;
    assert_eq!(configured, json!({"ok": true, "id": id, "status": "restarting", "applied": ["agent_brief"]}));
    wait_status(&session, &id, "running").await;

    let paused = ok(&session, "pause_agent", json!({"instance_id": id})).await;
    assert_eq!(paused, json!({"ok": true, "id": id, "status": "paused"}));
    fails(&session, "send_message", json!({"instance_id": id, "text": "there?"}), 409, "wrong_state").await;
    fails(&session, "pause_agent", json!({"instance_id": id}), 409, "wrong_state").await;

    let resumed = ok(&session, "resume_agent", json!({"instance_id": id})).await;
    assert_eq!(resumed["status"], "provisioning");
    wait_status(&session, &id, "running").await;
    assert_eq!(
        ok(&session, "send_message", json!({"instance_id": id, "text": "back"})).await["reply"],
        "[Be brief.] back"
    );

    let listed = ok(&session, "list_agents", json!({})).await;
    assert_eq!(listed["instances"][0]["id"], id.as_str());

    // Turns from MCP are recorded as such.
    let activity = ok(&session, "get_activity", json!({"instance_id": id, "limit": 10})).await;
    let turns: Vec<(&str, &str)> = activity["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["text"].as_str().unwrap(), t["source"].as_str().unwrap()))
        .collect();
    assert_eq!(turns, [("back", "mcp"), ("hello", "mcp")]);

    let destroyed = ok(&session, "destroy_agent", json!({"instance_id": id})).await;
    assert_eq!(destroyed["status"], "destroyed");
    fails(&session, "get_agent", json!({"instance_id": id}), 404, "not_found").await;

    // REST sees the same agent history.
    let rest = server.api(Some(&account)).get(&format!("/api/instances/{id}/activity")).await.ok();
    assert_eq!(rest["turns"].as_array().unwrap().len(), 2);
    session.cancel().await.unwrap();
}

async fn keys_and_errors_answer_as_rest_does(backend: Backend) {
    let server = start(backend, |_| {}).await;
    let owner = server.account(0).await;
    let other = server.account(0).await;
    let http = reqwest::Client::new();
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    });

    // No key and a bad key: the HTTP request is refused, like REST.
    for key in [None, Some("rk_not_a_key")] {
        let mut request =
            http.post(server.url("/mcp")).header("accept", "application/json, text/event-stream").json(&initialize);
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 401, "{key:?}");
        assert!(response.headers().contains_key("www-authenticate"));
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["code"], "unauthenticated");
        let rest = server.api(Some(&TestAccount { id: String::new(), key: key.unwrap_or("").into() }));
        rest.get("/api/instances").await.err(401, "unauthenticated");
        assert!(try_connect(&server, key).await.is_err(), "rmcp's client cannot connect with {key:?}");
    }

    // Another account's agent is not found, as over REST.
    let (mine, _) = connect(&server, &owner.key).await;
    let (theirs, _) = connect(&server, &other.key).await;
    let created = ok(&mine, "create_agent", json!({"runtime": "slow", "brief": "Mine."})).await;
    let id = created["id"].as_str().unwrap().to_owned();
    for (tool, args) in [
        ("get_agent", json!({"instance_id": id})),
        ("send_message", json!({"instance_id": id, "text": "hi"})),
        ("get_activity", json!({"instance_id": id})),
        ("configure_agent", json!({"instance_id": id, "model": "x"})),
        ("pause_agent", json!({"instance_id": id})),
        ("resume_agent", json!({"instance_id": id})),
        ("destroy_agent", json!({"instance_id": id})),
    ] {
        fails(&theirs, tool, args, 404, "not_found").await;
    }
    server.api(Some(&other)).get(&format!("/api/instances/{id}")).await.err(404, "not_found");

    // 409 while the first deploy settles, 402 once it has and the account cannot pay.
    fails(&mine, "create_agent", json!({"runtime": "echo", "brief": "Second."}), 409, "deploy_settling").await;
    server.api(Some(&owner)).wait_status(&id, "running").await;
    // The free month goes to the first priced agent ("slow" is free); the next one pays.
    let free_month = server.api(Some(&owner)).provision("echo-paid", "Free month.").await;
    server.api(Some(&owner)).wait_status(free_month["id"].as_str().unwrap(), "running").await;
    fails(&mine, "create_agent", json!({"runtime": "echo-paid", "brief": "Paid."}), 402, "insufficient_credits").await;
    server
        .api(Some(&owner))
        .post("/api/provision", json!({"runtime": "echo-paid", "brief": "x"}))
        .await
        .err(402, "insufficient_credits");

    // Bad arguments are invalid_argument naming the problem; unknown tools are refused.
    let err = fails(&mine, "send_message", json!({"instance_id": id, "txt": "typo"}), 400, "invalid_argument").await;
    assert!(err["error"].as_str().unwrap().contains("txt"), "{err}");
    fails(&mine, "create_agent", json!({"runtime": "nope", "brief": "x"}), 400, "invalid_argument").await;
    fails(&mine, "no_such_tool", json!({}), 404, "not_found").await;
    // Text holding NUL is refused naming the argument, as over REST and gRPC.
    let err =
        fails(&mine, "send_message", json!({"instance_id": id, "text": "a\u{0}b"}), 400, "invalid_argument").await;
    assert!(err["error"].as_str().unwrap().starts_with("text contains a NUL"), "{err}");

    // A key revoked mid-session stops working on the next request.
    let revoked = server.account(0).await;
    let (session, _) = connect(&server, &revoked.key).await;
    ok(&session, "list_agents", json!({})).await;
    let key_id = server.store().await.list_keys(&revoked.id).await.unwrap()[0].id.clone();
    server.revoke_key(&key_id).await;
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let mut params = CallToolRequestParams::new("list_agents");
    params.arguments = Some(Map::new());
    let refused = session.call_tool(params).await.expect_err("a revoked key is refused");
    assert!(refused.is_authorization_required(), "{refused:?}");
}

async fn progress_is_reported_while_a_turn_runs(backend: Backend) {
    let server = start(backend, |_| {}).await;
    let account = server.account(5_000).await;
    let (session, mut progress) = connect(&server, &account.key).await;
    let created = ok(&session, "create_agent", json!({"runtime": "example", "brief": "Wait."})).await;
    let id = created["id"].as_str().unwrap().to_owned();
    wait_status(&session, &id, "running").await;

    let mut params = CallToolRequestParams::new("send_message");
    params.arguments = Some(as_object(json!({"instance_id": id, "text": "sleep:2500 done"})));
    let handle = session
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(params)),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    let token = handle.progress_token.clone();
    let response = handle.await_response().await.unwrap();
    let rmcp::model::ServerResult::CallToolResult(result) = response else { panic!("{response:?}") };
    assert_eq!(result.structured_content.unwrap()["reply"], "[Wait.] done");

    let mut seen = Vec::new();
    while let Ok(note) = progress.try_recv() {
        seen.push(note);
    }
    assert!(seen.len() >= 2, "an immediate report and one after 2 s: {seen:?}");
    assert!(seen.iter().all(|n| n.progress_token == token && n.total == Some(900.0)));
    assert!(seen[0].message.as_deref().unwrap_or_default().contains("waiting for the agent"));
    assert!(seen.windows(2).all(|w| w[0].progress <= w[1].progress), "progress never goes back");
    // The turn streams: the reply's text came as progress while the runtime worked.
    let replied: String =
        seen.iter().filter_map(|n| n.message.as_deref()?.strip_prefix("reply: ").map(str::to_owned)).collect();
    assert_eq!(replied, "[Wait.] done", "each delta as it came: {seen:?}");
}

async fn query_tools_answer_dashboard_callers_only(backend: Backend) {
    // Loopback with no tokens: the dashboard answers, so the query tools do.
    let server = start(backend, |_| {}).await;
    let account = server.account(0).await;
    let (session, _) = connect(&server, &account.key).await;
    let created = ok(&session, "create_agent", json!({"runtime": "echo", "brief": "Observed."})).await;
    let id = created["id"].as_str().unwrap().to_owned();
    wait_status(&session, &id, "running").await;
    ok(&session, "send_message", json!({"instance_id": id, "text": "hello"})).await;

    let tools = session.list_all_tools().await.unwrap();
    let query = tools.iter().find(|t| t.name == "query").unwrap();
    let shapes = query.input_schema["properties"]["shape"]["enum"].as_array().unwrap();
    assert!(shapes.contains(&json!("sessions")) && shapes.contains(&json!("spans")), "{shapes:?}");
    assert!(query.input_schema["properties"]["args"]["properties"]["limit"].is_object());

    // The hosted turn is recorded as observed activity; poll, as it is written behind the reply.
    let mut rows = Vec::new();
    for _ in 0..100 {
        let answer = ok(&session, "query", json!({"shape": "sessions", "args": {"limit": 5}})).await;
        rows = answer["rows"].as_array().cloned().unwrap_or_default();
        if !rows.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!rows.is_empty(), "the hosted turn shows up as a session");
    let sessions = ok(&session, "list_sessions", json!({"limit": 5})).await;
    assert_eq!(sessions["shape"], "sessions");
    let rest = server.api(None).post("/api/local/query", json!({"shape": "sessions", "args": {"limit": 5}})).await.ok();
    assert_eq!(rest["count"], sessions["count"], "the same answer as REST");
    fails(&session, "query", json!({"shape": "nope"}), 400, "invalid_argument").await;
    server.stop().await.unwrap();

    // With SERVICE_API_TOKENS set, an account key is not a dashboard caller; a token is.
    let server = start(backend, |config| config.access.api_tokens = vec!["dash-token".into()]).await;
    let account = server.account(0).await;
    let (session, _) = connect(&server, &account.key).await;
    fails(&session, "list_sessions", json!({}), 401, "unauthenticated").await;
    ok(&session, "list_agents", json!({})).await;
    let (operator, _) = connect(&server, "dash-token").await;
    ok(&operator, "list_sessions", json!({})).await;
    fails(&operator, "list_agents", json!({}), 401, "unauthenticated").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_header_is_checked_against_the_allow_list() {
    let post = |server: &TestServer, host: &'static str, key: String| {
        let url = server.url("/mcp");
        async move {
            reqwest::Client::new()
                .post(url)
                .header("host", host)
                .header("accept", "application/json, text/event-stream")
                .bearer_auth(key)
                .json(&json!({
                    "jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
                }))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    let server = start(Backend::Sqlite, |_| {}).await;
    let account = server.account(0).await;
    assert_eq!(post(&server, "roost.example", account.key.clone()).await, 403, "not allowed by default");
    assert_eq!(post(&server, "localhost", account.key.clone()).await, 200);
    server.stop().await.unwrap();

    let server = start(Backend::Sqlite, |config| config.access.hosts.add("roost.example")).await;
    let account = server.account(0).await;
    assert_eq!(post(&server, "roost.example", account.key.clone()).await, 200, "configured hosts are allowed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skill_file_documents_every_route_and_tool() {
    let server = start(Backend::Sqlite, |_| {}).await;
    let response = reqwest::get(server.url("/skill.md")).await.unwrap();
    assert_eq!(response.status(), 200, "open, no key");
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/markdown"));
    let skill = response.text().await.unwrap();
    assert!(skill.starts_with("---\nname: roost\ndescription: "), "front matter first");
    assert!(skill.contains(&server.url("/mcp")), "the base URL is the address asked");
    assert!(!skill.contains("{base_url}"));

    let http = reqwest::Client::new();
    for section in roost_gateway::sections() {
        assert!(skill.contains(&format!("## {}", section.title)), "{}", section.title);
        for endpoint in &section.endpoints {
            let heading = format!("### {} {}", endpoint.verb.as_str(), endpoint.shown_path());
            assert!(skill.contains(&heading), "{heading} is documented");
            for code in endpoint.all_errors() {
                let section_text = skill.split(&heading).nth(1).unwrap().split("\n### ").next().unwrap();
                assert!(section_text.contains(&format!("`{}`", code.code())), "{heading} lists {}", code.code());
            }
            // And what is documented is served: no route fallback, no 405.
            let path = endpoint
                .shown_path()
                .replace("{instance_id}", "probe")
                .replace("{run_id}", "probe")
                .replace("{id}", "1")
                .replace("{path}", "SOUL.md");
            let method = reqwest::Method::from_bytes(endpoint.verb.as_str().as_bytes()).unwrap();
            if endpoint.path.contains("stream")
                || endpoint.path == "/api/logs"
                || endpoint.path == "/api/control/restart"
            {
                continue; // streams never end; restarting would stop the test server
            }
            let answer = http.request(method, server.url(&path)).send().await.unwrap();
            let status = answer.status().as_u16();
            let body = answer.text().await.unwrap_or_default();
            assert!(status != 405 && !body.contains("no route for"), "{heading}: {status} {body}");
        }
    }
    for tool in roost_gateway::mcp::tools::TOOLS {
        assert!(skill.contains(&format!("### {}\n", tool.name)), "tool {} is documented", tool.name);
    }
    for message in ["Instance", "InstanceStatus", "SendMessageResponse", "GetActivityResponse"] {
        assert!(skill.contains(&format!("### {message}\n")), "type {message} is documented");
    }
}

async fn skills_page_counts_routes_and_tools(backend: Backend) {
    let server = start(backend, |_| {}).await;
    let account = server.account(0).await;
    let api = server.api(Some(&account));
    let (session, _) = connect(&server, &account.key).await;
    ok(&session, "list_runtimes", json!({})).await;
    ok(&session, "list_runtimes", json!({})).await;
    fails(&session, "get_agent", json!({"instance_id": "ins_nope"}), 404, "not_found").await;
    server.api(None).get("/api/runtimes").await.ok();
    api.get("/api/instances/ins_nope").await.err(404, "not_found");
    session.cancel().await.unwrap();

    let page = server.api(None).get("/api/skills").await.ok();
    assert_eq!(page["skill_file"], "/skill.md");
    assert_eq!(page["warning"], "");
    let skills = page["skills"].as_array().unwrap();
    let find = |surface: &str, name: &str| {
        skills
            .iter()
            .find(|s| s["surface"] == surface && s["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name}"))
    };
    // Everything the skill file and the tool list offer is on the page, used or not.
    assert_eq!(skills.iter().filter(|s| s["surface"] == "mcp").count(), roost_gateway::mcp::tools::TOOLS.len());
    let routes: usize = roost_gateway::sections().iter().map(|s| s.endpoints.len()).sum();
    assert_eq!(skills.iter().filter(|s| s["surface"] == "rest").count(), routes);

    let tool = find("mcp", "list_runtimes");
    assert_eq!((tool["calls"].as_i64(), tool["errors"].as_i64()), (Some(2), Some(0)));
    assert!(tool["last_used_at"].is_string());
    let failed = find("mcp", "get_agent");
    assert_eq!((failed["calls"].as_i64(), failed["errors"].as_i64()), (Some(1), Some(1)));
    let unused = find("mcp", "destroy_agent");
    assert_eq!((unused["calls"].as_i64(), unused["last_used_at"].as_str()), (Some(0), None));
    assert_eq!(find("rest", "GET /api/runtimes")["calls"], 1);
    let missing = find("rest", "GET /api/instances/{instance_id}");
    assert_eq!((missing["calls"].as_i64(), missing["errors"].as_i64()), (Some(1), Some(1)));
    assert_eq!(find("rest", "POST /mcp")["calls"], 0, "MCP's transport requests are counted as tool calls");
    assert_eq!(find("rest", "GET /api/skills")["section"], "Dashboard pages");

    // Counts are stored: they survive a restart (the page itself counted once more).
    let server = server.restart().await;
    let page = server.api(None).get("/api/skills").await.ok();
    let skills = page["skills"].as_array().unwrap();
    let count = |name: &str| skills.iter().find(|s| s["name"] == name).unwrap()["calls"].as_i64().unwrap();
    assert_eq!(count("list_runtimes"), 2);
    assert_eq!(count("GET /api/skills"), 1);
}
