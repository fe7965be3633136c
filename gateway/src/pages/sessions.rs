//! `/dashboard/sessions`: sessions, most recently active first, filtered by id, agent,
//! service, last model and how recently they were active, fifty a page. And
//! `/dashboard/sessions/{session_id}`: one session's totals, its conversation and its
//! traces and custom runs.
//!
//! Everything comes from q/1 (`sessions`, `transcript`, `traces`, `runs`). Decisions:
//! - A session's totals are its row of the `sessions` shape (`session_id`). A session with
//!   no such row but with a conversation, traces or runs still shows them; only when all
//!   are empty is the page a 404.
//! - The conversation is the `transcript` shape: messages as chat bubbles, and between them
//!   the model calls (spans), custom-run events and log records as one-line activity, each
//!   linking to its span on the trace page. A hosted agent's turn (an event of type `turn`)
//!   reads as the user's message and the agent's reply (the first 300 characters of each,
//!   which is what the turn event keeps). `?show=messages` hides the activity.
//! - Each message once. A model call sends the conversation so far again (and a runtime its
//!   system prompt and context on every call): the page shows each call's messages that
//!   are new to the conversation, and in place of the others a line saying how many were
//!   shown above, linking to the call, whose full input is on the trace page ([`Fold`]). A message
//!   said twice (the user's second "yes") is new the second time: a call's messages are
//!   matched by how many times each occurs. A hosted agent's turn and its calls are one
//!   exchange: the turn's message and reply count as shown, so the calls add only their
//!   tool steps and what the runtime sends on its own, once, and again only when it
//!   changes. The folding starts afresh on each page of the conversation.
//! - The transcript is read 500 items at a time, oldest first. The next page starts at the
//!   last item's time (`?from=`) and skips the items of that instant already shown
//!   (`&skip=`), since q/1's `since` includes its bound and the order within an instant is
//!   fixed (`time, part, seq, id`).
//! - "Add to a dataset" (a form of the datasets' module, `features::datasets`) adds the whole
//!   conversation, or the hosted turns and model calls ticked among this page's of it.

use std::collections::HashMap;

use askama::Template;
use axum::{
    Router,
    extract::{Path, Query, State},
    response::Response,
    routing::get,
};
use http::StatusCode;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{
    Failure, When, count, float, format, int,
    layout::{Chrome, PageCall, percent_encode},
    listing::{
        Filters, PAGE_SIZE, Pager, WINDOWS, export_routes, known_choice, known_window, link, page_number, range_bound,
        rows_page, rows_warning, suggestions, window_since,
    },
    query,
    search::{self, Found},
    text, tokens,
};
use crate::Core;

/// Items of a conversation read at once (the most the `transcript` shape answers is 5,000).
const TRANSCRIPT_ITEMS: i64 = 500;
/// Traces and runs listed on a session's page (the rest are a link away).
const RELATED: i64 = 20;
/// Characters of a message shown before "show the rest".
const MESSAGE_CHARS: usize = 1500;
/// Characters of an activity line's text (a log body, an event's data).
const ACTIVITY_CHARS: usize = 300;
/// Characters of a tool call's arguments.
const ARGUMENT_CHARS: usize = 2000;

pub(super) fn routes() -> Router<Core> {
    export_routes::<ListQuery>(
        Router::new().route("/dashboard/sessions", get(list)).route("/dashboard/sessions/{session_id}", get(detail)),
    )
}

// ---------------------------------------------------------------------------------------
// What both pages show of sessions and traces: times, usage, links.

/// Milliseconds between two RFC 3339 times (none when either is unreadable).
pub(super) fn between_ms(from: &str, to: &str) -> Option<f64> {
    Some((unix_ns(to)? - unix_ns(from)?) as f64 / 1e6)
}

/// An RFC 3339 time as Unix nanoseconds.
pub(super) fn unix_ns(value: &str) -> Option<i64> {
    let ts: prost_types::Timestamp = value.parse().ok()?;
    Some(ts.seconds.saturating_mul(1_000_000_000).saturating_add(i64::from(ts.nanos)))
}

/// `120 in · 30 out · $0.0012` (or `· unpriced`) for a q/1 row's usage, leaving out what
/// is zero.
pub(super) fn usage_text(r: &Map<String, Value>) -> String {
    let (input, output) = (int(r, "input_tokens"), int(r, "output_tokens"));
    let mut parts = Vec::new();
    if input != 0 || output != 0 {
        parts.push(format!("{} in", tokens(input)));
        parts.push(format!("{} out", tokens(output)));
    }
    let cost = format::call_cost(format::cost(r, "cost_usd"), input + output);
    if !cost.is_empty() && cost != "$0" {
        parts.push(cost);
    }
    parts.join(" · ")
}

/// The trace page of `trace_id`, on span `span_id` when there is one.
pub(super) fn span_href(trace_id: &str, span_id: &str) -> String {
    if trace_id.is_empty() {
        return String::new();
    }
    let trace = format!("/dashboard/traces/{}", percent_encode(trace_id));
    link(&trace, &[("span", span_id)])
}

/// How an agent reads on a page: its name when it has one, else its id.
pub(super) fn agent_label(id: &str, name: &str) -> String {
    if name.trim().is_empty() { id.to_owned() } else { name.to_owned() }
}

/// The session page of `session_id`.
pub(super) fn session_href(session_id: &str) -> String {
    format!("/dashboard/sessions/{}", percent_encode(session_id))
}

// ---------------------------------------------------------------------------------------
// Conversations (this page and the trace page), shown by `conversation.html`.

