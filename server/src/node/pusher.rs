//! The node side of node push (`roost daemon --upstream URL --upstream-token KEY`): push
//! the outbox upstream in order, heartbeat, and keep going through any outage.

use std::{sync::Arc, time::Duration};

use prost::Message;
use roost_proto::v1::{HeartbeatRequest, HeartbeatResponse, PushBatchRequest, PushBatchResponse, PushItem};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::{
    Result,
    build_info::BUILD,
    store::{Store, on_reader, on_writer},
    update::Updater,
};

/// Where and how a node pushes.
#[derive(Debug, Clone)]
pub struct PushConfig {
    /// Base URL of the central roost, e.g. `https://roost.example.com`.
    pub upstream: String,
    /// An API key of the central roost's account this node belongs to.
    pub token: String,
    /// Most outbox items per pushed batch.
    pub batch_items: usize,
    /// How often to heartbeat.
    pub heartbeat_every: Duration,
    /// The longest wait between retries while the upstream is down.
    pub max_backoff: Duration,
}

impl PushConfig {
    /// A push to `upstream` with `token`, with default batch size and cadence.
    pub fn new(upstream: String, token: String) -> Self {
        Self {
            upstream: upstream.trim_end_matches('/').to_owned(),
            token,
            batch_items: 500,
            heartbeat_every: Duration::from_secs(30),
            max_backoff: Duration::from_secs(60),
        }
    }
}

/// The `roost_meta` key of this node's id.
const NODE_ID_KEY: &str = "node_id";
/// The `roost_meta` key where the last plan the upstream reported is kept.
pub const UPSTREAM_PLAN_KEY: &str = "upstream_plan";
/// How long to wait for more to push when the outbox is empty.
const IDLE_POLL: Duration = Duration::from_millis(200);

/// This node's id, made (and kept in the store) the first time it is needed.
pub async fn node_id(store: &Store) -> Result<String> {
    if let Some(id) = store.meta_get(NODE_ID_KEY).await? {
        return Ok(id);
    }
    let id = crate::ids::new_id("node");
    store.meta_set(NODE_ID_KEY, &id).await?;
    Ok(id)
}

#[derive(sqlx::FromRow)]
struct OutboxRow {
    seq: i64,
    kind: String,
    payload: Vec<u8>,
}

