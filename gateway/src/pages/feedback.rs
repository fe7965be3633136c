//! Scores on the trace and session pages, and the operator's feedback forms there
//! (docs/web.md#human-feedback).
//!
//! Decisions:
//! - A page's feedback is three scores per target, `source: "human"`: `thumbs` (true or
//!   false), `rating` (1–5) and `label` (one of `--feedback-labels`), a comment riding with
//!   the rating and label. Each has an id made from its name and target ([`Target::score_id`]),
//!   so giving it again replaces it: the operator changes their mind, they do not vote twice.
//! - Plain forms (post/redirect/get, CSRF-checked by [`Posted`]): they work without
//!   JavaScript and from the keyboard. The thumbs are toggle buttons: pressing the pressed
//!   one takes it back. The details form is filled with what was given; leaving the rating
//!   or label empty there takes that score back.
//! - A target's scores are read with `ListScores` (a trace's include its spans', a
//!   session's everything in it), so the pages show every score, the API's and
//!   evaluators' too; only the forms are about the operator's own.

use std::collections::HashMap;

use axum::{
    Router,
    extract::{Path, State},
    response::Response,
    routing::post,
};
use roost_proto::{
    ApiError, ErrorReason,
    json::value::{from_json, to_json},
    v1::{CreateScoresRequest, DeleteScoreRequest, ListScoresRequest, Score},
};
use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{
    Failure, When,
    forms::{Posted, csrf_field, done, failed},
    layout::{PageCall, percent_encode},
    sessions::{session_href, span_href},
};
use crate::Core;

/// The score a thumbs up or down is.
pub(super) const THUMBS: &str = "thumbs";
/// The score a 1–5 rating is.
const RATING: &str = "rating";
/// The score a category is.
const LABEL: &str = "label";
/// The ratings offered.
const RATINGS: [i64; 5] = [1, 2, 3, 4, 5];
/// Most scores of a target a page reads (`ListScores`' most).
const MAX_SCORES: i32 = 1000;

pub(super) fn routes() -> Router<Core> {
    Router::new()
        .route("/dashboard/traces/{trace_id}/feedback", post(on_trace))
        .route("/dashboard/sessions/{session_id}/feedback", post(on_session))
}

// ---------------------------------------------------------------------------------------
// Targets.

/// What a page's feedback is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Target {
    /// A trace (its id).
    Trace(String),
    /// One span of a trace (a model call): the trace's and the span's ids.
    Span(String, String),
    /// A session.
    Session(String),
}

impl Target {
    fn kind(&self) -> &'static str {
        match self {
            Self::Trace(_) => "trace",
            Self::Span(..) => "span",
            Self::Session(_) => "session",
        }
    }

    /// The id of the page's `name` score on this target: `human_<name>_<kind>_<hash of
    /// the target's ids>`, at most 256 bytes whatever the ids (a session id can be long).
    /// The same for every page and visit, so giving the score again replaces it.
    pub(super) fn score_id(&self, name: &str) -> String {
        let mut hash = Sha256::new();
        let ids: Vec<&str> = match self {
            Self::Trace(trace) => vec![trace],
            Self::Span(trace, span) => vec![trace, span],
            Self::Session(session) => vec![session],
        };
        for id in ids {
            hash.update(id.as_bytes());
            hash.update([0]);
        }
        format!("human_{name}_{}_{}", self.kind(), hex::encode(&hash.finalize()[..16]))
    }

    /// Where the forms about this target post.
    fn action(&self) -> String {
        match self {
            Self::Trace(trace) | Self::Span(trace, _) => {
                format!("/dashboard/traces/{}/feedback", percent_encode(trace))
            }
            Self::Session(session) => format!("{}/feedback", session_href(session)),
        }
    }

    /// The target as a notice names it.
    fn noun(&self) -> &'static str {
        match self {
            Self::Trace(_) => "the trace",
            Self::Span(..) => "the call",
            Self::Session(_) => "the session",
        }
    }

    /// A human score of `name` on this target.
    fn score(&self, name: &str, value: Value, comment: &str) -> Score {
        let (trace_id, span_id, session_id) = match self {
            Self::Trace(trace) => (trace.clone(), String::new(), String::new()),
            Self::Span(trace, span) => (trace.clone(), span.clone(), String::new()),
            Self::Session(session) => (String::new(), String::new(), session.clone()),
        };
        Score {
            id: self.score_id(name),
            name: name.to_owned(),
            value: Some(from_json(&value)),
            comment: comment.to_owned(),
            source: "human".to_owned(),
            trace_id,
            span_id,
            session_id,
            ..Score::default()
        }
    }
}