/// One item of a conversation.
pub(super) struct Entry {
    pub(super) time: When,
    /// A chat message (else a line of activity).
    pub(super) message: bool,
    /// The message's CSS role (`user`, `assistant`, `system`, `tool`, or empty).
    pub(super) class: &'static str,
    /// The message's role, or the activity's kind (`chat`, `turn`, a log's event name).
    pub(super) label: String,
    /// For activity: `span`, `event` or `log`.
    pub(super) source: &'static str,
    /// The text (a message's first [`MESSAGE_CHARS`] characters).
    pub(super) text: String,
    /// The rest of a long message.
    pub(super) more: String,
    /// How many characters `more` holds, as text.
    pub(super) more_chars: String,
    pub(super) tool_calls: Vec<ToolCall>,
    pub(super) model: String,
    /// Tokens and cost (`usage_text`).
    pub(super) usage: String,
    /// The span on the trace page, if the item has one.
    pub(super) href: String,
    /// The model call a message belongs to: its trace and span ids (empty for others).
    pub(super) call: (String, String),
    /// The thumbs form of the call this message answers (its last reply shown), set by
    /// [`super::feedback::mark_calls`] on pages that offer it.
    pub(super) feedback: Option<super::feedback::Form>,
}

/// A tool a message calls.
pub(super) struct ToolCall {
    pub(super) name: String,
    pub(super) arguments: String,
}

/// `text` cut at `max` characters: (shown, rest).
fn cut(text: &str, max: usize) -> (String, String) {
    match text.char_indices().nth(max) {
        Some((at, _)) => (text[..at].to_owned(), text[at..].to_owned()),
        None => (text.to_owned(), String::new()),
    }
}

/// `text` cut at `max` characters, with `…` when it was longer.
pub(super) fn short(text: &str, max: usize) -> String {
    let (shown, rest) = cut(text, max);
    if rest.is_empty() { shown } else { format!("{shown}…") }
}

fn role_class(role: &str) -> &'static str {
    match role {
        "user" => "user",
        "assistant" => "assistant",
        "tool" => "tool",
        "system" | "developer" => "system",
        // Not a GenAI role: a failed call or turn, shown in the conversation.
        "error" => "error",
        _ => "",
    }
}

fn message(time: When, role: &str, body: &str, model: String, usage: String, href: String) -> Entry {
    let (text, more) = cut(body, MESSAGE_CHARS);
    let more_chars = if more.is_empty() { String::new() } else { count(more.chars().count() as i64) };
    Entry {
        time,
        message: true,
        class: role_class(role),
        label: if role.is_empty() { "message".into() } else { role.to_owned() },
        source: "message",
        text,
        more,
        more_chars,
        tool_calls: Vec::new(),
        model,
        usage,
        href,
        call: (String::new(), String::new()),
        feedback: None,
    }
}

fn tool_calls(value: Option<&Value>) -> Vec<ToolCall> {
    let Some(Value::Array(calls)) = value else { return Vec::new() };
    calls
        .iter()
        .map(|call| {
            let name = call.get("name").and_then(Value::as_str).unwrap_or("(unnamed tool)").to_owned();
            let arguments = match call.get("arguments") {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => short(s, ARGUMENT_CHARS),
                Some(other) => short(&serde_json::to_string_pretty(other).unwrap_or_default(), ARGUMENT_CHARS),
            };
            ToolCall { name, arguments }
        })
        .collect()
}

/// Characters of a message that tell it from another when folding (a hosted turn's event
/// keeps the first 300 of its message and reply).
const FOLD_KEY_CHARS: usize = 300;

/// What a message is, for folding: its role, the start of its text, its tool calls.
type MessageKey = (String, String, String);

/// Folds the messages a call sends again (see the module's decisions): counts what the
/// conversation has shown, and what the current call (or hosted turn) has sent.
#[derive(Default)]
struct Fold {
    shown: HashMap<MessageKey, usize>,
    /// The current call: its trace and span (or a turn's time), what it sent, how many of
    /// its messages were folded and where their line goes.
    call: (String, String),
    sent: HashMap<MessageKey, usize>,
    folded: usize,
    line_at: usize,
    line_time: Option<When>,
    href: String,
    /// Hosted turns' messages and replies shown (role, text): a runtime may wrap the
    /// message it sends the model (a timestamp before it, say), and a turn keeps only the
    /// first 300 characters; a call's message holding one of them is that message.
    turns: Vec<(String, String)>,
}

/// Turn texts shorter than this are matched whole, not found inside a call's message (a
/// "yes" is inside too many).
const TURN_MATCH_CHARS: usize = 8;

impl Fold {
    fn key(role: &str, body: &str, tool_calls: Option<&Value>) -> MessageKey {
        let calls = tool_calls.filter(|v| !v.is_null()).map(Value::to_string).unwrap_or_default();
        (role.to_owned(), short(body, FOLD_KEY_CHARS), calls)
    }

    /// The key of a call's message (a hosted turn's when the message holds its text), and
    /// whether it is what a hosted agent's runtime told the model on its own: a user
    /// message of a session with turns that is none of the turns' messages (OpenClaw's
    /// internal context, say).
    fn message_key(&self, role: &str, body: &str, tool_calls: Option<&Value>) -> (MessageKey, bool) {
        let turn = self.turns.iter().rev().find(|(r, t)| {
            r == role && (t == body || (t.chars().count() >= TURN_MATCH_CHARS && body.contains(t.as_str())))
        });
        match turn {
            Some((_, text)) if tool_calls.is_none_or(Value::is_null) => (Self::key(role, text, None), false),
            _ => (Self::key(role, body, tool_calls), role == "user" && !self.turns.is_empty()),
        }
    }

