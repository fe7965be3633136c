//! Datasets: named, ordered lists of items, each owned by an account or the operator.

use roost_proto::{
    ApiError, ErrorReason,
    v1::{AddDatasetItemsRequest, CreateDatasetRequest, Dataset, DatasetItem},
};
use serde_json::Value;

use super::{Caller, Experiments, MAX_ITEMS, imports::NewItem, invalid};
use crate::{
    Result,
    ids::new_id,
    store::{BeginWrite as _, on_reader, on_writer},
    time::{now_ms, timestamp_ms},
};

/// Items written per statement (8 binds each, well under SQLite's limit).
const ROWS_PER_INSERT: usize = 500;

/// A dataset as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct DatasetRow {
    pub(crate) id: String,
    pub(crate) owner: String,
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) items: i64,
    pub(crate) created_ms: i64,
}

impl DatasetRow {
    /// As the API shows it.
    pub fn to_proto(&self) -> Dataset {
        Dataset {
            id: self.id.clone(),
            name: self.name.clone(),
            description: self.description.clone(),
            items: self.items,
            created_at: Some(timestamp_ms(self.created_ms)),
            account_id: self.owner.clone(),
        }
    }
}

/// An item as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ItemRow {
    pub(crate) id: String,
    pub(crate) position: i64,
    pub(crate) input: String,
    pub(crate) expected: String,
    pub(crate) metadata: String,
    pub(crate) source: String,
    pub(crate) created_ms: i64,
}

impl ItemRow {
    /// As the API shows it.
    pub fn to_proto(&self) -> DatasetItem {
        let metadata = match serde_json::from_str::<Value>(&self.metadata) {
            Ok(Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        };
        DatasetItem {
            id: self.id.clone(),
            input: self.input.clone(),
            expected: self.expected.clone(),
            metadata: Some(roost_proto::json::value::map_to_struct(&metadata)),
            source: self.source.clone(),
            position: self.position,
            created_at: Some(timestamp_ms(self.created_ms)),
        }
    }
}

const COLUMNS: &str = "id, owner, name, description, items, created_ms";
pub(crate) const ITEM_COLUMNS: &str = "id, position, input, expected, metadata, source, created_ms";
/// Items a `GetDataset` page holds when the caller names no limit, and at most.
const DEFAULT_PAGE: i64 = 1_000;
const MAX_PAGE: i64 = 10_000;

fn no_dataset(id: &str) -> crate::Error {
    ApiError::not_found(format!("no dataset {id}")).into()
}

impl Experiments {
    /// Adds a dataset (with its first items); 409 when the caller has one by that name.
    pub async fn create_dataset(&self, req: CreateDatasetRequest, caller: &Caller) -> Result<Dataset> {
        let name = req.name.trim().to_owned();
        if name.is_empty() || name.len() > 256 {
            return Err(invalid("name is required: 1-256 bytes"));
        }
        if req.description.len() > 4096 {
            return Err(invalid("description is at most 4096 bytes"));
        }
        let items = match &req.items {
            Some(add) if !add.dataset_id.is_empty() => {
                return Err(invalid("items of a new dataset name no dataset_id"));
            }
            Some(add) => self.items_of(add, caller).await?,
            None => Vec::new(),
        };
        let id = new_id("ds");
        let now = now_ms();
        let owner = caller.owner().to_owned();
        let created = on_writer!(self.store, |pool| {
            async {
                let mut tx = pool.begin_write().await?;
                let taken: Option<String> =
                    sqlx::query_scalar("SELECT id FROM datasets WHERE owner = $1 AND name = $2")
                        .bind(&owner)
                        .bind(&name)
                        .fetch_optional(&mut *tx)
                        .await?;
                if taken.is_some() {
                    return Ok::<_, sqlx::Error>(false);
                }
                sqlx::query(
                "INSERT INTO datasets (id, owner, name, description, items, created_ms) VALUES ($1, $2, $3, $4, 0, $5)",
            )
            .bind(&id)
            .bind(&owner)
            .bind(&name)
            .bind(&req.description)
            .bind(now)
            .execute(&mut *tx)
            .await?;
                tx.commit().await?;
                Ok::<_, sqlx::Error>(true)
            }
            .await
        })?;
        if !created {
            return Err(
                ApiError::new(ErrorReason::WrongState, format!("there is already a dataset named {name:?}")).into()
            );
        }
        if !items.is_empty() {
            self.append(&id, items).await?;
        }
        Ok(self.dataset(&id, caller).await?.to_proto())
    }