// ---------------------------------------------------------------------------------------
// Showing scores.

/// A target's scores as `ListScores` answers them (newest first), read for a page.
pub(super) async fn load(core: &Core, page: &PageCall, req: ListScoresRequest) -> Result<Vec<Score>, ApiError> {
    let req = ListScoresRequest { limit: MAX_SCORES, ..req };
    let (key, id) =
        if req.session_id.is_empty() { ("trace_id", &req.trace_id) } else { ("session_id", &req.session_id) };
    let api = format!("GET /api/v1/scores?{key}={}&limit={MAX_SCORES}", percent_encode(id));
    let answer = page.load(api, core.scores.list_scores(page.request(req.clone()))).await?;
    Ok(answer.scores)
}

/// A score as the pages' scores table shows it.
pub(super) struct Line {
    pub(super) name: String,
    pub(super) value: String,
    /// What it judges: `this trace`, a span's name, `call gpt-4o`…
    pub(super) on: String,
    /// That target's page (empty for the page's own target).
    pub(super) on_href: String,
    /// The target is a span or a hosted turn (shown marked).
    pub(super) call: bool,
    pub(super) source: String,
    pub(super) author: String,
    pub(super) comment: String,
    pub(super) time: When,
}

/// The scores on a page: its lines, or why they could not be read.
pub(super) type Lines = Result<Vec<Line>, Failure>;