    /// Starts the call `call` (ending the one before, whose folded line it then places).
    fn enter(&mut self, call: (String, String), entries: &mut Vec<Entry>) {
        if self.call != call {
            self.close(entries);
            self.call = call;
        }
    }

    /// True when the current call's message `key` was shown before (it is then folded).
    fn again(&mut self, key: MessageKey, time: &When, href: &str, at: usize) -> bool {
        let sent = self.sent.entry(key.clone()).or_default();
        *sent += 1;
        let shown = self.shown.entry(key).or_default();
        if *sent <= *shown {
            if self.folded == 0 {
                (self.line_at, self.line_time, self.href) = (at, Some(time.clone()), href.to_owned());
            }
            self.folded += 1;
            return true;
        }
        *shown += 1;
        false
    }

    fn close(&mut self, entries: &mut Vec<Entry>) {
        self.sent.clear();
        if self.folded == 0 {
            return;
        }
        let many = if self.folded == 1 { "1 message".to_owned() } else { format!("{} messages", self.folded) };
        let line = Entry {
            time: self.line_time.take().unwrap_or_default(),
            message: false,
            class: "",
            label: "folded".into(),
            source: "message",
            text: format!("{many} of this call, shown above"),
            more: String::new(),
            more_chars: String::new(),
            tool_calls: Vec::new(),
            model: String::new(),
            usage: String::new(),
            href: std::mem::take(&mut self.href),
            call: (String::new(), String::new()),
            feedback: None,
        };
        entries.insert(self.line_at.min(entries.len()), line);
        self.folded = 0;
    }
}

/// The entries of `transcript` rows: each message once ([`Fold`]). With `activity` false,
/// only messages (a hosted turn counts as two).
pub(super) fn conversation(rows: &[Map<String, Value>], activity: bool) -> Vec<Entry> {
    entries(rows, activity, Some(Fold::default()))
}

/// The entries of one call's messages, every one of them (a span's full input).
pub(super) fn call_messages(rows: &[Map<String, Value>]) -> Vec<Entry> {
    entries(rows, false, None)
}

fn entries(rows: &[Map<String, Value>], activity: bool, mut fold: Option<Fold>) -> Vec<Entry> {
    let mut entries = Vec::new();
    for row in rows {
        let time = When::iso(&text(row, "time"));
        let model = text(row, "model");
        let usage = usage_text(row);
        let href = span_href(&text(row, "trace_id"), &text(row, "span_id"));
        let body = text(row, "text");
        let kind = text(row, "kind");
        match text(row, "source").as_str() {
            "message" => {
                let role = text(row, "role");
                let mut runtimes_own = false;
                if let Some(fold) = &mut fold {
                    fold.enter((text(row, "trace_id"), text(row, "span_id")), &mut entries);
                    let (key, own) = fold.message_key(&role, &body, row.get("tool_calls"));
                    if fold.again(key, &time, &href, entries.len()) {
                        continue;
                    }
                    runtimes_own = own;
                }
                let mut entry = message(time, &role, &body, model, usage, href);
                if runtimes_own {
                    // Folded like a system message: the runtime's, not the person's.
                    (entry.class, entry.label) = ("system", "runtime context".to_owned());
                }
                entry.tool_calls = tool_calls(row.get("tool_calls"));
                entry.call = (text(row, "trace_id"), text(row, "span_id"));
                // A failed call's empty answer says nothing; its span says why (below).
                if !entry.text.is_empty() || !entry.tool_calls.is_empty() {
                    entries.push(entry);
                }
            }
            "span" if text(row, "status") == "error" && kind != "span" => {
                // A failed GenAI call (a span with an operation) is part of the conversation
                // whatever the view: the span's status message (`upstream 529 overloaded`)
                // in a bubble marked as an error, after the messages it was sent (the
                // transcript orders failed spans after their instant's messages).
                let why = text(row, "status_message");
                let what = if why.is_empty() { format!("{body} failed") } else { format!("{body}: {why}") };
                entries.push(message(time, "error", &what, model, usage, href));
            }
            "event" if kind == "turn" && text(row, "run_id").is_empty() => {
                // A hosted agent's turn: its data holds the message and the reply.
                let data: Value = serde_json::from_str(&body).unwrap_or_default();
                let field = |name: &str| data.get(name).and_then(Value::as_str).unwrap_or_default().to_owned();
                let (said, reply, error) = (field("text"), field("reply"), field("error"));
                let mut again = |role: &str, body: &str, entries: &mut Vec<Entry>| {
                    fold.as_mut().is_some_and(|fold| {
                        fold.enter(("turn".into(), text(row, "time")), entries);
                        if !body.trim().is_empty() {
                            fold.turns.push((role.to_owned(), body.trim().to_owned()));
                        }
                        fold.again(Fold::key(role, body.trim(), None), &time, "", entries.len())
                    })
                };
                if !again("user", &said, &mut entries) {
                    entries.push(message(time.clone(), "user", &said, String::new(), String::new(), String::new()));
                }
                if reply.is_empty() && !error.is_empty() {
                    let what = format!("The turn failed: {error}");
                    entries.push(message(time, "error", &what, model, usage, String::new()));
                } else if !again("assistant", &reply, &mut entries) {
                    entries.push(message(time, "assistant", &reply, model, usage, String::new()));
                }
            }
            source if activity => {
                let source = match source {
                    "span" => "span",
                    "event" => "event",
                    _ => "log",
                };
                entries.push(Entry {
                    time,
                    message: false,
                    class: "",
                    label: if kind.is_empty() { source.to_owned() } else { kind },
                    source,
                    text: short(&body, ACTIVITY_CHARS),
                    more: String::new(),
                    more_chars: String::new(),
                    tool_calls: Vec::new(),
                    model,
                    usage,
                    href,
                    call: (String::new(), String::new()),
                    feedback: None,
                });
            }
            _ => {}
        }
    }
    if let Some(fold) = &mut fold {
        fold.close(&mut entries);
    }
    entries
}

