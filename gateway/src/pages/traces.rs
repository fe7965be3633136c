//! `/dashboard/traces`: traces, newest first, filtered by session, service, model (a trace
//! with any span of it), errors and how recent, fifty a page. And
//! `/dashboard/traces/{trace_id}`: the trace as a waterfall of its spans, the selected
//! span's details (`?span=`, the root when none is chosen) and the trace's conversation.
//!
//! Everything comes from q/1 (`traces`, `spans`, `span`, `transcript`). Decisions:
//! - The waterfall reads at most 1,000 spans (the `spans` shape's most), the newest when a
//!   trace has more, and says so. It is drawn as a tree: children under their parent in
//!   start order; a span whose parent was never received is drawn as a root. Bars are SVG
//!   rects on a 0–1000 scale of the trace's time (no inline styles: the CSP forbids them).
//! - The trace's totals (time, spans, errors, tokens, cost) are its row of the `traces`
//!   shape (`trace_id`), so they count every span even when the waterfall is cut; summed
//!   from the waterfall's spans only when that row is missing.
//! - The conversation shows the trace's messages and log records (the `transcript` shape
//!   by `trace_id`); its spans are the waterfall already. The selected span's own messages
//!   are repeated beside its details.

use std::collections::HashMap;

use askama::Template;
use axum::{
    Router,
    extract::{Path, Query, State},
    response::Response,
    routing::get,
};
use http::StatusCode;
use roost_proto::v1::ListScoresRequest;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{
    Failure, When, count,
    feedback::{self, Form, Target},
    float, format, int,
    layout::{Chrome, PageCall, percent_encode},
    listing::{
        Filters, PAGE_SIZE, Pager, WINDOWS, export_routes, known_choice, known_window, link, page_number, range_bound,
        rows_page, rows_warning, suggestions, window_since,
    },
    query,
    search::{self, Found},
    sessions::{Entry, Stat, TraceRow, call_messages, conversation, session_href, span_href, unix_ns, usage_text},
    text, tokens,
};
use crate::Core;

/// Most spans of a trace the waterfall reads (the `spans` shape's most).
const MAX_SPANS: i64 = 1000;
/// Items of a trace's conversation read.
const TRANSCRIPT_ITEMS: i64 = 500;
/// Tree levels drawn in full; deeper spans show their depth as a number.
const MAX_GUIDE_DEPTH: usize = 16;

pub(super) fn routes() -> Router<Core> {
    export_routes::<ListQuery>(
        Router::new().route("/dashboard/traces", get(list)).route("/dashboard/traces/{trace_id}", get(detail)),
    )
}

// ---------------------------------------------------------------------------------------
// The list.

#[derive(Debug, Default, Deserialize)]
struct ListQuery {
    /// Words said or done in the trace: a full-text search replaces the list.
    #[serde(default)]
    text: String,
    #[serde(default)]
    session: String,
    #[serde(default)]
    service: String,
    #[serde(default)]
    model: String,
    #[serde(default)]
    errors: String,
    /// The user, matched whole.
    #[serde(default)]
    user: String,
    /// A tag, matched whole.
    #[serde(default)]
    tag: String,
    /// A metadata key, or `key=value`, matched whole.
    #[serde(default)]
    meta: String,
    /// A score: its name, `name=category` (or `=true`), or `name>=0.5` (`<`, `<=`, `>`).
    #[serde(default)]
    score: String,
    /// Only conversations without a session (traces with model calls and no session id).
    #[serde(default)]
    sessionless: String,
    #[serde(default)]
    window: String,
    /// A custom range's start (`datetime-local`, a date or RFC 3339; UTC): replaces the window.
    #[serde(default)]
    from: String,
    /// A custom range's end.
    #[serde(default)]
    to: String,
    /// The order: one of [`ORDERS`]' values (empty: newest first).
    #[serde(default)]
    order: String,
    #[serde(default)]
    page: String,
}

/// The orders the list offers: (value, label); the first is the default.
const ORDERS: &[(&str, &str)] =
    &[("", "Newest"), ("duration", "Longest"), ("tokens", "Most tokens"), ("cost", "Most expensive")];

