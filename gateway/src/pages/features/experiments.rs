//! `/dashboard/experiments/{id}`: one run of a dataset against a hosted agent: its status,
//! Cancel while it is queued or running, its aggregates (answered and failed items,
//! latency, tokens, cost, each check's pass rate, each score's mean) and its result per
//! item. While it is live the page reloads itself every few seconds (a `<meta refresh>`,
//! so it works without JavaScript), and stops once the run has ended.
//!
//! `/dashboard/experiments/compare?a=ex_…&b=ex_…`: two runs of one dataset side by side,
//! their aggregates in two columns, then item by item (joined on the item) each run's
//! answer, checks, latency and cost, the items whose checks differ marked. The dataset
//! page's form sends `?ids=ex_…&ids=ex_…` instead (two ticked checkboxes): then A is the
//! earlier run. Runs of different datasets are refused (400), as is anything but two runs.
//! (`GET /api/v1/experiments/{id}`, `POST /api/v1/experiments/{id}/cancel`.)

use std::collections::{BTreeMap, BTreeSet};

use askama::Template;
use axum::{
    extract::{Path, Query, State},
    response::Response,
};
use http::StatusCode;
use roost_proto::{
    ErrorReason,
    v1::{
        CancelExperimentRequest, Experiment, ExperimentCheck, ExperimentResult, ExperimentSummary,
        GetExperimentRequest, ListEvaluatorsRequest,
    },
};

use super::{alerts::Confirm, clip, datasets::dataset_href};
use crate::{
    Core,
    pages::{
        Failure, Message, When, count, duration_ms,
        feedback::value_text,
        forms::{Posted, submit},
        layout::{Chrome, PageCall, percent_encode},
        sessions::{Stat, session_href},
        tokens, usd_exact,
    },
};

/// The nav entry these pages are under.
const NAV: &str = "/dashboard/datasets";
const API: &str = "/api/v1/experiments";
/// Characters of an input, expected output or answer in a table cell.
const CELL_CHARS: usize = 400;
/// Seconds between reloads of a live run's page.
pub(super) const REFRESH_SECS: u32 = 3;

/// An experiment's page.
pub(super) fn experiment_href(id: &str) -> String {
    format!("/dashboard/experiments/{}", percent_encode(id))
}

/// An experiment as the lists show it (the datasets and dataset pages).
pub(super) struct RunRow {
    pub(super) id: String,
    pub(super) href: String,
    pub(super) name: String,
    pub(super) dataset_href: String,
    /// Its dataset's name (its id, should the name be missing).
    pub(super) dataset: String,
    pub(super) agent_id: String,
    pub(super) agent_href: String,
    /// It runs against a temporary copy of the agent.
    pub(super) copy: bool,
    /// What the copy changes: `brief “Be terse.” · model gpt-4o-mini`, or empty.
    pub(super) variant: String,
    /// `(chip class, text)`.
    pub(super) status: (&'static str, String),
    /// Items answered of all: `2 / 3`.
    pub(super) progress: String,
    pub(super) failed: String,
    pub(super) has_failed: bool,
    pub(super) latency: String,
    pub(super) cost: String,
    pub(super) created: When,
}

/// A status's chip class.
fn status_chip(status: &str) -> &'static str {
    match status {
        "running" => "running",
        "completed" => "completed",
        "failed" => "failed",
        "cancelled" => "warn",
        _ => "",
    }
}

/// A turn's latency: whole milliseconds are all a turn records, so under one reads as such.
fn latency(ms: f64) -> String {
    if ms < 1.0 { "< 1 ms".into() } else { duration_ms(ms) }
}

/// Money kept in nanocents: `$0`, else exact.
fn cost(nanocents: i64) -> String {
    if nanocents == 0 { "$0".into() } else { usd_exact(nanocents) }
}

