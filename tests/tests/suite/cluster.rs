//! Replicas of roost on one PostgreSQL (servers in this process sharing a database): the
//! cluster-wide workers run under a leader lease, and a key revoked on one replica stops
//! working on the others, and replicas ingesting into the same sessions count each once.
//! The multi-process tests of issue 19's agent leases build on this.

use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use roost_proto::v1::{ListReplicasRequest, feature_service_client::FeatureServiceClient};
use roost_server::{ServeConfig, secrets::SecretKey, store::DatabaseUrl};
use roost_tests::{Backend, TestDatabase, TestServer, each_backend};
use serde_json::Value;

use crate::observe::{assert_row_counts, otlp::traces_request};

async fn cluster(server: &TestServer) -> Value {
    server.api(None).get("/api/status").await.ok()["cluster"].clone()
}

/// Waits (at most `within`) until exactly one of `servers` says it leads and every one
/// names it as the leader; returns its index and the lease's epoch.
async fn one_leader(servers: &[&TestServer], within: Duration) -> (usize, i64) {
    let deadline = Instant::now() + within;
    loop {
        let mut views = Vec::new();
        for server in servers {
            views.push(cluster(server).await);
        }
        let leading: Vec<usize> = (0..views.len()).filter(|&i| views[i]["leading"] == true).collect();
        if let [leader] = leading[..] {
            let id = views[leader]["replica_id"].clone();
            if views.iter().all(|v| v["leader_id"] == id) {
                return (leader, views[leader]["leader_epoch"].as_i64().unwrap());
            }
        }
        assert!(Instant::now() < deadline, "no single leader within {within:?}: {views:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The settings of a replica on the shared database `url`: the same secret key (replicas
/// share the store's sealed secrets; ROOST_SECRET_KEY in production), its own data
/// directory, and leases of `ttl`.
fn replica(url: &DatabaseUrl, ttl: Duration) -> impl FnOnce(&mut ServeConfig) {
    let url = url.clone();
    move |c: &mut ServeConfig| {
        c.lease_ttl = ttl;
        c.secret_key = Some(SecretKey::from_bytes(&[7; 32]));
        c.database_url = url;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_workers_have_one_leader_who_hands_over_on_stop() {
    let ttl = Duration::from_secs(3);
    // The database outlives every replica (each TestServer drops the one it made).
    let db = TestDatabase::create().await;
    let url: DatabaseUrl = db.url().parse().unwrap();
    let a = TestServer::start_with(Backend::Postgres, replica(&url, ttl)).await;
    let b = TestServer::start_with(Backend::Postgres, replica(&url, ttl)).await;
    let c = TestServer::start_with(Backend::Postgres, replica(&url, ttl)).await;
    let mut servers = vec![Some(a), Some(b), Some(c)];
    let live = |servers: &[Option<TestServer>]| -> Vec<usize> { (0..3).filter(|&i| servers[i].is_some()).collect() };

    let all: Vec<&TestServer> = servers.iter().flatten().collect();
    let (first, epoch) = one_leader(&all, Duration::from_secs(5)).await;
    assert!(epoch >= 1);
    let ids: Vec<Value> = {
        let mut ids = Vec::new();
        for server in &all {
            ids.push(cluster(server).await["replica_id"].clone());
        }
        ids
    };
    assert!(ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2], "replica ids are distinct: {ids:?}");
    // The health page says who runs the workers, on the leader and on the others.
    for (i, server) in all.iter().enumerate() {
        let health = server.api(None).get("/api/health").await.ok();
        let check = health["checks"].as_array().unwrap().iter().find(|c| c["name"] == "cluster").unwrap().clone();
        assert_eq!(check["status"], "ok", "{check}");
        let leader = ids[first].as_str().unwrap();
        let detail = check["detail"].as_str().unwrap();
        if i == first {
            assert!(detail.starts_with(&format!("this replica ({leader})")), "{detail}");
        } else {
            assert!(detail.starts_with(&format!("replica {leader} runs")), "{detail}");
        }
    }

    // A clean stop hands the workers over within a renewal period, not the TTL.
    let stopped = Instant::now();
    servers[first].take().unwrap().stop().await.unwrap();
    let rest: Vec<usize> = live(&servers);
    let remaining: Vec<&TestServer> = rest.iter().map(|&i| servers[i].as_ref().unwrap()).collect();
    let (_, next_epoch) = one_leader(&remaining, ttl).await;
    assert!(stopped.elapsed() < ttl, "took {:?}", stopped.elapsed());
    assert_eq!(next_epoch, epoch + 1, "the new leader's term has the next epoch");
    for server in servers.into_iter().flatten() {
        server.stop().await.unwrap();
    }
}

/// A key revoked through one replica (`roost keys revoke` on its machine) stops working on
/// another replica, which shares only the database, within a second (its verified-key
/// cache lasts that long).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_key_stops_working_on_every_replica_within_a_second() {
    let db = TestDatabase::create().await;
    let url: DatabaseUrl = db.url().parse().unwrap();
    let a = TestServer::start_with(Backend::Postgres, replica(&url, Duration::from_secs(10))).await;
    let b = TestServer::start_with(Backend::Postgres, replica(&url, Duration::from_secs(10))).await;
    let account = a.account(0).await;
    for server in [&a, &b] {
        assert_eq!(server.api(Some(&account)).get("/api/account").await.status, 200);
    }
    let key_id = a.store().await.list_keys(&account.id).await.unwrap()[0].id.clone();
    a.revoke_key(&key_id).await;
    let revoked = Instant::now();
    assert_eq!(a.api(Some(&account)).get("/api/account").await.status, 401, "at once where it was revoked");
    loop {
        let status = b.api(Some(&account)).get("/api/account").await.status;
        if status == 401 {
            break;
        }
        assert_eq!(status, 200);
        assert!(revoked.elapsed() < Duration::from_millis(1_500), "still accepted after {:?}", revoked.elapsed());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    a.stop().await.unwrap();
    b.stop().await.unwrap();
}

/// Replicas ingesting into the same new sessions at once count each session once: the
/// kept sessions count (`telemetry::row_counts`) adds only the rows an upsert inserted,
/// and the status of either replica equals the table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_ingesting_the_same_sessions_count_each_once() {
    let db = TestDatabase::create().await;
    let url: DatabaseUrl = db.url().parse().unwrap();
    let a = TestServer::start_with(Backend::Postgres, replica(&url, Duration::from_secs(10))).await;
    let b = TestServer::start_with(Backend::Postgres, replica(&url, Duration::from_secs(10))).await;
    let (channel_a, channel_b) = (a.channel().await, b.channel().await);
    let exports = (0..40u8).map(|i| {
        let channel = if i % 2 == 0 { channel_a.clone() } else { channel_b.clone() };
        let request = traces_request(i + 1, 3, &format!("shared-{}", i % 8));
        async move { TraceServiceClient::new(channel).export(request).await.unwrap() }
    });
    futures::future::join_all(exports).await;
    assert_eq!(a.sql("SELECT COUNT(*) FROM sessions").await.unwrap(), [8]);
    assert_row_counts(&a).await;
    assert_row_counts(&b).await;
    a.stop().await.unwrap();
    b.stop().await.unwrap();
}

/// One trace's spans written by two replicas at once (its calls on one, its root naming the
/// session on the other, in either order): every trace ends in its root's session, with
/// each span counted once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_split_across_replicas_is_one_sessions() {
    use opentelemetry_proto::tonic::{
        collector::trace::v1::ExportTraceServiceRequest,
        trace::v1::{ResourceSpans, ScopeSpans},
    };
    let db = TestDatabase::create().await;
    let url: DatabaseUrl = db.url().parse().unwrap();
    let a = TestServer::start_with(Backend::Postgres, replica(&url, Duration::from_secs(10))).await;
    let b = TestServer::start_with(Backend::Postgres, replica(&url, Duration::from_secs(10))).await;
    let (channel_a, channel_b) = (a.channel().await, b.channel().await);
    // Trace i: `traces_request`'s three spans; the root (span 1) goes to one replica with
    // the session, the two calls to the other without one.
    let part = |trace: u8, root: bool| {
        let mut request = traces_request(trace, 3, &format!("split-{trace}"));
        let spans = &mut request.resource_spans[0].scope_spans[0].spans;
        spans.retain(|s| s.parent_span_id.is_empty() == root);
        if !root {
            for span in spans.iter_mut() {
                span.attributes.retain(|kv| kv.key != "session.id");
            }
        }
        let spans = std::mem::take(spans);
        ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: request.resource_spans[0].resource.clone(),
                scope_spans: vec![ScopeSpans { spans, ..Default::default() }],
                ..Default::default()
            }],
        }
    };
    let exports = (1..=30u8).flat_map(|trace| {
        let (first, second) = if trace % 2 == 0 {
            (channel_a.clone(), channel_b.clone())
        } else {
            (channel_b.clone(), channel_a.clone())
        };
        [(first, part(trace, true)), (second, part(trace, false))]
    });
    let exports = exports
        .map(|(channel, request)| async move { TraceServiceClient::new(channel).export(request).await.unwrap() });
    futures::future::join_all(exports).await;
    assert_eq!(a.sql("SELECT COUNT(*) FROM sessions").await.unwrap(), [30]);
    assert_eq!(a.sql("SELECT COUNT(*) FROM sessions WHERE spans = 3 AND input_tokens = 300").await.unwrap(), [30]);
    assert_eq!(a.sql("SELECT COUNT(*) FROM spans WHERE session_id IS NULL").await.unwrap(), [0]);
    assert_eq!(a.sql("SELECT COUNT(*) FROM traces WHERE session_id = ''").await.unwrap(), [0]);
    assert_row_counts(&a).await;
    assert_row_counts(&b).await;
    a.stop().await.unwrap();
    b.stop().await.unwrap();
}

