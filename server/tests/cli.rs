//! The operator CLI (`roost accounts|keys|credits|status|backup|restore|runtimes`) as operators run
//! it: the real binary, on the same store as a running `roost serve`, on SQLite and
//! PostgreSQL.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::process::{Command, Output};

use roost_tests::{Backend, TestServer, each_backend};
use serde_json::{Value, json};

each_backend!(
    accounts_keys_and_credits_work_beside_a_running_server,
    web_users_are_invited_with_one_time_links,
    bad_cli_input_is_refused_clearly,
    cli_commands_print_no_info_lines,
    status_reports_the_store_ingest_and_checks,
    backups_are_taken_online_and_restored,
    packaged_runtimes_install_once_and_are_listed
);

/// `roost <args>` on the server's store.
fn roost(server: &TestServer, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_roost"))
        .args(args)
        .arg("--data-dir")
        .arg(&server.config.data_dir)
        .env("ROOST_DATABASE_URL", store_url(server))
        .env("RUST_LOG", "warn")
        .output()
        .unwrap()
}

fn store_url(server: &TestServer) -> String {
    match &server.config.database_url {
        roost_server::store::DatabaseUrl::Postgres(url) => url.clone(),
        sqlite => sqlite.to_string(),
    }
}

fn json_of(out: &Output) -> Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

async fn web_users_are_invited_with_one_time_links(backend: Backend) {
    let server = TestServer::start(backend).await;
    let created = json_of(&roost(
        &server,
        &[
            "accounts",
            "create",
            "--name",
            "Ada",
            "--email",
            "Ada@Example.com",
            "--public-url",
            "https://roost.example/",
            "--json",
        ],
    ));
    let account = created["account_id"].as_str().unwrap().to_owned();
    assert_eq!(created["email"], "ada@example.com");
    let link = created["invite_url"].as_str().unwrap().to_owned();
    let token = link.strip_prefix("https://roost.example/invite/").unwrap_or_else(|| panic!("{link}")).to_owned();
    // The running server shows the invite.
    let page = server.http.get(server.url(&format!("/invite/{token}"))).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("ada@example.com"));

    let added =
        json_of(&roost(&server, &["users", "add", "--account", &account, "--email", "bob@example.com", "--json"]));
    // Without --public-url, links use the address the running server listens on.
    assert!(added["invite_url"].as_str().unwrap().starts_with(&server.url("/invite/")), "{added}");
    let listed = json_of(&roost(&server, &["users", "list", "--account", &account, "--json"]));
    assert_eq!(listed.as_array().unwrap().len(), 2);
    assert_eq!(listed[0]["password_set"], false);
    let reset = json_of(&roost(&server, &["users", "reset", "--email", "ada@example.com", "--json"]));
    assert_ne!(reset["invite_url"], created["invite_url"]);
    let old = server.http.get(server.url(&format!("/invite/{token}"))).send().await.unwrap();
    assert_eq!(old.status(), 404, "a reset link replaces the earlier one");

    // Refused clearly, and nothing made: a taken email, a bad one, an unknown account.
    for args in [
        &["accounts", "create", "--name", "Again", "--email", "ada@example.com"][..],
        &["accounts", "create", "--name", "Bad", "--email", "not-an-email"],
        &["users", "add", "--account", "acct_nope", "--email", "c@example.com"],
        &["users", "reset", "--email", "nobody@example.com"],
    ] {
        let out = roost(&server, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(!out.stderr.is_empty());
    }
    let accounts = json_of(&roost(&server, &["accounts", "list", "--json"]));
    assert_eq!(accounts.as_array().unwrap().len(), 1);
}

async fn accounts_keys_and_credits_work_beside_a_running_server(backend: Backend) {
    let server = TestServer::start(backend).await;

    let created = json_of(&roost(&server, &["accounts", "create", "--name", "Ada", "--credits", "700", "--json"]));
    let account = created["account_id"].as_str().unwrap().to_owned();
    let key = created["api_key"].as_str().unwrap().to_owned();
    assert!(account.starts_with("acct_") && key.starts_with("rsk_"), "{created}");

    // The running server takes the key at once.
    let api = server.api(None).with_key(Some(&key));
    assert_eq!(api.get("/api/account").await.ok()["balance_cents"], 700);

    let topped = json_of(&roost(&server, &["credits", "add", "--account", &account, "300", "--json"]));
    assert_eq!(
        topped,
        json!({"account_id": account, "balance_cents": 1000, "balance_nanocents": 1_000_000_000_000_i64})
    );
    assert_eq!(api.get("/api/account").await.ok()["balance_cents"], 1000);

    let second = json_of(&roost(&server, &["keys", "create", "--account", &account, "--name", "ci", "--json"]));
    let second_key = second["api_key"].as_str().unwrap().to_owned();
    let listed = json_of(&roost(&server, &["keys", "list", "--account", &account, "--json"]));
    assert_eq!(listed.as_array().unwrap().len(), 2);
    assert!(!listed.to_string().contains(&key[4..]), "keys list never shows secrets");
    assert_eq!(listed[1]["name"], "ci");

    // Used (so the server remembers it), then revoked: refused at once.
    assert_eq!(api.with_key(Some(&second_key)).get("/api/account").await.status, 200);
    let revoked = json_of(&roost(&server, &["keys", "revoke", second["key_id"].as_str().unwrap(), "--json"]));
    assert!(revoked["revoked_at"].is_i64());
    api.with_key(Some(&second_key)).get("/api/account").await.err(401, "unauthenticated");
    assert_eq!(api.get("/api/account").await.status, 200, "the other key still works");

    let plan = json_of(&roost(&server, &["accounts", "set-plan", "--account", &account, "pro", "--json"]));
    assert_eq!(plan["plan"], "pro");
    let accounts = json_of(&roost(&server, &["accounts", "list", "--json"]));
    assert_eq!(accounts[0]["plan"], "pro");

    // Without --json: readable text, the key printed once.
    let text = roost(&server, &["accounts", "create", "--name", "Bob"]);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("created account acct_") && text.contains("(shown once"), "{text}");
}

