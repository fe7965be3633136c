//! Full-text search on the Sessions and Traces pages (`?text=`): the q/1 `search` shape
//! grouped by conversation or by trace, each found item with its newest match's snippet,
//! the matching words marked, shown by `search_results.html`.
//!
//! Decisions: a search replaces the page's list (the list's own filters, order and paging
//! do not apply to hits); the time range and the service filter narrow it; at most
//! [`FOUND`] conversations or traces are listed, newest match first. A search whose text
//! has no words says so as the page's warning.

use roost_proto::search::{Terms, highlight};
use serde_json::{Map, Value, json};

use super::{
    Failure, When, count,
    layout::PageCall,
    listing::{Filters, window_since},
    query,
    sessions::{session_href, span_href},
    text,
};
use crate::Core;

/// Conversations or traces a search lists.
pub(super) const FOUND: i64 = 50;

/// What a search found, as the page shows it.
pub(super) struct Found {
    /// The text searched for.
    pub(super) text: String,
    /// Conversations (`group=conversation`) or traces.
    pub(super) by_trace: bool,
    pub(super) items: Result<Vec<Item>, Failure>,
    /// As many as a search lists were found: there may be more.
    pub(super) full: bool,
    /// The time range or service narrowed the search.
    pub(super) narrowed: bool,
    /// The page without the search.
    pub(super) clear: String,
}

/// One conversation or trace a search found.
pub(super) struct Item {
    /// A session id, or a trace's id for a conversation without one.
    pub(super) title: String,
    pub(super) href: String,
    /// The conversation has no session (it is one trace).
    pub(super) sessionless: bool,
    /// The trace's session, when listing traces.
    pub(super) session: String,
    pub(super) session_href: String,
    pub(super) service: String,
    pub(super) time: When,
    /// "1 match", "12 matches".
    pub(super) hits: String,
    /// What the newest match is (`message`, `tool call`, `span name`, `log`, `event`).
    pub(super) source: &'static str,
    /// Its snippet, in pieces: (text, a matched word).
    pub(super) snippet: Vec<(String, bool)>,
}

/// The search a list page shows instead of its list, for its filter's `(text, window,
/// service)` within its checked `range` (from, to): none when no text was given or the
/// range is not valid (the page says why). The second value is the warning for a text
/// with no words, shown over the usual list.
pub(super) async fn for_list(
    core: &Core,
    page: &PageCall,
    range: &Result<(Option<String>, Option<String>), String>,
    filter: &impl Filters,
    (text, window, service): (&str, &str, &str),
    by_trace: bool,
) -> (Option<Found>, String) {
    let (Ok((from, to)), false) = (range, text.is_empty()) else { return (None, String::new()) };
    let since = from.clone().or_else(|| window_since(window));
    let clear = filter.href(("text", ""), 1);
    match find(core, page, text, by_trace, (since, to.clone(), service), clear).await {
        Ok(found) => (Some(found), String::new()),
        Err(warning) => (None, warning),
    }
}

/// Searches for `text` (trimmed, non-empty), grouped by trace when `by_trace`, narrowed
/// by the page's `since`/`until` (RFC 3339) and service filter; `clear` is the page
/// without the search. `Err` holds the warning for a text with no words.
async fn find(
    core: &Core,
    page: &PageCall,
    text_searched: &str,
    by_trace: bool,
    narrow: (Option<String>, Option<String>, &str),
    clear: String,
) -> Result<Found, String> {
    let terms = Terms::parse(text_searched).map_err(|err| err.message().to_owned())?;
    let (since, until, service) = narrow;
    let args = json!({
        "text": text_searched,
        "group": if by_trace { "trace" } else { "conversation" },
        "limit": FOUND,
        "since": since,
        "until": until,
        "service_contains": service,
    });
    let items: Result<Vec<Item>, Failure> = match query::run(core, page, "search", args).await {
        Ok(rows) => Ok(rows.rows.iter().map(|r| item(r, &terms, by_trace)).collect()),
        Err(err) => Err(err.into()),
    };
    let full = items.as_ref().is_ok_and(|items| items.len() as i64 >= FOUND);
    let narrowed = since.is_some() || until.is_some() || !service.is_empty();
    Ok(Found { text: text_searched.to_owned(), by_trace, items, full, narrowed, clear })
}

fn item(r: &Map<String, Value>, terms: &Terms, by_trace: bool) -> Item {
    let (session, trace, span) = (text(r, "session_id"), text(r, "trace_id"), text(r, "span_id"));
    let hits = r.get("hits").and_then(Value::as_i64).unwrap_or(1);
    let trace_href = span_href(&trace, &span);
    let (title, href, sessionless) = if by_trace || session.is_empty() {
        (trace.clone(), trace_href, !by_trace)
    } else {
        (session.clone(), session_href(&session), false)
    };
    let source = match text(r, "source").as_str() {
        "message" => "message",
        "tool" => "tool call",
        "span" => "span name",
        "event" => "event",
        _ => "log",
    };
    Item {
        title: if title.is_empty() { "(a log record)".to_owned() } else { title },
        href,
        sessionless: sessionless && !trace.is_empty(),
        session_href: if by_trace && !session.is_empty() { session_href(&session) } else { String::new() },
        session: if by_trace { session } else { String::new() },
        service: text(r, "service"),
        time: When::iso(&text(r, "time")),
        hits: if hits == 1 { "1 match".to_owned() } else { format!("{} matches", count(hits)) },
        source,
        snippet: highlight(&text(r, "snippet"), terms),
    }
}
