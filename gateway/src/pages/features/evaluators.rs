//! `/dashboard/evaluators`: the LLM judges, each with its status (a spent budget shown as
//! such), sampling and spending, and a form for a new one; `/dashboard/evaluators/{id}`:
//! one judge, its forms (pause or resume; sample rate and budget; prompt and judge model),
//! Delete, and its latest judgements linked to the calls they judged
//! (`/api/v1/evaluators` and its writes).

use askama::Template;
use axum::{
    extract::{Path, State},
    response::Response,
};
use http::StatusCode;
use roost_proto::{
    ApiError, ErrorReason,
    v1::{
        CreateEvaluatorRequest, DeleteEvaluatorRequest, Evaluator, EvaluatorFilter, GetEvaluatorRequest, Judgement,
        ListEvaluatorsRequest, UpdateEvaluatorRequest,
    },
};
use serde::Deserialize;

use super::{alerts::Confirm, flag, input, number, rest};
use crate::{
    Core,
    pages::{
        Failure, Message, When, count,
        forms::{Posted, csrf_field, failed, submit, submit_to},
        layout::{Chrome, PageCall, percent_encode},
        usd, usd_exact,
    },
};

const HERE: &str = "/dashboard/evaluators";

/// The REST path of the evaluators, for the footer (the pages call the core directly).
const API: &str = "/api/v1/evaluators";

#[derive(Template)]
#[template(path = "evaluators.html")]
struct EvaluatorsPage {
    chrome: Chrome,
    evaluators: Result<Vec<Row>, Failure>,
}

impl EvaluatorsPage {
    /// How many evaluators stopped because their budget is spent (the page says so first).
    fn spent(&self) -> usize {
        self.evaluators.as_ref().map_or(0, |rows| rows.iter().filter(|r| r.budget_spent).count())
    }
}

#[derive(Template)]
#[template(path = "evaluator.html")]
struct EvaluatorPage {
    chrome: Chrome,
    evaluator: Result<Detail, Failure>,
}

struct Detail {
    e: Row,
    judgements: Vec<JudgementRow>,
}

/// An evaluator as the pages show it.
struct Row {
    id: String,
    href: String,
    name: String,
    score_name: String,
    model: String,
    prompt: String,
    /// How its answers are read: `number from 0 to 1`, `category: a, b`.
    output: String,
    /// Which calls it takes: `service app · model m` or `every model call`.
    filter: String,
    enabled: bool,
    /// `(chip class, text)` of its status.
    status: (&'static str, &'static str),
    detail: String,
    budget_spent: bool,
    /// Paused with its budget spent too: resuming alone will not make it judge.
    paused_and_spent: bool,
    sample: String,
    /// The sample rate as the form's percentage.
    sample_input: String,
    judged: String,
    failed: String,
    has_failures: bool,
    spent: String,
    budget: String,
    /// The budget in USD as the form's value.
    budget_input: String,
    /// The share of the budget spent, as a whole percentage (at most 100).
    used: String,
    created: When,
}