/// A share from 0 to 1 as a percentage, to one decimal at most: `67%`, `66.7%`.
fn share(value: f64) -> String {
    let percent = (value * 1000.0).round() / 10.0;
    let text = format!("{percent:.1}");
    format!("{}%", text.strip_suffix(".0").unwrap_or(&text))
}

/// A score's mean, to two decimals at most.
fn mean(value: f64) -> String {
    value_text(&serde_json::json!(value))
}

/// A check's name as a person reads it: `exact_match` → `exact match`, `contains:Paris/i`
/// → `contains “Paris” (any case)`.
pub(super) fn check_label(name: &str) -> String {
    let (base, any_case) = match name.strip_suffix("/i") {
        Some(base) => (base, " (any case)"),
        None => (name, ""),
    };
    let what = match base {
        "exact_match" => "exact match".to_owned(),
        "contains" => "contains expected".to_owned(),
        other => match other.strip_prefix("contains:") {
            Some(value) => format!("contains “{value}”"),
            None => other.to_owned(),
        },
    };
    format!("{what}{any_case}")
}

/// What a copy changes, in a few words.
fn variant(e: &Experiment) -> String {
    let mut parts = Vec::new();
    if !e.brief.is_empty() {
        parts.push(format!("brief “{}”", clip(e.brief.trim(), 60)));
    }
    if !e.model.is_empty() {
        parts.push(format!("model {}", e.model));
    }
    parts.join(" · ")
}

pub(super) fn run_row(e: &Experiment) -> RunRow {
    let summary = e.summary.clone().unwrap_or_default();
    RunRow {
        id: e.id.clone(),
        href: experiment_href(&e.id),
        name: e.name.clone(),
        dataset_href: dataset_href(&e.dataset_id),
        dataset: if e.dataset_name.is_empty() { e.dataset_id.clone() } else { e.dataset_name.clone() },
        agent_id: e.agent_id.clone(),
        agent_href: session_href(&e.agent_id),
        copy: e.copy,
        variant: variant(e),
        status: (status_chip(&e.status), e.status.clone()),
        progress: format!("{} / {}", count(e.completed), count(e.items)),
        failed: count(e.failed),
        has_failed: e.failed > 0,
        latency: if e.completed > 0 { latency(summary.latency_mean_ms) } else { "–".into() },
        cost: cost(summary.cost_nanocents),
        created: When::timestamp(e.created_at.as_ref()),
    }
}

// ---------------------------------------------------------------------------------------
// One experiment.

#[derive(Template)]
#[template(path = "experiment.html")]
struct ExperimentPage {
    chrome: Chrome,
    /// The run is queued or running: the page reloads itself.
    live: bool,
    refresh_secs: u32,
    /// Where it reloads: itself, without a form's notice.
    refresh_to: String,
    experiment: Result<Detail, Failure>,
}

struct Detail {
    run: RunRow,
    detail: String,
    brief: String,
    model: String,
    copy_id: String,
    /// The evaluators grading it: (their page, their name, else their id).
    evaluators: Vec<(String, String)>,
    /// Its checks, as a person reads them.
    checks: String,
    finished: When,
    stats: Vec<Stat>,
    /// (check, pass rate), by name.
    check_rates: Vec<(String, String)>,
    /// (score, mean), by name.
    score_means: Vec<(String, String)>,
    judge_cost: String,
    results: Vec<ResultRow>,
    /// Some result has a score or a score's error (else the table has no Scores column).
    has_scores: bool,
}

/// A check's outcome on an item.
struct Mark {
    label: String,
    passed: bool,
}