each_backend!(a_lone_replica_lists_itself_with_its_agents);

/// One server is a cluster of one: `GET /api/replicas` (and gRPC) names it, its address,
/// and every agent it runs; a destroyed agent leaves the list.
async fn a_lone_replica_lists_itself_with_its_agents(backend: Backend) {
    let server = TestServer::start(backend).await;
    let account = server.account(0).await;
    let api = server.api(Some(&account));
    let mut ids = Vec::new();
    for n in 0..2 {
        let id = api.provision("echo", &format!("agent {n}")).await["id"].as_str().unwrap().to_owned();
        api.wait_status(&id, "running").await;
        ids.push(id);
    }
    let view = server.api(None).get("/api/replicas").await.ok();
    let me = view["self"].as_str().unwrap().to_owned();
    assert!(me.starts_with("rep_"), "{view}");
    let replicas = view["replicas"].as_array().unwrap();
    assert_eq!(replicas.len(), 1, "{view}");
    assert_eq!(replicas[0]["id"], me);
    assert!(replicas[0]["addr"].as_str().unwrap().starts_with("127.0.0.1:"), "{view}");
    let mut agents: Vec<String> =
        replicas[0]["agents"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_owned()).collect();
    agents.sort();
    ids.sort();
    assert_eq!(agents, ids);
    assert_eq!(cluster(&server).await["replicas"].as_array().unwrap().len(), 1, "/api/status lists it too");

    let destroyed = api.post(&format!("/api/instances/{}/destroy", ids[0]), serde_json::json!({})).await;
    assert_eq!(destroyed.status, 200, "{}", destroyed.body);
    let answer = FeatureServiceClient::new(server.channel().await)
        .list_replicas(ListReplicasRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answer.self_id, me);
    assert_eq!(answer.replicas[0].agents, vec![ids[1].clone()]);
    // Dashboard access: a caller the dashboard refuses is refused here too.
    let public = TestServer::start_with(backend, |c| c.access.api_tokens = vec!["dash-token".into()]).await;
    let refused = public.api(None).get("/api/replicas").await;
    assert_eq!(refused.status, 401, "{}", refused.body);
}