/// Where the next page of a transcript starts: (`from`, `skip`), or none when `rows` is
/// not a full page, or when the whole page is one instant (it could not move on).
fn transcript_next(rows: &[Map<String, Value>]) -> Option<(String, usize)> {
    if (rows.len() as i64) < TRANSCRIPT_ITEMS {
        return None;
    }
    let last = text(rows.last()?, "time");
    let same = rows.iter().rev().take_while(|r| text(r, "time") == last).count();
    (same < rows.len()).then_some((last, same))
}

// ---------------------------------------------------------------------------------------
// The list.

#[derive(Debug, Default, Deserialize)]
struct ListQuery {
    /// Words said in the conversation: a full-text search replaces the list.
    #[serde(default)]
    text: String,
    #[serde(default)]
    search: String,
    #[serde(default)]
    agent: String,
    #[serde(default)]
    service: String,
    #[serde(default)]
    model: String,
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
    #[serde(default)]
    window: String,
    /// A custom range's start (`datetime-local`, a date or RFC 3339; UTC): replaces the window.
    #[serde(default)]
    from: String,
    /// A custom range's end.
    #[serde(default)]
    to: String,
    /// The order: one of [`ORDERS`]' values (empty: most recently active first).
    #[serde(default)]
    order: String,
    #[serde(default)]
    page: String,
}

/// The orders the list offers: (value, label); the first is the default.
const ORDERS: &[(&str, &str)] = &[("", "Last active"), ("tokens", "Most tokens"), ("cost", "Most expensive")];

impl ListQuery {
    fn trimmed(self) -> Self {
        Self {
            text: self.text.trim().to_owned(),
            search: self.search.trim().to_owned(),
            agent: self.agent.trim().to_owned(),
            service: self.service.trim().to_owned(),
            model: self.model.trim().to_owned(),
            user: self.user.trim().to_owned(),
            tag: self.tag.trim().to_owned(),
            meta: self.meta.trim().to_owned(),
            score: self.score.trim().to_owned(),
            window: known_window(self.window.trim()),
            from: self.from.trim().to_owned(),
            to: self.to.trim().to_owned(),
            order: known_choice(&self.order, ORDERS),
            page: self.page,
        }
    }
}

impl Filters for ListQuery {
    const PATH: &'static str = "/dashboard/sessions";
    const SHAPE: &'static str = "sessions";

    fn args(&self, since: Option<String>, until: Option<String>, number: i64) -> Value {
        json!({
            "limit": PAGE_SIZE + 1,
            "offset": (number - 1) * PAGE_SIZE,
            "search": self.search,
            "agent_id": self.agent,
            "service_contains": self.service,
            "model_contains": self.model,
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
            ("search", &self.search),
            ("agent", &self.agent),
            ("service", &self.service),
            ("model", &self.model),
            ("user", &self.user),
            ("tag", &self.tag),
            ("meta", &self.meta),
            ("score", &self.score),
            ("window", &self.window),
            ("from", &self.from),
            ("to", &self.to),
            ("order", &self.order),
        ]
    }
}

#[derive(Template)]
#[template(path = "sessions.html")]
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
    sessions: Result<Vec<SessionRow>, Failure>,
    warning: String,
    pager: Pager,
    /// Conversations without a session (one per trace), on the first page when no agent
    /// or id search narrows the list: such traces have neither.
    sessionless: Option<Result<Vec<TraceRow>, Failure>>,
    /// The Traces page with all of them, when there are more than shown.
    sessionless_more: String,
    /// A full-text search's conversations (`?text=`), shown instead of the list.
    found: Option<Found>,
}

/// Sessionless conversations shown under the sessions.
const SESSIONLESS: i64 = 20;

struct SessionRow {
    id: String,
    href: String,
    /// The agent's name, or its id when it has none.
    agent: String,
    agent_id: String,
    agent_href: String,
    service: String,
    service_href: String,
    model: String,
    model_href: String,
    first_seen: When,
    last_seen: When,
    spans: String,
    events: String,
    logs: String,
    errors: String,
    failed: bool,
    input: String,
    output: String,
    cost: String,
    /// Its scores, one short line.
    scores: String,
}