/// A checkbox's value as the filter keeps it: "1" when ticked, else empty.
fn ticked(value: &str) -> String {
    if matches!(value.trim(), "1" | "on" | "true" | "yes") { "1".into() } else { String::new() }
}

impl ListQuery {
    fn trimmed(self) -> Self {
        Self {
            text: self.text.trim().to_owned(),
            session: self.session.trim().to_owned(),
            service: self.service.trim().to_owned(),
            model: self.model.trim().to_owned(),
            errors: ticked(&self.errors),
            user: self.user.trim().to_owned(),
            tag: self.tag.trim().to_owned(),
            meta: self.meta.trim().to_owned(),
            score: self.score.trim().to_owned(),
            sessionless: ticked(&self.sessionless),
            window: known_window(self.window.trim()),
            from: self.from.trim().to_owned(),
            to: self.to.trim().to_owned(),
            order: known_choice(&self.order, ORDERS),
            page: self.page,
        }
    }

    fn errors_only(&self) -> bool {
        !self.errors.is_empty()
    }

    fn sessionless_only(&self) -> bool {
        !self.sessionless.is_empty()
    }
}

impl Filters for ListQuery {
    const PATH: &'static str = "/dashboard/traces";
    const SHAPE: &'static str = "traces";

    fn args(&self, since: Option<String>, until: Option<String>, number: i64) -> Value {
        json!({
            "limit": PAGE_SIZE + 1,
            "offset": (number - 1) * PAGE_SIZE,
            "session_contains": self.session,
            "service_contains": self.service,
            "model_contains": self.model,
            "errors_only": self.errors_only().then_some(true),
            "sessionless": self.sessionless_only().then_some(true),
            "user": self.user,
            "tag": self.tag,
            "metadata": self.meta,
            "score": self.score,
            "since": since,
            "until": until,
            "order": self.order,
        })
    }

    fn range(&self) -> (&str, &str, &str) {
        (&self.window, &self.from, &self.to)
    }

    fn cleaned(self) -> Self {
        self.trimmed()
    }

    fn params(&self) -> Vec<(&'static str, &str)> {
        vec![
            ("text", &self.text),
            ("session", &self.session),
            ("service", &self.service),
            ("model", &self.model),
            ("errors", &self.errors),
            ("user", &self.user),
            ("tag", &self.tag),
            ("meta", &self.meta),
            ("score", &self.score),
            ("sessionless", &self.sessionless),
            ("window", &self.window),
            ("from", &self.from),
            ("to", &self.to),
            ("order", &self.order),
        ]
    }
}

#[derive(Template)]
#[template(path = "traces.html")]
struct List {
    chrome: Chrome,
    filter: ListQuery,
    filtered: bool,
    windows: &'static [(&'static str, &'static str, i64)],
    orders: &'static [(&'static str, &'static str)],
    /// Known services and models, suggested in the filters.
    services: Vec<String>,
    models: Vec<String>,
    page: i64,
    traces: Result<Vec<ListRow>, Failure>,
    warning: String,
    pager: Pager,
    /// A full-text search's traces (`?text=`), shown instead of the list.
    found: Option<Found>,
}

/// A row of the list: the trace, and its service as a filter link.
struct ListRow {
    trace: TraceRow,
    service_href: String,
}

