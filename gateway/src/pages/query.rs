//! q/1 from a page: one shape run through `QueryService`, noted in the footer as the REST
//! call it equals (`POST /api/local/query {"shape":…,"args":…}`).

use roost_proto::{
    ApiError,
    json::value::{map_to_struct, struct_to_map},
    v1::QueryRequest,
};
use serde_json::{Map, Value};

use super::layout::PageCall;
use crate::Core;

/// A shape's answer, as a page uses it.
#[derive(Debug, Clone, Default)]
pub struct Rows {
    /// One JSON object per row.
    pub rows: Vec<Map<String, Value>>,
    /// The shape's warning (rows empty because the store could not answer), if any.
    pub warning: String,
    /// Rows were left out to keep within the byte budget.
    pub truncated: bool,
}

/// Runs `shape` with `args` (a JSON object; nulls and empty strings are dropped, so a page
/// can pass its unset filters as they are).
pub async fn run(core: &Core, page: &PageCall, shape: &str, args: Value) -> Result<Rows, ApiError> {
    let mut args = match args {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    args.retain(|_, v| !(v.is_null() || v.as_str().is_some_and(str::is_empty)));
    // Written out so the footer reads in the order the REST body is documented.
    let shown = format!("{{\"shape\":{},\"args\":{}}}", Value::from(shape), Value::Object(args.clone()));
    let request = QueryRequest { shape: shape.to_owned(), args: Some(map_to_struct(&args)) };
    let answer = page.load(format!("POST /api/local/query {shown}"), core.query.query(page.request(request))).await?;
    Ok(Rows {
        rows: answer.rows.iter().map(struct_to_map).collect(),
        warning: answer.warning,
        truncated: answer.truncated,
    })
}
