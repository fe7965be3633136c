//! `/dashboard/alerts`: alerts firing now (with Acknowledge), their history, the rules with
//! an edit form and Delete each, and a form for a new rule (`GET /api/alerts` and its
//! writes).

use askama::Template;
use axum::{
    extract::{Path, State},
    response::Response,
};
use roost_proto::{
    ApiError,
    v1::{
        AcknowledgeAlertRequest, Alert, AlertRule, CreateAlertRuleRequest, DeleteAlertRuleRequest, GetAlertsRequest,
        UpdateAlertRuleRequest,
    },
};
use serde::Deserialize;

use super::{flag, input, number, rest};
use crate::{
    Core,
    pages::{
        Failure, When, count, duration_ms,
        forms::{Posted, csrf_field, failed, submit},
        layout::{Chrome, PageCall},
        usd,
    },
};

const HERE: &str = "/dashboard/alerts";

/// The kinds AlertRule documents: value, label, what the threshold means.
const KINDS: &[(&str, &str, &str)] = &[
    ("cost_per_day", "Cost per day", "today's cost (UTC) in USD above the threshold"),
    ("error_rate", "Error rate", "the share of spans with an error status over the window above the threshold (0–1)"),
    (
        "token_spike",
        "Token spike",
        "tokens in the window above the threshold times the average per window over the 24 hours before",
    ),
    ("stuck_session", "Stuck session", "a custom run still open with no event for the window (threshold unused)"),
];

#[derive(Template)]
#[template(path = "alerts.html")]
struct AlertsPage {
    chrome: Chrome,
    alerts: Result<Alerts, Failure>,
    kinds: &'static [(&'static str, &'static str, &'static str)],
}

struct Alerts {
    warning: String,
    active: Vec<AlertRow>,
    history: Vec<AlertRow>,
    rules: Vec<RuleRow>,
}

struct AlertRow {
    id: i64,
    rule: String,
    fired: When,
    value: String,
    message: String,
    resolved: When,
    acknowledged: When,
    /// The webhook delivery: `(chip class, chip text, detail)`; no chip without a webhook.
    delivery: (&'static str, &'static str, String),
}

struct RuleRow {
    id: String,
    name: String,
    kind_label: String,
    threshold: String,
    threshold_input: String,
    window: String,
    window_input: String,
    webhook_url: String,
    enabled: bool,
    created: When,
}

/// The threshold (or a measured value) of a rule of `kind`, as a person reads it.
fn measure(kind: &str, value: f64) -> String {
    match kind {
        "cost_per_day" => usd(value),
        "error_rate" => format!("{:.1}%", value * 100.0),
        // As the alert's message writes the ratio.
        "token_spike" => format!("{value:.1}×"),
        "stuck_session" => "–".into(),
        _ => input(value),
    }
}

fn kind_label(kind: &str) -> String {
    KINDS.iter().find(|k| k.0 == kind).map_or_else(|| kind.to_owned(), |k| k.1.to_owned())
}

fn alert_row(alert: Alert, rules: &[AlertRule]) -> AlertRow {
    let kind = rules.iter().find(|r| r.id == alert.rule_id).map(|r| r.kind.as_str());
    let value = match kind {
        Some("stuck_session") => format!("{} open runs", count(alert.value as i64)),
        Some(kind) => measure(kind, alert.value),
        None => input(alert.value),
    };
    let delivery = if alert.delivered && alert.delivery_attempts == 0 {
        // Nothing was sent: the rule has no webhook (the store marks such alerts done).
        ("", "no webhook", String::new())
    } else if alert.delivered {
        ("ok", "delivered", String::new())
    } else if !alert.delivery_error.is_empty() {
        ("fail", "failed", alert.delivery_error)
    } else {
        ("", "", String::new())
    };
    AlertRow {
        id: alert.id,
        rule: if alert.rule_name.is_empty() { alert.rule_id } else { alert.rule_name },
        fired: When::timestamp(alert.fired_at.as_ref()),
        value,
        message: alert.message,
        resolved: When::timestamp(alert.resolved_at.as_ref()),
        acknowledged: When::timestamp(alert.acknowledged_at.as_ref()),
        delivery,
    }
}

/// A firing alert as the Overview lists it: the rule, the value and the message as the
/// Alerts page writes them.
pub(in crate::pages) struct Firing {
    pub(in crate::pages) rule: String,
    pub(in crate::pages) fired: When,
    pub(in crate::pages) value: String,
    pub(in crate::pages) message: String,
    pub(in crate::pages) acknowledged: bool,
}

/// The alerts firing now, from `GET /api/alerts`'s answer.
pub(in crate::pages) fn firing(answer: roost_proto::v1::GetAlertsResponse) -> Vec<Firing> {
    answer
        .active
        .into_iter()
        .map(|alert| {
            let row = alert_row(alert, &answer.rules);
            Firing {
                rule: row.rule,
                fired: row.fired,
                value: row.value,
                message: row.message,
                acknowledged: row.acknowledged.is_set(),
            }
        })
        .collect()
}

