//! `/dashboard/updates`: the self-updater. Running and latest versions, the last check and
//! install attempt, a rollback, held versions, the settings and stored flags, with a form
//! to turn unattended installs on or off (the kill switch still wins, and the page says so)
//! and a Check now button; then the history (`GET /api/update-check/status`, `/config`,
//! `/history` and their writes).

use askama::Template;
use axum::{
    Router,
    extract::State,
    response::Response,
    routing::{get, post},
};
use roost_proto::{
    ApiError,
    v1::{
        CheckNowRequest, GetUpdateConfigRequest, GetUpdateStatusRequest, ListUpdateHistoryRequest,
        SetUpdateConfigRequest, UpdateEvent,
    },
};
use serde::Deserialize;

use super::{
    Failure, When, duration_ms,
    forms::{Posted, csrf_field, failed, submit},
    layout::{Chrome, PageCall},
};
use crate::Core;

const HERE: &str = "/dashboard/updates";
/// History events shown (the API's default; it allows up to 100).
const HISTORY: i32 = 50;

pub(super) fn routes() -> Router<Core> {
    Router::new()
        .route(HERE, get(page))
        .route("/dashboard/updates/config", post(set_config))
        .route("/dashboard/updates/check", post(check_now))
}

#[derive(Template)]
#[template(path = "updates.html")]
struct UpdatesPage {
    chrome: Chrome,
    status: Result<Status, Failure>,
    config: Result<Config, Failure>,
    history: Result<Vec<Event>, Failure>,
}

struct Status {
    current: String,
    latest: String,
    update_available: bool,
    package: String,
    index_url: String,
    repository: String,
    public_key: String,
    last_check: Option<Event>,
    last_attempt: Option<Event>,
    rollback: Option<Rollback>,
    held: Vec<(String, When, String)>,
    role: String,
    check_every: String,
    min_age: String,
    retry: String,
    kill_switch: bool,
    auto_update: bool,
    restart: String,
    guard_armed: bool,
    installing: bool,
}

struct Rollback {
    from: String,
    to: String,
    reason: String,
    at: When,
    boots: i64,
    installed: bool,
    detail: String,
}

struct Config {
    /// The stored choice: `Some(true|false)`, or `None` (the role's default).
    stored: Option<bool>,
    source: String,
    plan: String,
    dismissed: String,
    effective: bool,
    kill_switch: bool,
    /// `SERVICE_AUTO_UPDATE` as the operator set it, when it is the kill switch.
    kill_value: String,
}

struct Event {
    at: When,
    kind: String,
    version: String,
    outcome: String,
    /// The outcome's chip class.
    class: &'static str,
    detail: String,
}

fn event(e: UpdateEvent) -> Event {
    let class = match e.outcome.as_str() {
        "ok" => "ok",
        "failed" | "refused" => "fail",
        "held" | "skipped" => "warn",
        _ => "",
    };
    Event {
        at: When::timestamp(e.at.as_ref()),
        kind: e.kind,
        version: e.version,
        outcome: e.outcome,
        class,
        detail: e.detail,
    }
}

fn secs(secs: i64) -> String {
    duration_ms(secs as f64 * 1000.0)
}