async fn list(State(core): State<Core>, page: PageCall, Query(filter): Query<ListQuery>) -> Response {
    let filter = filter.trimmed();
    let number = page_number(&filter.page);
    let range =
        range_bound("From", &filter.from, false).and_then(|from| Ok((from, range_bound("To", &filter.to, true)?)));
    let (mut sessionless, mut sessionless_more) = (None, String::new());
    let none = || Pager::new("Sessions", 1, 0, false, |_| String::new());
    // A search replaces the list; a text with no words is a warning over it.
    let (found, search_warning) =
        search::for_list(&core, &page, &range, &filter, (&filter.text, &filter.window, &filter.service), false).await;
    let (sessions, warning, pager) = match range {
        Err(message) => (Ok(Vec::new()), message, none()),
        Ok(_) if found.is_some() => (Ok(Vec::new()), String::new(), none()),
        Ok((from, to)) => {
            let since = from.or_else(|| window_since(&filter.window));
            let answer = query::run(&core, &page, "sessions", filter.args(since.clone(), to.clone(), number)).await;
            let listed = rows_page(answer, "Sessions", number, &filter, |r| session_row(r, &filter));
            if number == 1 && filter.agent.is_empty() && filter.search.is_empty() {
                let args = json!({
                    "limit": SESSIONLESS + 1,
                    "sessionless": true,
                    "service_contains": filter.service,
                    "model_contains": filter.model,
                    "user": filter.user,
                    "tag": filter.tag,
                    "metadata": filter.meta,
                    "score": filter.score,
                    "since": since,
                    "until": to,
                });
                sessionless = Some(match query::run(&core, &page, "traces", args).await {
                    Ok(rows) => {
                        if rows.rows.len() as i64 > SESSIONLESS {
                            sessionless_more = link(
                                "/dashboard/traces",
                                &[
                                    ("sessionless", "1"),
                                    ("service", &filter.service),
                                    ("model", &filter.model),
                                    ("user", &filter.user),
                                    ("tag", &filter.tag),
                                    ("meta", &filter.meta),
                                    ("score", &filter.score),
                                    ("window", &filter.window),
                                    ("from", &filter.from),
                                    ("to", &filter.to),
                                ],
                            );
                        }
                        Ok(rows.rows.iter().take(SESSIONLESS as usize).map(TraceRow::of).collect())
                    }
                    Err(err) => Err(err.into()),
                });
            }
            listed
        }
    };
    let warning = if warning.is_empty() { search_warning } else { warning };
    let (services, models) = suggestions(&core, &page).await;
    let view = List {
        chrome: page.chrome("Sessions", "/dashboard/sessions"),
        filtered: filter.filtered(),
        filter,
        windows: WINDOWS,
        orders: ORDERS,
        services,
        models,
        page: number,
        sessions,
        warning,
        pager,
        sessionless,
        sessionless_more,
        found,
    };
    page.render(&view)
}

fn session_row(r: &Map<String, Value>, filter: &ListQuery) -> SessionRow {
    let id = text(r, "session_id");
    let (agent_id, service, model) = (text(r, "agent_id"), text(r, "service"), text(r, "last_model"));
    let agent = agent_label(&agent_id, &text(r, "agent_name"));
    SessionRow {
        href: session_href(&id),
        id,
        agent_href: filter.href(("agent", &agent_id), 1),
        agent_id,
        service_href: filter.href(("service", &service), 1),
        model_href: filter.href(("model", &model), 1),
        agent,
        service,
        model,
        first_seen: When::iso(&text(r, "first_seen")),
        last_seen: When::iso(&text(r, "last_seen")),
        spans: count(int(r, "spans")),
        events: count(int(r, "events")),
        logs: count(int(r, "logs")),
        errors: count(int(r, "errors")),
        failed: int(r, "errors") > 0,
        input: tokens(int(r, "input_tokens")),
        output: tokens(int(r, "output_tokens")),
        cost: format::total_cost(float(r, "cost_usd"), int(r, "unpriced_calls")),
        scores: super::feedback::summary(r.get("scores")),
    }
}

// ---------------------------------------------------------------------------------------
// One session.

#[derive(Debug, Default, Deserialize)]
struct DetailQuery {
    #[serde(default)]
    show: String,
    #[serde(default)]
    from: String,
    #[serde(default)]
    skip: String,
}

#[derive(Template)]
#[template(path = "sessions_detail.html")]
struct Detail {
    chrome: Chrome,
    id: String,
    missing: bool,
    summary: Result<Option<Summary>, Failure>,
    summary_warning: String,
    messages_only: bool,
    all_href: String,
    messages_href: String,
    conversation: Result<Vec<Entry>, Failure>,
    conversation_warning: String,
    /// The conversation does not start at the session's beginning.
    later: Option<String>,
    next: Option<String>,
    traces: Result<Vec<TraceRow>, Failure>,
    traces_warning: String,
    traces_more: Option<String>,
    runs: Result<Vec<RunRow>, Failure>,
    runs_warning: String,
    /// A hosted agent's runtime output (its stdout and stderr), its last lines.
    output: Result<Vec<OutputLine>, Failure>,
    output_warning: String,
    /// The session's scores, everything in it included.
    scores: super::feedback::Lines,
    /// The operator's feedback on the session.
    feedback: super::feedback::Form,
    /// The form adding the conversation (or some of its turns and calls) to a dataset.
    add_to_dataset: Option<super::features::AddToDataset>,
}

/// A line a hosted agent's runtime printed.
struct OutputLine {
    when: When,
    /// Printed on stderr.
    stderr: bool,
    text: String,
}

/// How many of a runtime's last output lines the session page shows.
const OUTPUT_LINES: i64 = 40;

struct Summary {
    stats: Vec<Stat>,
    /// The agent's name, or its id when it has none.
    agent: String,
    agent_id: String,
    agent_href: String,
    service: String,
    service_href: String,
    model: String,
    first_seen: When,
    last_seen: When,
}

/// A number of a page's stats line.
pub(super) struct Stat {
    pub(super) label: &'static str,
    pub(super) value: String,
    /// Shown as an error (errors above zero).
    pub(super) alert: bool,
}

