//! Replicas of roost on one PostgreSQL: the cluster-wide workers run under a leader lease.
//! (Two servers in this process share a database; the multi-process tests of issue 19's
//! agent leases build on this.)

use std::time::{Duration, Instant};

use roost_server::{ServeConfig, secrets::SecretKey, store::DatabaseUrl};
use roost_tests::{Backend, TestDatabase, TestServer};
use serde_json::Value;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_workers_have_one_leader_who_hands_over_on_stop() {
    let ttl = Duration::from_secs(3);
    // Replicas share the store and so its secret key (ROOST_SECRET_KEY in production).
    let key = SecretKey::from_bytes(&[7; 32]);
    // The database outlives every replica (each TestServer drops the one it made).
    let db = TestDatabase::create().await;
    let url: DatabaseUrl = db.url().parse().unwrap();
    let replica = |url: DatabaseUrl| {
        let key = key.clone();
        move |c: &mut ServeConfig| {
            c.lease_ttl = ttl;
            c.secret_key = Some(key);
            c.database_url = url;
        }
    };
    let a = TestServer::start_with(Backend::Postgres, replica(url.clone())).await;
    let b = TestServer::start_with(Backend::Postgres, replica(url.clone())).await;
    let c = TestServer::start_with(Backend::Postgres, replica(url)).await;
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
