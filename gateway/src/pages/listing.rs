//! What the two list pages (`/dashboard/sessions`, `/dashboard/traces`) share: the
//! activity windows, page numbers and the pager, links that keep a list's filters
//! ([`Filters`]), and one page of rows read from q/1 ([`rows_page`]).

use serde_json::{Map, Value};

use super::{Failure, count, format, layout::percent_encode, query};
use roost_proto::ApiError;

/// Rows a list page shows.
pub(super) const PAGE_SIZE: i64 = 50;
/// The last page a list offers (q/1 offsets stop at 10,000).
pub(super) const MAX_PAGE: i64 = 10_000 / PAGE_SIZE + 1;
/// The activity windows the list pages offer: (value, label, seconds).
pub(super) const WINDOWS: &[(&str, &str, i64)] = &[
    ("1h", "Last hour", 3600),
    ("24h", "Last 24 hours", 86_400),
    ("7d", "Last 7 days", 7 * 86_400),
    ("30d", "Last 30 days", 30 * 86_400),
];

/// `since` for a window value (`""` or unknown: none).
pub(super) fn window_since(window: &str) -> Option<String> {
    WINDOWS
        .iter()
        .find(|(value, ..)| *value == window)
        .map(|(.., secs)| format::rfc3339(format::now_ms() / 1000 - secs, 0))
}

/// A known window value, or `""`.
pub(super) fn known_window(window: &str) -> String {
    if WINDOWS.iter().any(|(value, ..)| *value == window) { window.to_owned() } else { String::new() }
}

/// Known services and models offered as the filters' suggestions (`<datalist>`).
pub(super) const SUGGESTIONS: i64 = 50;

/// The services (the `health` shape: the services table) and models (the `models` shape,
/// its days merged) to suggest in the filters: each at most [`SUGGESTIONS`], empty when
/// the store cannot say.
pub(super) async fn suggestions(core: &crate::Core, page: &super::layout::PageCall) -> (Vec<String>, Vec<String>) {
    let names = |answer: Result<query::Rows, ApiError>, key: &str| {
        let mut names: Vec<String> = Vec::new();
        for row in answer.map(|rows| rows.rows).unwrap_or_default() {
            let name = super::text(&row, key);
            if !name.is_empty() && !names.contains(&name) {
                names.push(name);
            }
        }
        names.sort();
        names
    };
    let services = query::run(core, page, "health", serde_json::json!({"limit": SUGGESTIONS})).await;
    let models = query::run(core, page, "models", serde_json::json!({"limit": SUGGESTIONS})).await;
    (names(services, "service"), names(models, "model"))
}

/// A custom range's bound from a `from` or `to` input as RFC 3339 (UTC): a
/// `datetime-local` value (`2024-07-18T10:30`, seconds optional), a date (the day's start,
/// or its end for `to`), or RFC 3339 itself. Empty is none; anything else a message.
pub(super) fn range_bound(label: &str, value: &str, end: bool) -> Result<Option<String>, String> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(None);
    }
    let candidates = match value.len() {
        10 => vec![format!("{value}T{}", if end { "23:59:59.999999999Z" } else { "00:00:00Z" })],
        16 => vec![format!("{value}:{}", if end { "59.999999999Z" } else { "00Z" })],
        19 => vec![format!("{value}{}", if end { ".999999999Z" } else { "Z" })],
        _ => vec![value.to_owned()],
    };
    for candidate in candidates {
        if candidate.parse::<prost_types::Timestamp>().is_ok() {
            return Ok(Some(candidate));
        }
    }
    Err(format!(
        "{label} “{value}” is not a date and time. Use the picker, or write it as 2024-07-18T10:30 (UTC) or 2024-07-18."
    ))
}

/// `value` if it is one of `choices`' values, else `""` (the default order).
pub(super) fn known_choice(value: &str, choices: &[(&str, &str)]) -> String {
    let value = value.trim();
    if choices.iter().skip(1).any(|(v, _)| *v == value) { value.to_owned() } else { String::new() }
}

/// The page number of `?page=` (1 when absent or unreadable; at most [`MAX_PAGE`]).
pub(super) fn page_number(value: &str) -> i64 {
    value.trim().parse::<i64>().ok().filter(|p| *p >= 1).unwrap_or(1).min(MAX_PAGE)
}