impl Stat {
    pub(super) fn new(label: &'static str, value: String) -> Self {
        Self { label, value, alert: false }
    }
}

/// A trace of the session (also the trace list's row).
pub(super) struct TraceRow {
    pub(super) id: String,
    pub(super) href: String,
    pub(super) name: String,
    pub(super) service: String,
    pub(super) session: String,
    pub(super) session_href: String,
    pub(super) start: When,
    pub(super) duration: String,
    pub(super) spans: String,
    pub(super) errors: String,
    pub(super) failed: bool,
    pub(super) input: String,
    pub(super) output: String,
    pub(super) cost: String,
    /// Its scores, one short line (`thumbs 0.75 · tone friendly`).
    pub(super) scores: String,
}

impl TraceRow {
    /// A `traces` shape row.
    pub(super) fn of(r: &Map<String, Value>) -> Self {
        let id = text(r, "trace_id");
        let session = text(r, "session_id");
        Self {
            href: format!("/dashboard/traces/{}", percent_encode(&id)),
            id,
            name: text(r, "root_name"),
            service: text(r, "service"),
            session_href: if session.is_empty() { String::new() } else { session_href(&session) },
            session,
            start: When::iso(&text(r, "start_time")),
            duration: format::duration_ms(float(r, "duration_ms")),
            spans: count(int(r, "spans")),
            errors: count(int(r, "errors")),
            failed: int(r, "errors") > 0,
            input: tokens(int(r, "input_tokens")),
            output: tokens(int(r, "output_tokens")),
            cost: format::total_cost(float(r, "cost_usd"), int(r, "unpriced_calls")),
            scores: super::feedback::summary(r.get("scores")),
        }
    }
}

struct RunRow {
    id: String,
    runtime: String,
    status: String,
    started: When,
    ended: When,
    events: String,
    usage: String,
}

async fn detail(
    State(core): State<Core>,
    page: PageCall,
    Path(id): Path<String>,
    Query(view): Query<DetailQuery>,
) -> Response {
    let messages_only = view.show == "messages";
    let from = view.from.trim().to_owned();
    let from = if unix_ns(&from).is_some() { from } else { String::new() };
    let skip = if from.is_empty() { 0 } else { view.skip.trim().parse::<usize>().unwrap_or(0) };
    let (summary, transcript, traces, runs, output, scores) = tokio::join!(
        query::run(&core, &page, "sessions", json!({ "session_id": id, "limit": 1 })),
        query::run(&core, &page, "transcript", json!({ "session_id": id, "limit": TRANSCRIPT_ITEMS, "since": from })),
        query::run(&core, &page, "traces", json!({ "session_id": id, "limit": RELATED + 1 })),
        query::run(&core, &page, "runs", json!({ "session_id": id, "limit": RELATED })),
        query::run(
            &core,
            &page,
            "logs",
            json!({ "session_id": id, "event_name": roost_proto::RUNTIME_OUTPUT_EVENT, "limit": OUTPUT_LINES }),
        ),
        super::feedback::load(
            &core,
            &page,
            roost_proto::v1::ListScoresRequest { session_id: id.clone(), ..Default::default() }
        ),
    );
    let (scores, scores_failed) = match scores {
        Ok(scores) => (scores, None),
        Err(err) => (Vec::new(), Some(Failure::from(err))),
    };

    let (summary, summary_warning) = match summary {
        Ok(rows) => (Ok(rows.rows.iter().find(|r| text(r, "session_id") == id).map(summarise)), rows_warning(&rows)),
        Err(err) => (Err(Failure::from(err)), String::new()),
    };
    // The turns and calls the "Add to a dataset" form offers: this page's of the conversation.
    let mut picks = Vec::new();
    let (conversation, conversation_warning, next, transcript_empty) = match transcript {
        Ok(rows) => {
            let next = transcript_next(&rows.rows).map(|(at, same)| {
                let show = if messages_only { "messages" } else { "" };
                let skip = same.to_string();
                link(&session_href(&id), &[("show", show), ("from", &at), ("skip", &skip)])
            });
            // Items of the first instant that the previous page showed.
            let shown_before =
                if from.is_empty() { 0 } else { rows.rows.iter().take_while(|r| text(r, "time") == from).count() };
            let fresh = &rows.rows[skip.min(shown_before)..];
            picks = super::features::picks(fresh);
            let mut entries = conversation(fresh, !messages_only);
            super::feedback::mark_calls(&core, &mut entries, page.here(), &scores);
            (Ok(entries), rows_warning(&rows), next, rows.rows.is_empty())
        }
        Err(err) => (Err(Failure::from(err)), String::new(), None, false),
    };
    let (traces, traces_warning, traces_more) = match traces {
        Ok(mut rows) => {
            let more = rows.rows.len() as i64 > RELATED;
            rows.rows.truncate(RELATED as usize);
            let more = more.then(|| link("/dashboard/traces", &[("session", &id)]));
            (Ok(rows.rows.iter().map(TraceRow::of).collect::<Vec<_>>()), rows_warning(&rows), more)
        }
        Err(err) => (Err(Failure::from(err)), String::new(), None),
    };
    let (runs, runs_warning) = match runs {
        Ok(rows) => (Ok(rows.rows.iter().map(run_row).collect::<Vec<_>>()), rows_warning(&rows)),
        Err(err) => (Err(Failure::from(err)), String::new()),
    };

    // Newest first from the store; shown oldest first, as a terminal would.
    let (output, output_warning) = match output {
        Ok(rows) => (
            Ok(rows
                .rows
                .iter()
                .rev()
                .map(|r| OutputLine {
                    when: When::iso(&text(r, "time")),
                    stderr: int(r, "severity_number") >= 13,
                    text: text(r, "body"),
                })
                .collect::<Vec<_>>()),
            rows_warning(&rows),
        ),
        Err(err) => (Err(Failure::from(err)), String::new()),
    };

    let missing = from.is_empty()
        && matches!(summary, Ok(None))
        && transcript_empty
        && traces.as_ref().is_ok_and(Vec::is_empty)
        && runs.as_ref().is_ok_and(Vec::is_empty)
        && [&summary_warning, &conversation_warning, &traces_warning, &runs_warning].iter().all(|w| w.is_empty());
    let add_to_dataset =
        if missing { None } else { Some(super::features::add_to_dataset(&core, &page, &id, picks).await) };
    let here = session_href(&id);
    let target = super::feedback::Target::Session(id.clone());
    let feedback = super::feedback::Form::new(&core, target.clone(), "session", "session", page.here(), &scores);
    let scores = match scores_failed {
        Some(failure) => Err(failure),
        None => Ok(super::feedback::lines(&scores, &target, &HashMap::new())),
    };
    let skip_text = if skip > 0 { skip.to_string() } else { String::new() };
    let view = Detail {
        chrome: page.chrome(
            if missing { "No such session".to_owned() } else { format!("Session {id}") },
            "/dashboard/sessions",
        ),
        missing,
        summary,
        summary_warning,
        messages_only,
        all_href: link(&here, &[("from", &from), ("skip", &skip_text)]),
        messages_href: link(&here, &[("show", "messages"), ("from", &from), ("skip", &skip_text)]),
        conversation,
        conversation_warning,
        later: (!from.is_empty()).then(|| link(&here, &[("show", if messages_only { "messages" } else { "" })])),
        next,
        traces,
        traces_warning,
        traces_more,
        runs,
        runs_warning,
        output,
        output_warning,
        scores,
        feedback,
        add_to_dataset,
        id,
    };
    page.render_with(if missing { StatusCode::NOT_FOUND } else { StatusCode::OK }, &view)
}