pub(super) async fn page(State(core): State<Core>, page: PageCall) -> Response {
    let answer = page.load("GET /api/alerts", core.features.get_alerts(page.request(GetAlertsRequest {}))).await;
    let alerts = answer.map_err(Failure::from).map(|a| Alerts {
        warning: a.warning,
        active: a.active.into_iter().map(|x| alert_row(x, &a.rules)).collect(),
        history: a.history.into_iter().map(|x| alert_row(x, &a.rules)).collect(),
        rules: a
            .rules
            .into_iter()
            .map(|r| RuleRow {
                kind_label: kind_label(&r.kind),
                threshold: measure(&r.kind, r.threshold),
                threshold_input: input(r.threshold),
                window: if r.kind == "cost_per_day" {
                    "today (UTC)".into()
                } else {
                    duration_ms(r.window_secs as f64 * 1000.0)
                },
                window_input: r.window_secs.to_string(),
                created: When::timestamp(r.created_at.as_ref()),
                id: r.id,
                name: r.name,
                webhook_url: r.webhook_url,
                enabled: r.enabled,
            })
            .collect(),
    });
    page.render(&AlertsPage { chrome: page.chrome("Alerts", HERE), alerts, kinds: KINDS })
}

/// The new-rule form: every field of `CreateAlertRuleRequest`.
#[derive(Debug, Deserialize)]
pub(super) struct NewRule {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    threshold: String,
    #[serde(default)]
    window_secs: String,
    #[serde(default)]
    webhook_url: String,
    #[serde(default)]
    enabled: Option<String>,
}

fn new_rule(form: &NewRule) -> Result<CreateAlertRuleRequest, ApiError> {
    Ok(CreateAlertRuleRequest {
        name: form.name.trim().to_owned(),
        kind: form.kind.trim().to_owned(),
        threshold: number("threshold", Some(&form.threshold))?.unwrap_or_default(),
        window_secs: number("window_secs", Some(&form.window_secs))?.unwrap_or_default(),
        webhook_url: form.webhook_url.trim().to_owned(),
        enabled: flag("enabled", form.enabled.as_deref())?,
    })
}

pub(super) async fn create(State(core): State<Core>, Posted(page, form): Posted<NewRule>) -> Response {
    let request = match new_rule(&form) {
        Ok(request) => request,
        Err(err) => return failed(&page, &err),
    };
    let api = rest("POST /api/alerts", &request);
    submit(&page, api, core.features.create_alert_rule(page.request(request)), HERE, |answer| {
        let rule = answer.rule.unwrap_or_default();
        format!("Rule {} ({}) created.", display_name(&rule.name, &rule.id), rule.kind)
    })
    .await
}

fn display_name(name: &str, id: &str) -> String {
    if name.is_empty() { id.to_owned() } else { format!("“{name}”") }
}

/// A rule's edit form: fields absent from the post stay as they are; an empty number
/// field too. An empty webhook URL removes the webhook.
#[derive(Debug, Deserialize)]
pub(super) struct RuleEdit {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    threshold: Option<String>,
    #[serde(default)]
    window_secs: Option<String>,
    #[serde(default)]
    webhook_url: Option<String>,
    #[serde(default)]
    enabled: Option<String>,
}

fn rule_edit(id: String, form: &RuleEdit) -> Result<UpdateAlertRuleRequest, ApiError> {
    Ok(UpdateAlertRuleRequest {
        id,
        name: form.name.as_deref().map(|n| n.trim().to_owned()),
        threshold: number("threshold", form.threshold.as_deref())?,
        window_secs: number("window_secs", form.window_secs.as_deref())?,
        webhook_url: form.webhook_url.as_deref().map(|u| u.trim().to_owned()),
        enabled: flag("enabled", form.enabled.as_deref())?,
    })
}

pub(super) async fn update(
    State(core): State<Core>,
    Path(id): Path<String>,
    Posted(page, form): Posted<RuleEdit>,
) -> Response {
    let request = match rule_edit(id.clone(), &form) {
        Ok(request) => request,
        Err(err) => return failed(&page, &err),
    };
    let api = rest(&format!("POST /api/alerts/rules/{id}"), &request);
    submit(&page, api, core.features.update_alert_rule(page.request(request)), HERE, |answer| {
        let rule = answer.rule.unwrap_or_default();
        format!("Rule {} updated.", display_name(&rule.name, &rule.id))
    })
    .await
}

/// A form with nothing but its CSRF field (delete, acknowledge, kill).
#[derive(Debug, Deserialize)]
pub(in crate::pages) struct Confirm {
    #[serde(default)]
    pub(in crate::pages) csrf: String,
}

csrf_field!(NewRule, RuleEdit, Confirm);

pub(super) async fn delete(
    State(core): State<Core>,
    Path(id): Path<String>,
    Posted(page, _): Posted<Confirm>,
) -> Response {
    let request = DeleteAlertRuleRequest { id: id.clone() };
    let api = format!("DELETE /api/alerts/rules/{id}");
    submit(&page, api, core.features.delete_alert_rule(page.request(request)), HERE, |_| {
        format!("Rule {id} deleted, with its alerts.")
    })
    .await
}

pub(super) async fn acknowledge(
    State(core): State<Core>,
    Path(id): Path<String>,
    Posted(page, _): Posted<Confirm>,
) -> Response {
    let Ok(number) = id.parse::<i64>() else {
        return failed(&page, &ApiError::not_found(format!("no alert {id}")));
    };
    let request = AcknowledgeAlertRequest { id: number };
    let api = format!("POST /api/alerts/{id}/ack");
    submit(&page, api, core.features.acknowledge_alert(page.request(request)), HERE, |answer| {
        let alert = answer.alert.unwrap_or_default();
        format!("Alert {} of {} acknowledged.", alert.id, alert.rule_name)
    })
    .await
}
