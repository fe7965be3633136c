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
    concurrent_writes_all_land
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