async fn list(State(core): State<Core>, page: PageCall, Query(filter): Query<ListQuery>) -> Response {
    let filter = filter.trimmed();
    let number = page_number(&filter.page);
    let range =
        range_bound("From", &filter.from, false).and_then(|from| Ok((from, range_bound("To", &filter.to, true)?)));
    let none = || Pager::new("Traces", 1, 0, false, |_| String::new());
    // A search replaces the list; a text with no words is a warning over it.
    let (found, search_warning) =
        search::for_list(&core, &page, &range, &filter, (&filter.text, &filter.window, &filter.service), true).await;
    let (traces, warning, pager) = match range {
        Err(message) => (Ok(Vec::new()), message, none()),
        Ok(_) if found.is_some() => (Ok(Vec::new()), String::new(), none()),
        Ok((from, to)) => {
            let args = filter.args(from.or_else(|| window_since(&filter.window)), to, number);
            let answer = query::run(&core, &page, "traces", args).await;
            rows_page(answer, "Traces", number, &filter, |r| {
                let trace = TraceRow::of(r);
                ListRow { service_href: filter.href(("service", &trace.service), 1), trace }
            })
        }
    };
    let warning = if warning.is_empty() { search_warning } else { warning };
    let (services, models) = suggestions(&core, &page).await;
    let view = List {
        chrome: page.chrome("Traces", "/dashboard/traces"),
        filtered: filter.filtered(),
        filter,
        windows: WINDOWS,
        orders: ORDERS,
        services,
        models,
        page: number,
        traces,
        warning,
        pager,
        found,
    };
    page.render(&view)
}

// ---------------------------------------------------------------------------------------
// One trace.

#[derive(Debug, Default, Deserialize)]
struct DetailQuery {
    #[serde(default)]
    span: String,
}

#[derive(Template)]
#[template(path = "traces_detail.html")]
struct Detail {
    chrome: Chrome,
    id: String,
    missing: bool,
    waterfall: Result<Waterfall, Failure>,
    spans_warning: String,
    selected: Option<Result<Option<SpanDetail>, Failure>>,
    selected_id: String,
    selected_warning: String,
    conversation: Result<Vec<Entry>, Failure>,
    conversation_warning: String,
    conversation_full: bool,
    /// The trace's scores, its spans' included.
    scores: feedback::Lines,
    /// The operator's feedback on the trace, and on the selected span.
    feedback: Form,
    span_feedback: Option<Form>,
}

struct Waterfall {
    name: String,
    stats: Vec<Stat>,
    services: Vec<String>,
    /// The time axis' labels, equally spaced from 0 to its end (a round duration at or
    /// past the trace's): the bars are drawn on this scale.
    axis: Vec<String>,
    sessions: Vec<(String, String)>,
    start: When,
    lines: Vec<Line>,
    /// The trace has more spans than the waterfall reads.
    cut: bool,
}

/// A span in the waterfall.
struct Line {
    name: String,
    href: String,
    /// Tree guides before the name (`│ ├─`).
    guide: String,
    service: String,
    duration: String,
    /// The bar: x and width on the 0–1000 scale.
    x: String,
    width: String,
    title: String,
    class: String,
    selected: bool,
    failed: bool,
    detail: String,
}

