//! The central side of node push: heartbeats and pushed batches from `roost daemon`
//! nodes, authenticated by an account API key (the node's token).

use opentelemetry_proto::tonic::collector::{
    logs::v1::ExportLogsServiceRequest, metrics::v1::ExportMetricsServiceRequest, trace::v1::ExportTraceServiceRequest,
};
use prost::Message;
use roost_proto::{
    ApiError, ErrorReason,
    json::value::struct_to_map,
    v1::{
        AddRunEventsRequest, EndRunResponse, HeartbeatRequest, HeartbeatResponse, PushBatchRequest, PushBatchResponse,
        Run, ScoreList,
    },
};

use super::kinds;
use crate::{
    Result,
    store::{BeginWrite, on_reader, on_writer},
    telemetry::{
        Telemetry,
        limits::Bounds,
        otlp,
        rows::Batch,
        runs::{event_rows, run_end, run_row},
        writer::NodeCursor,
    },
    time::{now_ms, timestamp_ms},
};

/// Most items in one pushed batch.
pub const MAX_PUSH_ITEMS: usize = 1000;

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::invalid_argument(message)
}

impl Telemetry {
    /// Records a node's heartbeat (registering the node with the caller's account the
    /// first time); replies with the account's plan and how far its items are applied.
    pub async fn heartbeat(&self, account_id: &str, req: HeartbeatRequest) -> Result<HeartbeatResponse> {
        let node = self.node(account_id, &req.node_id).await?;
        let rollback =
            req.rollback.as_ref().map(|r| serde_json::Value::Object(struct_to_map(r)).to_string()).unwrap_or_default();
        let now_ns = now_ms() * 1_000_000;
        on_writer!(self.store, |pool| {
            sqlx::query(
                "UPDATE nodes SET hostname = $2, version = $3, outbox_depth = $4, auto_update = $5, rollback = $6, \
                 last_heartbeat_ns = $7 WHERE node_id = $1",
            )
            .bind(&req.node_id)
            .bind(&req.hostname)
            .bind(&req.version)
            .bind(req.outbox_depth)
            .bind(req.auto_update)
            .bind(&rollback)
            .bind(now_ns)
            .execute(pool)
            .await
            .map(|done| done.rows_affected())
        })?;
        let plan = self.store.account(account_id).await?.map(|a| a.plan).unwrap_or_else(|| "free".to_owned());
        Ok(HeartbeatResponse {
            ok: true,
            plan,
            server_time: Some(timestamp_ms(now_ms())),
            applied_through: node.applied_through,
        })
    }

    /// Applies a node's batch: items past its cursor, all in one transaction with the new
    /// cursor.
    pub async fn push_batch(&self, account_id: &str, req: PushBatchRequest) -> Result<PushBatchResponse> {
        if req.items.len() > MAX_PUSH_ITEMS {
            return Err(bad(format!("{} items in one batch; the limit is {MAX_PUSH_ITEMS}", req.items.len())).into());
        }
        if req.items.windows(2).any(|w| w[0].seq >= w[1].seq) {
            return Err(bad("items must be in increasing seq order").into());
        }
        let node = self.node(account_id, &req.node_id).await?;
        let mut batch = Batch { node_id: req.node_id.clone(), ..Batch::default() };
        let (mut applied, mut skipped, mut through) = (0, 0, node.applied_through);
        for item in &req.items {
            if item.seq <= node.applied_through {
                skipped += 1;
                continue;
            }
            let mut part =
                self.decode_item(&item.kind, &item.payload).map_err(|e| bad(format!("item {}: {e}", item.seq)))?;
            part.node_id.clone_from(&req.node_id);
            batch.append(part);
            applied += 1;
            through = item.seq;
        }
        if applied > 0 {
            batch.node_id.clone_from(&req.node_id);
            let cursor = NodeCursor { node_id: req.node_id.clone(), applied_through: through };
            self.writer.write(batch, None, Some(cursor)).await?;
        }
        Ok(PushBatchResponse { ok: true, applied_through: through, applied, skipped })
    }

