//! `/dashboard/datasets`: the datasets (name, items, created), the latest experiments, and
//! a form for a new dataset with its items as JSON Lines or CSV;
//! `/dashboard/datasets/{id}`: one dataset's items, a form adding more, a form running it
//! as an experiment against a hosted agent (or a temporary copy with another brief or
//! model) with checks and evaluators, its experiments with two to pick for a comparison,
//! and Delete. Also the session page's "Add to a dataset" form
//! (`/dashboard/sessions/{id}/dataset`): the whole conversation, or the turns and model
//! calls ticked, as items of a dataset picked or named there (`/api/v1/datasets`,
//! `/api/v1/experiments` and their writes).
//!
//! The run form has one checkbox per evaluator, all named `evaluator`, and the session
//! form one per turn or call: those posts are read as their list of fields ([`Fields`]),
//! since a form struct takes each name once.

use askama::Template;
use axum::{
    extract::{Path, Query, State},
    response::Response,
};
use http::StatusCode;
use roost_proto::{
    ApiError, ErrorReason,
    v1::{
        AddDatasetItemsRequest, CallRef, CreateDatasetRequest, CreateExperimentRequest, Dataset, DatasetItem,
        DeleteDatasetRequest, ExperimentCheck, GetDatasetRequest, ListDatasetsRequest, ListEvaluatorsRequest,
        ListExperimentsRequest,
    },
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{
    AgentChoice, agent_choices,
    alerts::Confirm,
    clip,
    experiments::{RunRow, run_row},
    flag,
};
use crate::{
    Core,
    pages::{
        Failure, Message, When, count,
        forms::{CsrfField, Posted, csrf_field, failed, submit, submit_to},
        layout::{Chrome, PageCall, percent_encode},
        listing::Pager,
        text,
    },
};

const HERE: &str = "/dashboard/datasets";

/// The REST paths, for the footer (the pages call the core directly).
const API: &str = "/api/v1/datasets";
const EXPERIMENTS_API: &str = "/api/v1/experiments";

/// Items a dataset's page lists at once; `?offset=` pages on, as the API does.
const ITEMS_SHOWN: i64 = 200;
/// Experiments the datasets page lists, newest first.
const RECENT_EXPERIMENTS: usize = 20;
/// Characters of an item's input or expected output in a table cell.
const CELL_CHARS: usize = 240;
/// Turns and model calls the session page offers to tick.
const PICKS: usize = 100;

/// A dataset's page.
pub(super) fn dataset_href(id: &str) -> String {
    format!("{HERE}/{}", percent_encode(id))
}

#[derive(Template)]
#[template(path = "datasets.html")]
struct DatasetsPage {
    chrome: Chrome,
    datasets: Result<Vec<DatasetRow>, Failure>,
    experiments: Result<Vec<RunRow>, Failure>,
    /// More experiments than listed.
    more_experiments: bool,
}

#[derive(Template)]
#[template(path = "dataset.html")]
struct DatasetPage {
    chrome: Chrome,
    dataset: Result<Detail, Failure>,
}

struct Detail {
    d: DatasetRow,
    /// The description in full.
    description: String,
    items: Vec<ItemRow>,
    /// Links to the items before and after these (`Items 201–400 of 1,234`).
    pager: Pager,
    experiments: Result<Vec<RunRow>, Failure>,
    /// One of its experiments is queued or running (it cannot be deleted then).
    running: bool,
    agents: Vec<AgentChoice>,
    evaluators: Result<Vec<EvaluatorChoice>, Failure>,
}

/// A dataset as the pages show it.
struct DatasetRow {
    id: String,
    href: String,
    name: String,
    /// Its description, cut for a table cell.
    short_description: String,
    items: String,
    empty: bool,
    created: When,
}

struct ItemRow {
    position: String,
    input: String,
    expected: String,
    /// Its metadata as compact JSON (empty when it has none), cut.
    metadata: String,
    source: String,
}

/// An evaluator offered as a checkbox of the run form.
struct EvaluatorChoice {
    id: String,
    /// `correctness · gpt-4o-mini`, and its state when it is not judging.
    label: String,
}

fn dataset_row(d: Dataset) -> DatasetRow {
    DatasetRow {
        href: dataset_href(&d.id),
        short_description: clip(&d.description, 160),
        items: count(d.items),
        empty: d.items == 0,
        created: When::timestamp(d.created_at.as_ref()),
        id: d.id,
        name: d.name,
    }
}

fn item_row(item: DatasetItem) -> ItemRow {
    let metadata = item.metadata.as_ref().map(roost_proto::json::value::struct_to_map).unwrap_or_default();
    ItemRow {
        position: count(item.position),
        input: clip(&item.input, CELL_CHARS),
        expected: clip(&item.expected, CELL_CHARS),
        metadata: if metadata.is_empty() { String::new() } else { clip(&Value::Object(metadata).to_string(), 160) },
        source: item.source,
    }
}

/// A request as its REST body reads in the footer: fields left at their defaults left
/// out, long texts cut (an items text can be megabytes).
fn body(request: &impl Serialize) -> String {
    fn compact(value: Value) -> Option<Value> {
        match value {
            Value::Null | Value::Bool(false) => None,
            Value::String(s) if s.is_empty() => None,
            Value::String(s) => Some(Value::String(clip(&s, 120))),
            Value::Number(n) if n.as_f64() == Some(0.0) => None,
            Value::Array(list) => {
                let list: Vec<Value> = list.into_iter().filter_map(compact).collect();
                (!list.is_empty()).then_some(Value::Array(list))
            }
            Value::Object(map) => {
                let map: Map<String, Value> = map.into_iter().filter_map(|(k, v)| Some((k, compact(v)?))).collect();
                (!map.is_empty()).then_some(Value::Object(map))
            }
            other => Some(other),
        }
    }
    compact(serde_json::to_value(request).unwrap_or_default()).map(|v| v.to_string()).unwrap_or_default()
}

/// How a write reads over REST: `method path`, then its body when it has one.
fn call(method_path: &str, request: &impl Serialize) -> String {
    let body = body(request);
    if body.is_empty() { method_path.to_owned() } else { format!("{method_path} {body}") }
}

pub(super) async fn page(State(core): State<Core>, page: PageCall) -> Response {
    let (datasets, experiments) = tokio::join!(
        page.load(format!("GET {API}"), core.experiments.list_datasets(page.request(ListDatasetsRequest {}))),
        page.load(
            format!("GET {EXPERIMENTS_API}"),
            core.experiments.list_experiments(page.request(ListExperimentsRequest::default()))
        ),
    );
    let datasets = datasets.map_err(Failure::from).map(|a| a.datasets.into_iter().map(dataset_row).collect());
    let more_experiments = experiments.as_ref().is_ok_and(|a| a.experiments.len() > RECENT_EXPERIMENTS);
    let experiments = experiments
        .map_err(Failure::from)
        .map(|a| a.experiments.iter().take(RECENT_EXPERIMENTS).map(run_row).collect());
    page.render(&DatasetsPage { chrome: page.chrome("Datasets", HERE), datasets, experiments, more_experiments })
}

/// `?offset=`: where the dataset page's items start. Anything unreadable is the first page.
#[derive(Debug, Default, Deserialize)]
pub(super) struct ItemsAt {
    #[serde(default)]
    offset: String,
}

pub(super) async fn detail(
    State(core): State<Core>,
    Path(id): Path<String>,
    Query(at): Query<ItemsAt>,
    page: PageCall,
) -> Response {
    let offset = at.offset.parse::<i64>().unwrap_or(0).max(0);
    let request = GetDatasetRequest { id: id.clone(), offset, limit: ITEMS_SHOWN };
    let answer = page.load(format!("GET {API}/{id}"), core.experiments.get_dataset(page.request(request))).await;
    let answer = match answer {
        Err(err) if err.reason() == ErrorReason::NotFound => {
            let message = Message {
                chrome: page.chrome("Dataset not found", HERE),
                heading: "No such dataset".into(),
                detail: format!(
                    "There is no dataset {id} (it may have been deleted). The datasets page lists every one."
                ),
                back: Some((HERE.to_owned(), "All datasets".to_owned())),
            };
            return page.render_with(StatusCode::NOT_FOUND, &message);
        }
        Err(err) => {
            let dataset = Err(Failure::from(err));
            return page.render(&DatasetPage { chrome: page.chrome(format!("Dataset {id}"), HERE), dataset });
        }
        Ok(answer) => answer,
    };
    let list = ListExperimentsRequest { dataset_id: id.clone() };
    let (experiments, evaluators, agents) = tokio::join!(
        page.load(
            format!("GET {EXPERIMENTS_API}?dataset_id={}", percent_encode(&id)),
            core.experiments.list_experiments(page.request(list))
        ),
        page.load("GET /api/v1/evaluators", core.evaluators.list_evaluators(page.request(ListEvaluatorsRequest {}))),
        agent_choices(&core, &page),
    );
    let running = experiments
        .as_ref()
        .is_ok_and(|a| a.experiments.iter().any(|e| matches!(e.status.as_str(), "queued" | "running")));
    let experiments = experiments.map_err(Failure::from).map(|a| a.experiments.iter().map(run_row).collect());
    let evaluators = evaluators.map_err(Failure::from).map(|a| {
        a.evaluators
            .into_iter()
            .map(|e| {
                let state =
                    if e.status == "active" { String::new() } else { format!(" ({})", e.status.replace('_', " ")) };
                EvaluatorChoice { label: format!("{} · {}{state}", e.name, e.model), id: e.id }
            })
            .collect()
    });
    let dataset = answer.dataset.unwrap_or_default();
    let (total, shown) = (dataset.items, answer.items.len() as i64);
    let href = dataset_href(&dataset.id);
    let pager = Pager {
        showing: if shown < total {
            format!("Items {}–{} of {}", count(offset + 1), count(offset + shown), count(total))
        } else {
            String::new()
        },
        // Each lands on the items, not the forms above them.
        prev: (offset > 0).then(|| format!("{href}?offset={}#items-h", (offset - ITEMS_SHOWN).max(0))),
        next: (answer.next_offset > 0).then(|| format!("{href}?offset={}#items-h", answer.next_offset)),
    };
    let title = format!("Dataset {}", dataset.name);
    let detail = Detail {
        description: dataset.description.clone(),
        d: dataset_row(dataset),
        items: answer.items.into_iter().map(item_row).collect(),
        pager,
        experiments,
        running,
        agents,
        evaluators,
    };
    page.render(&DatasetPage { chrome: page.chrome(title, HERE), dataset: Ok(detail) })
}

/// Items as a form gives them: a text in `format` (`jsonl`, the default, or `csv`), its
/// lines ended by `\n` (browsers send `\r\n`).
fn items_text(format: &str, text: &str) -> Result<AddDatasetItemsRequest, ApiError> {
    let text = text.replace("\r\n", "\n");
    match format.trim() {
        "" | "jsonl" => Ok(AddDatasetItemsRequest { jsonl: text, ..Default::default() }),
        "csv" => Ok(AddDatasetItemsRequest { csv: text, ..Default::default() }),
        other => Err(ApiError::invalid_argument(format!("format: {other:?} is not jsonl or csv"))),
    }
}

/// "1 item", "3 items".
fn items(n: i64) -> String {
    if n == 1 { "1 item".to_owned() } else { format!("{} items", count(n)) }
}

/// The new-dataset form.
#[derive(Debug, Deserialize)]
pub(super) struct NewDataset {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    description: String,
    /// `jsonl` or `csv`.
    #[serde(default)]
    format: String,
    /// Its first items, in that format (optional).
    #[serde(default)]
    items: String,
}

/// The add-items form of a dataset's page.
#[derive(Debug, Deserialize)]
pub(super) struct NewItems {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    format: String,
    #[serde(default)]
    items: String,
}

csrf_field!(NewDataset, NewItems);

fn new_dataset(form: &NewDataset) -> Result<CreateDatasetRequest, ApiError> {
    let items = if form.items.trim().is_empty() { None } else { Some(items_text(&form.format, &form.items)?) };
    Ok(CreateDatasetRequest {
        name: form.name.trim().to_owned(),
        description: form.description.trim().replace("\r\n", "\n"),
        items,
    })
}

pub(super) async fn create(State(core): State<Core>, Posted(page, form): Posted<NewDataset>) -> Response {
    let request = match new_dataset(&form) {
        Ok(request) => request,
        Err(err) => return failed(&page, &err),
    };
    let api = call(&format!("POST {API}"), &request);
    submit_to(&page, api, core.experiments.create_dataset(page.request(request)), |answer| {
        let d = answer.dataset.unwrap_or_default();
        (dataset_href(&d.id), format!("Dataset “{}” created with {}.", d.name, items(d.items)))
    })
    .await
}

pub(super) async fn add_items(
    State(core): State<Core>,
    Path(id): Path<String>,
    Posted(page, form): Posted<NewItems>,
) -> Response {
    if form.items.trim().is_empty() {
        return failed(&page, &ApiError::invalid_argument("no items: paste JSON Lines or CSV in the box"));
    }
    let request = match items_text(&form.format, &form.items) {
        Ok(request) => request,
        Err(err) => return failed(&page, &err),
    };
    let api = call(&format!("POST {API}/{id}/items"), &request);
    let request = AddDatasetItemsRequest { dataset_id: id.clone(), ..request };
    submit(&page, api, core.experiments.add_dataset_items(page.request(request)), &dataset_href(&id), |answer| {
        let d = answer.dataset.unwrap_or_default();
        format!("Added {} to “{}”: it has {} now.", items(answer.added), d.name, items(d.items))
    })
    .await
}

pub(super) async fn delete(
    State(core): State<Core>,
    Path(id): Path<String>,
    Posted(page, _): Posted<Confirm>,
) -> Response {
    let request = DeleteDatasetRequest { id: id.clone() };
    submit(&page, format!("DELETE {API}/{id}"), core.experiments.delete_dataset(page.request(request)), HERE, |_| {
        format!("Dataset {id} deleted, with its items and experiments.")
    })
    .await
}

/// A posted form read as its fields in order, for forms that send a name more than once
/// (a checkbox per evaluator, turn or call).
#[derive(Debug, Deserialize)]
#[serde(transparent)]
pub(super) struct Fields(Vec<(String, String)>);

impl Fields {
    /// The first value of `name`, trimmed (empty when absent).
    fn one(&self, name: &str) -> &str {
        self.0.iter().find(|(k, _)| k == name).map_or("", |(_, v)| v.trim())
    }

    /// Every non-empty value of `name`, trimmed, in order.
    fn all(&self, name: &str) -> Vec<String> {
        self.0.iter().filter(|(k, v)| k == name && !v.trim().is_empty()).map(|(_, v)| v.trim().to_owned()).collect()
    }
}

impl CsrfField for Fields {
    fn csrf(&self) -> &str {
        self.0.iter().find(|(k, _)| k == "csrf").map_or("", |(_, v)| v.as_str())
    }
}

/// The run form: agent, optional name, brief and model, a copy even without them, the
/// checks and the evaluators.
fn new_experiment(dataset_id: &str, form: &Fields) -> Result<CreateExperimentRequest, ApiError> {
    let agent_id = form.one("agent_id");
    if agent_id.is_empty() {
        return Err(ApiError::invalid_argument("agent: choose the hosted agent to run the dataset against"));
    }
    let ignore_case = flag("ignore case", Some(form.one("ignore_case")))?.unwrap_or(false);
    let mut checks = Vec::new();
    if flag("exact match", Some(form.one("check_exact")))?.unwrap_or(false) {
        checks.push(ExperimentCheck { kind: "exact".into(), value: String::new(), ignore_case });
    }
    if flag("contains the expected output", Some(form.one("check_contains")))?.unwrap_or(false) {
        checks.push(ExperimentCheck { kind: "contains".into(), value: String::new(), ignore_case });
    }
    let wanted = form.one("contains_value");
    if !wanted.is_empty() {
        checks.push(ExperimentCheck { kind: "contains".into(), value: wanted.to_owned(), ignore_case });
    }
    // The brief as written (its blank lines are the author's), lines ended by `\n`.
    let brief = form.0.iter().find(|(k, _)| k == "brief").map_or("", |(_, v)| v.as_str());
    let brief = if brief.trim().is_empty() { String::new() } else { brief.replace("\r\n", "\n") };
    Ok(CreateExperimentRequest {
        dataset_id: dataset_id.to_owned(),
        agent_id: agent_id.to_owned(),
        name: form.one("name").to_owned(),
        brief,
        model: form.one("model").to_owned(),
        copy: flag("copy", Some(form.one("copy")))?.unwrap_or(false),
        evaluator_ids: form.all("evaluator"),
        checks,
    })
}

pub(super) async fn run(
    State(core): State<Core>,
    Path(id): Path<String>,
    Posted(page, form): Posted<Fields>,
) -> Response {
    let request = match new_experiment(&id, &form) {
        Ok(request) => request,
        Err(err) => return failed(&page, &err),
    };
    let api = call(&format!("POST {EXPERIMENTS_API}"), &request);
    submit_to(&page, api, core.experiments.create_experiment(page.request(request)), |answer| {
        let e = answer.experiment.unwrap_or_default();
        let on = if e.copy { format!("a copy of agent {}", e.agent_id) } else { format!("agent {}", e.agent_id) };
        (
            super::experiments::experiment_href(&e.id),
            format!("Experiment “{}” queued: its {} run against {on}.", e.name, items(e.items)),
        )
    })
    .await
}

// ---------------------------------------------------------------------------------------
// The session page's form.

/// A turn or model call of a conversation, offered as a checkbox of the session page's
/// "Add to a dataset" form.
pub(in crate::pages) struct Pick {
    /// The field it sets: `turn` or `call`.
    pub(in crate::pages) name: &'static str,
    /// A turn's id, or a call's `trace_id/span_id`.
    pub(in crate::pages) value: String,
    /// What it is: `turn: “What is 2+2?”`, `call gpt-4o: “What is 2+2?”`.
    pub(in crate::pages) label: String,
    pub(in crate::pages) time: When,
}

/// The session page's "Add to a dataset" form.
pub(in crate::pages) struct AddToDataset {
    /// Where it posts.
    pub(in crate::pages) action: String,
    /// The datasets to add to: (id, `name (12 items)`).
    pub(in crate::pages) datasets: Vec<(String, String)>,
    /// Why the datasets could not be listed (a new one can still be named).
    pub(in crate::pages) datasets_failed: Option<Failure>,
    /// The conversation's turns and model calls on this page of it, oldest first.
    pub(in crate::pages) picks: Vec<Pick>,
}

/// `text` with a zero-width space in each run of 24 characters without a space, so a long
/// word (an id, a URL) in a checkbox's label wraps instead of widening a phone's page.
fn breakable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut run = 0;
    for c in text.chars() {
        run = if c.is_whitespace() { 0 } else { run + 1 };
        if run > 24 {
            out.push('\u{200b}');
            run = 1;
        }
        out.push(c);
    }
    out
}

