//! The feature pages of the dashboard: alerts, guard, evaluators, datasets and experiments,
//! crons, channels, skills and health, each over its feature API (`FeatureService`;
//! `EvaluatorService` for the evaluators, `ExperimentService` for datasets and experiments),
//! with the forms that change alert rules, guard policies, evaluators, datasets,
//! experiments and crons. Module per page; the form-field parsing they share is here.

mod alerts;
pub(super) use alerts::{Firing, firing};
mod channels;
mod crons;
mod datasets;
pub(super) use datasets::{AddToDataset, add_to_dataset, picks};
mod evaluators;
mod experiments;
mod guard;
mod health;
mod skills;

use std::str::FromStr;

use axum::{
    Router,
    routing::{get, post},
};
use roost_proto::ApiError;
use serde::Serialize;

use crate::Core;

pub(super) fn routes() -> Router<Core> {
    Router::new()
        .route("/dashboard/alerts", get(alerts::page).post(alerts::create))
        .route("/dashboard/alerts/rules/{id}", post(alerts::update))
        .route("/dashboard/alerts/rules/{id}/delete", post(alerts::delete))
        .route("/dashboard/alerts/{id}/ack", post(alerts::acknowledge))
        .route("/dashboard/guard", get(guard::page).post(guard::create))
        .route("/dashboard/guard/{id}", post(guard::update))
        .route("/dashboard/guard/{id}/delete", post(guard::delete))
        .route("/dashboard/evaluators", get(evaluators::page).post(evaluators::create))
        .route("/dashboard/evaluators/{id}", get(evaluators::detail).post(evaluators::update))
        .route("/dashboard/evaluators/{id}/delete", post(evaluators::delete))
        .route("/dashboard/datasets", get(datasets::page).post(datasets::create))
        .route("/dashboard/datasets/{id}", get(datasets::detail))
        .route("/dashboard/datasets/{id}/items", post(datasets::add_items))
        .route("/dashboard/datasets/{id}/run", post(datasets::run))
        .route("/dashboard/datasets/{id}/delete", post(datasets::delete))
        .route("/dashboard/sessions/{session_id}/dataset", post(datasets::from_session))
        .route("/dashboard/experiments/compare", get(experiments::compare))
        .route("/dashboard/experiments/{id}", get(experiments::detail))
        .route("/dashboard/experiments/{id}/cancel", post(experiments::cancel))
        .route("/dashboard/crons", get(crons::page).post(crons::create))
        .route("/dashboard/crons/{id}", get(crons::detail).post(crons::update))
        .route("/dashboard/crons/{id}/kill", post(crons::kill))
        .route("/dashboard/crons/{id}/delete", post(crons::delete))
        .route("/dashboard/channels", get(channels::page))
        .route("/dashboard/skills", get(skills::page))
        .route("/dashboard/health", get(health::page))
}

/// A hosted agent offered in a form's agent picker.
pub(super) struct AgentChoice {
    pub(super) id: String,
    /// Its name (else its id), runtime and state: `planner · ins_… (echo, running)`.
    pub(super) label: String,
}

/// Every hosted agent not destroyed, for the forms that name one (crons, guard): a picker
/// instead of a typed id. Empty when the channels API cannot answer (the form then says
/// there is no agent to pick).
pub(super) async fn agent_choices(core: &Core, page: &crate::pages::layout::PageCall) -> Vec<AgentChoice> {
    let request = page.request(roost_proto::v1::GetChannelsRequest {});
    let Ok(answer) = page.load("GET /api/channels", core.features.get_channels(request)).await else {
        return Vec::new();
    };
    answer
        .agents
        .into_iter()
        .map(|a| {
            let who =
                if a.name.is_empty() { a.instance_id.clone() } else { format!("{} · {}", a.name, a.instance_id) };
            AgentChoice { label: format!("{who} ({}, {})", a.runtime, a.status), id: a.instance_id }
        })
        .collect()
}

/// A posted number field: empty (or absent) is `None`; anything else must parse.
pub(super) fn number<T: FromStr>(field: &str, value: Option<&str>) -> Result<Option<T>, ApiError> {
    match value.map(str::trim) {
        None | Some("") => Ok(None),
        Some(v) => {
            v.parse().map(Some).map_err(|_| ApiError::invalid_argument(format!("{field}: {v:?} is not a number")))
        }
    }
}

/// A posted yes/no field (a select of `true`/`false`, or a checkbox's `on`): empty or
/// absent is `None`.
pub(super) fn flag(field: &str, value: Option<&str>) -> Result<Option<bool>, ApiError> {
    match value.map(str::trim) {
        None | Some("") => Ok(None),
        Some("true" | "on" | "yes" | "1") => Ok(Some(true)),
        Some("false" | "off" | "no" | "0") => Ok(Some(false)),
        Some(v) => Err(ApiError::invalid_argument(format!("{field}: {v:?} is not true or false"))),
    }
}

/// How a write reads over REST for the footer: method and path, then the JSON body with
/// unset fields (and the path's `id`) left out.
pub(super) fn rest(method_path: &str, body: &impl Serialize) -> String {
    let mut value = serde_json::to_value(body).unwrap_or_default();
    if let Some(map) = value.as_object_mut() {
        map.retain(|k, v| k != "id" && !v.is_null());
        if map.is_empty() {
            return method_path.to_owned();
        }
    }
    format!("{method_path} {value}")
}

/// Shortens `text` to `max` characters for a table cell (the full text is on its page).
pub(super) fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        let mut out: String = text.chars().take(max).collect();
        out.push('…');
        out
    }
}

/// A number as a form field's value (no exponent, no trailing `.0`).
pub(super) fn input(value: f64) -> String {
    let text = format!("{value}");
    text.strip_suffix(".0").map_or(text.clone(), str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_fields_parse_or_say_why() {
        assert_eq!(number::<f64>("threshold", Some(" 0.5 ")).unwrap(), Some(0.5));
        assert_eq!(number::<i64>("window_secs", Some("")).unwrap(), None);
        assert_eq!(number::<i64>("window_secs", None).unwrap(), None);
        let err = number::<f64>("threshold", Some("lots")).unwrap_err();
        assert!(err.message().contains("threshold"), "{}", err.message());
        assert_eq!(flag("enabled", Some("false")).unwrap(), Some(false));
        assert_eq!(flag("enabled", Some("on")).unwrap(), Some(true));
        assert!(flag("enabled", Some("maybe")).is_err());
        assert_eq!(clip("abcdef", 3), "abc…");
        assert_eq!(input(3.0), "3");
        assert_eq!(input(0.25), "0.25");
    }

    #[test]
    fn writes_read_as_rest_calls() {
        let req =
            roost_proto::v1::UpdateAlertRuleRequest { id: "alr_1".into(), threshold: Some(0.9), ..Default::default() };
        assert_eq!(rest("POST /api/alerts/rules/alr_1", &req), r#"POST /api/alerts/rules/alr_1 {"threshold":0.9}"#);
        assert_eq!(
            rest("POST /api/crons/c/kill", &roost_proto::v1::KillCronRequest { id: "c".into() }),
            "POST /api/crons/c/kill"
        );
    }
}
