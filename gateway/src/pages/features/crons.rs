//! `/dashboard/crons`: messages sent to hosted agents on a schedule, with a form for a new
//! one, and `/dashboard/crons/{id}`: one cron, its edit form, Kill and Delete, and its run
//! history (`GET /api/crons`, `GET /api/crons/{id}` and their writes).

use askama::Template;
use axum::{
    extract::{Path, State},
    response::Response,
};
use http::StatusCode;
use roost_proto::{
    ApiError, ErrorReason,
    v1::{
        CreateCronRequest, Cron, DeleteCronRequest, GetCronRequest, KillCronRequest, ListCronsRequest,
        UpdateCronRequest,
    },
};
use serde::Deserialize;

use super::{AgentChoice, agent_choices, alerts::Confirm, clip, flag, rest};
use crate::{
    Core,
    pages::{
        Failure, Message, When, duration_ms,
        forms::{Posted, csrf_field, failed, submit, submit_to},
        layout::{Chrome, PageCall, percent_encode},
    },
};

const HERE: &str = "/dashboard/crons";

#[derive(Template)]
#[template(path = "crons.html")]
struct CronsPage {
    chrome: Chrome,
    crons: Result<Crons, Failure>,
    /// The agents the new-cron form offers.
    agents: Vec<AgentChoice>,
}

struct Crons {
    rows: Vec<CronRow>,
    warning: String,
}

#[derive(Template)]
#[template(path = "cron.html")]
struct CronPage {
    chrome: Chrome,
    cron: Result<Detail, Failure>,
}

struct Detail {
    cron: CronRow,
    runs: Vec<RunRow>,
}

struct CronRow {
    id: String,
    href: String,
    name: String,
    instance_id: String,
    schedule: String,
    /// The schedule in words (`readable_schedule`).
    readable: String,
    message: String,
    short_message: String,
    enabled: bool,
    /// `(chip class, text)`: enabled (with a next run), finished (enabled, never again) or
    /// stopped.
    state: (&'static str, &'static str),
    next: When,
    last: When,
    created: When,
}

struct RunRow {
    started: When,
    duration: String,
    ok: bool,
    reply: String,
    error: String,
}

fn cron_row(c: Cron) -> CronRow {
    let next = When::timestamp(c.next_run.as_ref());
    let state = match (c.enabled, next.is_set()) {
        (true, true) => ("active", "enabled"),
        (true, false) => ("", "finished"),
        (false, _) => ("paused", "stopped"),
    };
    CronRow {
        href: format!("{HERE}/{}", percent_encode(&c.id)),
        short_message: clip(&c.message, 120),
        last: When::timestamp(c.last_run.as_ref()),
        created: When::timestamp(c.created_at.as_ref()),
        next,
        state,
        enabled: c.enabled,
        id: c.id,
        name: c.name,
        instance_id: c.instance_id,
        readable: readable_schedule(&c.schedule),
        schedule: c.schedule,
        message: c.message,
    }
}

