//! `/` and `/dashboard`: the overview. Health checks, ingest rates, today's and this
//! week's tokens and cost, sessions active in the last hour, and the update banner with
//! its dismiss button (a form that calls the seed's dismiss endpoint's service). When roost
//! has spans but no model call at all, it says so: the usual cause is an app whose GenAI
//! instrumentation is missing or failed to import, which no other page would show.

use askama::Template;
use axum::{
    Router,
    extract::State,
    response::Response,
    routing::{get, post},
};
use roost_proto::v1::{DismissRequest, GetAlertsRequest, GetStatusRequest, GetUsageRequest, UsageRow};
use serde::Deserialize;
use serde_json::json;

use super::{
    Failure, When, count, float, format,
    forms::{Posted, csrf_field, submit},
    int,
    layout::{Chrome, PageCall, percent_encode},
    query, rate, text, tokens, total_cost,
};
use crate::Core;

pub(super) fn routes() -> Router<Core> {
    Router::new().route("/dashboard", get(overview)).route("/dashboard/dismiss", post(dismiss))
}

#[derive(Template)]
#[template(path = "overview.html")]
struct Overview {
    chrome: Chrome,
    /// Alerts firing now, shown first (nothing when none fire).
    firing: Result<Vec<super::features::Firing>, Failure>,
    status: Result<Status, Failure>,
    usage: Result<Usage, Failure>,
    active: Result<Vec<ActiveSession>, Failure>,
    active_warning: String,
    /// The services roost has spans from, named for the sentence saying it has no model
    /// call, when it has none ([`spans_without_model_calls`]).
    no_model_calls: Option<String>,
}