    /// The caller's datasets, newest first.
    pub async fn list_datasets(&self, caller: &Caller) -> Result<Vec<DatasetRow>> {
        let (sql, owner) = match caller {
            Caller::Operator => (format!("SELECT {COLUMNS} FROM datasets ORDER BY created_ms DESC, id"), None),
            Caller::Account(account) => (
                format!("SELECT {COLUMNS} FROM datasets WHERE owner = $1 ORDER BY created_ms DESC, id"),
                Some(account.clone()),
            ),
        };
        Ok(on_reader!(self.store, |pool| {
            let query = sqlx::query_as(sqlx::AssertSqlSafe(sql.clone()));
            match &owner {
                Some(owner) => query.bind(owner).fetch_all(pool).await,
                None => query.fetch_all(pool).await,
            }
        })?)
    }

    /// One of the caller's datasets; 404 for one it may not see.
    pub async fn dataset(&self, id: &str, caller: &Caller) -> Result<DatasetRow> {
        let sql = format!("SELECT {COLUMNS} FROM datasets WHERE id = $1");
        let row: Option<DatasetRow> = on_reader!(self.store, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(sql.clone())).bind(id).fetch_optional(pool).await
        })?;
        row.filter(|r| caller.sees(&r.owner)).ok_or_else(|| no_dataset(id))
    }

    /// A dataset's items, in order.
    pub async fn items(&self, dataset_id: &str) -> Result<Vec<ItemRow>> {
        let sql = format!("SELECT {ITEM_COLUMNS} FROM dataset_items WHERE dataset_id = $1 ORDER BY position");
        Ok(on_reader!(self.store, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(sql.clone())).bind(dataset_id).fetch_all(pool).await
        })?)
    }

    /// A page of a dataset's items: at most `limit` after the first `offset`, and where the
    /// next page starts (0 after the last). Positions run from 1 without gaps (items are
    /// only ever appended), so a page is a range of positions.
    pub async fn items_page(&self, dataset: &DatasetRow, offset: i64, limit: i64) -> Result<(Vec<ItemRow>, i64)> {
        if offset < 0 || limit < 0 {
            return Err(invalid("offset and limit are counts of items: 0 or more"));
        }
        let limit = if limit == 0 { DEFAULT_PAGE } else { limit.min(MAX_PAGE) };
        let sql = format!(
            "SELECT {ITEM_COLUMNS} FROM dataset_items WHERE dataset_id = $1 AND position > $2 ORDER BY position LIMIT $3"
        );
        let items: Vec<ItemRow> = on_reader!(self.store, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(sql.clone()))
                .bind(&dataset.id)
                .bind(offset)
                .bind(limit)
                .fetch_all(pool)
                .await
        })?;
        let end = offset.saturating_add(items.len() as i64);
        let next = if items.len() as i64 == limit && end < dataset.items { end } else { 0 };
        Ok((items, next))
    }

    /// Appends the items a request names; all or none.
    pub async fn add_items(&self, req: AddDatasetItemsRequest, caller: &Caller) -> Result<(Dataset, i64)> {
        let dataset = self.dataset(&req.dataset_id, caller).await?;
        let items = self.items_of(&req, caller).await?;
        if items.is_empty() {
            return Err(invalid("no items: give items, jsonl, csv, turn_ids, calls or session_id"));
        }
        let added = items.len() as i64;
        self.append(&dataset.id, items).await?;
        Ok((self.dataset(&dataset.id, caller).await?.to_proto(), added))
    }

    /// Writes items after a dataset's last, in one transaction. Taking the positions
    /// updates the dataset's row first, so concurrent appends to one dataset queue there
    /// instead of drawing the same positions.
    async fn append(&self, dataset_id: &str, items: Vec<NewItem>) -> Result<()> {
        let n = items.len() as i64;
        let now = now_ms();
        let rows: Vec<(String, NewItem)> = items.into_iter().map(|item| (new_id("di"), item)).collect();
        let appended = on_writer!(self.store, |pool| {
            async {
            let mut tx = pool.begin_write().await?;
            let last: Option<i64> = sqlx::query_scalar(
                "UPDATE datasets SET items = items + $2 WHERE id = $1 AND items + $2 <= $3 RETURNING items",
            )
            .bind(dataset_id)
            .bind(n)
            .bind(MAX_ITEMS)
            .fetch_optional(&mut *tx)
            .await?;
            let Some(last) = last else { return Ok::<_, sqlx::Error>(false) };
            let first = last - n + 1;
            for (chunk_at, chunk) in rows.chunks(ROWS_PER_INSERT).enumerate() {
                let mut q = sqlx::QueryBuilder::new(
                    "INSERT INTO dataset_items (id, dataset_id, position, input, expected, metadata, source, created_ms) ",
                );
                q.push_values(chunk.iter().enumerate(), |mut row, (i, (id, item))| {
                    row.push_bind(id)
                        .push_bind(dataset_id)
                        .push_bind(first + (chunk_at * ROWS_PER_INSERT + i) as i64)
                        .push_bind(&item.input)
                        .push_bind(&item.expected)
                        .push_bind(Value::Object(item.metadata.clone()).to_string())
                        .push_bind(&item.source)
                        .push_bind(now);
                });
                q.build().execute(&mut *tx).await?;
            }
            tx.commit().await?;
            Ok::<_, sqlx::Error>(true)
            }
            .await
        })?;
        if !appended {
            return Err(invalid(format!("a dataset holds at most {MAX_ITEMS} items")));
        }
        Ok(())
    }

    /// Deletes a dataset, its items and its finished experiments (their results are about
    /// its items); 409 while an experiment of it is queued or running.
    pub async fn delete_dataset(&self, id: &str, caller: &Caller) -> Result<()> {
        let dataset = self.dataset(id, caller).await?;
        let deleted = on_writer!(self.store, |pool| {
            async {
            let mut tx = pool.begin_write().await?;
            let busy: Option<String> = sqlx::query_scalar(
                "SELECT id FROM experiments WHERE dataset_id = $1 AND status IN ('queued', 'running') LIMIT 1",
            )
            .bind(&dataset.id)
            .fetch_optional(&mut *tx)
            .await?;
            if busy.is_some() {
                return Ok::<_, sqlx::Error>(false);
            }
            sqlx::query(
                "DELETE FROM experiment_results WHERE experiment_id IN (SELECT id FROM experiments WHERE dataset_id = $1)",
            )
            .bind(&dataset.id)
            .execute(&mut *tx)
            .await?;
            sqlx::query("DELETE FROM experiments WHERE dataset_id = $1").bind(&dataset.id).execute(&mut *tx).await?;
            sqlx::query("DELETE FROM dataset_items WHERE dataset_id = $1").bind(&dataset.id).execute(&mut *tx).await?;
            sqlx::query("DELETE FROM datasets WHERE id = $1").bind(&dataset.id).execute(&mut *tx).await?;
            tx.commit().await?;
            Ok::<_, sqlx::Error>(true)
            }
            .await
        })?;
        if !deleted {
            return Err(ApiError::new(
                ErrorReason::WrongState,
                "an experiment of this dataset is running: cancel it first",
            )
            .into());
        }
        Ok(())
    }
}