struct SpanDetail {
    name: String,
    status: String,
    status_message: String,
    fields: Vec<(&'static str, String)>,
    session: String,
    session_href: String,
    parent_href: String,
    parent: String,
    start: When,
    end: When,
    attributes: Vec<(String, String)>,
    resource: Vec<(String, String)>,
    events: Vec<SpanEvent>,
    messages: Vec<Entry>,
}

struct SpanEvent {
    time: When,
    name: String,
    attributes: Vec<(String, String)>,
}

async fn detail(
    State(core): State<Core>,
    page: PageCall,
    Path(id): Path<String>,
    Query(view): Query<DetailQuery>,
) -> Response {
    // Trace ids are stored as lowercase hex: an id pasted in capitals finds its trace too.
    let id = if id.bytes().all(|b| b.is_ascii_hexdigit()) { id.to_ascii_lowercase() } else { id };
    let chosen = view.span.trim().to_ascii_lowercase();
    let (spans, transcript, summary, scores) = tokio::join!(
        query::run(&core, &page, "spans", json!({ "trace_id": id, "limit": MAX_SPANS })),
        query::run(&core, &page, "transcript", json!({ "trace_id": id, "limit": TRANSCRIPT_ITEMS })),
        query::run(&core, &page, "traces", json!({ "trace_id": id, "limit": 1 })),
        feedback::load(&core, &page, ListScoresRequest { trace_id: id.clone(), ..ListScoresRequest::default() }),
    );
    let (scores, scores_failed) = match scores {
        Ok(scores) => (scores, None),
        Err(err) => (Vec::new(), Some(Failure::from(err))),
    };
    let summary = summary.ok().and_then(|rows| rows.rows.into_iter().next());
    let (transcript_rows, conversation_warning, transcript_failed) = match transcript {
        Ok(rows) => {
            let warning = rows_warning(&rows);
            (rows.rows, warning, None)
        }
        Err(err) => (Vec::new(), String::new(), Some(Failure::from(err))),
    };
    let conversation_full = transcript_rows.len() as i64 >= TRANSCRIPT_ITEMS;
    let (span_rows, spans_warning, spans_failed) = match spans {
        Ok(rows) => {
            let warning = rows_warning(&rows);
            (rows.rows, warning, None)
        }
        Err(err) => (Vec::new(), String::new(), Some(Failure::from(err))),
    };

    // The selected span: the one asked for, else the first root.
    let here = format!("/dashboard/traces/{}", percent_encode(&id));
    let tree = tree(&span_rows);
    let selected_id = if !chosen.is_empty() {
        chosen
    } else {
        tree.first().map(|(i, _)| text(&span_rows[*i], "span_id")).unwrap_or_default()
    };
    let (selected, selected_warning) = if selected_id.is_empty() || spans_failed.is_some() {
        (None, String::new())
    } else {
        match query::run(&core, &page, "span", json!({ "trace_id": id, "span_id": selected_id })).await {
            Ok(rows) => {
                let warning = rows_warning(&rows);
                let own: Vec<_> = transcript_rows
                    .iter()
                    .filter(|r| text(r, "source") == "message" && text(r, "span_id") == selected_id)
                    .cloned()
                    .collect();
                (Some(Ok(rows.rows.first().map(|r| span_detail(r, &id, &own)))), warning)
            }
            Err(err) => (Some(Err(Failure::from(err))), String::new()),
        }
    };

    let missing = span_rows.is_empty()
        && transcript_rows.is_empty()
        && spans_failed.is_none()
        && transcript_failed.is_none()
        && spans_warning.is_empty()
        && conversation_warning.is_empty();
    let waterfall = match spans_failed {
        Some(failure) => Err(failure),
        None => Ok(waterfall(&span_rows, summary.as_ref(), &tree, &here, &selected_id)),
    };
    let without_spans: Vec<_> = transcript_rows.into_iter().filter(|r| text(r, "source") != "span").collect();
    let conversation = match transcript_failed {
        Some(failure) => Err(failure),
        None => {
            let mut entries = conversation(&without_spans, true);
            feedback::mark_calls(&core, &mut entries, page.here(), &scores);
            Ok(entries)
        }
    };
    let span_names: HashMap<String, String> = span_rows.iter().map(|r| (text(r, "span_id"), text(r, "name"))).collect();
    let span_feedback = match &selected {
        Some(Ok(Some(_))) => {
            let row = span_rows.iter().find(|r| text(r, "span_id") == selected_id);
            let call = row.is_some_and(|r| !text(r, "operation").is_empty() || !text(r, "model").is_empty());
            let target = Target::Span(id.clone(), selected_id.clone());
            Some(Form::new(&core, target, if call { "call" } else { "span" }, "span", page.here(), &scores))
        }
        _ => None,
    };
    let trace_feedback = Form::new(&core, Target::Trace(id.clone()), "trace", "trace", page.here(), &scores);
    let scores = match scores_failed {
        Some(failure) => Err(failure),
        None => Ok(feedback::lines(&scores, &Target::Trace(id.clone()), &span_names)),
    };
    let title = match &waterfall {
        _ if missing => "No such trace".to_owned(),
        Ok(w) if !w.name.is_empty() => format!("Trace {}", w.name),
        _ => format!("Trace {id}"),
    };
    let view = Detail {
        chrome: page.chrome(title, "/dashboard/traces"),
        id,
        missing,
        waterfall,
        spans_warning,
        selected,
        selected_id,
        selected_warning,
        conversation,
        conversation_warning,
        conversation_full,
        scores,
        feedback: trace_feedback,
        span_feedback,
    };
    page.render_with(if missing { StatusCode::NOT_FOUND } else { StatusCode::OK }, &view)
}

/// The spans in tree order: (index in `rows`, depth-first guide). Children follow their
/// parent, siblings in start order; spans whose parent is not among `rows` are roots;
/// spans caught in a parent cycle come last, as roots.
fn tree(rows: &[Map<String, Value>]) -> Vec<(usize, String)> {
    let starts: Vec<i64> = rows.iter().map(|r| unix_ns(&text(r, "start_time")).unwrap_or(0)).collect();
    let ids: Vec<String> = rows.iter().map(|r| text(r, "span_id")).collect();
    let index: HashMap<&str, usize> = ids.iter().enumerate().map(|(i, id)| (id.as_str(), i)).collect();
    let order = |a: &usize, b: &usize| starts[*a].cmp(&starts[*b]).then_with(|| ids[*a].cmp(&ids[*b]));
    let mut children: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut roots = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        match index.get(text(row, "parent_span_id").as_str()) {
            Some(&parent) if parent != i => children.entry(parent).or_default().push(i),
            _ => roots.push(i),
        }
    }
    roots.sort_by(order);
    for list in children.values_mut() {
        list.sort_by(order);
    }
    let mut out = Vec::with_capacity(rows.len());
    let mut seen = vec![false; rows.len()];
    // Roots in order, then whatever a parent cycle kept out of reach.
    let mut next_root = roots.into_iter().chain(0..rows.len());
    // (span, its guide, the prefix its children's guides start with, its depth)
    let mut stack: Vec<(usize, String, String, usize)> = Vec::new();
    let root = |r: usize| (r, String::new(), String::new(), 0);
    while let Some((i, guide, prefix, depth)) = stack.pop().or_else(|| next_root.by_ref().find(|r| !seen[*r]).map(root))
    {
        if seen[i] {
            continue;
        }
        seen[i] = true;
        out.push((i, guide));
        let kids: Vec<usize> = children.get(&i).into_iter().flatten().copied().filter(|k| !seen[*k]).collect();
        for (n, kid) in kids.iter().enumerate().rev() {
            let last = n + 1 == kids.len();
            let (guide, carry) = if depth >= MAX_GUIDE_DEPTH {
                (format!("{prefix}⋯{} ", depth + 1), prefix.clone())
            } else {
                let branch = if last { "└─" } else { "├─" };
                let carry = if last { "\u{a0}\u{a0}" } else { "│\u{a0}" };
                (format!("{prefix}{branch}"), format!("{prefix}{carry}"))
            };
            stack.push((*kid, guide, carry, depth + 1));
        }
    }
    out
}

