//! Reading agents: instances (with their live status) and their activity.

use roost_proto::v1::{GetActivityResponse, Instance, Turn, TurnStatus, Usage};

use super::{
    Hosting,
    instances::{InstanceRow, no_such_instance},
    limits,
};
use crate::{
    Result,
    accounts::service::clamp_limit,
    billing::{
        ledger::{LEDGER_COLUMNS, LedgerRow},
        money::nanocents_to_cents,
    },
    store::on_reader,
    time::timestamp_ms,
};

#[derive(sqlx::FromRow)]
struct TurnRow {
    id: String,
    seq: i64,
    status: String,
    source: String,
    text: String,
    reply: String,
    error: String,
    queued_at: i64,
    started_at: i64,
    duration_ms: i64,
    input_tokens: i64,
    output_tokens: i64,
    model: String,
    charged_nanocents: i64,
    chat_id: Option<i64>,
    /// Whether the turn made model calls (so it has a trace).
    traced: bool,
}

impl From<TurnRow> for Turn {
    fn from(row: TurnRow) -> Self {
        let status = match row.status.as_str() {
            "completed" => TurnStatus::Completed,
            "failed" => TurnStatus::Failed,
            "timed_out" => TurnStatus::TimedOut,
            "cancelled" => TurnStatus::Cancelled,
            "interrupted" => TurnStatus::Interrupted,
            _ => TurnStatus::Unspecified,
        };
        let trace_id = if row.traced { hex::encode(crate::callers::turn_trace(&row.id).0) } else { String::new() };
        Turn {
            id: row.id,
            status: status as i32,
            source: row.source,
            text: row.text,
            reply: row.reply,
            error: row.error,
            queued_at: Some(timestamp_ms(row.queued_at)),
            started_at: Some(timestamp_ms(row.started_at)),
            duration_ms: row.duration_ms,
            usage: Some(Usage { input_tokens: row.input_tokens, output_tokens: row.output_tokens }),
            model: row.model,
            charged_cents: nanocents_to_cents(row.charged_nanocents),
            charged_nanocents: row.charged_nanocents,
            seq: row.seq,
            chat_id: row.chat_id.unwrap_or_default(),
            trace_id,
        }
    }
}

impl Hosting {
    /// The API view of a stored instance, with the live status when the agent is loaded.
    fn view(&self, row: &InstanceRow) -> Instance {
        let mut instance = row.to_proto();
        if let Some(agent) = self.registry.get(&row.id) {
            let live = agent.state();
            instance.status = live.status.to_proto() as i32;
            instance.status_detail.clone_from(&live.detail);
        }
        instance
    }

    /// The caller's agent.
    pub async fn get_instance(&self, account_id: &str, id: &str) -> Result<Instance> {
        let id = limits::instance_id(id)?;
        let row = self.store.instance(id).await?;
        let row = row
            .filter(|r| r.account_id == account_id && r.destroyed_at.is_none())
            .ok_or_else(|| no_such_instance(id))?;
        let mut instance = self.view(&row);
        let workspaces = self.drivers.process.workspaces().clone();
        let id = id.to_owned();
        instance.workspace_bytes = tokio::task::spawn_blocking(move || workspaces.size(&id))
            .await
            .map_or(0, |bytes| i64::try_from(bytes).unwrap_or(i64::MAX));
        Ok(instance)
    }

    /// The caller's agents, newest first.
    pub async fn list_instances(&self, account_id: &str) -> Result<Vec<Instance>> {
        Ok(self.store.instances_of(account_id).await?.iter().map(|row| self.view(row)).collect())
    }

    /// An agent's recent turns and charges, newest first; readable after destroy.
    pub async fn activity(&self, account_id: &str, id: &str, limit: i32) -> Result<GetActivityResponse> {
        let id = limits::instance_id(id)?;
        let owned = self.store.instance(id).await?.is_some_and(|r| r.account_id == account_id);
        if !owned {
            return Err(no_such_instance(id).into());
        }
        // No flush needed: a turn's caller is answered only after its record commits.
        let limit = clamp_limit(limit);
        let turns: Vec<TurnRow> = on_reader!(self.store, |pool| {
            sqlx::query_as(
                "SELECT id, seq, status, source, text, reply, error, queued_at, started_at, duration_ms, input_tokens, \
                 output_tokens, model, charged_nanocents, chat_id, \
                 EXISTS (SELECT 1 FROM model_calls c WHERE c.turn_id = turns.id AND c.turn_id <> '') AS traced \
                 FROM turns WHERE instance_id = $1 \
                 ORDER BY queued_at DESC, seq DESC LIMIT $2",
            )
            .bind(id)
            .bind(limit)
            .fetch_all(pool)
            .await
        })?;
        let charges: Vec<LedgerRow> = on_reader!(self.store, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT {LEDGER_COLUMNS} FROM ledger WHERE instance_id = $1 ORDER BY seq DESC LIMIT $2"
            )))
            .bind(id)
            .bind(limit)
            .fetch_all(pool)
            .await
        })?;
        Ok(GetActivityResponse {
            turns: turns.into_iter().map(Into::into).collect(),
            charges: charges.into_iter().map(Into::into).collect(),
        })
    }
}