fn summarise(r: &Map<String, Value>) -> Summary {
    let (first, last) = (text(r, "first_seen"), text(r, "last_seen"));
    let lasted = between_ms(&first, &last).map(format::duration_ms).unwrap_or_else(|| "–".into());
    let (agent_id, service) = (text(r, "agent_id"), text(r, "service"));
    let agent = agent_label(&agent_id, &text(r, "agent_name"));
    Summary {
        stats: vec![
            Stat::new("Lasted", lasted),
            Stat::new("Spans", count(int(r, "spans"))),
            Stat::new("Events", count(int(r, "events"))),
            Stat::new("Log records", count(int(r, "logs"))),
            Stat { label: "Errors", value: count(int(r, "errors")), alert: int(r, "errors") > 0 },
            Stat::new("Input tokens", tokens(int(r, "input_tokens"))),
            Stat::new("Output tokens", tokens(int(r, "output_tokens"))),
            Stat::new("Cost", format::total_cost(float(r, "cost_usd"), int(r, "unpriced_calls"))),
        ],
        agent_href: link("/dashboard/sessions", &[("agent", &agent_id)]),
        service_href: link("/dashboard/sessions", &[("service", &service)]),
        agent_id,
        agent,
        service,
        model: text(r, "last_model"),
        first_seen: When::iso(&first),
        last_seen: When::iso(&last),
    }
}