fn waterfall(
    rows: &[Map<String, Value>],
    summary: Option<&Map<String, Value>>,
    tree: &[(usize, String)],
    here: &str,
    selected: &str,
) -> Waterfall {
    let span_ns = |r: &Map<String, Value>| {
        let start = unix_ns(&text(r, "start_time")).unwrap_or(0);
        let end = unix_ns(&text(r, "end_time")).unwrap_or(start).max(start);
        (start, end)
    };
    let t0 = rows.iter().map(|r| span_ns(r).0).min().unwrap_or(0);
    let t1 = rows.iter().map(|r| span_ns(r).1).max().unwrap_or(t0);
    let (axis_ns, axis) = time_axis((t1 - t0).max(1));
    let total = axis_ns as f64;

    let mut services: Vec<String> = Vec::new();
    let mut sessions: Vec<(String, String)> = Vec::new();
    let (mut input, mut output, mut cost, mut errors, mut unpriced) = (0, 0, 0.0, 0, 0);
    for r in rows {
        let (service, session) = (text(r, "service"), text(r, "session_id"));
        if !service.is_empty() && !services.contains(&service) {
            services.push(service);
        }
        if !session.is_empty() && !sessions.iter().any(|(_, s)| *s == session) {
            sessions.push((session_href(&session), session));
        }
        input += int(r, "input_tokens");
        output += int(r, "output_tokens");
        cost += float(r, "cost_usd");
        unpriced +=
            i64::from(format::unpriced(format::cost(r, "cost_usd"), int(r, "input_tokens") + int(r, "output_tokens")));
        errors += i64::from(text(r, "status") == "error");
    }
    let lines = tree
        .iter()
        .map(|(i, guide)| {
            let r = &rows[*i];
            let (start, end) = span_ns(r);
            let id = text(r, "span_id");
            let x = (start - t0) as f64 / total * 1000.0;
            let width = ((end - start) as f64 / total * 1000.0).max(2.0).min(1000.0 - x).max(0.5);
            let genai = !text(r, "operation").is_empty() || !text(r, "model").is_empty();
            let failed = text(r, "status") == "error";
            let mut class = Vec::new();
            if genai {
                class.push("genai");
            }
            if failed {
                class.push("error");
            }
            if id == selected {
                class.push("selected");
            }
            let duration = format::duration_ms(float(r, "duration_ms"));
            let offset = format::duration_ms((start - t0) as f64 / 1e6);
            let detail = step_detail(r);
            Line {
                name: text(r, "name"),
                href: link(here, &[("span", &id)]),
                title: format!("starts at +{offset}, lasts {duration}"),
                guide: guide.clone(),
                service: text(r, "service"),
                duration,
                x: format!("{x:.1}"),
                width: format!("{width:.1}"),
                class: class.join(" "),
                selected: id == selected,
                failed,
                detail,
            }
        })
        .collect();
    // The trace's own row counts every span, also those past the waterfall's cut.
    let (mut duration_ms, mut spans) = ((t1 - t0) as f64 / 1e6, rows.len() as i64);
    if let Some(summary) = summary {
        (duration_ms, spans) = (float(summary, "duration_ms"), int(summary, "spans"));
        (errors, input, output, cost, unpriced) = (
            int(summary, "errors"),
            int(summary, "input_tokens"),
            int(summary, "output_tokens"),
            float(summary, "cost_usd"),
            int(summary, "unpriced_calls"),
        );
    }
    let root = tree.first().map(|(i, _)| text(&rows[*i], "name")).unwrap_or_default();
    let start = rows.iter().min_by_key(|r| span_ns(r).0).map(|r| When::iso(&text(r, "start_time"))).unwrap_or_default();
    Waterfall {
        axis,
        name: root,
        stats: vec![
            Stat::new("Duration", format::duration_ms(duration_ms)),
            Stat::new("Spans", count(spans)),
            Stat { label: "Errors", value: count(errors), alert: errors > 0 },
            Stat::new("Input tokens", tokens(input)),
            Stat::new("Output tokens", tokens(output)),
            Stat::new("Cost", format::total_cost(cost, unpriced)),
        ],
        services,
        sessions,
        start,
        lines,
        cut: rows.len() as i64 >= MAX_SPANS,
    }
}