/// Pushes and heartbeats until `shutdown`.
pub async fn run(store: Store, config: PushConfig, updater: Option<Arc<Updater>>, shutdown: CancellationToken) {
    let node_id = match node_id(&store).await {
        Ok(id) => id,
        Err(err) => {
            warn!(error = %err, "node push disabled: cannot read or create the node id");
            return;
        }
    };
    info!(upstream = %config.upstream, node = %node_id, "pushing to upstream");
    let client = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap_or_default();
    let mut failures = 0u32;
    let mut last_heartbeat: Option<tokio::time::Instant> = None;
    loop {
        if last_heartbeat.is_none_or(|at| at.elapsed() >= config.heartbeat_every) {
            last_heartbeat = Some(tokio::time::Instant::now());
            if let Err(err) = heartbeat(&store, &client, &config, &node_id, updater.as_deref()).await {
                warn!(error = %err, "heartbeat to upstream failed");
            }
        }
        let wait = match push_once(&store, &client, &config, &node_id).await {
            Ok(0) => {
                failures = 0;
                IDLE_POLL
            }
            Ok(_) => {
                failures = 0;
                Duration::ZERO
            }
            Err(err) => {
                failures += 1;
                let backoff =
                    Duration::from_millis(250 * 2u64.saturating_pow(failures.min(16))).min(config.max_backoff);
                if failures == 1 || failures.is_power_of_two() {
                    warn!(error = %err, failures, retry_in = ?backoff, "push to upstream failed; data stays queued");
                }
                backoff
            }
        };
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// Pushes one batch of the outbox; how many items were pushed.
async fn push_once(
    store: &Store,
    client: &reqwest::Client,
    config: &PushConfig,
    node_id: &str,
) -> Result<usize, String> {
    let limit = config.batch_items as i64;
    let rows: Vec<OutboxRow> = on_reader!(store, |pool| {
        sqlx::query_as("SELECT seq, kind, payload FROM outbox ORDER BY seq LIMIT $1").bind(limit).fetch_all(pool).await
    })
    .map_err(|e| format!("reading the outbox: {e}"))?;
    if rows.is_empty() {
        return Ok(0);
    }
    let request = PushBatchRequest {
        node_id: node_id.to_owned(),
        items: rows.into_iter().map(|r| PushItem { seq: r.seq, kind: r.kind, payload: r.payload }).collect(),
    };
    let count = request.items.len();
    let reply: PushBatchResponse = post(client, config, "/ingest/batch", &request).await?;
    forget_through(store, reply.applied_through).await?;
    Ok(count)
}

async fn heartbeat(
    store: &Store,
    client: &reqwest::Client,
    config: &PushConfig,
    node_id: &str,
    updater: Option<&Updater>,
) -> Result<(), String> {
    let depth: i64 = on_reader!(store, |pool| sqlx::query_scalar("SELECT COUNT(*) FROM outbox").fetch_one(pool).await)
        .map_err(|e| format!("reading the outbox: {e}"))?;
    let request = HeartbeatRequest {
        node_id: node_id.to_owned(),
        version: updater.map_or_else(|| BUILD.version.to_owned(), |u| u.settings().version.clone()),
        hostname: hostname(),
        outbox_depth: depth,
        auto_update: match updater {
            Some(updater) => updater.installs_unattended().await,
            None => false,
        },
        rollback: updater.and_then(Updater::rollback_record).and_then(|record| {
            let json = serde_json::to_value(record).ok()?;
            Some(roost_proto::json::value::from_json(&json)).and_then(|value| match value.kind {
                Some(prost_types::value::Kind::StructValue(object)) => Some(object),
                _ => None,
            })
        }),
    };
    let reply: HeartbeatResponse = post(client, config, "/ingest/heartbeat", &request).await?;
    store.meta_set(UPSTREAM_PLAN_KEY, &reply.plan).await.map_err(|e| e.to_string())?;
    if let Some(updater) = updater {
        updater.apply_plan(&reply.plan).await;
    }
    // A push whose answer was lost is not pushed twice: the heartbeat says how far it got.
    forget_through(store, reply.applied_through).await
}

/// Drops outbox items the upstream has applied.
async fn forget_through(store: &Store, seq: i64) -> Result<(), String> {
    on_writer!(store, |pool| {
        sqlx::query("DELETE FROM outbox WHERE seq <= $1").bind(seq).execute(pool).await.map(|done| done.rows_affected())
    })
    .map_err(|e| format!("trimming the outbox: {e}"))?;
    Ok(())
}

/// POSTs a protobuf message and decodes the protobuf answer.
async fn post<Req: Message, Resp: Message + Default>(
    client: &reqwest::Client,
    config: &PushConfig,
    path: &str,
    request: &Req,
) -> Result<Resp, String> {
    let resp = client
        .post(format!("{}{path}", config.upstream))
        .bearer_auth(&config.token)
        .header("content-type", "application/x-protobuf")
        .header("accept", "application/x-protobuf")
        .body(request.encode_to_vec())
        .send()
        .await
        .map_err(|e| format!("{path}: {e}"))?;
    let status = resp.status();
    let body = resp.bytes().await.map_err(|e| format!("{path}: {e}"))?;
    if !status.is_success() {
        return Err(format!("{path}: HTTP {status}: {}", String::from_utf8_lossy(&body[..body.len().min(300)])));
    }
    Resp::decode(body).map_err(|e| format!("{path}: undecodable answer: {e}"))
}

fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_default()
}
