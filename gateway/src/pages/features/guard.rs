//! `/dashboard/guard`: the guard policies (a spend limit per agent per day, a loop
//! detector) with an edit form and Delete each, a form for a new one, and the incidents
//! they recorded (`GET /api/guard` and its writes).

use askama::Template;
use axum::{
    extract::{Path, State},
    response::Response,
};
use roost_proto::{
    ApiError,
    v1::{CreateGuardPolicyRequest, DeleteGuardPolicyRequest, GetGuardRequest, UpdateGuardPolicyRequest},
};
use serde::Deserialize;

use super::{AgentChoice, agent_choices, alerts::Confirm, flag, input, number, rest};
use crate::{
    Core,
    pages::{
        Failure, When,
        forms::{Posted, csrf_field, failed, submit},
        layout::{Chrome, PageCall},
        usd,
    },
};

const HERE: &str = "/dashboard/guard";

/// The kinds GuardPolicy documents: value, label, what the limit means.
const KINDS: &[(&str, &str, &str)] = &[
    ("spend_per_day", "Spend per day", "the agent's cost today (UTC) in USD above the limit"),
    (
        "tool_loop",
        "Tool loop",
        "the agent's last `limit` tool calls all the same tool with the same input (at least 2)",
    ),
];

#[derive(Template)]
#[template(path = "guard.html")]
struct GuardPage {
    chrome: Chrome,
    guard: Result<Guard, Failure>,
    kinds: &'static [(&'static str, &'static str, &'static str)],
    /// The agents the new-policy form offers (besides every agent).
    agents: Vec<AgentChoice>,
}

struct Guard {
    warning: String,
    policies: Vec<PolicyRow>,
    incidents: Vec<IncidentRow>,
}

struct PolicyRow {
    id: String,
    kind_label: String,
    instance: String,
    limit: String,
    limit_input: String,
    enabled: bool,
    created: When,
}

struct IncidentRow {
    id: i64,
    policy_id: String,
    instance_id: String,
    at: When,
    detail: String,
    action: String,
    paused: bool,
}

fn limit_text(kind: &str, limit: f64) -> String {
    match kind {
        "spend_per_day" => format!("{} a day", usd(limit)),
        "tool_loop" => format!("{} identical calls", input(limit)),
        _ => input(limit),
    }
}

pub(super) async fn page(State(core): State<Core>, page: PageCall) -> Response {
    let answer = page.load("GET /api/guard", core.features.get_guard(page.request(GetGuardRequest {}))).await;
    let guard = answer.map_err(Failure::from).map(|g| Guard {
        warning: g.warning,
        policies: g
            .policies
            .into_iter()
            .map(|p| PolicyRow {
                kind_label: KINDS.iter().find(|k| k.0 == p.kind).map_or_else(|| p.kind.clone(), |k| k.1.to_owned()),
                limit: limit_text(&p.kind, p.limit),
                limit_input: input(p.limit),
                instance: p.instance_id,
                enabled: p.enabled,
                created: When::timestamp(p.created_at.as_ref()),
                id: p.id,
            })
            .collect(),
        incidents: g
            .incidents
            .into_iter()
            .map(|i| IncidentRow {
                id: i.id,
                paused: i.action == "paused",
                policy_id: i.policy_id,
                instance_id: i.instance_id,
                at: When::timestamp(i.at.as_ref()),
                detail: i.detail,
                action: i.action,
            })
            .collect(),
    });
    let agents = agent_choices(&core, &page).await;
    page.render(&GuardPage { chrome: page.chrome("Guard", HERE), guard, kinds: KINDS, agents })
}

/// The new-policy form: every field of `CreateGuardPolicyRequest`.
#[derive(Debug, Deserialize)]
pub(super) struct NewPolicy {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    instance_id: String,
    #[serde(default)]
    limit: String,
    #[serde(default)]
    enabled: Option<String>,
}

fn new_policy(form: &NewPolicy) -> Result<CreateGuardPolicyRequest, ApiError> {
    Ok(CreateGuardPolicyRequest {
        kind: form.kind.trim().to_owned(),
        instance_id: form.instance_id.trim().to_owned(),
        limit: number("limit", Some(&form.limit))?.unwrap_or_default(),
        enabled: flag("enabled", form.enabled.as_deref())?,
    })
}

pub(super) async fn create(State(core): State<Core>, Posted(page, form): Posted<NewPolicy>) -> Response {
    let request = match new_policy(&form) {
        Ok(request) => request,
        Err(err) => return failed(&page, &err),
    };
    let api = rest("POST /api/guard", &request);
    submit(&page, api, core.features.create_guard_policy(page.request(request)), HERE, |answer| {
        let policy = answer.policy.unwrap_or_default();
        let whom = if policy.instance_id.is_empty() { "every agent".to_owned() } else { policy.instance_id };
        format!("Policy {} ({} for {whom}) created.", policy.id, policy.kind)
    })
    .await
}

/// A policy's edit form: absent or empty fields stay as they are.
#[derive(Debug, Deserialize)]
pub(super) struct PolicyEdit {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    limit: Option<String>,
    #[serde(default)]
    enabled: Option<String>,
}

csrf_field!(NewPolicy, PolicyEdit);

pub(super) async fn update(
    State(core): State<Core>,
    Path(id): Path<String>,
    Posted(page, form): Posted<PolicyEdit>,
) -> Response {
    let fields =
        number("limit", form.limit.as_deref()).and_then(|l| Ok((l, flag("enabled", form.enabled.as_deref())?)));
    let request = match fields {
        Ok((limit, enabled)) => UpdateGuardPolicyRequest { id: id.clone(), limit, enabled },
        Err(err) => return failed(&page, &err),
    };
    let api = rest(&format!("POST /api/guard/{id}"), &request);
    submit(&page, api, core.features.update_guard_policy(page.request(request)), HERE, |_| {
        format!("Policy {id} updated.")
    })
    .await
}

pub(super) async fn delete(
    State(core): State<Core>,
    Path(id): Path<String>,
    Posted(page, _): Posted<Confirm>,
) -> Response {
    let request = DeleteGuardPolicyRequest { id: id.clone() };
    let api = format!("DELETE /api/guard/{id}");
    submit(&page, api, core.features.delete_guard_policy(page.request(request)), HERE, |_| {
        format!("Policy {id} deleted.")
    })
    .await
}