/// A JSON object's entries as (key, text), sorted by key.
/// Intervals of the waterfall's time axis.
const AXIS_STEPS: i64 = 4;

/// The waterfall's time axis for a trace lasting `total_ns`: its end (the smallest
/// 1, 2, 2.5 or 5 × 10ⁿ ns step times [`AXIS_STEPS`] that holds the trace) and a label
/// at each tick, `0` first.
fn time_axis(total_ns: i64) -> (i64, Vec<String>) {
    let rough = (total_ns as f64 / AXIS_STEPS as f64).max(1.0);
    let magnitude = 10f64.powi(rough.log10().floor() as i32);
    let step = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * magnitude).find(|s| *s >= rough).unwrap_or(rough);
    let labels = (0..=AXIS_STEPS)
        .map(|i| if i == 0 { "0".to_owned() } else { format::duration_ms(step * i as f64 / 1e6) })
        .collect();
    ((step * AXIS_STEPS as f64).ceil() as i64, labels)
}

/// What a step of the waterfall says under its name: the model with tokens and cost,
/// the time to the first token, and a tool call's arguments and result.
fn step_detail(r: &Map<String, Value>) -> String {
    let attribute = |key: &str| r.get("attributes").and_then(|a| a.get(key));
    let mut parts = vec![text(r, "model"), usage_text(r)];
    if let Some(seconds) = attribute("gen_ai.server.time_to_first_token").and_then(Value::as_f64) {
        parts.push(format!("first token {}", format::duration_ms(seconds * 1000.0)));
    }
    let shown = |value: &Value| match value {
        Value::String(s) => super::sessions::short(s, TOOL_TEXT_CHARS),
        other => super::sessions::short(&other.to_string(), TOOL_TEXT_CHARS),
    };
    match (attribute("gen_ai.tool.call.arguments"), attribute("gen_ai.tool.call.result")) {
        (Some(args), Some(result)) => parts.push(format!("{} → {}", shown(args), shown(result))),
        (Some(args), None) => parts.push(shown(args)),
        (None, Some(result)) => parts.push(format!("→ {}", shown(result))),
        (None, None) => {}
    }
    parts.into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>().join(" · ")
}