/// A CLI command prints its result, not the store's start-up lines: with `RUST_LOG`
/// unset, nothing at info reaches stderr.
async fn cli_commands_print_no_info_lines(backend: Backend) {
    let server = TestServer::start(backend).await;
    let out = Command::new(env!("CARGO_BIN_EXE_roost"))
        .args(["accounts", "list", "--data-dir"])
        .arg(&server.config.data_dir)
        .env("ROOST_DATABASE_URL", store_url(&server))
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "no log lines on stderr");
}

async fn bad_cli_input_is_refused_clearly(backend: Backend) {
    let server = TestServer::start(backend).await;
    let out = roost(&server, &["credits", "add", "--account", "acct_nobody", "5"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no account acct_nobody"));
    let out = roost(&server, &["keys", "revoke", "key_nothing"]);
    assert_eq!(out.status.code(), Some(1));
    let out = roost(&server, &["accounts", "create", "--name", "x", "--credits", "lots"]);
    assert_eq!(out.status.code(), Some(2), "bad usage");
    let out = roost(&server, &["accounts", "set-plan", "--account", "a", "platinum"]);
    assert_eq!(out.status.code(), Some(2));
}

async fn status_reports_the_store_ingest_and_checks(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    let run = api.post("/api/v1/runs", json!({"runtime": "cli-test"})).await.ok();
    let events = json!({"events": [{"id": "a", "event_type": "message"}, {"id": "b", "event_type": "message"}]});
    api.post(&format!("/api/v1/runs/{}/events", run["run_id"].as_str().unwrap()), events).await.ok();
    let url = server.url("");

    let status = json_of(&roost(&server, &["status", "--url", &url, "--json"]));
    assert_eq!(status["store"]["reachable"], true, "{status}");
    assert_eq!((status["store"]["events"].as_i64(), status["store"]["runs"].as_i64()), (Some(2), Some(1)), "{status}");
    assert_eq!(status["ingest"]["events_total"], 2, "{status}");
    assert!(status["ingest"]["events_per_sec"].as_f64().unwrap() > 0.0, "{status}");
    let checks = status["health"]["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 6, "{status}");
    // roost status says what confines hosted agents (this machine has bubblewrap).
    let sandbox = checks.iter().find(|c| c["name"] == "sandbox").unwrap();
    assert_eq!(sandbox["status"], "ok", "{sandbox}");
    assert!(sandbox["detail"].as_str().unwrap().starts_with("bubblewrap"), "{sandbox}");
    assert_eq!(status["cluster"]["leading"], true, "a lone replica leads: {status}");
    assert_eq!(status["cluster"]["leader_id"], status["cluster"]["replica_id"], "{status}");
    assert_eq!(status["handler_verdict"], "none");

    let text = roost(&server, &["status", "--url", &url]);
    assert!(text.status.success(), "{}", String::from_utf8_lossy(&text.stderr));
    let text = String::from_utf8(text.stdout).unwrap();
    for line in ["store ", "ingest ", "replica ", "health ", "pages ", "sandbox"] {
        assert!(text.contains(line), "{line:?} missing from:\n{text}");
    }

    let nobody = roost(&server, &["status", "--url", "http://127.0.0.1:9"]);
    assert_eq!(nobody.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&nobody.stderr).contains("nothing answers"), "{nobody:?}");
}

/// `roost backup` while the server answers turns (SQLite): a whole copy, carrying the
/// secret key; a second one over it needs --force; `roost restore` refuses while a server
/// runs on the data directory, then restores into a stopped one, and roost serves the same
/// account, key, agent (its sealed secret opens: the key came along) and every turn
/// answered before the backup started. On PostgreSQL both commands point to pg_dump.
async fn backups_are_taken_online_and_restored(backend: Backend) {
    let server = TestServer::start(backend).await;
    let folder = tempfile::tempdir().unwrap();
    let file = folder.path().join("roost-backup.db");
    let file_arg = file.to_str().unwrap();
    if backend == Backend::Postgres {
        for args in [["backup", "--to", file_arg], ["restore", "--from", file_arg]] {
            let out = roost(&server, &args);
            assert_eq!(out.status.code(), Some(2));
            let said = String::from_utf8_lossy(&out.stderr);
            assert!(said.contains("pg_dump") && said.contains("secret.key"), "{said}");
        }
        return;
    }
    let account = server.account(1_000).await;
    let api = server.api(Some(&account));
    let id = api.provision("echo", "kept").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    api.post(&format!("/api/instances/{id}/config"), json!({"PROVIDER_API_KEY": "sk-kept-secret"})).await.ok();
    api.wait_status(&id, "running").await;

    // Turns keep being answered while the backup runs.
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let stop = tokio_util::sync::CancellationToken::new();
    let writer = {
        let (api, id, answered, stop) = (api.clone(), id.clone(), answered.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.is_cancelled() {
                api.message(&id, "during the backup").await.ok();
                answered.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let before = answered.load(std::sync::atomic::Ordering::SeqCst);
    let report = json_of(&roost(&server, &["backup", "--to", file_arg, "--json"]));
    assert!(report["bytes"].as_u64().unwrap() > 0, "{report}");
    assert!(report["files"].as_array().unwrap().contains(&json!("secret.key")), "{report}");
    let again = roost(&server, &["backup", "--to", file_arg]);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
    json_of(&roost(&server, &["backup", "--to", file_arg, "--force", "--json"]));
    let busy = roost(&server, &["restore", "--from", file_arg, "--force"]);
    assert_eq!(busy.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&busy.stderr).contains("is running"), "{}", String::from_utf8_lossy(&busy.stderr));
    stop.cancel();
    writer.await.unwrap();
    assert!(before > 0, "turns were answered before the backup");
    server.stop().await.unwrap();

    let restored = tempfile::tempdir().unwrap();
    let restore = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_roost"))
            .args(["restore", "--from", file_arg, "--json"])
            .args(extra)
            .arg("--data-dir")
            .arg(restored.path())
            .env_remove("ROOST_DATABASE_URL")
            .env("RUST_LOG", "warn")
            .output()
            .unwrap()
    };
    let done = json_of(&restore(&[]));
    assert!(done["files"].as_array().unwrap().contains(&json!("secret.key")), "{done}");
    let over = restore(&[]);
    assert_eq!(over.status.code(), Some(1), "an existing store needs --force");

    let dir = restored.path().to_path_buf();
    let server = TestServer::start_with(Backend::Sqlite, |c| {
        c.database_url = roost_server::store::DatabaseUrl::sqlite_in(&dir);
        c.data_dir = dir.clone();
    })
    .await;
    let api = server.api(Some(&account));
    assert_eq!(api.get("/api/account").await.ok()["id"], account.id.as_str());
    let view = api.wait_status(&id, "running").await;
    assert_eq!(view["config"]["provider_api_key_set"], true);
    let turns =
        api.get(&format!("/api/instances/{id}/activity?limit=500")).await.ok()["turns"].as_array().unwrap().len();
    assert!(turns >= before.min(500), "{turns} turns restored, {before} answered before the backup");
}

/// `roost runtimes install` leaves a complete install alone and refuses what it has no
/// lock for; `roost runtimes list` shows what is installed and offered. (The install
/// itself runs in scripts/test, which installs the real packages once per lock hash.)
async fn packaged_runtimes_install_once_and_are_listed(backend: Backend) {
    use roost_server::runtimes::packaged::Package;
    let server = TestServer::start(backend).await;
    let out = roost(&server, &["runtimes", "list", "--json"]);
    assert_eq!(json_of(&out), json!([]));

    // The install scripts/test made, as if made in this data directory.
    let hermes = roost_tests::tools::installed_runtime(Package::Hermes);
    let dir = server.config.data_dir.join("runtimes/hermes");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(&hermes.dir, dir.join(&hermes.version)).unwrap();
    let out = roost(&server, &["runtimes", "install", "hermes"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("hermes 0.19.0 is installed in"), "nothing reinstalled: {said}");

    let listed = json_of(&roost(&server, &["runtimes", "list", "--json"]));
    let rows = listed.as_array().unwrap();
    assert_eq!(rows.len(), 1, "{listed}");
    assert_eq!(
        (&rows[0]["name"], &rows[0]["version"], &rows[0]["offered"]),
        (&json!("hermes"), &json!("0.19.0"), &json!(true))
    );
    assert_eq!(rows[0]["agents"], 0);

    let out = roost(&server, &["runtimes", "install", "hermes", "--version", "0.1.0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no tested lock for hermes 0.1.0"));
    let out = roost(&server, &["runtimes", "install", "langchain"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("roost installs openclaw and hermes"));
}
