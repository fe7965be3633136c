//! The agent's files: `GET /api/instances/{id}/files[?path=]` and `/files/{path}`, gRPC's
//! `ListFiles` / `ReadFile` and MCP's `list_files` / `read_file`, against a workspace a
//! hostile runtime shaped (tests/runtimes/hostile_agent.py `{"files": true}`): links out to
//! `/etc/passwd`, `..` and `/`, a FIFO, a 3 MiB file, an HTML page, and a file it swaps
//! for a link to `/etc/shadow` while roost reads it. Nothing outside the workspace is ever
//! answered; another account sees nothing.

use roost_proto::v1::{ListFilesRequest, ReadFileRequest};
use roost_tests::{Backend, TestServer, each_backend};
use serde_json::{Value, json};

use super::{
    TEST_CATALOGUE,
    sandbox::{ask, hostile},
    start,
};

each_backend!(the_owner_lists_and_downloads_the_workspace_and_nothing_outside_it);

/// roost with the hostile runtime in its catalogue.
async fn with_hostile(backend: Backend) -> TestServer {
    start(backend, |config| {
        config.hosting.catalogue =
            roost_server::runtimes::Catalogue::from_toml(&format!("{TEST_CATALOGUE}\n{}", hostile("hostile", "")))
                .expect("catalogue");
    })
    .await
}

/// What the host's `/etc/passwd` starts with: it must never be in an answer.
const HOST_PASSWD: &str = "root:x:0:0:";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_swapped_for_a_link_mid_read_never_yields_the_hosts_file() {
    let server = with_hostile(Backend::Sqlite).await;
    let account = server.account(1_000).await;
    let api = server.api(Some(&account));
    let id = api.provision("hostile", "swapper").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    assert_eq!(ask(&api, &id, json!({"swap": 10})).await, "swapping");
    let http = reqwest::Client::new();
    let (mut plain, mut refused) = (0, 0);
    // 400 reads at least, and on until both sides were met (a loaded machine may run the
    // swapping thread in long slices).
    for read in 0.. {
        if read >= 400 && plain > 0 && refused > 0 || read == 5_000 {
            break;
        }
        let answer = http
            .get(server.url(&format!("/api/instances/{id}/files/swap.txt")))
            .bearer_auth(&account.key)
            .send()
            .await
            .unwrap();
        let status = answer.status().as_u16();
        let body = answer.text().await.unwrap();
        match status {
            200 => {
                assert_eq!(body, "plain", "only the agent's own file is ever read");
                plain += 1;
            }
            // The link, or the moment between unlink and rename.
            400 | 404 => {
                assert!(!body.contains("root:"), "{body}");
                refused += 1;
            }
            other => panic!("{other}: {body}"),
        }
    }
    assert!(plain > 0 && refused > 0, "both sides of the swap were met: {plain} files, {refused} links");
}

