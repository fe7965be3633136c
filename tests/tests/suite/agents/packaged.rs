//! The real runtimes people host, OpenClaw and Hermes Agent, at the versions roost pins,
//! installed by `roost runtimes install` (scripts/test does it once, cached), each in its
//! sandbox, against a scripted model behind roost's gateway
//! ([`roost_tests::fake_agent_model`]): provision, three turns where the third is answered
//! from the first, a tool turn that writes and reads a workspace file inside the sandbox,
//! every model call a span with its tool calls, the account charged exactly what the
//! gateway metered, a brief change reaching the system prompt, pause/resume keeping the
//! conversation, destroy removing the workspace and every process. And where the operator
//! lets nothing out, Hermes boots and answers without trying the internet.

use std::time::Duration;

use roost_server::{
    ServeConfig,
    billing::prices::PriceBook,
    llm::Upstream,
    runtimes::{Catalogue, packaged::Package},
    sandbox::EgressPolicy,
};
use roost_tests::{
    Api, Backend, TestServer,
    browser::Browser,
    each_backend,
    fake_agent_model::{self as scripted, ScriptedModel},
    process::runtime_pids,
    tools,
    workspace::Workspace,
};
use serde_json::json;

use super::{TEST_CATALOGUE, money::assert_books_balance, start};

each_backend!(openclaw_is_hosted_end_to_end, hermes_is_hosted_end_to_end);

/// The scripted model's price: 1 cent per 1,000 prompt tokens, 2 cents per 1,000
/// completion tokens (USD per million tokens).
const PRICES: &str = r#"
[models."gpt-4o-mini"]
input_usd_per_mtok = 10
output_usd_per_mtok = 20
"#;

/// The longest a real runtime may take to be ready here (OpenClaw: 13-19 s alone; tests
/// run side by side on two cores).
const BOOT: Duration = Duration::from_secs(240);
/// The longest one turn may take (OpenClaw's first loads lazily: 6-10 s alone).
const TURN: Duration = Duration::from_secs(180);

/// roost with `package` in its catalogue (its built-in entry) and the scripted model as
/// the managed upstream.
pub async fn start_with(backend: Backend, package: Package, model: &ScriptedModel) -> TestServer {
    start_configured(backend, package, model, |_| {}).await
}

/// [`start_with`], then `configure`.
async fn start_configured(
    backend: Backend,
    package: Package,
    model: &ScriptedModel,
    configure: impl FnOnce(&mut ServeConfig),
) -> TestServer {
    let install = tools::installed_runtime(package);
    let catalogue = format!("{TEST_CATALOGUE}\n{}", package.catalogue_toml(&install.dir));
    let upstream = model.base_url();
    start(backend, move |config| {
        config.hosting.catalogue = Catalogue::from_toml(&catalogue).expect("catalogue");
        config.hosting.prices = PriceBook::from_toml(PRICES).expect("prices");
        config.hosting.models.openai = Some(Upstream { base_url: upstream, api_key: Some("sk-operator".into()) });
        config.hosting.turn_timeout = TURN;
        configure(config);
    })
    .await
}

async fn openclaw_is_hosted_end_to_end(backend: Backend) {
    hosted_end_to_end(backend, Package::OpenClaw).await;
}

async fn hermes_is_hosted_end_to_end(backend: Backend) {
    hosted_end_to_end(backend, Package::Hermes).await;
}

/// One turn's reply.
async fn said(api: &Api, id: &str, text: &str) -> String {
    let reply = api.post_with_timeout(&format!("/api/instances/{id}/messages"), json!({ "text": text }), TURN).await;
    let body = reply.expect("the turn ended in time").ok();
    body["reply"].as_str().unwrap_or_else(|| panic!("a reply: {body}")).to_owned()
}