/// A cron expression as a person reads it (`*/5 * * * *` → "every 5 minutes"), for the
/// common forms; anything else is shown as written (the raw expression is always
/// beside it). Times are UTC, as the scheduler runs them.
pub(super) fn readable_schedule(expr: &str) -> String {
    const DAYS: [&str; 7] = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
    let named = match expr.trim() {
        "@hourly" => Some("every hour, on the hour"),
        "@daily" | "@midnight" => Some("every day at 00:00 UTC"),
        "@weekly" => Some("every Sunday at 00:00 UTC"),
        "@monthly" => Some("on the 1st of every month at 00:00 UTC"),
        "@yearly" | "@annually" => Some("every 1 January at 00:00 UTC"),
        _ => None,
    };
    if let Some(named) = named {
        return named.to_owned();
    }
    let fields: Vec<&str> = expr.split_whitespace().collect();
    // Six fields: seconds first; read the rest when the seconds are 0.
    let fields: &[&str] = match fields.as_slice() {
        ["0", rest @ ..] if rest.len() == 5 => rest,
        all if all.len() == 5 => all,
        _ => return expr.to_owned(),
    };
    let number = |s: &str, max: u32| s.parse::<u32>().ok().filter(|n| *n <= max);
    let at = |minute: u32, hour: u32| format!("{hour:02}:{minute:02} UTC");
    match *fields {
        ["*", "*", "*", "*", "*"] => "every minute".to_owned(),
        [m, "*", "*", "*", "*"] if m.starts_with("*/") => match number(&m[2..], 59) {
            Some(n) if n > 0 => format!("every {n} minutes"),
            _ => expr.to_owned(),
        },
        [m, "*", "*", "*", "*"] => match number(m, 59) {
            Some(0) => "every hour, on the hour".to_owned(),
            Some(n) => format!("every hour at :{n:02}"),
            None => expr.to_owned(),
        },
        [m, h, "*", "*", "*"] if h.starts_with("*/") => match (number(m, 59), number(&h[2..], 23)) {
            (Some(m), Some(n)) if n > 0 => format!("every {n} hours at :{m:02}"),
            _ => expr.to_owned(),
        },
        [m, h, "*", "*", "*"] => match (number(m, 59), number(h, 23)) {
            (Some(m), Some(h)) => format!("every day at {}", at(m, h)),
            _ => expr.to_owned(),
        },
        [m, h, "*", "*", "1-5"] => match (number(m, 59), number(h, 23)) {
            (Some(m), Some(h)) => format!("every weekday at {}", at(m, h)),
            _ => expr.to_owned(),
        },
        [m, h, "*", "*", d] => match (number(m, 59), number(h, 23), number(d, 7)) {
            (Some(m), Some(h), Some(d)) => format!("every {} at {}", DAYS[(d % 7) as usize], at(m, h)),
            _ => expr.to_owned(),
        },
        [m, h, dom, "*", "*"] => match (number(m, 59), number(h, 23), number(dom, 31)) {
            (Some(m), Some(h), Some(dom)) if dom > 0 => format!("on day {dom} of every month at {}", at(m, h)),
            _ => expr.to_owned(),
        },
        _ => expr.to_owned(),
    }
}

pub(super) async fn page(State(core): State<Core>, page: PageCall) -> Response {
    let answer = page.load("GET /api/crons", core.features.list_crons(page.request(ListCronsRequest {}))).await;
    let crons = answer
        .map_err(Failure::from)
        .map(|list| Crons { rows: list.crons.into_iter().map(cron_row).collect(), warning: list.warning });
    let agents = agent_choices(&core, &page).await;
    page.render(&CronsPage { chrome: page.chrome("Crons", HERE), crons, agents })
}

pub(super) async fn detail(State(core): State<Core>, Path(id): Path<String>, page: PageCall) -> Response {
    let request = GetCronRequest { id: id.clone() };
    let answer = page.load(format!("GET /api/crons/{id}"), core.features.get_cron(page.request(request))).await;
    match answer {
        Err(err) if err.reason() == ErrorReason::NotFound => {
            let message = Message {
                chrome: page.chrome("Cron not found", HERE),
                heading: "No such cron".into(),
                detail: format!("There is no cron {id} (it may have been deleted). The crons page lists every one."),
                back: Some((HERE.to_owned(), "All crons".to_owned())),
            };
            page.render_with(StatusCode::NOT_FOUND, &message)
        }
        answer => {
            let title = match &answer {
                Ok(a) => a.cron.as_ref().filter(|c| !c.name.is_empty()).map_or_else(|| id.clone(), |c| c.name.clone()),
                Err(_) => id.clone(),
            };
            let cron = answer.map_err(Failure::from).map(|a| {
                let runs = a
                    .runs
                    .into_iter()
                    .map(|r| RunRow {
                        started: When::timestamp(r.started_at.as_ref()),
                        duration: duration_ms(r.duration_ms as f64),
                        ok: r.ok,
                        reply: r.reply,
                        error: r.error,
                    })
                    .collect();
                Detail { cron: cron_row(a.cron.unwrap_or_default()), runs }
            });
            page.render(&CronPage { chrome: page.chrome(format!("Cron {title}"), HERE), cron })
        }
    }
}

/// The new-cron form: every field of `CreateCronRequest`.
#[derive(Debug, Deserialize)]
pub(super) struct NewCron {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    instance_id: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    schedule: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    enabled: Option<String>,
}