/// The turns and model calls of a conversation's `transcript` rows, oldest first, at most
/// [`PICKS`]: a hosted agent's turns (their event), and the model calls whose messages are
/// kept (what a call becomes an item from), each with what its user said last.
pub(in crate::pages) fn picks(rows: &[Map<String, Value>]) -> Vec<Pick> {
    let mut picks: Vec<Pick> = Vec::new();
    // A call's place in `picks`, its model and the last user message seen of it.
    let mut calls: Vec<(String, usize, String, String)> = Vec::new();
    for row in rows {
        let time = When::iso(&text(row, "time"));
        match text(row, "source").as_str() {
            "event" if text(row, "kind") == "turn" && text(row, "run_id").is_empty() => {
                let id = text(row, "id");
                if id.is_empty() || picks.iter().any(|p| p.name == "turn" && p.value == id) {
                    continue;
                }
                let data: Value = serde_json::from_str(&text(row, "text")).unwrap_or_default();
                let field = |name: &str| data.get(name).and_then(Value::as_str).unwrap_or_default().to_owned();
                let status = field("status");
                let state =
                    if status.is_empty() || status == "completed" { String::new() } else { format!(" ({status})") };
                let label = format!("turn: “{}”{state}", breakable(&clip(field("text").trim(), 80)));
                picks.push(Pick { name: "turn", value: id, label, time });
            }
            "message" => {
                let (trace, span) = (text(row, "trace_id"), text(row, "span_id"));
                if trace.is_empty() || span.is_empty() {
                    continue;
                }
                let key = format!("{trace}/{span}");
                let at = match calls.iter().position(|(k, ..)| *k == key) {
                    Some(at) => at,
                    None => {
                        picks.push(Pick { name: "call", value: key.clone(), label: String::new(), time });
                        calls.push((key, picks.len() - 1, text(row, "model"), String::new()));
                        calls.len() - 1
                    }
                };
                let said = text(row, "text");
                if text(row, "role") == "user" && !said.trim().is_empty() {
                    calls[at].3 = said;
                }
                if calls[at].2.is_empty() {
                    calls[at].2 = text(row, "model");
                }
            }
            _ => {}
        }
    }
    for (_, at, model, said) in calls {
        let what = if model.is_empty() { "call".to_owned() } else { format!("call {model}") };
        picks[at].label =
            if said.is_empty() { what } else { format!("{what}: “{}”", breakable(&clip(said.trim(), 80))) };
    }
    picks.truncate(PICKS);
    picks
}

