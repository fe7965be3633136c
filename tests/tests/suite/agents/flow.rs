//! The seed's whole flow: create account → list runtimes without a key → provision (first
//! one free) → poll until running → message → config (restart) → pause → message gets 409
//! → resume → destroy (refund shown in activity) → get gives 404. Over REST and gRPC.

use roost_proto::v1::{
    ConfigureRequest, DestroyRequest, GetActivityRequest, GetInstanceRequest, InstanceStatus, ListInstancesRequest,
    ListRuntimesRequest, PauseRequest, ProvisionRequest, ResumeRequest, SendMessageRequest,
};
use roost_tests::{Backend, each_backend};
use serde_json::json;
use tonic::Code;

use super::start;

each_backend!(seed_flow_over_rest, paid_agent_pays_and_is_refunded_pro_rata, seed_flow_over_grpc);

async fn seed_flow_over_rest(backend: Backend) {
    let server = start(backend, |_| {}).await;
    let account = server.account(5_000).await;
    let api = server.api(Some(&account));

    // The catalogue needs no key.
    let runtimes = server.api(None).get("/api/runtimes").await.ok();
    let example = runtimes.as_array().unwrap().iter().find(|r| r["id"] == "example").unwrap();
    assert_eq!(example["price_cents_month"], 500);
    assert_eq!(example["channels"], json!(["telegram"]));
    assert_eq!(example["included_model"], true);

    // The first-ever agent's first period is free, even on a paid runtime.
    let created = api.provision("example", "Be kind.").await;
    assert_eq!(created["status"], "provisioning");
    assert_eq!(created["charged_cents"], 0);
    assert_eq!(created["balance_cents"], 5_000);
    assert_eq!(created["price_cents_month"], 500);
    let id = created["id"].as_str().unwrap().to_owned();
    let running = api.wait_status(&id, "running").await;
    assert_eq!(running["brief"], "Be kind.");
    assert_eq!(
        running["config"],
        json!({"provider_api_key_set": false, "messaging_bot_token_set": false, "channel": "", "allowed_chat_ids": []})
    );

    let turn = api.message(&id, "hello").await.ok();
    assert_eq!(turn["reply"], "[Be kind.] hello");
    assert!(turn["turn_id"].as_str().unwrap().starts_with("turn_"));
    // A process runtime's usage is what its model calls through roost's gateway add up
    // to (none here), not what it reports about itself.
    assert_eq!(turn["usage"], json!({"input_tokens": 0, "output_tokens": 0}));

    // Config restarts the agent; the new brief is in effect afterwards.
    let configured = api
        .post(
            &format!("/api/instances/{id}/config"),
            json!({"agent_brief": "Be brief.", "MESSAGING_BOT_TOKEN": "123:abc"}),
        )
        .await
        .ok();
    assert_eq!(
        configured,
        json!({"ok": true, "id": id, "status": "restarting", "applied": ["agent_brief", "MESSAGING_BOT_TOKEN"]})
    );
    let restarted = api.wait_status(&id, "running").await;
    assert_eq!(restarted["config"]["messaging_bot_token_set"], true);
    assert_eq!(restarted["config"]["channel"], "telegram");
    assert!(!restarted.to_string().contains("123:abc"), "secrets are never echoed: {restarted}");
    assert_eq!(api.message(&id, "again").await.ok()["reply"], "[Be brief.] again");

    let paused = api.post(&format!("/api/instances/{id}/pause"), json!({})).await.ok();
    assert_eq!(paused, json!({"ok": true, "id": id, "status": "paused"}));
    api.message(&id, "are you there?").await.err(409, "wrong_state");

    let resumed = api.post(&format!("/api/instances/{id}/resume"), json!({})).await.ok();
    assert_eq!(resumed["status"], "provisioning");
    api.wait_status(&id, "running").await;
    assert_eq!(api.message(&id, "back").await.ok()["reply"], "[Be brief.] back");

    let destroyed = api.post(&format!("/api/instances/{id}/destroy"), json!({})).await.ok();
    assert_eq!(destroyed["status"], "destroyed");
    assert_eq!(destroyed["refunded_cents"], 0, "a free period refunds nothing");
    assert_eq!(destroyed["balance_cents"], 5_000);

    // The refund (of the free period: 0) shows in activity, which outlives the agent.
    let activity = api.get(&format!("/api/instances/{id}/activity")).await.ok();
    let kinds: Vec<&str> =
        activity["charges"].as_array().unwrap().iter().map(|c| c["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["refund", "provision"]);
    let texts: Vec<&str> = activity["turns"].as_array().unwrap().iter().map(|t| t["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["back", "again", "hello"], "turns newest first");

    api.get(&format!("/api/instances/{id}")).await.err(404, "not_found");
    assert_eq!(api.get("/api/instances").await.ok(), json!([]));
}

async fn paid_agent_pays_and_is_refunded_pro_rata(backend: Backend) {
    let server = start(backend, |_| {}).await;
    let account = server.account(1_000).await;
    let api = server.api(Some(&account));
    // An agent of a free runtime does not use the free month up: the first priced one gets
    // it, and the ledger names it.
    let echo = api.provision("echo", "free runtime").await;
    assert_eq!(echo["charged_cents"], 0);
    api.wait_status(echo["id"].as_str().unwrap(), "running").await;
    assert_eq!(api.get("/api/account").await.ok()["first_agent_free"], true, "echo leaves it");
    let first = api.provision("echo-paid", "first priced").await;
    assert_eq!((first["charged_cents"].as_i64(), first["balance_cents"].as_i64()), (Some(0), Some(1_000)));
    let first_id = first["id"].as_str().unwrap();
    api.wait_status(first_id, "running").await;
    let given = api.get(&format!("/api/instances/{first_id}/activity")).await.ok();
    assert_eq!(given["charges"][0]["instance_id"], first_id, "the row names the agent");
    let given = given["charges"][0]["description"].as_str().unwrap().to_owned();
    assert_eq!(given, "first period of echo-paid free: the account's first priced agent");

    let paid = api.provision("example", "paid one").await;
    assert_eq!((paid["charged_cents"].as_i64(), paid["balance_cents"].as_i64()), (Some(500), Some(500)));
    let id = paid["id"].as_str().unwrap();
    api.wait_status(id, "running").await;
    let account_view = api.get("/api/account").await.ok();
    assert_eq!(account_view["balance_cents"], 500);
    assert_eq!(account_view["first_agent_free"], false);

    let destroyed = api.post(&format!("/api/instances/{id}/destroy"), json!({})).await.ok();
    let refund = destroyed["refunded_cents"].as_i64().unwrap();
    assert!((495..=500).contains(&refund), "almost the whole 30-day period is unused: {refund}");
    assert_eq!(destroyed["balance_cents"], 500 + refund);

    let activity = api.get(&format!("/api/instances/{id}/activity")).await.ok();
    let refund_row = &activity["charges"][0];
    assert_eq!((refund_row["kind"].as_str(), refund_row["amount_cents"].as_i64()), (Some("refund"), Some(refund)));
    assert_eq!(refund_row["balance_after_cents"], 500 + refund);
    let ledger = api.get("/api/account/ledger").await.ok();
    let kinds: Vec<&str> = ledger["charges"].as_array().unwrap().iter().map(|c| c["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["refund", "provision", "provision", "provision", "credit"]);
}

async fn seed_flow_over_grpc(backend: Backend) {
    let server = start(backend, |_| {}).await;
    let account = server.account(1_000).await;
    let mut agents = server.agents(&account.key).await;

    let runtimes = agents.list_runtimes(ListRuntimesRequest {}).await.unwrap().into_inner().runtimes;
    assert!(runtimes.iter().any(|r| r.id == "echo" && r.driver == "echo"));

    let created = agents
        .provision(ProvisionRequest {
            runtime: "echo".into(),
            brief: "Be terse.".into(),
            model_mode: 0,
            name: " Trip planner ".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(created.charged_cents, 0);
    let instance = created.instance.unwrap();
    assert_eq!(instance.name, "Trip planner", "the name, trimmed");
    let id = instance.id;
    let get = |id: &str| GetInstanceRequest { instance_id: id.into() };
    for _ in 0..200 {
        let instance = agents.get_instance(get(&id)).await.unwrap().into_inner().instance.unwrap();
        if instance.status() == InstanceStatus::Running {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    let message = |text: &str| SendMessageRequest { instance_id: id.clone(), text: text.into() };
    assert_eq!(agents.send_message(message("hi")).await.unwrap().into_inner().reply, "[Be terse.] hi");

    let configured = agents
        .configure(ConfigureRequest {
            instance_id: id.clone(),
            agent_brief: Some("Be loud.".into()),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(configured.status(), InstanceStatus::Restarting);
    for _ in 0..200 {
        if agents.get_instance(get(&id)).await.unwrap().into_inner().instance.unwrap().status()
            == InstanceStatus::Running
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(agents.send_message(message("hi")).await.unwrap().into_inner().reply, "[Be loud.] hi");

    // A new name alone restarts nothing; a bad one changes nothing.
    let rename =
        |name: &str| ConfigureRequest { instance_id: id.clone(), name: Some(name.into()), ..Default::default() };
    let renamed = agents.configure(rename("Lisbon planner")).await.unwrap().into_inner();
    assert_eq!(
        (renamed.status(), renamed.applied.as_slice()),
        (InstanceStatus::Running, ["name".to_owned()].as_slice())
    );
    let instance = agents.get_instance(get(&id)).await.unwrap().into_inner().instance.unwrap();
    assert_eq!((instance.name.as_str(), instance.status()), ("Lisbon planner", InstanceStatus::Running));
    for bad in ["x".repeat(81), "two\nlines".to_owned()] {
        let err = agents.configure(rename(&bad)).await.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{bad:?}");
        assert!(err.message().starts_with("name:"), "{}", err.message());
    }
    let instance = agents.get_instance(get(&id)).await.unwrap().into_inner().instance.unwrap();
    assert_eq!(instance.name, "Lisbon planner");

    agents.pause(PauseRequest { instance_id: id.clone() }).await.unwrap();
    let err = agents.send_message(message("hi")).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert_eq!(roost_proto::ApiError::from_status(&err).reason(), roost_proto::ErrorReason::WrongState);

    agents.resume(ResumeRequest { instance_id: id.clone() }).await.unwrap();
    let destroyed = agents.destroy(DestroyRequest { instance_id: id.clone() }).await.unwrap().into_inner();
    assert_eq!(destroyed.status(), InstanceStatus::Destroyed);

    let activity =
        agents.get_activity(GetActivityRequest { instance_id: id.clone(), limit: 0 }).await.unwrap().into_inner();
    assert_eq!(activity.turns.len(), 2);
    assert!(activity.turns.iter().all(|t| t.source == "grpc"));
    assert_eq!(agents.get_instance(get(&id)).await.unwrap_err().code(), Code::NotFound);
    assert!(agents.list_instances(ListInstancesRequest {}).await.unwrap().into_inner().instances.is_empty());
}

/// `roost runtimes install` while roost serves: the runtime is offered at once, no
/// restart. Before, asking for it says how to install it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_installed_while_serving_is_offered_at_once() {
    use roost_server::runtimes::packaged::{Package, STAMP};
    let server = roost_tests::TestServer::start(Backend::Sqlite).await;
    let account = server.account(0).await;
    let api = server.api(Some(&account));
    let offered = || async {
        let runtimes = api.get("/api/runtimes").await.ok();
        runtimes.as_array().unwrap().iter().any(|r| r["id"] == "hermes")
    };
    assert!(!offered().await);
    let refused = api.post("/api/provision", json!({"runtime": "hermes", "brief": "b"})).await;
    refused.err(400, "invalid_argument");
    assert!(refused.body["error"].as_str().unwrap().contains("roost runtimes install hermes"), "{}", refused.body);
    let unknown = api.post("/api/provision", json!({"runtime": "nonesuch", "brief": "b"})).await;
    assert!(!unknown.body["error"].as_str().unwrap().contains("install"), "{}", unknown.body);

    // What an install leaves in the data directory: the pinned version's directory, stamped.
    let pinned = Package::Hermes.default_version();
    let at = Package::Hermes.dir(&server.config.data_dir.join("runtimes"), pinned.version);
    std::fs::create_dir_all(&at).unwrap();
    std::fs::write(at.join(STAMP), pinned.lock_hash()).unwrap();
    let mut seen = false;
    for _ in 0..40 {
        seen = offered().await;
        if seen {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(seen, "the installed runtime is offered while roost serves");
}