pub(super) async fn create(State(core): State<Core>, Posted(page, form): Posted<NewCron>) -> Response {
    let request = match flag("enabled", form.enabled.as_deref()) {
        Ok(enabled) => CreateCronRequest {
            instance_id: form.instance_id.trim().to_owned(),
            name: form.name.trim().to_owned(),
            schedule: form.schedule.trim().to_owned(),
            message: form.message,
            enabled,
        },
        Err(err) => return failed(&page, &err),
    };
    let api = rest("POST /api/crons", &request);
    submit_to(&page, api, core.features.create_cron(page.request(request)), |answer| {
        let cron = answer.cron.unwrap_or_default();
        let path = format!("{HERE}/{}", percent_encode(&cron.id));
        (path, format!("Cron {} created: {} to {}.", cron.id, cron.schedule, cron.instance_id))
    })
    .await
}

/// Where a cron's forms go back to: the list, or the cron's own page (the default).
fn back(id: &str, back: &str) -> String {
    if back == HERE { HERE.to_owned() } else { format!("{HERE}/{}", percent_encode(id)) }
}

/// A cron's edit form: fields absent from the post stay as they are.
#[derive(Debug, Deserialize)]
pub(super) struct CronEdit {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    schedule: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    enabled: Option<String>,
    #[serde(default)]
    back: String,
}

fn cron_edit(id: String, form: CronEdit) -> Result<UpdateCronRequest, ApiError> {
    Ok(UpdateCronRequest {
        id,
        enabled: flag("enabled", form.enabled.as_deref())?,
        name: form.name.map(|n| n.trim().to_owned()),
        schedule: form.schedule.map(|s| s.trim().to_owned()),
        message: form.message,
    })
}

pub(super) async fn update(
    State(core): State<Core>,
    Path(id): Path<String>,
    Posted(page, form): Posted<CronEdit>,
) -> Response {
    let to = back(&id, &form.back);
    let request = match cron_edit(id.clone(), form) {
        Ok(request) => request,
        Err(err) => return failed(&page, &err),
    };
    let api = rest(&format!("POST /api/crons/{id}"), &request);
    submit(&page, api, core.features.update_cron(page.request(request)), &to, |_| format!("Cron {id} updated.")).await
}

/// Kill and Delete: nothing but the CSRF field and where to go back to.
#[derive(Debug, Deserialize)]
pub(super) struct CronAction {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    back: String,
}

csrf_field!(NewCron, CronEdit, CronAction);

pub(super) async fn kill(
    State(core): State<Core>,
    Path(id): Path<String>,
    Posted(page, form): Posted<CronAction>,
) -> Response {
    let request = KillCronRequest { id: id.clone() };
    let api = format!("POST /api/crons/{id}/kill");
    submit(&page, api, core.features.kill_cron(page.request(request)), &back(&id, &form.back), |_| {
        format!("Cron {id} killed: it will not run again (its history is kept).")
    })
    .await
}

pub(super) async fn delete(
    State(core): State<Core>,
    Path(id): Path<String>,
    Posted(page, _): Posted<Confirm>,
) -> Response {
    let request = DeleteCronRequest { id: id.clone() };
    let api = format!("DELETE /api/crons/{id}");
    submit(&page, api, core.features.delete_cron(page.request(request)), HERE, |_| {
        format!("Cron {id} deleted, with its history.")
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::readable_schedule;

    #[test]
    fn schedules_read_as_words() {
        for (expr, words) in [
            ("*/5 * * * *", "every 5 minutes"),
            ("0 * * * *", "every hour, on the hour"),
            ("15 * * * *", "every hour at :15"),
            ("30 */2 * * *", "every 2 hours at :30"),
            ("0 9 * * *", "every day at 09:00 UTC"),
            ("0 0 9 * * *", "every day at 09:00 UTC"),
            ("0 9 * * 1-5", "every weekday at 09:00 UTC"),
            ("30 18 * * 5", "every Friday at 18:30 UTC"),
            ("0 8 1 * *", "on day 1 of every month at 08:00 UTC"),
            ("@daily", "every day at 00:00 UTC"),
            ("0 9 * 1,7 *", "0 9 * 1,7 *"),
        ] {
            assert_eq!(readable_schedule(expr), words, "{expr}");
        }
    }
}