struct ResultRow {
    position: String,
    input: String,
    expected: String,
    output: String,
    status: (&'static str, String),
    error: String,
    latency: String,
    tokens: String,
    cost: String,
    checks: Vec<Mark>,
    /// `name value` of each score, then why an evaluator gave none.
    scores: Vec<String>,
    /// It failed, or failed a check.
    bad: bool,
}

/// A result's checks in the order its experiment lists them (`order`: their names); a
/// result's map comes in name order.
fn marks(checks: &BTreeMap<String, bool>, order: &[String]) -> Vec<Mark> {
    in_order(checks, order)
        .into_iter()
        .map(|(name, passed)| Mark { label: check_label(name), passed: *passed })
        .collect()
}

/// A map keyed by check names in the experiment's order (`order`), names it lacks last.
fn in_order<'a, T>(by_name: &'a BTreeMap<String, T>, order: &[String]) -> Vec<(&'a String, &'a T)> {
    let mut named: Vec<(&String, &T)> = by_name.iter().collect();
    named.sort_by_key(|(name, _)| order.iter().position(|o| o == *name).unwrap_or(order.len()));
    named
}

/// The names an experiment's checks give their results, in its order.
fn check_names(e: &Experiment) -> Vec<String> {
    e.checks.iter().map(ExperimentCheck::result_name).collect()
}

fn scores(r: &ExperimentResult) -> Vec<String> {
    let given = r.scores.as_ref().map(roost_proto::json::value::struct_to_map).unwrap_or_default();
    let mut out: Vec<String> = given.iter().map(|(name, value)| format!("{name} {}", value_text(value))).collect();
    out.extend(r.score_errors.iter().map(|(name, why)| format!("{name}: no grade ({why})")));
    out
}

fn result_row(r: &ExperimentResult, order: &[String]) -> ResultRow {
    let answered = r.status == "completed";
    ResultRow {
        position: count(r.position),
        input: clip(&r.input, CELL_CHARS),
        expected: clip(&r.expected, CELL_CHARS),
        output: clip(&r.output, CELL_CHARS),
        status: (status_chip(&r.status), r.status.clone()),
        error: r.error.clone(),
        latency: if answered || r.latency_ms > 0 { latency(r.latency_ms as f64) } else { "–".into() },
        tokens: format!("{} in · {} out", tokens(r.input_tokens), tokens(r.output_tokens)),
        cost: cost(r.cost_nanocents),
        checks: marks(&r.checks, order),
        scores: scores(r),
        bad: r.status == "failed" || r.checks.values().any(|passed| !passed),
    }
}

fn stats(e: &Experiment, s: &ExperimentSummary) -> Vec<Stat> {
    let answered = e.completed > 0;
    let time = |ms: f64| if answered { latency(ms) } else { "–".into() };
    vec![
        Stat::new("Items", count(e.items)),
        Stat::new("Answered", count(e.completed)),
        Stat { label: "Failed", value: count(e.failed), alert: e.failed > 0 },
        Stat::new("Latency mean", time(s.latency_mean_ms)),
        Stat::new("Latency p50", time(s.latency_p50_ms)),
        Stat::new("Latency p95", time(s.latency_p95_ms)),
        Stat::new("Input tokens", tokens(s.input_tokens)),
        Stat::new("Output tokens", tokens(s.output_tokens)),
        Stat::new("Cost", cost(s.cost_nanocents)),
    ]
}

fn detail_of(e: Experiment, results: &[ExperimentResult]) -> Detail {
    let summary = e.summary.clone().unwrap_or_default();
    let order = check_names(&e);
    let checks: Vec<String> = order.iter().map(|name| check_label(name)).collect();
    Detail {
        run: run_row(&e),
        stats: stats(&e, &summary),
        check_rates: in_order(&summary.checks, &order)
            .into_iter()
            .map(|(name, rate)| (check_label(name), share(*rate)))
            .collect(),
        score_means: summary.scores.iter().map(|(name, value)| (name.clone(), mean(*value))).collect(),
        judge_cost: if e.evaluator_ids.is_empty() { String::new() } else { cost(summary.judge_cost_nanocents) },
        results: results.iter().map(|r| result_row(r, &order)).collect(),
        has_scores: !e.evaluator_ids.is_empty()
            || results
                .iter()
                .any(|r| r.scores.as_ref().is_some_and(|s| !s.fields.is_empty()) || !r.score_errors.is_empty()),
        detail: e.status_detail,
        brief: e.brief,
        model: e.model,
        copy_id: e.copy_id,
        evaluators: e
            .evaluator_ids
            .iter()
            .map(|id| (format!("/dashboard/evaluators/{}", percent_encode(id)), id.clone()))
            .collect(),
        checks: if checks.is_empty() { "none".into() } else { checks.join(", ") },
        finished: When::timestamp(e.finished_at.as_ref()),
    }
}

