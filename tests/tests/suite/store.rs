//! The storage suite: the same tests against SQLite and PostgreSQL, on `Store` directly.

use std::sync::Arc;

use roost_server::store::{BackendKind, DatabaseUrl, Store, StoreOptions};
use roost_tests::{Backend, TestDatabase, each_backend};
use tempfile::TempDir;

each_backend!(
    open_migrates_and_reports,
    reopening_keeps_data_and_schema,
    concurrent_opens_migrate_once,
    meta_round_trips,
    concurrent_writes_all_land,
    leader_leases_have_one_holder_at_a_time,
    led_workers_run_on_one_replica_and_move_on_a_stop
);

/// A fresh, empty database (nothing migrated yet) and what keeps it alive.
struct FreshDatabase {
    url: DatabaseUrl,
    _dir: TempDir,
    _db: Option<TestDatabase>,
}

impl FreshDatabase {
    async fn new(backend: Backend) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (url, db) = match backend {
            // A directory that does not exist yet: opening must create it.
            Backend::Sqlite => (DatabaseUrl::sqlite_in(&dir.path().join("nested")), None),
            Backend::Postgres => {
                let db = TestDatabase::create().await;
                (db.url().parse().unwrap(), Some(db))
            }
        };
        Self { url, _dir: dir, _db: db }
    }

    async fn open(&self) -> Store {
        Store::open(&self.url, &StoreOptions::default()).await.unwrap()
    }
}

/// A store opened on a fresh database.
struct TestStore {
    store: Store,
    db: FreshDatabase,
}

impl TestStore {
    async fn new(backend: Backend) -> Self {
        let db = FreshDatabase::new(backend).await;
        Self { store: db.open().await, db }
    }
}

async fn open_migrates_and_reports(backend: Backend) {
    let t = TestStore::new(backend).await;
    let expected = match backend {
        Backend::Sqlite => BackendKind::Sqlite,
        Backend::Postgres => BackendKind::Postgres,
    };
    assert_eq!(t.store.kind(), expected);
    assert!(t.store.schema_version().await.unwrap() >= 1);
    assert!(t.store.ping().await.is_ok());
    assert!(t.store.size_bytes().await.unwrap() > 0);
    assert!(!t.store.location().contains('@'), "{}", t.store.location());
}

async fn reopening_keeps_data_and_schema(backend: Backend) {
    let t = TestStore::new(backend).await;
    t.store.meta_set("marker", "kept").await.unwrap();
    let version = t.store.schema_version().await.unwrap();
    t.store.close().await;

    let again = t.db.open().await;
    assert_eq!(again.schema_version().await.unwrap(), version);
    assert_eq!(again.meta_get("marker").await.unwrap().as_deref(), Some("kept"));
}

async fn concurrent_opens_migrate_once(backend: Backend) {
    let t = TestStore::new(backend).await;
    // Four processes' worth of opens racing to migrate one empty database.
    let fresh = FreshDatabase::new(backend).await;
    let opens: Vec<_> = (0..4)
        .map(|_| {
            let url = fresh.url.clone();
            tokio::spawn(async move { Store::open(&url, &StoreOptions::default()).await })
        })
        .collect();
    let expected = t.store.schema_version().await.unwrap();
    for open in opens {
        let store = open.await.unwrap().unwrap();
        assert_eq!(store.schema_version().await.unwrap(), expected);
    }
}

async fn meta_round_trips(backend: Backend) {
    let t = TestStore::new(backend).await;
    assert_eq!(t.store.meta_get("absent").await.unwrap(), None);
    let awkward = "quotes ' \" ; -- and ünïcödé ✓";
    t.store.meta_set("k", awkward).await.unwrap();
    assert_eq!(t.store.meta_get("k").await.unwrap().as_deref(), Some(awkward));
    t.store.meta_set("k", "replaced").await.unwrap();
    assert_eq!(t.store.meta_get("k").await.unwrap().as_deref(), Some("replaced"));
}

async fn concurrent_writes_all_land(backend: Backend) {
    let t = TestStore::new(backend).await;
    let store = Arc::new(t.store.clone());
    let writers: Vec<_> = (0..50)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move { store.meta_set(&format!("key-{i}"), &i.to_string()).await })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap().unwrap();
    }
    for i in 0..50 {
        assert_eq!(t.store.meta_get(&format!("key-{i}")).await.unwrap(), Some(i.to_string()));
    }
}