struct JudgementRow {
    time: When,
    href: String,
    trace_id: String,
    span_id: String,
    /// `(chip class, text)` of its status.
    status: (&'static str, String),
    value: String,
    attempts: String,
    error: String,
    cost: String,
}

/// A share from 0 to 1 as a percentage, to 4 decimals at most (`0.07` → `7`, not
/// `7.000000000000001`).
fn percent(share: f64) -> String {
    input((share * 100.0 * 10_000.0).round() / 10_000.0)
}

fn row(e: Evaluator) -> Row {
    let status = match e.status.as_str() {
        "active" => ("active", "active"),
        "paused" => ("paused", "paused"),
        "budget_spent" => ("warn", "Budget spent"),
        _ => ("", "unknown"),
    };
    let out_of_budget = e.spent_nanocents >= e.budget_nanocents;
    let output = if e.output == "category" {
        format!("category: {}", e.categories.join(", "))
    } else {
        format!("number from {} to {}", input(e.min), input(e.max))
    };
    let filter = e.filter.unwrap_or_default();
    let parts: Vec<String> = [
        ("service", &filter.service),
        ("model", &filter.model),
        ("agent", &filter.agent_id),
        ("session", &filter.session_id),
    ]
    .into_iter()
    .filter(|(_, v)| !v.is_empty())
    .map(|(k, v)| format!("{k} {v}"))
    .collect();
    let used = if e.budget_nanocents > 0 {
        (e.spent_nanocents as f64 / e.budget_nanocents as f64 * 100.0).min(100.0)
    } else {
        100.0
    };
    Row {
        href: format!("{HERE}/{}", percent_encode(&e.id)),
        score_name: if e.score_name.is_empty() || e.score_name == e.name { String::new() } else { e.score_name },
        output,
        filter: if parts.is_empty() { "every model call".into() } else { parts.join(" · ") },
        budget_spent: e.status == "budget_spent",
        paused_and_spent: !e.enabled && out_of_budget,
        status,
        detail: e.status_detail,
        sample: format!("{}%", percent(e.sample_rate)),
        sample_input: percent(e.sample_rate),
        judged: count(e.judged),
        failed: count(e.failed),
        has_failures: e.failed > 0,
        spent: usd(e.spent_usd),
        budget: usd(e.budget_usd),
        budget_input: input(e.budget_usd),
        used: format!("{used:.0}"),
        created: When::timestamp(e.created_at.as_ref()),
        enabled: e.enabled,
        id: e.id,
        name: e.name,
        model: e.model,
        prompt: e.prompt,
    }
}

/// A judgement's score as text: a number as the form writes it, a category as it is.
fn value(value: Option<&prost_types::Value>) -> String {
    match value.map(roost_proto::json::value::to_json) {
        None | Some(serde_json::Value::Null) => String::new(),
        Some(serde_json::Value::String(s)) => s,
        Some(serde_json::Value::Number(n)) => n.as_f64().map_or_else(|| n.to_string(), input),
        Some(other) => other.to_string(),
    }
}

fn judgement_row(j: Judgement) -> JudgementRow {
    let status = match j.status.as_str() {
        "done" => ("ok", "judged".to_owned()),
        "failed" => ("fail", "failed".to_owned()),
        other => ("", other.to_owned()),
    };
    JudgementRow {
        time: When::timestamp(j.time.as_ref()),
        href: format!("/dashboard/traces/{}?span={}", percent_encode(&j.trace_id), percent_encode(&j.span_id)),
        value: value(j.value.as_ref()),
        attempts: count(j.attempts),
        cost: if j.cost_nanocents == 0 { "$0".into() } else { usd_exact(j.cost_nanocents) },
        status,
        error: j.error,
        trace_id: j.trace_id,
        span_id: j.span_id,
    }
}

pub(super) async fn page(State(core): State<Core>, page: PageCall) -> Response {
    let answer =
        page.load(format!("GET {API}"), core.evaluators.list_evaluators(page.request(ListEvaluatorsRequest {}))).await;
    let evaluators = answer.map_err(Failure::from).map(|list| list.evaluators.into_iter().map(row).collect());
    page.render(&EvaluatorsPage { chrome: page.chrome("Evaluators", HERE), evaluators })
}

pub(super) async fn detail(State(core): State<Core>, Path(id): Path<String>, page: PageCall) -> Response {
    let request = GetEvaluatorRequest { id: id.clone() };
    let answer = page.load(format!("GET {API}/{id}"), core.evaluators.get_evaluator(page.request(request))).await;
    match answer {
        Err(err) if err.reason() == ErrorReason::NotFound => {
            let message = Message {
                chrome: page.chrome("Evaluator not found", HERE),
                heading: "No such evaluator".into(),
                detail: format!(
                    "There is no evaluator {id} (it may have been deleted). The evaluators page lists every one."
                ),
                back: Some((HERE.to_owned(), "All evaluators".to_owned())),
            };
            page.render_with(StatusCode::NOT_FOUND, &message)
        }
        answer => {
            let title = match &answer {
                Ok(a) => a.evaluator.as_ref().map_or_else(|| id.clone(), |e| e.name.clone()),
                Err(_) => id.clone(),
            };
            let evaluator = answer.map_err(Failure::from).map(|a| Detail {
                e: row(a.evaluator.unwrap_or_default()),
                judgements: a.judgements.into_iter().map(judgement_row).collect(),
            });
            page.render(&EvaluatorPage { chrome: page.chrome(format!("Evaluator {title}"), HERE), evaluator })
        }
    }
}

/// A posted sample rate, a percentage above 0 and at most 100, as the API's share (0–1);
/// empty is `None`. Checked here so the error speaks of percentages, as the form does.
fn sample_rate(value: Option<&str>) -> Result<Option<f64>, ApiError> {
    match number::<f64>("sample rate (%)", value)? {
        None => Ok(None),
        Some(p) if p > 0.0 && p <= 100.0 => Ok(Some(p / 100.0)),
        Some(p) => Err(ApiError::invalid_argument(format!(
            "sample rate (%): {} is not a percentage above 0 and at most 100",
            input(p)
        ))),
    }
}

/// A posted textarea with its lines ended by `\n`: browsers send `\r\n`, and the prompt
/// should read the same to the judge (and over REST) as one written there.
fn lines(text: &str) -> String {
    text.replace("\r\n", "\n")
}

/// The new-evaluator form: every field of `Evaluator` a person sets.
#[derive(Debug, Deserialize)]
pub(super) struct NewEvaluator {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    score_name: String,
    #[serde(default)]
    model: String,
    #[serde(default)]
    prompt: String,
    #[serde(default)]
    output: String,
    /// Comma-separated.
    #[serde(default)]
    categories: String,
    #[serde(default)]
    min: String,
    #[serde(default)]
    max: String,
    /// A percentage.
    #[serde(default)]
    sample_rate: String,
    #[serde(default)]
    service: String,
    #[serde(default)]
    filter_model: String,
    #[serde(default)]
    agent_id: String,
    #[serde(default)]
    session_id: String,
    #[serde(default)]
    budget_usd: String,
}

fn new_evaluator(form: &NewEvaluator) -> Result<CreateEvaluatorRequest, ApiError> {
    let output = form.output.trim().to_owned();
    let categories = if output == "category" {
        form.categories.split(',').map(str::trim).filter(|c| !c.is_empty()).map(str::to_owned).collect()
    } else {
        Vec::new()
    };
    let min = number("min", Some(&form.min))?;
    let max = number("max", Some(&form.max))?;
    // One bound given: the other keeps its default (0 to 1), as the API has it.
    let (min, max) = match (min, max) {
        (None, None) => (0.0, 0.0),
        (min, max) => (min.unwrap_or(0.0), max.unwrap_or(1.0)),
    };
    let budget = number::<f64>("budget (USD)", Some(&form.budget_usd))?
        .ok_or_else(|| ApiError::invalid_argument("budget (USD) is required: judge calls are paid for from it"))?;
    Ok(CreateEvaluatorRequest {
        evaluator: Some(Evaluator {
            name: form.name.trim().to_owned(),
            score_name: form.score_name.trim().to_owned(),
            model: form.model.trim().to_owned(),
            prompt: lines(&form.prompt),
            output,
            categories,
            min,
            max,
            sample_rate: sample_rate(Some(&form.sample_rate))?.unwrap_or_default(),
            filter: Some(EvaluatorFilter {
                service: form.service.trim().to_owned(),
                model: form.filter_model.trim().to_owned(),
                agent_id: form.agent_id.trim().to_owned(),
                session_id: form.session_id.trim().to_owned(),
            }),
            budget_usd: budget,
            ..Default::default()
        }),
    })
}

pub(super) async fn create(State(core): State<Core>, Posted(page, form): Posted<NewEvaluator>) -> Response {
    let request = match new_evaluator(&form) {
        Ok(request) => request,
        Err(err) => return failed(&page, &err),
    };
    let api = create_call(request.evaluator.as_ref().unwrap_or(&Evaluator::default()));
    submit_to(&page, api, core.evaluators.create_evaluator(page.request(request)), |answer| {
        let e = answer.evaluator.unwrap_or_default();
        let path = format!("{HERE}/{}", percent_encode(&e.id));
        (path, format!("Evaluator “{}” ({}) created: it judges new matching calls with {}.", e.name, e.id, e.model))
    })
    .await
}

/// The create call as it reads over REST, for the footer: the evaluator's fields that the
/// form set (an `Evaluator` serialises every field, roost's own counters among them).
fn create_call(e: &Evaluator) -> String {
    let mut body = serde_json::Map::new();
    let mut text = |key: &str, value: &str| {
        if !value.is_empty() {
            body.insert(key.to_owned(), value.into());
        }
    };
    text("name", &e.name);
    text("score_name", &e.score_name);
    text("model", &e.model);
    text("prompt", &e.prompt);
    text("output", &e.output);
    if !e.categories.is_empty() {
        body.insert("categories".into(), e.categories.clone().into());
    }
    for (key, value) in [("min", e.min), ("max", e.max), ("sample_rate", e.sample_rate), ("budget_usd", e.budget_usd)] {
        if value != 0.0 {
            body.insert(key.into(), value.into());
        }
    }
    let filter = e.filter.clone().unwrap_or_default();
    let filter: serde_json::Map<String, serde_json::Value> = [
        ("service", filter.service),
        ("model", filter.model),
        ("agent_id", filter.agent_id),
        ("session_id", filter.session_id),
    ]
    .into_iter()
    .filter(|(_, v)| !v.is_empty())
    .map(|(k, v)| (k.to_owned(), v.into()))
    .collect();
    if !filter.is_empty() {
        body.insert("filter".into(), filter.into());
    }
    format!("POST {API} {}", serde_json::json!({ "evaluator": body }))
}

/// Where an evaluator's forms go back to: the list, or its own page (the default).
fn back(id: &str, back: &str) -> String {
    if back == HERE { HERE.to_owned() } else { format!("{HERE}/{}", percent_encode(id)) }
}

/// An evaluator's change forms (pause or resume; sample rate and budget; prompt and judge
/// model): fields absent from the post, or empty, stay as they are.
#[derive(Debug, Deserialize)]
pub(super) struct EvaluatorEdit {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    enabled: Option<String>,
    /// A percentage.
    #[serde(default)]
    sample_rate: Option<String>,
    #[serde(default)]
    budget_usd: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    back: String,
}

csrf_field!(NewEvaluator, EvaluatorEdit);

fn evaluator_edit(id: String, form: &EvaluatorEdit) -> Result<UpdateEvaluatorRequest, ApiError> {
    let text = |v: &Option<String>| v.as_deref().map(str::trim).filter(|v| !v.is_empty()).map(str::to_owned);
    Ok(UpdateEvaluatorRequest {
        id,
        enabled: flag("enabled", form.enabled.as_deref())?,
        sample_rate: sample_rate(form.sample_rate.as_deref())?,
        budget_nanocents: None,
        budget_usd: number("budget (USD)", form.budget_usd.as_deref())?,
        model: text(&form.model),
        // The prompt as written (its blank lines are the author's); empty keeps it.
        prompt: form.prompt.as_deref().filter(|p| !p.trim().is_empty()).map(lines),
    })
}

/// The notice after a change: what the evaluator is now.
fn changed(request: &UpdateEvaluatorRequest, e: &Evaluator) -> String {
    let what = match request.enabled {
        Some(false) => "paused".to_owned(),
        Some(true) if e.status == "budget_spent" => "resumed, but its budget is spent: raise it to judge again".into(),
        Some(true) => "resumed".to_owned(),
        None => "updated".to_owned(),
    };
    format!("Evaluator “{}” {what}.", e.name)
}

pub(super) async fn update(
    State(core): State<Core>,
    Path(id): Path<String>,
    Posted(page, form): Posted<EvaluatorEdit>,
) -> Response {
    let to = back(&id, &form.back);
    let request = match evaluator_edit(id.clone(), &form) {
        Ok(request) => request,
        Err(err) => return failed(&page, &err),
    };
    let api = rest(&format!("POST {API}/{id}"), &request);
    let asked = request.clone();
    submit(&page, api, core.evaluators.update_evaluator(page.request(request)), &to, |answer| {
        changed(&asked, &answer.evaluator.unwrap_or_default())
    })
    .await
}

pub(super) async fn delete(
    State(core): State<Core>,
    Path(id): Path<String>,
    Posted(page, _): Posted<Confirm>,
) -> Response {
    let request = DeleteEvaluatorRequest { id: id.clone() };
    let api = format!("DELETE {API}/{id}");
    submit(&page, api, core.evaluators.delete_evaluator(page.request(request)), HERE, |_| {
        format!("Evaluator {id} deleted, with its judgements (the scores it gave stay).")
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_rates_are_percentages() {
        assert_eq!(sample_rate(Some("10")).unwrap(), Some(0.1));
        assert_eq!(sample_rate(Some("100")).unwrap(), Some(1.0));
        assert_eq!(sample_rate(Some("")).unwrap(), None);
        for bad in ["0", "150", "-5", "most"] {
            let err = sample_rate(Some(bad)).unwrap_err();
            assert!(err.message().contains("sample rate (%)"), "{bad}: {}", err.message());
        }
        assert_eq!(percent(0.07), "7");
        assert_eq!(percent(0.125), "12.5");
    }

    #[test]
    fn the_new_evaluator_form_reads_as_the_api_takes_it() {
        let form = NewEvaluator {
            csrf: String::new(),
            name: " tone ".into(),
            score_name: String::new(),
            model: "gpt-4o-mini".into(),
            prompt: "{{output}}".into(),
            output: "category".into(),
            categories: "friendly, rude,, ".into(),
            min: String::new(),
            max: "5".into(),
            sample_rate: "25".into(),
            service: "app".into(),
            filter_model: String::new(),
            agent_id: String::new(),
            session_id: String::new(),
            budget_usd: "0.5".into(),
        };
        let e = new_evaluator(&form).unwrap().evaluator.unwrap();
        assert_eq!(
            (e.name.as_str(), e.categories.as_slice()),
            ("tone", ["friendly".to_owned(), "rude".into()].as_slice())
        );
        assert_eq!((e.min, e.max, e.sample_rate, e.budget_usd), (0.0, 5.0, 0.25, 0.5));
        assert_eq!(e.filter.as_ref().unwrap().service, "app");
        assert_eq!(
            create_call(&e),
            r#"POST /api/v1/evaluators {"evaluator":{"budget_usd":0.5,"categories":["friendly","rude"],"filter":{"service":"app"},"max":5.0,"model":"gpt-4o-mini","name":"tone","output":"category","prompt":"{{output}}","sample_rate":0.25}}"#
        );
        let err = new_evaluator(&NewEvaluator { budget_usd: String::new(), ..form }).unwrap_err();
        assert!(err.message().contains("budget"), "{}", err.message());
    }

    #[test]
    fn a_spent_budget_reads_as_such() {
        let e = Evaluator {
            id: "ev_1".into(),
            name: "correctness".into(),
            status: "budget_spent".into(),
            enabled: true,
            budget_nanocents: 1_000_000,
            spent_nanocents: 2_100_000,
            budget_usd: 0.00001,
            spent_usd: 0.000021,
            sample_rate: 1.0,
            ..Default::default()
        };
        let r = row(e);
        assert_eq!(r.status, ("warn", "Budget spent"));
        assert!(r.budget_spent && !r.paused_and_spent);
        assert_eq!((r.spent.as_str(), r.budget.as_str(), r.used.as_str()), ("$0.000021", "$0.00001", "100"));
        assert_eq!(
            (r.sample.as_str(), r.budget_input.as_str(), r.filter.as_str()),
            ("100%", "0.00001", "every model call")
        );
        assert_eq!(r.href, "/dashboard/evaluators/ev_1");
    }
}