/// Characters of a tool call's arguments or result under its step (the span panel has
/// all of it).
const TOOL_TEXT_CHARS: usize = 80;

fn pairs(value: Option<&Value>) -> Vec<(String, String)> {
    let Some(Value::Object(map)) = value else { return Vec::new() };
    let mut pairs: Vec<(String, String)> = map
        .iter()
        .map(|(k, v)| {
            let text = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.clone(), text)
        })
        .collect();
    pairs.sort();
    pairs
}

fn kind_name(kind: i64) -> &'static str {
    match kind {
        1 => "internal",
        2 => "server",
        3 => "client",
        4 => "producer",
        5 => "consumer",
        _ => "unspecified",
    }
}

fn span_detail(r: &Map<String, Value>, trace_id: &str, messages: &[Map<String, Value>]) -> SpanDetail {
    let mut fields: Vec<(&'static str, String)> = vec![
        ("Span id", text(r, "span_id")),
        ("Kind", kind_name(int(r, "kind")).to_owned()),
        ("Service", text(r, "service")),
        ("Scope", text(r, "scope")),
        ("Duration", format::duration_ms(float(r, "duration_ms"))),
        ("Operation", text(r, "operation")),
        ("System", text(r, "system")),
        ("Request model", text(r, "request_model")),
        ("Response model", text(r, "response_model")),
        ("Tool", text(r, "tool_name")),
        ("Agent", text(r, "agent_id")),
    ];
    for (label, key) in [
        ("Input tokens", "input_tokens"),
        ("Output tokens", "output_tokens"),
        ("Cache read tokens", "cache_read_tokens"),
        ("Cache write tokens", "cache_write_tokens"),
    ] {
        if r.get(key).is_some_and(|v| !v.is_null()) {
            fields.push((label, count(int(r, key))));
        }
    }
    fields.push((
        "Cost",
        format::call_cost(format::cost(r, "cost_usd"), int(r, "input_tokens") + int(r, "output_tokens")),
    ));
    fields.retain(|(_, value)| !value.is_empty());
    let parent = text(r, "parent_span_id");
    let session = text(r, "session_id");
    let events = match r.get("events") {
        Some(Value::Array(events)) => events
            .iter()
            .map(|e| SpanEvent {
                time: When::iso(e.get("time").and_then(Value::as_str).unwrap_or_default()),
                name: e.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
                attributes: pairs(e.get("attributes")),
            })
            .collect(),
        _ => Vec::new(),
    };
    SpanDetail {
        name: text(r, "name"),
        status: text(r, "status"),
        status_message: text(r, "status_message"),
        fields,
        session_href: if session.is_empty() { String::new() } else { session_href(&session) },
        session,
        parent_href: if parent.is_empty() { String::new() } else { span_href(trace_id, &parent) },
        parent,
        start: When::iso(&text(r, "start_time")),
        end: When::iso(&text(r, "end_time")),
        attributes: pairs(r.get("attributes")),
        resource: pairs(r.get("resource")),
        events,
        messages: call_messages(&exchange_rows(r).unwrap_or_else(|| messages.to_vec())),
    }
}