async fn the_owner_lists_and_downloads_the_workspace_and_nothing_outside_it(backend: Backend) {
    let server = with_hostile(backend).await;
    let account = server.account(1_000).await;
    let api = server.api(Some(&account));
    let id = api.provision("hostile", "shape your files").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    let shaped = ask(&api, &id, json!({"files": true})).await;
    assert!(shaped.as_array().is_some_and(|names| names.contains(&json!("pipe"))), "{shaped}");

    // The workspace: memory files first, then everything, folders first, links as links.
    let root = api.get(&format!("/api/instances/{id}/files")).await.ok();
    let memory: Vec<&str> = root["memory"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(memory, ["SOUL.md", "MEMORY.md", ".hermes/memories/USER.md"], "{root}");
    let kind = |name: &str| {
        let entry = root["files"].as_array().unwrap().iter().find(|f| f["name"] == name);
        entry.map(|f| f["kind"].as_str().unwrap().to_owned()).unwrap_or_else(|| panic!("{name} in {root}"))
    };
    assert_eq!(kind(".hermes"), "folder");
    assert_eq!(kind("notes"), "folder");
    assert_eq!(kind("passwd"), "link");
    assert_eq!(kind("up"), "link");
    assert_eq!(kind("pipe"), "other");
    assert_eq!(kind("SOUL.md"), "file");
    assert_eq!(root["files"][0]["kind"], "folder", "folders first: {root}");
    let notes = api.get(&format!("/api/instances/{id}/files?path=notes")).await.ok();
    assert_eq!(notes["files"][0]["path"], "notes/plan.md", "{notes}");
    assert_eq!(notes["memory"], json!([]), "memory files only with the workspace itself");

    // A download is the file's bytes, as an attachment no browser renders as roost's page.
    let http = reqwest::Client::new();
    let download = |path: &str| {
        http.get(server.url(&format!("/api/instances/{id}/files/{path}"))).bearer_auth(&account.key).send()
    };
    let soul = download("SOUL.md").await.unwrap();
    assert_eq!(soul.status(), 200);
    assert_eq!(soul.headers()["content-type"], "text/plain; charset=utf-8");
    assert!(soul.headers()["content-disposition"].to_str().unwrap().starts_with("attachment;"));
    assert_eq!(soul.headers()["x-content-type-options"], "nosniff");
    assert_eq!(soul.text().await.unwrap(), "# Soul\nI am **hostile**.");
    let nested = download(".hermes/memories/USER.md").await.unwrap();
    assert_eq!(nested.text().await.unwrap(), "name: Ada");
    let escaped = download("notes%2Fplan.md").await.unwrap();
    assert_eq!(escaped.text().await.unwrap(), "step 1 <script>alert(1)</script>", "an escaped slash is a slash");
    let page = download("page.html").await.unwrap();
    assert_eq!(page.headers()["content-type"], "text/plain; charset=utf-8", "never text/html");
    assert!(page.headers()["content-security-policy"].to_str().unwrap().contains("sandbox"));

    // Nothing outside the workspace, whichever way it is asked for. (Escaped slashes keep
    // the HTTP client from resolving the `..` itself.)
    for (path, status, code) in [
        ("passwd", 400, "invalid_argument"),
        ("up%2FSOUL.md", 400, "invalid_argument"),
        ("root%2Fetc%2Fpasswd", 400, "invalid_argument"),
        ("%2Fetc%2Fpasswd", 400, "invalid_argument"),
        ("notes%2F..%2F..%2F..%2Fetc%2Fpasswd", 400, "invalid_argument"),
        ("pipe", 400, "invalid_argument"),
        ("notes", 400, "invalid_argument"),
        ("big.bin", 413, "payload_too_large"),
        ("missing.md", 404, "not_found"),
        ("SOUL.md%2Fx", 404, "not_found"),
    ] {
        let answer = download(path).await.unwrap();
        let got = answer.status().as_u16();
        let body: Value = answer.json().await.unwrap();
        assert_eq!((got, body["code"].as_str()), (status, Some(code)), "{path}: {body}");
        assert!(!body.to_string().contains(HOST_PASSWD), "{path}: {body}");
    }
    for path in ["..", "../", "%2Fetc", "up", "root", "passwd", "notes/../.."] {
        let listing = api.get(&format!("/api/instances/{id}/files?path={path}")).await;
        listing.err(400, "invalid_argument");
    }
    api.get(&format!("/api/instances/{id}/files?path=missing")).await.err(404, "not_found");
    api.get(&format!("/api/instances/{id}/files?folder=x")).await.err(400, "invalid_argument");

    // Another account: the agent does not exist.
    let stranger = server.account(1_000).await;
    let theirs = server.api(Some(&stranger));
    theirs.get(&format!("/api/instances/{id}/files")).await.err(404, "not_found");
    theirs.get(&format!("/api/instances/{id}/files/SOUL.md")).await.err(404, "not_found");
    server.api(None).get(&format!("/api/instances/{id}/files")).await.err(401, "unauthenticated");

    // gRPC: the same listing and bytes; the same refusals.
    let mut agents = server.agents(&account.key).await;
    let listing = agents
        .list_files(ListFilesRequest { instance_id: id.clone(), path: String::new() })
        .await
        .expect("ListFiles")
        .into_inner();
    assert_eq!(listing.memory.len(), 3);
    let read = agents
        .read_file(ReadFileRequest { instance_id: id.clone(), path: "MEMORY.md".into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((read.content.as_slice(), read.text), (&b"- the user likes tea"[..], true));
    let refused = agents.read_file(ReadFileRequest { instance_id: id.clone(), path: "/etc/passwd".into() }).await;
    assert_eq!(refused.expect_err("absolute").code(), tonic::Code::InvalidArgument);
    let mut strangers = server.agents(&stranger.key).await;
    let hidden = strangers.list_files(ListFilesRequest { instance_id: id.clone(), path: String::new() }).await;
    assert_eq!(hidden.expect_err("not theirs").code(), tonic::Code::NotFound);

    // MCP: the text is the answer; structured content has the bytes.
    let (session, _) = crate::mcp::connect(&server, &account.key).await;
    let (read, text) = crate::mcp::call(&session, "read_file", json!({"instance_id": id, "path": "SOUL.md"})).await;
    assert_eq!(text, "# Soul\nI am **hostile**.");
    assert_eq!(read.unwrap()["content"], "IyBTb3VsCkkgYW0gKipob3N0aWxlKiou");
    let (_, text) = crate::mcp::call(&session, "list_files", json!({"instance_id": id})).await;
    assert!(text.contains("Memory files:\nSOUL.md  (file, 24 bytes)"), "{text}");
    let (refused, _) = crate::mcp::call(&session, "read_file", json!({"instance_id": id, "path": "passwd"})).await;
    assert_eq!(refused.unwrap_err()["code"], "invalid_argument");

    // Paused: a workspace on its own disk (roost as root) is mounted only while the agent
    // runs, so it says so; a plain directory is still read.
    api.post(&format!("/api/instances/{id}/pause"), json!({})).await.ok();
    let paused = api.get(&format!("/api/instances/{id}/files")).await;
    if rustix::process::geteuid().is_root() {
        paused.err(409, "wrong_state");
        assert!(paused.body["error"].as_str().unwrap().contains("resume"), "{}", paused.body);
    } else {
        assert_eq!(paused.ok()["memory"].as_array().unwrap().len(), 3);
    }
}