/// The leader lease as the database times it: one holder at a time, renewals keep the
/// epoch, a release or an expiry lets the next holder in with the next epoch.
async fn leader_leases_have_one_holder_at_a_time(backend: Backend) {
    let db = FreshDatabase::new(backend).await;
    let store = db.open().await;
    assert_eq!(store.claim_lease("test", "rep_a", 60_000).await.unwrap(), Some(1));
    assert_eq!(store.claim_lease("test", "rep_b", 60_000).await.unwrap(), None, "held by a");
    assert_eq!(store.claim_lease("test", "rep_a", 60_000).await.unwrap(), Some(1), "a renewal keeps the epoch");
    let holder = store.lease_holder("test").await.unwrap().unwrap();
    assert_eq!((holder.owner.as_str(), holder.epoch), ("rep_a", 1));
    assert!(holder.expires_in_ms > 50_000 && holder.expires_in_ms <= 60_000, "{holder:?}");

    store.release_lease("test", "rep_b").await.unwrap();
    assert_eq!(store.claim_lease("test", "rep_b", 60_000).await.unwrap(), None, "only the holder releases");
    store.release_lease("test", "rep_a").await.unwrap();
    assert_eq!(store.claim_lease("test", "rep_b", 100).await.unwrap(), Some(2), "released: the next takes it");

    // Expired (100 ms): anyone may take it, and racing takers get it once.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let racers = ["rep_c", "rep_d", "rep_e", "rep_f", "rep_g"].map(|r| {
        let store = store.clone();
        tokio::spawn(async move { store.claim_lease("test", r, 60_000).await.unwrap() })
    });
    let mut won = Vec::new();
    for racer in racers {
        won.extend(racer.await.unwrap());
    }
    assert_eq!(won, [3], "one racer takes the expired lease, at the next epoch");
    assert_eq!(store.lease_holder("other").await.unwrap(), None);
}

/// Led workers run on one replica at a time; when the leader stops, another replica's
/// workers start within a renewal period.
async fn led_workers_run_on_one_replica_and_move_on_a_stop(backend: Backend) {
    use std::{
        sync::atomic::{AtomicUsize, Ordering},
        time::{Duration, Instant},
    };

    use roost_server::cluster::leader::Leadership;
    use tokio_util::sync::CancellationToken;

    let db = FreshDatabase::new(backend).await;
    let store = db.open().await;
    let ttl = Duration::from_millis(900);
    let running = Arc::new(AtomicUsize::new(0));
    let replicas: Vec<_> = ["rep_a", "rep_b", "rep_c"]
        .into_iter()
        .map(|id| {
            let leadership = Leadership::new(store.clone(), "test", id.to_owned(), ttl);
            let stop = CancellationToken::new();
            tokio::spawn(leadership.clone().run(stop.clone()));
            let running = running.clone();
            leadership.lead(stop.clone(), move |term| {
                let running = running.clone();
                async move {
                    running.fetch_add(1, Ordering::SeqCst);
                    term.cancelled().await;
                    running.fetch_sub(1, Ordering::SeqCst);
                }
            });
            (leadership, stop)
        })
        .collect();

    let leader = async || {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let leading: Vec<_> = replicas.iter().filter(|(l, s)| !s.is_cancelled() && l.term().is_some()).collect();
            if leading.len() == 1 && running.load(Ordering::SeqCst) == 1 {
                return leading[0].0.replica().to_owned();
            }
            assert!(Instant::now() < deadline, "no single leader within 5 s");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let first = leader().await;
    // Over several renewals, never a second leader.
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(running.load(Ordering::SeqCst) <= 1, "two replicas ran the led workers");
    }
    let (_, stop) = replicas.iter().find(|(l, _)| l.replica() == first).unwrap();
    let stopped = Instant::now();
    stop.cancel();
    let second = leader().await;
    assert_ne!(second, first);
    assert!(stopped.elapsed() < ttl, "the release let the next replica in before the TTL: {:?}", stopped.elapsed());
    for (_, stop) in &replicas {
        stop.cancel();
    }
}