struct Status {
    version: String,
    health: String,
    checks: Vec<(String, String, String)>,
    rates: Vec<(&'static str, String, String)>,
    store: String,
    banner: Option<(String, String)>,
    unpriced: Vec<(String, String)>,
}

struct Usage {
    today: Totals,
    week: Totals,
}

struct Totals {
    cost: String,
    input: String,
    output: String,
    /// `1 call`, `12 calls`.
    calls: String,
}

impl Totals {
    fn of(row: Option<&UsageRow>) -> Self {
        let row = row.cloned().unwrap_or_default();
        Self {
            cost: total_cost(row.cost_usd, row.unpriced_calls),
            input: tokens(row.input_tokens),
            output: tokens(row.output_tokens),
            calls: if row.calls == 1 { "1 call".to_owned() } else { format!("{} calls", count(row.calls)) },
        }
    }
}

/// A conversation active in the last hour: a session, or a trace that holds model calls
/// and no session id (the official OpenAI instrumentation sends none).
struct ActiveSession {
    id: String,
    /// "no session" for a trace listed in a session's place.
    marker: &'static str,
    href: String,
    service: String,
    model: String,
    last_seen: When,
    tokens: String,
    cost: String,
}

/// Conversations the overview lists.
const ACTIVE: i64 = 10;

pub(super) async fn overview(State(core): State<Core>, page: PageCall) -> Response {
    let since = format::rfc3339(format::now_ms() / 1000 - 3600, 0);
    let (status, usage, active, alerts) = tokio::join!(
        page.load("GET /api/status", core.features.get_status(page.request(GetStatusRequest {}))),
        page.load("GET /api/usage?days=7", core.features.get_usage(page.request(GetUsageRequest { days: 7 }))),
        query::run(&core, &page, "sessions", json!({ "limit": ACTIVE, "since": since })),
        page.load("GET /api/alerts", core.features.get_alerts(page.request(GetAlertsRequest {}))),
    );
    let firing = alerts.map(super::features::firing).map_err(Failure::from);
    let sessionless =
        query::run(&core, &page, "traces", json!({ "limit": ACTIVE, "since": since, "sessionless": true })).await;
    let status = status.map_err(Failure::from).map(|s| {
        let health = s.health.clone().unwrap_or_default();
        let ingest = s.ingest.unwrap_or_default();
        let update = s.update.unwrap_or_default();
        let store = s.store.unwrap_or_default();
        Status {
            version: s.version,
            health: health.status,
            checks: health.checks.into_iter().map(|c| (c.name, c.status, c.detail)).collect(),
            rates: vec![
                ("Spans", rate(ingest.spans_per_sec), count(ingest.spans_total)),
                ("Log records", rate(ingest.logs_per_sec), count(ingest.logs_total)),
                ("Metric points", rate(ingest.metric_points_per_sec), count(ingest.metric_points_total)),
                ("Events", rate(ingest.events_per_sec), count(ingest.events_total)),
            ],
            store: format!("{} · {}", store.backend, format::bytes(store.size_bytes)),
            banner: update.show_banner.then(|| (update.latest.clone(), update.current.clone())),
            unpriced: s.unpriced_models.into_iter().map(|m| (m.model, count(m.calls))).collect(),
        }
    });
    // Only looked into when the week holds no call (the usual case costs nothing more).
    let no_model_calls = match &usage {
        Ok(u) if u.week.as_ref().is_none_or(|w| w.calls == 0) => spans_without_model_calls(&core, &page).await,
        _ => None,
    };
    let usage = usage
        .map_err(Failure::from)
        .map(|u| Usage { today: Totals::of(u.today.as_ref()), week: Totals::of(u.week.as_ref()) });
    let (active, active_warning) = match (active, sessionless) {
        (Ok(sessions), Ok(traces)) => {
            let mut rows: Vec<(String, ActiveSession)> = sessions
                .rows
                .iter()
                .map(|r| {
                    let id = text(r, "session_id");
                    let last = text(r, "last_seen");
                    (
                        last.clone(),
                        ActiveSession {
                            href: format!("/dashboard/sessions/{}", percent_encode(&id)),
                            id,
                            marker: "",
                            service: text(r, "service"),
                            model: text(r, "last_model"),
                            last_seen: When::iso(&last),
                            tokens: tokens(int(r, "input_tokens") + int(r, "output_tokens")),
                            cost: total_cost(float(r, "cost_usd"), int(r, "unpriced_calls")),
                        },
                    )
                })
                .collect();
            rows.extend(traces.rows.iter().map(|r| {
                let id = text(r, "trace_id");
                let last = text(r, "end_time");
                (
                    last.clone(),
                    ActiveSession {
                        href: format!("/dashboard/traces/{}", percent_encode(&id)),
                        id: text(r, "root_name"),
                        marker: "no session",
                        service: text(r, "service"),
                        model: String::new(),
                        last_seen: When::iso(&last),
                        tokens: tokens(int(r, "input_tokens") + int(r, "output_tokens")),
                        cost: total_cost(float(r, "cost_usd"), int(r, "unpriced_calls")),
                    },
                )
            }));
            rows.sort_by_key(|(last, _)| std::cmp::Reverse(super::sessions::unix_ns(last)));
            rows.truncate(ACTIVE as usize);
            let warning = [sessions.warning, traces.warning].into_iter().filter(|w| !w.is_empty()).collect::<Vec<_>>();
            (Ok(rows.into_iter().map(|(_, row)| row).collect()), warning.join(" "))
        }
        (Err(err), _) | (_, Err(err)) => (Err(err.into()), String::new()),
    };
    page.render(&Overview {
        chrome: page.chrome("Overview", "/dashboard"),
        firing,
        status,
        usage,
        active,
        active_warning,
        no_model_calls,
    })
}

/// Services shown by name in the sentence; more are counted.
const NAMED_SERVICES: usize = 3;

/// The services roost has spans from (`my-agent`, `a, b and 2 more`), when it has no model
/// call at all: no usage of any model on any day (GenAI spans, log events and token
/// metrics all count, q/1 `models`). `None` when there is a call, no span, or a query
/// failed (the page shows failures elsewhere; this sentence is only a hint).
async fn spans_without_model_calls(core: &Core, page: &PageCall) -> Option<String> {
    let (models, services) = tokio::join!(
        query::run(core, page, "models", json!({ "days": 3660, "limit": 1 })),
        query::run(core, page, "health", json!({ "limit": 100 })),
    );
    let (models, services) = (models.ok()?, services.ok()?);
    if !models.rows.is_empty() || !models.warning.is_empty() || !services.warning.is_empty() {
        return None;
    }
    let names: Vec<String> = services
        .rows
        .iter()
        .filter(|r| int(r, "spans") > 0)
        .map(|r| match text(r, "service") {
            name if name.is_empty() => "an app with no service.name".to_owned(),
            name => name,
        })
        .collect();
    match names.len() {
        0 => None,
        1 => Some(names[0].clone()),
        n if n <= NAMED_SERVICES => Some(format!("{} and {}", names[..n - 1].join(", "), names[n - 1])),
        n => Some(format!("{} and {} more", names[..NAMED_SERVICES].join(", "), n - NAMED_SERVICES)),
    }
}

#[derive(Debug, Deserialize)]
struct Dismiss {
    #[serde(default)]
    version: String,
    #[serde(default)]
    csrf: String,
}

csrf_field!(Dismiss);

/// The banner's dismiss button: `POST /api/update-check/dismiss {"version"}` through the
/// update service, then back to the overview.
async fn dismiss(State(core): State<Core>, Posted(page, form): Posted<Dismiss>) -> Response {
    let request = DismissRequest { version: form.version.clone() };
    submit(&page, "POST /api/update-check/dismiss", core.updates.dismiss(page.request(request)), "/dashboard", |_| {
        format!("The banner for {} is dismissed.", form.version)
    })
    .await
}