/// The page for a run that is not there.
fn missing(page: &PageCall, id: &str) -> Response {
    let message = Message {
        chrome: page.chrome("Experiment not found", NAV),
        heading: "No such experiment".into(),
        detail: format!(
            "There is no experiment {id} (its dataset may have been deleted, with its experiments). The datasets page \
             lists the latest ones."
        ),
        back: Some((NAV.to_owned(), "Datasets".to_owned())),
    };
    page.render_with(StatusCode::NOT_FOUND, &message)
}

pub(super) async fn detail(State(core): State<Core>, Path(id): Path<String>, page: PageCall) -> Response {
    let request = GetExperimentRequest { id: id.clone() };
    let answer = page.load(format!("GET {API}/{id}"), core.experiments.get_experiment(page.request(request))).await;
    match answer {
        Err(err) if err.reason() == ErrorReason::NotFound => missing(&page, &id),
        answer => {
            let (title, live) = match &answer {
                Ok(a) => a.experiment.as_ref().map_or((id.clone(), false), |e| {
                    (e.name.clone(), matches!(e.status.as_str(), "queued" | "running"))
                }),
                Err(_) => (id.clone(), false),
            };
            let mut experiment =
                answer.map_err(Failure::from).map(|a| detail_of(a.experiment.unwrap_or_default(), &a.results));
            // The evaluators by name (a deleted one keeps its id).
            if let Ok(d) = &mut experiment
                && !d.evaluators.is_empty()
            {
                let listed = core.evaluators.list_evaluators(page.request(ListEvaluatorsRequest {}));
                if let Ok(list) = page.load("GET /api/v1/evaluators", listed).await {
                    for (_, label) in &mut d.evaluators {
                        if let Some(e) = list.evaluators.iter().find(|e| e.id == *label) {
                            *label = e.name.clone();
                        }
                    }
                }
            }
            let chrome = page.chrome(format!("Experiment {title}"), NAV);
            let refresh_to = experiment_href(&id);
            page.render(&ExperimentPage { chrome, live, refresh_secs: REFRESH_SECS, refresh_to, experiment })
        }
    }
}

pub(super) async fn cancel(
    State(core): State<Core>,
    Path(id): Path<String>,
    Posted(page, _): Posted<Confirm>,
) -> Response {
    let request = CancelExperimentRequest { id: id.clone() };
    let back = experiment_href(&id);
    submit(
        &page,
        format!("POST {API}/{id}/cancel"),
        core.experiments.cancel_experiment(page.request(request)),
        &back,
        |a| {
            let e = a.experiment.unwrap_or_default();
            format!("Experiment “{}” cancelled: it stops after the item it is on.", e.name)
        },
    )
    .await
}

// ---------------------------------------------------------------------------------------
// Two runs side by side.

#[derive(Template)]
#[template(path = "experiments_compare.html")]
struct ComparePage {
    chrome: Chrome,
    a: RunRow,
    b: RunRow,
    /// The same comparison the other way round.
    swap_href: String,
    metrics: Vec<Metric>,
    items: Vec<Pair>,
    /// How many items' checks (or outcome) differ.
    differing: usize,
}

/// A row of the aggregates table.
struct Metric {
    label: String,
    a: String,
    b: String,
    differs: bool,
}