/// The session page's form, with the datasets to add to.
pub(in crate::pages) async fn add_to_dataset(
    core: &Core,
    page: &PageCall,
    session_id: &str,
    picks: Vec<Pick>,
) -> AddToDataset {
    let listed =
        page.load(format!("GET {API}"), core.experiments.list_datasets(page.request(ListDatasetsRequest {}))).await;
    let (datasets, datasets_failed) = match listed {
        Ok(answer) => {
            (answer.datasets.into_iter().map(|d| (d.id, format!("{} ({})", d.name, items(d.items)))).collect(), None)
        }
        Err(err) => (Vec::new(), Some(Failure::from(err))),
    };
    AddToDataset {
        action: format!("/dashboard/sessions/{}/dataset", percent_encode(session_id)),
        datasets,
        datasets_failed,
        picks,
    }
}

/// What the session form adds: the turns and calls ticked, else the whole conversation.
fn session_items(session_id: &str, form: &Fields) -> Result<AddDatasetItemsRequest, ApiError> {
    let turn_ids = form.all("turn");
    let calls = form
        .all("call")
        .into_iter()
        .map(|value| match value.split_once('/') {
            Some((trace, span)) if !trace.is_empty() && !span.is_empty() => {
                Ok(CallRef { trace_id: trace.to_owned(), span_id: span.to_owned() })
            }
            _ => Err(ApiError::invalid_argument(format!("call: {value:?} is not a trace id and a span id"))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let whole = turn_ids.is_empty() && calls.is_empty();
    Ok(AddDatasetItemsRequest {
        turn_ids,
        calls,
        session_id: if whole { session_id.to_owned() } else { String::new() },
        ..Default::default()
    })
}

pub(super) async fn from_session(
    State(core): State<Core>,
    Path(session_id): Path<String>,
    Posted(page, form): Posted<Fields>,
) -> Response {
    let add = match session_items(&session_id, &form) {
        Ok(add) => add,
        Err(err) => return failed(&page, &err),
    };
    let what = if add.session_id.is_empty() { "the turns and calls ticked" } else { "the conversation" };
    let dataset_id = form.one("dataset_id").to_owned();
    if dataset_id.is_empty() {
        let name = form.one("new_name");
        if name.is_empty() {
            return failed(&page, &ApiError::invalid_argument("choose a dataset, or name a new one"));
        }
        let request = CreateDatasetRequest {
            name: name.to_owned(),
            description: format!("From session {session_id}."),
            items: Some(add),
        };
        let api = call(&format!("POST {API}"), &request);
        return submit_to(&page, api, core.experiments.create_dataset(page.request(request)), |answer| {
            let d = answer.dataset.unwrap_or_default();
            let notice =
                format!("Dataset “{}” created with {} from {what} of session {session_id}.", d.name, items(d.items));
            (dataset_href(&d.id), notice)
        })
        .await;
    }
    let api = call(&format!("POST {API}/{dataset_id}/items"), &add);
    let request = AddDatasetItemsRequest { dataset_id: dataset_id.clone(), ..add };
    let back = dataset_href(&dataset_id);
    submit(&page, api, core.experiments.add_dataset_items(page.request(request)), &back, |answer| {
        let d = answer.dataset.unwrap_or_default();
        format!("Added {} from {what} of session {session_id} to “{}”.", items(answer.added), d.name)
    })
    .await
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> Fields {
        Fields(pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect())
    }

    #[test]
    fn the_run_form_reads_as_the_api_takes_it() {
        let form = fields(&[
            ("csrf", "k"),
            ("agent_id", " ins_1 "),
            ("brief", "Be terse.\r\nAlways."),
            ("check_exact", "on"),
            ("contains_value", "Paris"),
            ("ignore_case", "on"),
            ("evaluator", "ev_1"),
            ("evaluator", "ev_2"),
        ]);
        assert_eq!(form.csrf(), "k");
        let req = new_experiment("ds_1", &form).unwrap();
        assert_eq!((req.agent_id.as_str(), req.brief.as_str()), ("ins_1", "Be terse.\nAlways."));
        assert_eq!(req.evaluator_ids, ["ev_1", "ev_2"]);
        let checks: Vec<_> = req.checks.iter().map(|c| (c.kind.as_str(), c.value.as_str(), c.ignore_case)).collect();
        assert_eq!(checks, [("exact", "", true), ("contains", "Paris", true)]);
        assert_eq!(
            call("POST /api/v1/experiments", &req),
            r#"POST /api/v1/experiments {"agent_id":"ins_1","brief":"Be terse.\nAlways.","checks":[{"ignore_case":true,"kind":"exact"},{"ignore_case":true,"kind":"contains","value":"Paris"}],"dataset_id":"ds_1","evaluator_ids":["ev_1","ev_2"]}"#
        );
        let err = new_experiment("ds_1", &fields(&[("brief", "x")])).unwrap_err();
        assert!(err.message().contains("agent"), "{}", err.message());
    }

    #[test]
    fn items_come_as_json_lines_or_csv() {
        let jsonl = items_text("jsonl", "{\"input\":\"a\"}\r\n{\"input\":\"b\"}").unwrap();
        assert_eq!(jsonl.jsonl, "{\"input\":\"a\"}\n{\"input\":\"b\"}");
        assert_eq!(items_text("csv", "input\nx").unwrap().csv, "input\nx");
        assert!(items_text("xml", "<a/>").is_err());
        let long = "x".repeat(500);
        let req = AddDatasetItemsRequest { jsonl: long, ..Default::default() };
        assert!(call("POST /api/v1/datasets/ds/items", &req).ends_with("…\"}"));
        assert_eq!(items(1), "1 item");
        assert_eq!(items(1200), "1,200 items");
    }

    #[test]
    fn a_session_form_adds_what_is_ticked_or_the_whole_conversation() {
        let whole = session_items("s-1", &fields(&[("dataset_id", "ds_1")])).unwrap();
        assert_eq!((whole.session_id.as_str(), whole.turn_ids.len()), ("s-1", 0));
        let some = session_items("s-1", &fields(&[("turn", "turn_1"), ("call", "ab/cd")])).unwrap();
        assert_eq!((some.session_id.as_str(), some.turn_ids.as_slice()), ("", ["turn_1".to_owned()].as_slice()));
        assert_eq!((some.calls[0].trace_id.as_str(), some.calls[0].span_id.as_str()), ("ab", "cd"));
        assert!(session_items("s-1", &fields(&[("call", "nope")])).is_err());
    }

    #[test]
    fn a_conversation_offers_its_turns_and_calls() {
        let row = |v: Value| v.as_object().unwrap().clone();
        let rows = vec![
            row(
                json!({"time": "2026-01-01T00:00:00Z", "source": "event", "kind": "turn", "run_id": "", "id": "turn_1",
                       "text": "{\"text\":\"hi there\",\"reply\":\"hello\",\"status\":\"completed\"}"}),
            ),
            row(json!({"time": "2026-01-01T00:00:01Z", "source": "message", "role": "system", "text": "Be terse.",
                       "trace_id": "t", "span_id": "s1", "model": "m"})),
            row(json!({"time": "2026-01-01T00:00:01Z", "source": "message", "role": "user", "text": "2+2?",
                       "trace_id": "t", "span_id": "s1", "model": "m"})),
            row(json!({"time": "2026-01-01T00:00:01Z", "source": "message", "role": "assistant", "text": "4",
                       "trace_id": "t", "span_id": "s1", "model": "m"})),
            row(
                json!({"time": "2026-01-01T00:00:02Z", "source": "span", "kind": "chat", "trace_id": "t", "span_id": "s2"}),
            ),
        ];
        let picks = picks(&rows);
        let shown: Vec<_> = picks.iter().map(|p| (p.name, p.value.as_str(), p.label.as_str())).collect();
        assert_eq!(shown, [("turn", "turn_1", "turn: “hi there”"), ("call", "t/s1", "call m: “2+2?”")]);
        assert_eq!(breakable(&"x".repeat(30)), format!("{}\u{200b}{}", "x".repeat(24), "x".repeat(6)));
        assert_eq!(breakable("short words stay"), "short words stay");
    }
}