/// A score's value as text: a number without trailing zeros, `true`/`false`, or the
/// category.
pub(super) fn value_text(value: &Value) -> String {
    match value {
        Value::Number(n) => n.as_f64().map_or_else(|| n.to_string(), number),
        Value::Bool(b) => b.to_string(),
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A number with at most two decimals, trailing zeros dropped.
fn number(n: f64) -> String {
    let text = format!("{n:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" { "0".to_owned() } else { text.to_owned() }
}

/// The lines of `scores` on a page about `own` (whose scores say "this trace" or "this
/// session"); `span_names` names the spans a trace page knows.
pub(super) fn lines(scores: &[Score], own: &Target, span_names: &HashMap<String, String>) -> Vec<Line> {
    scores
        .iter()
        .map(|s| {
            let (on, on_href, call) = match s.target.as_str() {
                "span" => {
                    let name = span_names.get(&s.span_id).cloned().unwrap_or_else(|| {
                        if s.model.is_empty() { format!("span {}", s.span_id) } else { format!("call {}", s.model) }
                    });
                    (name, span_href(&s.trace_id, &s.span_id), true)
                }
                "turn" => ("hosted turn".to_owned(), span_href(&s.trace_id, &s.span_id), true),
                "session" if *own == Target::Session(s.session_id.clone()) => {
                    ("this session".to_owned(), String::new(), false)
                }
                "session" => (format!("session {}", s.session_id), session_href(&s.session_id), false),
                _ if *own == Target::Trace(s.trace_id.clone()) => ("this trace".to_owned(), String::new(), false),
                _ => (format!("trace {}", short_id(&s.trace_id)), span_href(&s.trace_id, ""), false),
            };
            Line {
                name: s.name.clone(),
                value: value_text(&s.value.as_ref().map(to_json).unwrap_or_default()),
                on,
                on_href,
                call,
                source: s.source.clone(),
                author: s.author.clone(),
                comment: s.comment.clone(),
                time: When::timestamp(s.time.as_ref()),
            }
        })
        .collect()
}

/// The first 8 characters of an id (the link holds it all).
fn short_id(id: &str) -> String {
    id.chars().take(8).collect()
}

/// A list row's `scores` column (a JSON object: name → mean number or category) as one
/// short line, names in order: `rating 4.5 · thumbs 0.75 · tone friendly`.
pub(super) fn summary(scores: Option<&Value>) -> String {
    let Some(Value::Object(map)) = scores else { return String::new() };
    let mut parts: Vec<(String, String)> = map.iter().map(|(k, v)| (k.clone(), value_text(v))).collect();
    parts.sort();
    parts.into_iter().map(|(name, value)| format!("{name} {value}")).collect::<Vec<_>>().join(" · ")
}

// ---------------------------------------------------------------------------------------
// The forms.

/// A feedback form about one target, filled with what the operator gave it before.
pub(super) struct Form {
    /// Where it posts.
    pub(super) action: String,
    /// The span judged, for a call's form (a hidden field).
    pub(super) span: String,
    /// The page to come back to (a hidden field).
    pub(super) back: String,
    /// Prefix of the form's element ids, unique on the page.
    pub(super) key: String,
    /// What the form judges, as its legend says (`trace`, `call`, `session`).
    pub(super) what: &'static str,
    /// The thumbs given: up, down or none.
    pub(super) thumbs: Option<bool>,
    /// The rating given, as its radio's value (`""`: none).
    pub(super) rating: String,
    pub(super) label: String,
    pub(super) comment: String,
    /// The categories offered (`--feedback-labels`).
    pub(super) labels: Vec<String>,
    pub(super) ratings: [i64; 5],
}

impl Form {
    /// The form about `target` on the page at `here`, its element ids starting with `key`
    /// (the form comes back to `#<key>-feedback`), filled from `scores` (the page's
    /// `ListScores` answer).
    pub(super) fn new(
        core: &Core,
        target: Target,
        what: &'static str,
        key: &str,
        here: &str,
        scores: &[Score],
    ) -> Self {
        let given = |name: &str| {
            let id = target.score_id(name);
            scores.iter().find(|s| s.id == id)
        };
        let value = |name: &str| given(name).map(|s| s.value.as_ref().map(to_json).unwrap_or_default());
        let thumbs = value(THUMBS).and_then(|v| v.as_bool());
        let rating = value(RATING).map(|v| value_text(&v)).unwrap_or_default();
        let label = value(LABEL).map(|v| value_text(&v)).unwrap_or_default();
        // The comment rides with both; the newer one's is the one last given.
        let comment = [given(LABEL), given(RATING)]
            .into_iter()
            .flatten()
            .max_by_key(|s| s.time.map(|t| (t.seconds, t.nanos)))
            .map(|s| s.comment.clone())
            .unwrap_or_default();
        let span = match &target {
            Target::Span(_, span) => span.clone(),
            _ => String::new(),
        };
        Self {
            action: target.action(),
            back: format!("{}#{key}-feedback", without_notice(here)),
            span,
            key: key.to_owned(),
            what,
            thumbs,
            rating,
            label,
            comment,
            labels: core.options.feedback_labels.clone(),
            ratings: RATINGS,
        }
    }

    /// The thumbs button `up`'s value: the choice, or `clear` when it is the one given
    /// (pressing a pressed toggle takes it back).
    pub(super) fn thumb_value(&self, up: bool) -> &'static str {
        match (self.thumbs == Some(up), up) {
            (true, _) => "clear",
            (false, true) => "up",
            (false, false) => "down",
        }
    }

    /// Whether thumbs `up` is the one given.
    pub(super) fn pressed(&self, up: bool) -> bool {
        self.thumbs == Some(up)
    }

    /// Whether `rating` (a radio's value) is the one given.
    pub(super) fn rated(&self, rating: &i64) -> bool {
        self.rating == rating.to_string()
    }
}

/// Gives each model call of a conversation its thumbs, on the call's last reply shown
/// (an assistant message of the call): the reply is what the operator judges, and a call
/// that replied in several messages gets one pair of thumbs, not one per message.
pub(super) fn mark_calls(core: &Core, entries: &mut [super::sessions::Entry], here: &str, scores: &[Score]) {
    let mut last: HashMap<(String, String), usize> = HashMap::new();
    for (i, entry) in entries.iter().enumerate() {
        if entry.message && entry.class == "assistant" && !entry.call.0.is_empty() && !entry.call.1.is_empty() {
            last.insert(entry.call.clone(), i);
        }
    }
    for ((trace, span), i) in last {
        let key = format!("msg-{span}");
        entries[i].feedback = Some(Form::new(core, Target::Span(trace, span), "call", &key, here, scores));
    }
}

/// `path` without a `done=` notice (a form's page is often the one a form came back to).
fn without_notice(path: &str) -> String {
    let (path, fragment) = path.split_once('#').map_or((path, ""), |(p, f)| (p, f));
    let (base, query) = path.split_once('?').unwrap_or((path, ""));
    let kept: Vec<&str> = query.split('&').filter(|p| !p.is_empty() && !p.starts_with("done=")).collect();
    let mut out = if kept.is_empty() { base.to_owned() } else { format!("{base}?{}", kept.join("&")) };
    if !fragment.is_empty() {
        out.push('#');
        out.push_str(fragment);
    }
    out
}

/// A feedback form's post.
#[derive(Debug, Default, Deserialize)]
struct FeedbackPost {
    #[serde(default)]
    csrf: String,
    /// The span judged (a call's form), else empty: the trace.
    #[serde(default)]
    span: String,
    /// `up`, `down` or `clear`; empty when the details form was sent.
    #[serde(default)]
    thumbs: String,
    /// Set by the details form: its rating, label and comment replace what was given.
    #[serde(default)]
    details: String,
    #[serde(default)]
    rating: String,
    #[serde(default)]
    label: String,
    #[serde(default)]
    comment: String,
    /// The page to come back to.
    #[serde(default)]
    back: String,
}
csrf_field!(FeedbackPost);

async fn on_trace(
    State(core): State<Core>,
    Path(trace_id): Path<String>,
    Posted(page, form): Posted<FeedbackPost>,
) -> Response {
    let trace_id = trace_id.trim().to_ascii_lowercase();
    let span = form.span.trim().to_ascii_lowercase();
    let default = span_href(&trace_id, &span);
    let target = if span.is_empty() { Target::Trace(trace_id) } else { Target::Span(trace_id, span) };
    give(&core, &page, target, &form, &default).await
}

async fn on_session(
    State(core): State<Core>,
    Path(session_id): Path<String>,
    Posted(page, form): Posted<FeedbackPost>,
) -> Response {
    let default = session_href(&session_id);
    give(&core, &page, Target::Session(session_id), &form, &default).await
}

/// Records what a form gave `target` (and takes back what it cleared), then back to the
/// page it came from with a notice saying what was saved.
async fn give(core: &Core, page: &PageCall, target: Target, form: &FeedbackPost, default: &str) -> Response {
    let refuse = |message: String| failed(page, &ApiError::invalid_argument(message));
    let mut scores = Vec::new();
    let mut cleared = Vec::new();
    let mut said = Vec::new();
    match form.thumbs.trim() {
        "" => {}
        "up" | "down" => {
            let up = form.thumbs.trim() == "up";
            scores.push(target.score(THUMBS, Value::Bool(up), ""));
            said.push(if up { "thumbs up" } else { "thumbs down" }.to_owned());
        }
        "clear" => {
            cleared.push(THUMBS);
            said.push("thumbs taken back".to_owned());
        }
        other => return refuse(format!("thumbs is up, down or clear, not “{other}”")),
    }
    if !form.details.is_empty() {
        let comment = form.comment.trim();
        match form.rating.trim() {
            "" => cleared.push(RATING),
            rating => match rating.parse::<i64>() {
                Ok(n) if RATINGS.contains(&n) => {
                    scores.push(target.score(RATING, Value::from(n), comment));
                    said.push(format!("rating {n}"));
                }
                _ => return refuse(format!("a rating is a whole number from 1 to 5, not “{rating}”")),
            },
        }
        let labels = &core.options.feedback_labels;
        match form.label.trim() {
            "" => cleared.push(LABEL),
            label if labels.iter().any(|l| l == label) => {
                scores.push(target.score(LABEL, Value::from(label), comment));
                said.push(format!("label {label}"));
            }
            label => return refuse(format!("“{label}” is not one of the labels offered: {}", labels.join(", "))),
        }
        if !comment.is_empty() && !scores.iter().any(|s| s.name == RATING || s.name == LABEL) {
            return refuse("A comment goes with a rating or a label: choose one of them too".to_owned());
        }
        if said.is_empty() {
            said.push("rating, label and comment cleared".to_owned());
        }
    }
    if said.is_empty() {
        return refuse("The form said nothing to save: choose thumbs, a rating or a label".to_owned());
    }
    if !scores.is_empty() {
        let request = CreateScoresRequest { scores, ..CreateScoresRequest::default() };
        if let Err(err) = page.load("POST /api/v1/scores", core.scores.create_scores(page.request(request))).await {
            return failed(page, &err);
        }
    }
    for name in cleared {
        let id = target.score_id(name);
        let call = core.scores.delete_score(page.request(DeleteScoreRequest { id: id.clone() }));
        match page.load(format!("DELETE /api/v1/scores/{id}"), call).await {
            Err(err) if err.reason() != ErrorReason::NotFound => return failed(page, &err),
            _ => {}
        }
    }
    done(&back_to(&form.back, default), &format!("Saved on {}: {}.", target.noun(), said.join(", ")))
}

/// Where a form comes back to: the posted page when it is a dashboard page of this site
/// (never another site: the field is the visitor's to change), else `default`; without
/// its old notice.
fn back_to(posted: &str, default: &str) -> String {
    let posted = posted.trim();
    let ours = posted.starts_with("/dashboard/") && !posted.contains(['\\', '\r', '\n']);
    without_notice(if ours { posted } else { default })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_scores_have_one_id_per_target_and_name() {
        let span = Target::Span("ab".into(), "cd".into());
        assert_eq!(span.score_id(THUMBS), Target::Span("ab".into(), "cd".into()).score_id(THUMBS));
        assert_ne!(span.score_id(THUMBS), Target::Trace("ab".into()).score_id(THUMBS));
        assert_ne!(span.score_id(THUMBS), span.score_id(RATING));
        assert!(span.score_id(THUMBS).starts_with("human_thumbs_span_"));
        assert!(Target::Session("s".repeat(256)).score_id(LABEL).len() <= 256);
    }

    #[test]
    fn values_and_row_summaries_read_short() {
        assert_eq!(value_text(&serde_json::json!(0.75)), "0.75");
        assert_eq!(value_text(&serde_json::json!(4.0)), "4");
        assert_eq!(value_text(&serde_json::json!(0.3333)), "0.33");
        assert_eq!(value_text(&serde_json::json!(true)), "true");
        let row = serde_json::json!({"tone": "friendly", "thumbs": 0.75});
        assert_eq!(summary(Some(&row)), "thumbs 0.75 · tone friendly");
        assert_eq!(summary(None), "");
    }

    #[test]
    fn a_form_comes_back_to_a_dashboard_page_without_its_old_notice() {
        assert_eq!(
            back_to("/dashboard/traces/ab?span=cd&done=Saved#call-cd-feedback", "/x"),
            "/dashboard/traces/ab?span=cd#call-cd-feedback"
        );
        assert_eq!(back_to("https://evil.example/", "/dashboard/traces/ab"), "/dashboard/traces/ab");
        assert_eq!(back_to("//evil.example/dashboard/", "/dashboard/sessions/s"), "/dashboard/sessions/s");
        assert_eq!(without_notice("/dashboard/sessions/s?done=x"), "/dashboard/sessions/s");
    }
}