/// One item in both runs.
struct Pair {
    position: String,
    input: String,
    expected: String,
    /// Run A's outcome, then B's (none: not run there).
    sides: [Option<Side>; 2],
    /// Its outcome or a check's pass or fail differs between the runs.
    differs: bool,
}

/// One run's outcome for an item.
struct Side {
    output: String,
    status: (&'static str, String),
    error: String,
    checks: Vec<Mark>,
    latency: String,
    cost: String,
    scores: Vec<String>,
}

fn side(r: &ExperimentResult, order: &[String]) -> Side {
    let row = result_row(r, order);
    Side {
        output: row.output,
        status: row.status,
        error: row.error,
        checks: row.checks,
        latency: row.latency,
        cost: row.cost,
        scores: row.scores,
    }
}

/// Whether an item came out differently: answered in one run and not the other, or a check
/// both ran that passed in one and failed in the other.
fn differs(a: &ExperimentResult, b: &ExperimentResult) -> bool {
    (a.status == "completed") != (b.status == "completed")
        || a.checks.iter().any(|(name, passed)| b.checks.get(name).is_some_and(|other| other != passed))
}

fn metrics(a: &Experiment, b: &Experiment) -> Vec<Metric> {
    let (sa, sb) = (a.summary.clone().unwrap_or_default(), b.summary.clone().unwrap_or_default());
    let mut rows = Vec::new();
    let mut row = |label: &str, a: String, b: String| {
        let differs = a != b;
        rows.push(Metric { label: label.to_owned(), a, b, differs });
    };
    let on = |e: &Experiment| if e.copy { format!("a copy of {}", e.agent_id) } else { e.agent_id.clone() };
    let or_own = |value: &str, own: &str| if value.is_empty() { own.to_owned() } else { value.to_owned() };
    row("Agent", on(a), on(b));
    row(
        "Brief",
        or_own(&clip(a.brief.trim(), 200), "the agent's own"),
        or_own(&clip(b.brief.trim(), 200), "the agent's own"),
    );
    row("Model", or_own(&a.model, "the agent's own"), or_own(&b.model, "the agent's own"));
    row("Status", a.status.clone(), b.status.clone());
    row(
        "Answered",
        format!("{} / {}", count(a.completed), count(a.items)),
        format!("{} / {}", count(b.completed), count(b.items)),
    );
    row("Failed", count(a.failed), count(b.failed));
    let time = |e: &Experiment, ms: f64| if e.completed > 0 { latency(ms) } else { "–".into() };
    row("Latency mean", time(a, sa.latency_mean_ms), time(b, sb.latency_mean_ms));
    row("Latency p95", time(a, sa.latency_p95_ms), time(b, sb.latency_p95_ms));
    let used = |s: &ExperimentSummary| format!("{} in · {} out", tokens(s.input_tokens), tokens(s.output_tokens));
    row("Tokens", used(&sa), used(&sb));
    row("Cost", cost(sa.cost_nanocents), cost(sb.cost_nanocents));
    // In A's order of checks, then any of B's that A lacks.
    let mut order = check_names(a);
    order.extend(check_names(b));
    let mut names: Vec<&String> =
        sa.checks.keys().chain(sb.checks.keys()).collect::<BTreeSet<_>>().into_iter().collect();
    names.sort_by_key(|name| order.iter().position(|o| o == *name).unwrap_or(order.len()));
    for name in names {
        let rate = |s: &ExperimentSummary| s.checks.get(name).map_or_else(|| "–".to_owned(), |r| share(*r));
        row(&format!("Passed: {}", check_label(name)), rate(&sa), rate(&sb));
    }
    let names: BTreeSet<&String> = sa.scores.keys().chain(sb.scores.keys()).collect();
    for name in names {
        let value = |s: &ExperimentSummary| s.scores.get(name).map_or_else(|| "–".to_owned(), |v| mean(*v));
        row(&format!("Mean {name}"), value(&sa), value(&sb));
    }
    rows
}

/// The items of both runs, joined on the item (its position when a result has no item id),
/// in dataset order; `orders` are the two experiments' check names, in their order.
fn pairs(a: &[ExperimentResult], b: &[ExperimentResult], orders: [&[String]; 2]) -> Vec<Pair> {
    let key = |r: &ExperimentResult| if r.item_id.is_empty() { format!("#{}", r.position) } else { r.item_id.clone() };
    let mut order: Vec<(i64, String)> = Vec::new();
    let mut found: BTreeMap<String, (Option<&ExperimentResult>, Option<&ExperimentResult>)> = BTreeMap::new();
    for (r, first) in a.iter().map(|r| (r, true)).chain(b.iter().map(|r| (r, false))) {
        let k = key(r);
        let entry = found.entry(k.clone()).or_insert_with(|| {
            order.push((r.position, k.clone()));
            (None, None)
        });
        if first {
            entry.0 = Some(r);
        } else {
            entry.1 = Some(r);
        }
    }
    order.sort();
    order
        .into_iter()
        .filter_map(|(_, k)| found.get(&k).copied())
        .map(|(ra, rb)| {
            let any = ra.or(rb).expect("a joined item is in one run at least");
            Pair {
                position: count(any.position),
                input: clip(&any.input, CELL_CHARS),
                expected: clip(&any.expected, CELL_CHARS),
                differs: match (ra, rb) {
                    (Some(ra), Some(rb)) => differs(ra, rb),
                    _ => true,
                },
                sides: [ra.map(|r| side(r, orders[0])), rb.map(|r| side(r, orders[1]))],
            }
        })
        .collect()
}

/// A comparison the page cannot make: a message with `status`.
fn refuse(page: &PageCall, status: StatusCode, heading: &str, detail: String) -> Response {
    let message = Message {
        chrome: page.chrome("Cannot compare", NAV),
        heading: heading.into(),
        detail,
        back: page
            .came_from()
            .map(|from| (from.to_owned(), "Go back".to_owned()))
            .or_else(|| Some((NAV.to_owned(), "Datasets".to_owned()))),
    };
    page.render_with(status, &message)
}

/// The two runs a comparison names, and whether they were named as `a` and `b` (else
/// they are ticked `ids`, ordered by when they were made).
fn named(query: &[(String, String)]) -> (Vec<String>, bool) {
    let mut ids: Vec<String> = Vec::new();
    let mut explicit = false;
    for (key, value) in query {
        let value = value.trim();
        if matches!(key.as_str(), "a" | "b" | "ids") && !value.is_empty() && !ids.iter().any(|i| i == value) {
            explicit |= key != "ids";
            ids.push(value.to_owned());
        }
    }
    (ids, explicit)
}

pub(super) async fn compare(
    State(core): State<Core>,
    page: PageCall,
    Query(query): Query<Vec<(String, String)>>,
) -> Response {
    let (ids, explicit) = named(&query);
    let [first, second] = ids.as_slice() else {
        return refuse(
            &page,
            StatusCode::BAD_REQUEST,
            "Choose two runs",
            format!(
                "A comparison takes two runs of one dataset (?a=ex_…&b=ex_…); {} given. Tick two runs on their \
                 dataset's page and press Compare.",
                ids.len()
            ),
        );
    };
    let load = |id: &String| {
        let request = GetExperimentRequest { id: id.clone() };
        page.load(format!("GET {API}/{id}"), core.experiments.get_experiment(page.request(request)))
    };
    let (one, two) = tokio::join!(load(first), load(second));
    let (one, two) = match (one, two) {
        (Ok(one), Ok(two)) => (one, two),
        (Err(err), _) | (_, Err(err)) if err.reason() == ErrorReason::NotFound => {
            return refuse(
                &page,
                StatusCode::NOT_FOUND,
                "No such experiment",
                format!("{} ({}).", err.message(), err.reason().code()),
            );
        }
        (Err(err), _) | (_, Err(err)) => {
            let status = err.reason().http_status();
            return refuse(
                &page,
                status,
                "Could not load the runs",
                format!("{} ({}).", err.message(), err.reason().code()),
            );
        }
    };
    let (mut a, mut b) =
        ((one.experiment.unwrap_or_default(), one.results), (two.experiment.unwrap_or_default(), two.results));
    if a.0.dataset_id != b.0.dataset_id {
        return refuse(
            &page,
            StatusCode::BAD_REQUEST,
            "These runs are of different datasets",
            format!(
                "{} ran dataset {} and {} ran dataset {}: only runs of one dataset compare item by item.",
                a.0.id, a.0.dataset_id, b.0.id, b.0.dataset_id
            ),
        );
    }
    let made = |e: &Experiment| e.created_at.as_ref().map(|t| (t.seconds, t.nanos)).unwrap_or_default();
    if !explicit && made(&b.0) < made(&a.0) {
        std::mem::swap(&mut a, &mut b);
    }
    let items = pairs(&a.1, &b.1, [&check_names(&a.0), &check_names(&b.0)]);
    let view = ComparePage {
        chrome: page.chrome(format!("Compare {} and {}", a.0.name, b.0.name), NAV),
        swap_href: format!(
            "/dashboard/experiments/compare?a={}&b={}",
            percent_encode(&b.0.id),
            percent_encode(&a.0.id)
        ),
        metrics: metrics(&a.0, &b.0),
        differing: items.iter().filter(|p| p.differs).count(),
        items,
        a: run_row(&a.0),
        b: run_row(&b.0),
    };
    page.render(&view)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(item: &str, position: i64, status: &str, checks: &[(&str, bool)]) -> ExperimentResult {
        ExperimentResult {
            item_id: item.into(),
            position,
            status: status.into(),
            checks: checks.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn checks_and_shares_read_plainly() {
        assert_eq!(check_label("exact_match"), "exact match");
        assert_eq!(check_label("contains/i"), "contains expected (any case)");
        assert_eq!(check_label("contains:Paris"), "contains “Paris”");
        assert_eq!(share(2.0 / 3.0), "66.7%");
        assert_eq!(share(1.0), "100%");
        assert_eq!(share(0.0), "0%");
        assert_eq!(mean(0.75), "0.75");
        assert_eq!(cost(0), "$0");
        assert_eq!((latency(0.0), latency(1250.0)), ("< 1 ms".to_owned(), "1.25 s".to_owned()));
    }

    #[test]
    fn runs_join_on_their_items_and_differences_are_marked() {
        let a = vec![
            result("di_1", 1, "completed", &[("exact_match", true)]),
            result("di_2", 2, "completed", &[("exact_match", true)]),
            result("di_3", 3, "completed", &[("exact_match", false)]),
        ];
        let b = vec![
            result("di_2", 2, "completed", &[("exact_match", false)]),
            result("di_1", 1, "completed", &[("exact_match", true)]),
            result("di_3", 3, "failed", &[]),
        ];
        let joined = pairs(&a, &b, [&[], &[]]);
        let shown: Vec<_> = joined.iter().map(|p| (p.position.as_str(), p.differs)).collect();
        assert_eq!(shown, [("1", false), ("2", true), ("3", true)]);
        let only_a = pairs(&a[..1], &[], [&[], &[]]);
        assert!(only_a[0].differs && only_a[0].sides[1].is_none());
    }

    #[test]
    fn a_comparison_names_two_runs() {
        let q = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
        };
        assert_eq!(named(&q(&[("a", "ex_1"), ("b", "ex_2")])), (vec!["ex_1".into(), "ex_2".into()], true));
        assert_eq!(named(&q(&[("ids", "ex_2"), ("ids", "ex_1")])), (vec!["ex_2".into(), "ex_1".into()], false));
        assert_eq!(named(&q(&[("ids", "ex_1"), ("ids", "ex_1")])).0.len(), 1);
    }
}