async fn page(State(core): State<Core>, page: PageCall) -> Response {
    let history = ListUpdateHistoryRequest { limit: HISTORY };
    let (status, config, history) = tokio::join!(
        page.load(
            "GET /api/update-check/status",
            core.updates.get_update_status(page.request(GetUpdateStatusRequest {}))
        ),
        page.load(
            "GET /api/update-check/config",
            core.updates.get_update_config(page.request(GetUpdateConfigRequest {}))
        ),
        page.load(
            format!("GET /api/update-check/history?limit={HISTORY}"),
            core.updates.list_update_history(page.request(history))
        ),
    );
    let status = status.map_err(Failure::from).map(|s| Status {
        update_available: s.update_available,
        last_check: s.last_check.map(event),
        last_attempt: s.last_attempt.map(event),
        rollback: s.rollback.map(|r| Rollback {
            at: When::timestamp(r.time.as_ref()),
            from: r.from,
            to: r.to,
            reason: r.reason,
            boots: r.boots,
            installed: r.installed,
            detail: r.detail,
        }),
        held: s.held.into_iter().map(|h| (h.version, When::timestamp(h.until.as_ref()), h.reason)).collect(),
        check_every: secs(s.check_every_secs),
        min_age: format!("{} h", super::features::input(s.min_age_hours)),
        retry: secs(s.retry_secs),
        kill_switch: s.kill_switch,
        auto_update: s.auto_update,
        guard_armed: s.guard_armed,
        installing: s.installing,
        current: s.current,
        latest: s.latest,
        package: s.package,
        index_url: s.index_url,
        repository: s.repository,
        public_key: s.public_key,
        role: s.role,
        restart: s.restart,
    });
    let config = config.map_err(Failure::from).map(|c| {
        let flags = c.config.unwrap_or_default();
        Config {
            stored: flags.auto_update,
            source: flags.auto_update_source,
            plan: flags.plan,
            dismissed: flags.dismissed.join(", "),
            effective: c.effective_auto_update,
            kill_switch: c.kill_switch,
            kill_value: c.kill_switch_value,
        }
    });
    let history = history.map_err(Failure::from).map(|h| h.events.into_iter().map(event).collect());
    page.render(&UpdatesPage { chrome: page.chrome("Updates", HERE), status, config, history })
}

#[derive(Debug, Deserialize)]
struct AutoUpdate {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    auto_update: String,
}

/// The toggle: `POST /api/update-check/config {"auto_update": …}`.
async fn set_config(State(core): State<Core>, Posted(page, form): Posted<AutoUpdate>) -> Response {
    let auto_update = match form.auto_update.trim() {
        "true" => Some(true),
        "false" => Some(false),
        // Absent: the core's own 400 ("auto_update (a boolean) is required").
        "" => None,
        other => {
            return failed(&page, &ApiError::invalid_argument(format!("auto_update: {other:?} is not true or false")));
        }
    };
    let api = match auto_update {
        Some(on) => format!("POST /api/update-check/config {{\"auto_update\":{on}}}"),
        None => "POST /api/update-check/config {}".to_owned(),
    };
    let request = SetUpdateConfigRequest { auto_update };
    submit(&page, api, core.updates.set_update_config(page.request(request)), HERE, |answer| {
        let choice = if auto_update == Some(true) { "on" } else { "off" };
        if answer.kill_switch {
            format!(
                "Automatic updates are stored as {choice}, but the kill switch (SERVICE_AUTO_UPDATE=off) keeps \
                 anything from installing."
            )
        } else if answer.effective_auto_update {
            format!("Automatic updates are {choice}: this roost installs new releases unattended.")
        } else {
            format!("Automatic updates are {choice}: nothing installs unattended.")
        }
    })
    .await
}

#[derive(Debug, Deserialize)]
struct CheckNow {
    #[serde(default)]
    csrf: String,
}

csrf_field!(AutoUpdate, CheckNow);

/// Check now: `POST /api/update-check/check-now`; what the check found is the notice.
async fn check_now(State(core): State<Core>, Posted(page, _): Posted<CheckNow>) -> Response {
    let call = core.updates.check_now(page.request(CheckNowRequest {}));
    submit(&page, "POST /api/update-check/check-now", call, HERE, |answer| {
        let check = answer.check.unwrap_or_default();
        let mut notice = format!("Checked the package index: {}", check.outcome);
        if !check.version.is_empty() {
            notice.push_str(&format!(" ({})", check.version));
        }
        if !check.detail.is_empty() {
            notice.push_str(&format!(", {}", check.detail));
        }
        notice.push('.');
        if let Some(install) = answer.install {
            notice.push_str(&format!(" Installing {}: {}.", install.version, install.outcome));
        }
        notice
    })
    .await
}