    /// What a pushed item adds. Its strings are bounded as local ingest bounds them (U+0000
    /// replaced, sizes limited): an item from a node that stored it before these rules, or
    /// from a node with larger limits, is applied rather than failing its batch, which the
    /// node would push again forever.
    fn decode_item(&self, kind: &str, payload: &[u8]) -> std::result::Result<Batch, String> {
        let garbled = |e: prost::DecodeError| format!("cannot decode a {kind} payload: {e}");
        let mut bounds = Bounds::new(&self.limits);
        let mut batch = match kind {
            kinds::OTLP_TRACES => {
                let mut req = ExportTraceServiceRequest::decode(payload).map_err(garbled)?;
                bounds.traces(&mut req);
                otlp::traces::convert(&req, &self.prices).0
            }
            kinds::OTLP_LOGS => {
                let mut req = ExportLogsServiceRequest::decode(payload).map_err(garbled)?;
                bounds.logs(&mut req);
                otlp::logs::convert(&req, &self.prices).0
            }
            kinds::OTLP_METRICS => {
                let mut req = ExportMetricsServiceRequest::decode(payload).map_err(garbled)?;
                bounds.metrics(&mut req);
                otlp::metrics::convert(&req, &self.prices).0
            }
            kinds::RUN => {
                let mut run = Run::decode(payload).map_err(garbled)?;
                bounds.run(&mut run);
                Batch { runs: vec![run_row(&run)], ..Batch::default() }
            }
            kinds::RUN_EVENTS => {
                let mut req = AddRunEventsRequest::decode(payload).map_err(garbled)?;
                bounds.run_events(&mut req);
                Batch { events: event_rows(&req, &self.prices), ..Batch::default() }
            }
            kinds::RUN_END => {
                let mut end = EndRunResponse::decode(payload).map_err(garbled)?;
                bounds.run_end(&mut end);
                Batch { run_ends: vec![run_end(&end)], ..Batch::default() }
            }
            kinds::SCORES => {
                let list = ScoreList::decode(payload).map_err(garbled)?;
                let scores: Vec<_> = list.scores.iter().filter_map(crate::telemetry::scores::from_stored).collect();
                if scores.len() < list.scores.len() {
                    tracing::warn!(dropped = list.scores.len() - scores.len(), "pushed scores out of bounds dropped");
                }
                Batch { scores, ..Batch::default() }
            }
            other => return Err(format!("unknown item kind {other:?}")),
        };
        bounds.keys(&mut batch);
        Ok(batch)
    }

    /// The node, registered to the caller's account on first contact. A node id taken by
    /// another account is refused (404, as for anything not the caller's).
    async fn node(&self, account_id: &str, node_id: &str) -> Result<NodeRecord> {
        let valid = !node_id.is_empty() && node_id.len() <= 128 && node_id.bytes().all(|b| b.is_ascii_graphic());
        if !valid {
            return Err(bad("node_id is required: 1-128 printable characters").into());
        }
        let now_ns = now_ms() * 1_000_000;
        on_writer!(self.store, |pool| {
            let mut tx = pool.begin_write().await?;
            sqlx::query(
                "INSERT INTO nodes (node_id, account_id, hostname, version, applied_through, outbox_depth, auto_update, \
                 rollback, first_seen_ns, last_heartbeat_ns) VALUES ($1, $2, '', '', 0, 0, $3, '', $4, $4) \
                 ON CONFLICT (node_id) DO NOTHING",
            )
            .bind(node_id)
            .bind(account_id)
            .bind(false)
            .bind(now_ns)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
        });
        let node: Option<NodeRecord> = on_reader!(self.store, |pool| {
            sqlx::query_as("SELECT account_id, applied_through FROM nodes WHERE node_id = $1")
                .bind(node_id)
                .fetch_optional(pool)
                .await
        })?;
        match node {
            Some(node) if node.account_id == account_id => Ok(node),
            _ => Err(ApiError::new(ErrorReason::NotFound, format!("node {node_id} belongs to another account")).into()),
        }
    }
}

#[derive(sqlx::FromRow)]
struct NodeRecord {
    account_id: String,
    applied_through: i64,
}
