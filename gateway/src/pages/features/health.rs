//! `/dashboard/health`: every health check with its detail (`GET /api/health`); the store,
//! ingest, workers, the last handler failure and what it means now, and unpriced models
//! (`GET /api/status`); and each telemetry service's verdict (q/1 `health`).

use askama::Template;
use axum::{extract::State, response::Response};
use roost_proto::v1::{GetHealthReportRequest, GetStatusRequest, HealthCheck};
use serde_json::json;

use crate::{
    Core,
    pages::{
        Failure, When, bytes, count, float, int,
        layout::{Chrome, PageCall},
        query, rate, text,
    },
};

/// Services shown (the q/1 shape's default).
const SERVICES: i64 = 100;

#[derive(Template)]
#[template(path = "health.html")]
struct HealthPage {
    chrome: Chrome,
    report: Result<Report, Failure>,
    status: Result<Status, Failure>,
    services: Result<Services, Failure>,
}

struct Report {
    status: String,
    checked: When,
    checks: Vec<Check>,
}

struct Check {
    name: String,
    status: String,
    detail: String,
}

impl From<HealthCheck> for Check {
    fn from(c: HealthCheck) -> Self {
        Self { name: c.name, status: c.status, detail: c.detail }
    }
}

struct Status {
    version: String,
    git_commit: String,
    backend: String,
    location: String,
    size: String,
    reachable: bool,
    store_error: String,
    stored: Vec<(&'static str, String)>,
    ingest: Vec<(&'static str, String, String)>,
    workers: Option<Check>,
    /// `(page, error, when)`.
    last_failure: Option<(String, String, When)>,
    /// `(verdict, chip class, what it means)`.
    verdict: (String, &'static str, &'static str),
    unpriced: Vec<(String, String)>,
}

struct Services {
    rows: Vec<ServiceRow>,
    warning: String,
    /// More services than shown (the limit, or the byte budget).
    more: bool,
}

struct ServiceRow {
    service: String,
    status: String,
    first_seen: When,
    last_seen: When,
    spans: String,
    errors: String,
    error_rate: String,
    logs: String,
    log_errors: String,
    metric_points: String,
}

fn verdict(verdict: &str) -> (&'static str, &'static str) {
    match verdict {
        "none" => ("ok", "No feature page has answered empty since roost started."),
        "transient" => (
            "warn",
            "A page answered empty because the store failed, but the store answers now: that empty answer was a \
             passing failure.",
        ),
        "broken" => (
            "fail",
            "The store still does not answer: pages that show nothing with a warning are not showing an empty store.",
        ),
        _ => ("", ""),
    }
}

pub(super) async fn page(State(core): State<Core>, page: PageCall) -> Response {
    let (report, status, services) = tokio::join!(
        page.load("GET /api/health", core.features.get_health_report(page.request(GetHealthReportRequest {}))),
        page.load("GET /api/status", core.features.get_status(page.request(GetStatusRequest {}))),
        query::run(&core, &page, "health", json!({ "limit": SERVICES })),
    );
    let report = report.map_err(Failure::from).map(|r| {
        let r = r.report.unwrap_or_default();
        Report {
            status: r.status,
            checked: When::timestamp(r.checked_at.as_ref()),
            checks: r.checks.into_iter().map(Check::from).collect(),
        }
    });
    let status = status.map_err(Failure::from).map(|s| {
        let store = s.store.unwrap_or_default();
        let ingest = s.ingest.unwrap_or_default();
        let (class, meaning) = verdict(&s.handler_verdict);
        Status {
            version: s.version,
            git_commit: s.git_commit,
            size: bytes(store.size_bytes),
            reachable: store.reachable,
            stored: vec![
                ("Spans", count(store.spans)),
                ("Log records", count(store.logs)),
                ("Metric points", count(store.metric_points)),
                ("Events", count(store.events)),
                ("Custom runs", count(store.runs)),
                ("Sessions", count(store.sessions)),
                ("Hosted agents", count(store.hosted_agents)),
            ],
            backend: store.backend,
            location: store.location,
            store_error: store.error,
            ingest: vec![
                ("Spans", rate(ingest.spans_per_sec), count(ingest.spans_total)),
                ("Log records", rate(ingest.logs_per_sec), count(ingest.logs_total)),
                ("Metric points", rate(ingest.metric_points_per_sec), count(ingest.metric_points_total)),
                ("Events", rate(ingest.events_per_sec), count(ingest.events_total)),
            ],
            workers: s.health.unwrap_or_default().checks.into_iter().find(|c| c.name == "workers").map(Check::from),
            last_failure: s.last_handler_failure.map(|f| (f.page, f.error, When::timestamp(f.at.as_ref()))),
            verdict: (s.handler_verdict, class, meaning),
            unpriced: s.unpriced_models.into_iter().map(|m| (m.model, count(m.calls))).collect(),
        }
    });
    let services = services.map_err(Failure::from).map(|r| Services {
        more: r.truncated || r.rows.len() as i64 >= SERVICES,
        rows: r
            .rows
            .iter()
            .map(|row| ServiceRow {
                service: text(row, "service"),
                status: text(row, "status"),
                first_seen: When::iso(&text(row, "first_seen")),
                last_seen: When::iso(&text(row, "last_seen")),
                spans: count(int(row, "spans")),
                errors: count(int(row, "errors")),
                error_rate: format!("{:.1}%", float(row, "error_rate") * 100.0),
                logs: count(int(row, "logs")),
                log_errors: count(int(row, "log_errors")),
                metric_points: count(int(row, "metric_points")),
            })
            .collect(),
        warning: r.warning,
    });
    page.render(&HealthPage { chrome: page.chrome("Health", "/dashboard/health"), report, status, services })
}