async fn hosted_end_to_end(backend: Backend, package: Package) {
    let name = package.name();
    let model = ScriptedModel::start().await;
    let server = start_with(backend, package, &model).await;
    let account = server.account(100_000).await;
    let api = server.api(Some(&account));

    // The catalogue offers it with defaults that fit it.
    let runtimes = api.get("/api/runtimes").await.ok();
    let entry = runtimes.as_array().unwrap().iter().find(|r| r["id"] == name).expect("listed").clone();
    assert_eq!(entry["driver"], name, "{entry}");
    assert!(
        entry["memory_mb"].as_u64().unwrap() >= 512 && entry["boot_timeout_secs"].as_u64().unwrap() >= 60,
        "{entry}"
    );

    let id = api.provision(name, "You are Pip, a terse test agent.").await["id"].as_str().unwrap().to_owned();
    api.wait_status_within(&id, "running", BOOT).await;
    let workspace = Workspace::of(&server.config.data_dir, &id);
    let soul = match package {
        Package::OpenClaw => "SOUL.md",
        Package::Hermes => ".hermes/SOUL.md",
    };
    assert_eq!(workspace.read(soul).unwrap(), "You are Pip, a terse test agent.", "the brief is its SOUL.md");

    // Three turns: the third is answered from the first (the model is sent the history).
    assert_eq!(said(&api, &id, "Please remember the word pomegranate.").await, "Noted: pomegranate.");
    assert_eq!(said(&api, &id, "Hello there.").await, scripted::HELLO);
    assert_eq!(said(&api, &id, "Now, which word did I ask you to remember?").await, "The word was pomegranate.");
    let calls = model.calls();
    let last = calls.last().unwrap();
    assert!(last.user_messages.iter().any(|m| m.contains("pomegranate")), "history sent: {:?}", last.user_messages);
    assert!(last.system.contains("You are Pip"), "the brief opens the system prompt");

    // A tool turn: the runtime writes then reads a workspace file in its sandbox.
    let reply = said(&api, &id, "Please write the file and read it back.").await;
    assert!(reply.contains(scripted::TOOL_CONTENT), "the read result reached the model: {reply}");
    assert_eq!(workspace.read(scripted::TOOL_FILE).unwrap(), scripted::TOOL_CONTENT);
    let tool_calls: Vec<String> = model.calls().iter().filter_map(|c| c.tool_call.clone()).collect();
    assert_eq!(tool_calls.len(), 2, "a write then a read: {tool_calls:?}");

    // The same turn streamed: each tool step as it starts and ends, the reply's text, and
    // the synchronous answer at the end.
    let streamed = super::streaming::stream_turn(&api, &id, "Please write the file and read it back.").await;
    println!("{name}: a streamed tool turn: {:?}", streamed.order);
    let done = streamed.done();
    assert!(done["reply"].as_str().unwrap().contains(scripted::TOOL_CONTENT), "{done}");
    assert!(streamed.text().contains(scripted::TOOL_CONTENT), "the deltas carry the reply: {streamed:?}");
    let steps: Vec<(bool, &str)> =
        streamed.tools.iter().map(|t| (t["finished"].as_bool().unwrap(), t["name"].as_str().unwrap())).collect();
    assert_eq!(steps.len(), 4, "a write and a read, each started and finished: {:?}", streamed.tools);
    assert!(steps.iter().filter(|(finished, _)| *finished).count() == 2, "{steps:?}");
    let first_delta = streamed.order.iter().position(|e| e == "delta").unwrap();
    let last_tool = streamed.order.iter().rposition(|e| e == "tool").unwrap();
    assert!(last_tool < first_delta || streamed.deltas.len() > 1, "text streams: {:?}", streamed.order);

    // The model is the tenant's: what it makes the runtime's shell do stays in the
    // sandbox. roost's key and store, the host's secrets and other processes are not there.
    let data_dir = server.config.data_dir.display().to_string();
    let probe = format!(
        "Please run the command: cat {data_dir}/secret.key {data_dir}/roost.db /etc/shadow 2>&1; ls /root 2>&1; \
         id -u"
    );
    let printed = said(&api, &id, &probe).await;
    println!("{name}: the shell probe printed {printed:?}");
    assert!(printed.starts_with("The command printed:"), "{printed}");
    let secret = std::fs::read_to_string(server.config.data_dir.join("secret.key")).unwrap_or_default();
    assert!(secret.trim().is_empty() || !printed.contains(secret.trim()), "roost's key leaked: {printed}");
    assert!(printed.contains("No such file"), "roost's files are not in the sandbox: {printed}");
    assert!(printed.contains("1000"), "it runs as the sandbox's user: {printed}");
    assert!(!printed.contains("root:"), "no shadow file: {printed}");

    // The files roost has written at each boot (the brief, the runtime's configuration,
    // Hermes' brief hash), swapped for links to host paths: the next boot writes through
    // none of them, as root or otherwise, and the runtime still gets its configuration.
    let targets = server.config.data_dir.join("attack");
    let swapped = match package {
        Package::OpenClaw => vec!["SOUL.md", ".openclaw/openclaw.json"],
        Package::Hermes => vec![".hermes/SOUL.md", ".hermes/config.yaml", ".hermes/.roost-brief.sha256"],
    };
    let swap = swapped
        .iter()
        .enumerate()
        .map(|(i, file)| format!("rm -f $HOME/{file} && ln -s {}/{i} $HOME/{file}", targets.display()))
        .collect::<Vec<_>>()
        .join(" && ");
    let printed = said(&api, &id, &format!("Please run the command: {swap} && echo swapped")).await;
    assert!(printed.contains("swapped"), "{printed}");
    for file in &swapped {
        assert_eq!(workspace.owner(file).unwrap().mode & 0o170000, 0o120000, "{file} is a link now");
    }

    // Every model call is a span in the agent's session, tool calls included.
    let chats = model.calls().len();
    let dashboard = server.api(None);
    let mut spans = Vec::new();
    for _ in 0..200 {
        spans = crate::observe::q1(&dashboard, "spans", json!({"session_id": id, "limit": 500})).await;
        if spans.iter().filter(|s| s["operation"] == "chat").count() >= chats {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let chat_spans: Vec<_> = spans.iter().filter(|s| s["operation"] == "chat").collect();
    assert_eq!(chat_spans.len(), chats, "one span per model call");
    assert!(chat_spans.iter().all(|s| s["input_tokens"] == scripted::PROMPT_TOKENS), "tokens on each");
    // The calls' messages, tool calls included, are stored once and read back in the
    // session's transcript (the spans keep references, not copies).
    let transcript = crate::observe::q1(&dashboard, "transcript", json!({"session_id": id, "limit": 5000})).await;
    let text = serde_json::to_string(&transcript).unwrap();
    assert!(
        text.contains(scripted::TOOL_FILE) && text.contains(&tool_calls[0]),
        "the tool calls are in the calls' messages"
    );

    // The account paid exactly what the gateway metered, turn by turn.
    let metered = server
        .sql(&format!(
            "SELECT CAST(COALESCE(SUM(charged_nanocents), 0) AS BIGINT) FROM model_calls WHERE instance_id = '{id}'"
        ))
        .await
        .unwrap()[0];
    let turns = server
        .sql(&format!(
            "SELECT CAST(COALESCE(SUM(charged_nanocents), 0) AS BIGINT) FROM turns WHERE instance_id = '{id}'"
        ))
        .await
        .unwrap()[0];
    assert!(metered > 0, "the calls were charged");
    assert_eq!(turns, metered, "the turns' charges are their calls'");
    let ledger = api.get("/api/account/ledger?limit=500").await.ok();
    let usage: i64 = ledger["charges"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "usage")
        .map(|c| c["amount_nanocents"].as_i64().unwrap())
        .sum();
    assert_eq!(-usage, metered, "{ledger}");
    assert_books_balance(&server, &account).await;

    // Its output is in the log store, in its session, under its runtime's name.
    let mut output = Vec::new();
    for _ in 0..100 {
        let args = json!({"session_id": id, "service": name, "event_name": roost_proto::RUNTIME_OUTPUT_EVENT});
        output = crate::observe::q1(&dashboard, "logs", args).await;
        if !output.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!output.is_empty(), "the runtime's stdout/stderr are stored");
    // ...apart from its conversation.
    let transcript = crate::observe::q1(&dashboard, "transcript", json!({"session_id": id, "limit": 5000})).await;
    let first_line = output.last().unwrap()["body"].as_str().unwrap().to_owned();
    assert!(!transcript.iter().any(|r| r["text"] == first_line.as_str()), "output is not in the conversation");

    // A new brief restarts the runtime; the next call's system prompt carries it.
    api.post(&format!("/api/instances/{id}/config"), json!({"agent_brief": "You are Quill, who speaks in rhyme."}))
        .await
        .ok();
    api.wait_status_within(&id, "running", BOOT).await;
    assert_eq!(said(&api, &id, "Hello again.").await, scripted::HELLO);
    assert!(model.calls().last().unwrap().system.contains("You are Quill"), "the new brief is in the system prompt");
    assert!(!targets.exists(), "nothing was written through the links");
    for file in &swapped {
        assert_eq!(workspace.owner(file).unwrap().mode & 0o170000, 0o100000, "{file} is a file again");
    }

    // Pause and resume keep the conversation.
    let before = runtime_pids(&id);
    assert!(!before.is_empty());
    api.post(&format!("/api/instances/{id}/pause"), json!({})).await.ok();
    assert!(runtime_pids(&id).is_empty(), "paused: no runtime process left (workers included)");
    api.post(&format!("/api/instances/{id}/resume"), json!({})).await.ok();
    api.wait_status_within(&id, "running", BOOT).await;
    assert_eq!(said(&api, &id, "So, which word did I ask you to remember?").await, "The word was pomegranate.");

    // Each exchange once: a turn and the model calls that answered it are one exchange, so
    // neither the calls' copies of the turn's message and reply nor the history each call
    // sends again are shown twice.
    let page = roost_tests::pages::Visitor::new(&server).get(&format!("/dashboard/sessions/{id}?show=messages")).await;
    let bubbles = page.texts("ol.conversation li.msg .text");
    for text in ["Please remember the word pomegranate.", "Noted: pomegranate.", "Hello there."] {
        let times = bubbles.iter().filter(|b| b.contains(text)).count();
        assert_eq!(times, 1, "{text:?} once on the session page: {bubbles:#?}");
    }

    // The agent's session page reads as its conversation: the messages, the replies and
    // the tool calls (a real browser, on one backend; the screenshot is for people).
    if backend == Backend::Sqlite && !Browser::skipped() {
        let browser = Browser::start().await;
        browser.open(&server.url(&format!("/dashboard/sessions/{id}"))).await;
        let page = browser.main_text().await;
        for needle in
            ["remember the word pomegranate", "The word was pomegranate.", scripted::TOOL_CONTENT, "Runtime output"]
        {
            assert!(page.contains(needle), "{needle:?} on the session page:\n{page}");
        }
        browser.screenshot(&format!("packaged-{name}-session")).await;
        let output = server.url(&format!("/dashboard/sessions/{id}#output-h"));
        browser.open(&output).await;
        browser.screenshot(&format!("packaged-{name}-output")).await;
        browser.resize(390, 844).await;
        browser.open(&output).await;
        browser.screenshot(&format!("packaged-{name}-output-390")).await;
        browser.close().await;
        let dark = Browser::start_dark().await;
        dark.open(&output).await;
        dark.screenshot(&format!("packaged-{name}-output-dark")).await;
        dark.resize(390, 844).await;
        dark.open(&output).await;
        dark.screenshot(&format!("packaged-{name}-output-dark-390")).await;
        dark.close().await;
    }

    // Its state directory swapped for a link to a host directory: the next boot makes a
    // directory of its own there again, and writes nothing on the host.
    let state = match package {
        Package::OpenClaw => ".openclaw",
        Package::Hermes => ".hermes",
    };
    let host_dir = server.config.data_dir.join("attack-dir");
    std::fs::create_dir_all(&host_dir).unwrap();
    // The running runtime makes its state directory again as it writes: the swap is
    // tried until the link is what is there. (Moved aside rather than `rm -rf`, and by a
    // relative name: Hermes asks for approval before a recursive delete or a command
    // naming `$HOME/.hermes/`, which a tenant steps around just as easily.)
    let command = format!(
        "cd $HOME && for i in 1 2 3 4 5 6 7 8 9 10; do mv {state} old-{state}-$i 2>/dev/null; \
         ln -s {} {state} 2>/dev/null; test -L {state} && break; done; echo swapped",
        host_dir.display()
    );
    // The runtime may not survive losing its state under it: the turn's answer is not
    // the point, what the next boot does is.
    let text = format!("Please run the command: {command}");
    let _ = api.post_with_timeout(&format!("/api/instances/{id}/messages"), json!({ "text": text }), TURN).await;
    assert_eq!(workspace.owner(state).unwrap().mode & 0o170000, 0o120000, "a link now");
    let status = api.get(&format!("/api/instances/{id}")).await.ok()["status"].clone();
    if status == "failed" {
        api.post(&format!("/api/instances/{id}/resume"), json!({})).await.ok();
    } else {
        api.post(&format!("/api/instances/{id}/config"), json!({"agent_brief": "You are Pip again."})).await.ok();
    }
    api.wait_status_within(&id, "running", BOOT).await;
    assert_eq!(said(&api, &id, "Hello once more.").await, scripted::HELLO);
    assert_eq!(std::fs::read_dir(&host_dir).unwrap().count(), 0, "nothing written into the host directory");
    assert_eq!(workspace.owner(state).unwrap().mode & 0o170000, 0o040000, "a directory again");

    // Destroy takes the workspace and every process.
    api.post(&format!("/api/instances/{id}/destroy"), json!({})).await.ok();
    let dir = server.config.data_dir.join("agents").join(&id);
    assert!(!dir.exists() && workspace.image().is_none(), "destroy deletes the workspace");
    assert!(runtime_pids(&id).is_empty());
}

/// Where the operator lets nothing out (`--egress-default deny`: agents reach only roost's
/// model gateway), a Hermes agent boots and answers a turn without trying the internet:
/// its egress proxy records no connection at all. Before, every boot tried GitHub (the
/// tirith scanner's download) and the first turn OpenRouter (its model list, for the
/// tool-search gate), each a refused connection in the agent's egress.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hermes_boots_and_answers_without_reaching_out() {
    let model = ScriptedModel::start().await;
    let server = start_configured(Backend::Sqlite, Package::Hermes, &model, |config| {
        config.hosting.sandbox.egress = EgressPolicy::new(&[], &[], false).expect("policy");
    })
    .await;
    let account = server.account(100_000).await;
    let api = server.api(Some(&account));
    let id = api.provision("hermes", "You are Pip, a terse test agent.").await["id"].as_str().unwrap().to_owned();
    api.wait_status_within(&id, "running", BOOT).await;
    assert_eq!(said(&api, &id, "Hello there.").await, scripted::HELLO);

    // A refusal is recorded as it happens (the proxy answers, then reports it), and what
    // Hermes starts in the background at boot has had the whole boot and turn to start:
    // a moment more lets the last records land.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let dashboard = server.api(None);
    let spans = crate::observe::q1(&dashboard, "spans", json!({"session_id": id, "limit": 500})).await;
    assert!(spans.iter().any(|s| s["operation"] == "chat"), "the turn's model call is recorded: {spans:?}");
    let egress: Vec<String> = spans
        .iter()
        .filter_map(|s| s["name"].as_str().filter(|n| n.starts_with("egress ")).map(str::to_owned))
        .collect();
    assert!(egress.is_empty(), "no egress attempt after a boot and a turn: {egress:?}");
}