/// A model call's whole exchange as the `span` shape answers it (`messages`: what it was
/// sent, repeats of the conversation included, then its answer), as transcript rows; `None`
/// for spans without one (no messages, or stored before messages were kept once: their
/// transcript rows and attributes show them).
fn exchange_rows(r: &Map<String, Value>) -> Option<Vec<Map<String, Value>>> {
    let Some(Value::Array(messages)) = r.get("messages") else { return None };
    if messages.is_empty() {
        return None;
    }
    let model = r.get("response_model").filter(|m| !m.is_null()).or(r.get("request_model")).cloned();
    let rows = messages
        .iter()
        .map(|m| {
            let mut row = Map::new();
            row.insert("source".into(), Value::from("message"));
            row.insert("time".into(), r.get("start_time").cloned().unwrap_or(Value::Null));
            row.insert("trace_id".into(), r.get("trace_id").cloned().unwrap_or(Value::Null));
            row.insert("span_id".into(), r.get("span_id").cloned().unwrap_or(Value::Null));
            row.insert("model".into(), model.clone().unwrap_or(Value::Null));
            for field in ["role", "text", "tool_calls"] {
                row.insert(field.into(), m.get(field).cloned().unwrap_or(Value::Null));
            }
            row
        })
        .collect();
    Some(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(id: &str, parent: &str, start_ms: i64) -> Map<String, Value> {
        let at = |ms: i64| format::rfc3339(1_800_000_000 + ms / 1000, ((ms % 1000) * 1_000_000) as i32);
        json!({"span_id": id, "parent_span_id": parent, "start_time": at(start_ms), "end_time": at(start_ms + 10),
               "name": id, "duration_ms": 10.0})
        .as_object()
        .unwrap()
        .clone()
    }

    #[test]
    fn spans_are_drawn_as_a_tree_in_start_order() {
        // Given newest first, as the spans shape answers.
        let rows = vec![
            span("c2", "b", 40),
            span("c1", "b", 30),
            span("lost", "never-sent", 35),
            span("b", "a", 20),
            span("d", "a", 50),
            span("a", "", 0),
        ];
        let tree = tree(&rows);
        let order: Vec<(&str, &str)> =
            tree.iter().map(|(i, g)| (rows[*i]["span_id"].as_str().unwrap(), g.as_str())).collect();
        assert_eq!(
            order,
            [("a", ""), ("b", "├─"), ("c1", "│\u{a0}├─"), ("c2", "│\u{a0}└─"), ("d", "└─"), ("lost", ""),]
        );
    }

    #[test]
    fn the_time_axis_ends_on_a_round_step() {
        assert_eq!(
            time_axis(1_000_000_000),
            (1_000_000_000, ["0", "250 ms", "500 ms", "750 ms", "1.00 s"].map(String::from).to_vec())
        );
        assert_eq!(time_axis(5_800_000).0, 8_000_000, "5.8 ms: steps of 2 ms");
        assert_eq!(time_axis(1).0, 4, "a trace of no time still has an axis");
    }

    #[test]
    fn cycles_and_self_parents_do_not_loop() {
        let rows = vec![span("x", "y", 0), span("y", "x", 5), span("z", "z", 10)];
        let tree = tree(&rows);
        assert_eq!(tree.len(), 3, "every span once: {tree:?}");
    }

    #[test]
    fn bars_sit_on_the_traces_time_scale() {
        let rows = vec![span("b", "a", 50), span("a", "", 0)];
        let tree = tree(&rows);
        let w = waterfall(&rows, None, &tree, "/dashboard/traces/t", "b");
        // 60 ms on an axis to 80 ms (four 20 ms steps).
        assert_eq!(w.axis, ["0", "20.0 ms", "40.0 ms", "60.0 ms", "80.0 ms"]);
        assert_eq!((w.lines[0].x.as_str(), w.lines[0].width.as_str()), ("0.0", "125.0"));
        assert_eq!((w.lines[1].x.as_str(), w.lines[1].width.as_str()), ("625.0", "125.0"));
        assert!(w.lines[1].selected && w.lines[1].class.contains("selected"));
        assert_eq!(w.lines[1].href, "/dashboard/traces/t?span=b");
        assert_eq!(w.name, "a");
    }
}