fn run_row(r: &Map<String, Value>) -> RunRow {
    RunRow {
        id: text(r, "run_id"),
        runtime: text(r, "runtime"),
        status: text(r, "status"),
        started: When::iso(&text(r, "started_at")),
        ended: When::iso(&text(r, "ended_at")),
        events: count(int(r, "events")),
        usage: usage_text(r),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn long_messages_are_cut_on_a_character_boundary() {
        let (shown, rest) = cut("héllo wörld", 7);
        assert_eq!((shown.as_str(), rest.as_str()), ("héllo w", "örld"));
        assert_eq!(cut("short", 10), ("short".to_owned(), String::new()));
        assert_eq!(short("abcdef", 3), "abc…");
    }

    #[test]
    fn transcript_rows_become_messages_turns_and_activity() {
        let rows = vec![
            row(json!({"time": "2026-01-01T00:00:00Z", "source": "span", "kind": "chat", "text": "chat gpt-4o",
                        "model": "gpt-4o", "input_tokens": 12, "output_tokens": 3, "cost_usd": 0.5,
                        "trace_id": "ab", "span_id": "cd"})),
            row(json!({"time": "2026-01-01T00:00:01Z", "source": "message", "kind": "message", "role": "assistant",
                        "text": "", "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}],
                        "trace_id": "ab", "span_id": "cd"})),
            row(json!({"time": "2026-01-01T00:00:02Z", "source": "event", "kind": "turn", "run_id": "",
                        "text": "{\"text\":\"hi\",\"reply\":\"hello\"}", "model": "m"})),
        ];
        let all = conversation(&rows, true);
        assert_eq!(all.len(), 4);
        assert!(!all[0].message);
        assert_eq!((all[0].label.as_str(), all[0].usage.as_str()), ("chat", "12 in · 3 out · $0.50"));
        assert_eq!(all[0].href, "/dashboard/traces/ab?span=cd");
        assert_eq!((all[1].class, all[1].tool_calls[0].name.as_str()), ("assistant", "get_weather"));
        assert!(all[1].tool_calls[0].arguments.contains("\"city\": \"Paris\""));
        assert_eq!((all[2].class, all[2].text.as_str()), ("user", "hi"));
        assert_eq!((all[3].class, all[3].text.as_str()), ("assistant", "hello"));
        assert_eq!(conversation(&rows, false).len(), 3, "messages only: no span line");
    }

    /// A message row of call `span`.
    fn said(span: &str, second: u32, role: &str, text: &str) -> Map<String, Value> {
        row(json!({"time": format!("2026-01-01T00:00:{second:02}Z"), "source": "message", "kind": "message",
                   "role": role, "text": text, "trace_id": "t", "span_id": span}))
    }

    fn shown(entries: &[Entry]) -> Vec<String> {
        entries.iter().map(|e| format!("{}: {}", e.label, e.text)).collect()
    }

    #[test]
    fn a_call_that_sends_the_conversation_again_shows_what_is_new() {
        let rows = vec![
            said("c1", 0, "system", "Be terse."),
            said("c1", 0, "user", "yes"),
            said("c1", 0, "assistant", "Sure?"),
            said("c2", 1, "system", "Be terse."),
            said("c2", 1, "user", "yes"),
            said("c2", 1, "assistant", "Sure?"),
            said("c2", 1, "user", "yes"),
            said("c2", 1, "assistant", "Done."),
        ];
        let entries = conversation(&rows, false);
        assert_eq!(
            shown(&entries),
            [
                "system: Be terse.",
                "user: yes",
                "assistant: Sure?",
                "folded: 3 messages of this call, shown above",
                "user: yes",
                "assistant: Done.",
            ],
            "the second yes is new"
        );
        assert_eq!(entries[3].href, "/dashboard/traces/t?span=c2", "the full input is a click away");
        assert_eq!(call_messages(&rows).len(), rows.len(), "a call's own view keeps everything");
    }

    #[test]
    fn a_hosted_turn_and_its_calls_are_one_exchange() {
        let turn = row(json!({"time": "2026-01-01T00:00:00Z", "source": "event", "kind": "turn", "run_id": "",
                              "text": "{\"text\":\"hi\",\"reply\":\"hello\"}"}));
        let rows = vec![
            turn,
            said("c1", 1, "system", "You are OpenClaw."),
            said("c1", 1, "user", "hi"),
            said("c1", 1, "assistant", "hello"),
        ];
        let wrapped = vec![
            row(json!({"time": "2026-01-01T00:00:00Z", "source": "event", "kind": "turn", "run_id": "",
                       "text": "{\"text\":\"Remember pomegranate.\",\"reply\":\"Noted.\"}"})),
            said("c1", 1, "user", "[Fri 2026-01-01 00:00 UTC] Remember pomegranate."),
            said("c1", 1, "assistant", "Noted."),
            row(json!({"time": "2026-01-01T00:00:02Z", "source": "event", "kind": "turn", "run_id": "",
                       "text": "{\"text\":\"Which word?\",\"reply\":\"Pomegranate.\"}"})),
            said("c2", 3, "user", "[Fri 2026-01-01 00:00 UTC] Remember pomegranate."),
            said("c2", 3, "assistant", "Noted."),
            said("c2", 3, "user", "[Fri 2026-01-01 00:00 UTC] Which word?"),
            said("c2", 3, "assistant", "Pomegranate."),
        ];
        let entries = conversation(&wrapped, false);
        let texts: Vec<&str> = entries.iter().filter(|e| e.message).map(|e| e.text.as_str()).collect();
        assert_eq!(texts, ["Remember pomegranate.", "Noted.", "Which word?", "Pomegranate."], "a runtime's envelope");

        // What the runtime adds on its own is folded, once.
        let context = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>> data";
        let mut with_context = wrapped.clone();
        with_context.insert(1, said("c1", 1, "user", context));
        with_context.push(said("c3", 5, "user", context));
        let entries = conversation(&with_context, false);
        let own: Vec<_> = entries.iter().filter(|e| e.text == context).map(|e| (e.class, e.label.as_str())).collect();
        assert_eq!(own, [("system", "runtime context")]);
        let entries = conversation(&rows, false);
        assert_eq!(
            shown(&entries),
            [
                "user: hi",
                "assistant: hello",
                "system: You are OpenClaw.",
                "folded: 2 messages of this call, shown above",
            ],
        );
    }

    #[test]
    fn a_full_transcript_page_continues_after_its_last_instant() {
        let at = |t: &str| row(json!({ "time": t }));
        let mut rows: Vec<_> = (0..TRANSCRIPT_ITEMS - 2).map(|_| at("2026-01-01T00:00:00Z")).collect();
        rows.push(at("2026-01-01T00:00:01.5Z"));
        rows.push(at("2026-01-01T00:00:01.5Z"));
        assert_eq!(transcript_next(&rows), Some(("2026-01-01T00:00:01.5Z".to_owned(), 2)));
        assert_eq!(transcript_next(&rows[1..]), None, "not a full page");
        let stuck: Vec<_> = (0..TRANSCRIPT_ITEMS).map(|_| at("2026-01-01T00:00:00Z")).collect();
        assert_eq!(transcript_next(&stuck), None);
    }

    #[test]
    fn times_between() {
        assert_eq!(between_ms("2026-01-01T00:00:00Z", "2026-01-01T00:00:01.5Z"), Some(1500.0));
    }
}