/// `path` with the non-empty `params` as its query.
pub(super) fn link(path: &str, params: &[(&str, &str)]) -> String {
    let query: Vec<String> =
        params.iter().filter(|(_, v)| !v.is_empty()).map(|(k, v)| format!("{k}={}", percent_encode(v))).collect();
    if query.is_empty() { path.to_owned() } else { format!("{path}?{}", query.join("&")) }
}

/// The links between pages of a list.
pub(super) struct Pager {
    /// What this page shows (`Sessions 51–100`), empty when there is one page only.
    pub(super) showing: String,
    /// The previous page, if any.
    pub(super) prev: Option<String>,
    /// The next page, if any.
    pub(super) next: Option<String>,
}

impl Pager {
    /// For page `number` of `noun`, which got `shown` rows and knows whether more follow;
    /// `at(n)` is page n's link.
    pub(super) fn new(noun: &str, number: i64, shown: usize, more: bool, at: impl Fn(i64) -> String) -> Self {
        let first = (number - 1) * PAGE_SIZE + 1;
        let showing = if number == 1 && !more {
            String::new()
        } else if shown == 0 {
            format!("Page {number}")
        } else {
            format!("{noun} {}–{}", count(first), count(first + shown as i64 - 1))
        };
        Self {
            showing,
            prev: (number > 1).then(|| at(number - 1)),
            next: (more && number < MAX_PAGE).then(|| at(number + 1)),
        }
    }
}

/// A q/1 answer's notes: its warning, and a word when rows were left out.
pub(super) fn rows_warning(rows: &query::Rows) -> String {
    let mut warning = rows.warning.clone();
    if rows.truncated {
        if !warning.is_empty() {
            warning.push(' ');
        }
        warning.push_str("Some rows were left out to keep the answer within its size limit.");
    }
    warning
}

/// A list's filters, all in its URL: every link of the list keeps them.
pub(super) trait Filters {
    /// The list's path.
    const PATH: &'static str;
    /// The q/1 shape the list shows.
    const SHAPE: &'static str;

    /// The shape's arguments for these filters, page `number`, with `since` and `until`
    /// read from the window or the range.
    fn args(&self, since: Option<String>, until: Option<String>, number: i64) -> Value;

    /// The activity window, and the custom range's `from` and `to` as typed.
    fn range(&self) -> (&str, &str, &str);

    /// The filters as read from a URL, cleaned up (trimmed, unknown choices dropped).
    fn cleaned(self) -> Self;

    /// The filters as query parameters, in the order links write them (`page` apart).
    fn params(&self) -> Vec<(&'static str, &str)>;

    /// Whether any filter is set.
    fn filtered(&self) -> bool {
        self.params().iter().any(|(_, value)| !value.is_empty())
    }

    /// The first page of this list.
    fn first_page(&self) -> String {
        self.href(("", ""), 1)
    }

    /// Every row of this list (not one page) as a file in `format` (`csv`, `jsonl`).
    fn export_href(&self, format: &str) -> String {
        link(&format!("{}.{format}", Self::PATH), &self.params())
    }

    /// Page `page` of this list with `change` made: (name, value) replaced.
    fn href(&self, change: (&str, &str), page: i64) -> String {
        let page = if page > 1 { page.to_string() } else { String::new() };
        let mut params = self.params();
        for param in &mut params {
            if param.0 == change.0 {
                param.1 = change.1;
            }
        }
        params.push(("page", page.as_str()));
        link(Self::PATH, &params)
    }
}

/// Page `number` of a list of `noun` from a q/1 answer read with `limit` one more than
/// [`PAGE_SIZE`] (the extra row says whether more follow): its rows made by `row`, the
/// answer's notes, and the pager.
pub(super) fn rows_page<R>(
    answer: Result<query::Rows, ApiError>,
    noun: &str,
    number: i64,
    filter: &impl Filters,
    row: impl Fn(&Map<String, Value>) -> R,
) -> (Result<Vec<R>, Failure>, String, Pager) {
    let (rows, warning, more) = match answer {
        Ok(mut rows) => {
            let more = rows.rows.len() as i64 > PAGE_SIZE;
            rows.rows.truncate(PAGE_SIZE as usize);
            let warning = rows_warning(&rows);
            (Ok(rows.rows.iter().map(row).collect::<Vec<_>>()), warning, more)
        }
        Err(err) => (Err(Failure::from(err)), String::new(), false),
    };
    let shown = rows.as_ref().map_or(0, Vec::len);
    let pager = Pager::new(noun, number, shown, more, |n| filter.href(("", ""), n));
    (rows, warning, pager)
}

/// The formats a list exports to, as the path's extension says (`/dashboard/sessions.csv`).
const EXPORT_FORMATS: &[&str] = &["csv", "jsonl"];

/// A list's export routes (`/dashboard/sessions.csv`, `….jsonl`), each taking the list's
/// filters.
pub(super) fn export_routes<F>(mut router: axum::Router<crate::Core>) -> axum::Router<crate::Core>
where
    F: Filters + serde::de::DeserializeOwned + Send + Sync + 'static,
{
    use axum::extract::{Query, State};
    for format in EXPORT_FORMATS {
        router = router.route(
            &format!("{}.{format}", F::PATH),
            axum::routing::get(
                async |State(core): State<crate::Core>, page: super::layout::PageCall, Query(filter): Query<F>| {
                    export_list(&core, &page, &filter.cleaned(), format).await
                },
            ),
        );
    }
    router
}

/// Every row a list's filters select, as a file (`/dashboard/sessions.csv?…`): its filters
/// without its pages, and without a text search (which replaces the list on the page).
async fn export_list<F: Filters>(
    core: &crate::Core,
    page: &super::layout::PageCall,
    filter: &F,
    format: &str,
) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    let (window, from, to) = filter.range();
    match range_bound("From", from, false).and_then(|from| Ok((from, range_bound("To", to, true)?))) {
        Err(message) => crate::HttpError::from(ApiError::invalid_argument(message)).into_response(),
        Ok((from, to)) => {
            let since = from.or_else(|| window_since(window));
            export(core, page, F::SHAPE, filter.args(since, to, 1), format).await
        }
    }
}

/// Every row of `shape` that `args` select (a page's filters: its `limit` and `offset` are
/// dropped, like its unset filters) as a download named `shape.format`, streamed from the
/// store by the `Export` call. A refused export answers its error.
async fn export(
    core: &crate::Core,
    page: &super::layout::PageCall,
    shape: &str,
    args: Value,
    format: &str,
) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    let mut args = match args {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    args.retain(|k, v| !(k == "limit" || k == "offset" || v.is_null() || v.as_str().is_some_and(str::is_empty)));
    let request = roost_proto::v1::ExportRequest {
        shape: shape.to_owned(),
        args: Some(roost_proto::json::value::map_to_struct(&args)),
        format: format.to_owned(),
    };
    match core.query.export(page.request(request)).await {
        Ok(parts) => crate::routes::query::export_file(parts.into_inner(), &format!("{shape}.{format}")),
        Err(status) => crate::HttpError::from(status).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_and_links() {
        assert_eq!((page_number(""), page_number("3"), page_number("-1"), page_number("x")), (1, 3, 1, 1));
        assert_eq!(page_number("999999"), MAX_PAGE);
        assert_eq!(link("/p", &[("a", ""), ("b", "x y/z")]), "/p?b=x%20y%2Fz");
        let pager = Pager::new("Sessions", 2, 50, true, |n| format!("/s?page={n}"));
        assert_eq!(pager.showing, "Sessions 51–100");
        assert_eq!((pager.prev.as_deref(), pager.next.as_deref()), (Some("/s?page=1"), Some("/s?page=3")));
        assert!(Pager::new("Sessions", 1, 3, false, |_| String::new()).showing.is_empty());
    }

    #[test]
    fn range_bounds() {
        assert_eq!(range_bound("From", "", false), Ok(None));
        assert_eq!(range_bound("From", "2024-07-18T10:30", false), Ok(Some("2024-07-18T10:30:00Z".into())));
        assert_eq!(range_bound("To", "2024-07-18T10:30", true), Ok(Some("2024-07-18T10:30:59.999999999Z".into())));
        assert_eq!(range_bound("To", "2024-07-18", true), Ok(Some("2024-07-18T23:59:59.999999999Z".into())));
        assert_eq!(range_bound("From", "2024-07-18T10:30:05Z", false), Ok(Some("2024-07-18T10:30:05Z".into())));
        assert!(range_bound("From", "yesterday", false).unwrap_err().contains("From “yesterday”"));
        assert!(range_bound("From", "2024-13-40", false).is_err());
    }
}
