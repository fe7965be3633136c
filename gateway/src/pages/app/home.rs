//! `/`: a signed-in user's home: balance, recent charges, the account's agents with their
//! status, and the form that creates one (`POST /instances`, the seed's provision).
//!
//! A visitor who is not signed in to the web app gets the dashboard's overview when the
//! dashboard would answer them (the operator on this machine, or with a dashboard token),
//! and the sign-in form otherwise. While an agent is booting or applying config, the page
//! refreshes itself every 2 s (a `<meta refresh>`, so it works with JavaScript off).

use askama::Template;
use axum::{
    Router,
    extract::State,
    response::{IntoResponse, Redirect, Response},
    routing::post,
};
use http::Method;
use roost_proto::{
    json::enums::JsonEnum,
    v1::{
        Instance, InstanceStatus, ListInstancesRequest, ListLedgerRequest, ListRuntimesRequest, ModelMode,
        ProvisionRequest,
    },
};
use serde::Deserialize;

use super::{Signed, signed_in};
use crate::{
    Core, cookies,
    pages::{
        Failure, When, cents,
        forms::{Posted, csrf_field, submit_to},
        layout::{Chrome, PageCall},
        usd_exact,
    },
};

pub(super) fn routes() -> Router<Core> {
    Router::new().route("/instances", post(provision))
}

#[derive(Template)]
#[template(path = "app_home.html")]
struct Home {
    chrome: Chrome,
    balance: String,
    first_agent_free: bool,
    agents: Result<Vec<AgentRow>, Failure>,
    runtimes: Result<Vec<RuntimeChoice>, Failure>,
    charges: Result<Vec<ChargeRow>, Failure>,
    settling: bool,
}

/// One agent in a list.
pub(super) struct AgentRow {
    pub id: String,
    /// Its name ('' for none): shown instead of the id, which stays beside it.
    pub name: String,
    pub runtime: String,
    pub status: &'static str,
    pub detail: String,
    pub model_mode: &'static str,
    pub price: String,
    pub paid_through: When,
}

impl From<Instance> for AgentRow {
    fn from(i: Instance) -> Self {
        Self {
            status: status_name(i.status),
            model_mode: ModelMode::json_name(i.model_mode).unwrap_or("managed"),
            price: cents(i.price_cents_month),
            paid_through: When::timestamp(i.paid_through.as_ref()),
            detail: i.status_detail,
            runtime: i.runtime,
            name: i.name,
            id: i.id,
        }
    }
}

struct RuntimeChoice {
    id: String,
    label: String,
}

/// How the agent form offers a runtime: id, price, description and, for a runtime that
/// runs as processes in a sandbox, what one agent may use and how long it may take to start.
fn runtime_label(rt: &roost_proto::v1::Runtime) -> String {
    let mut label = format!("{} · {}/month · {}", rt.id, cents(rt.price_cents_month), rt.description);
    if !matches!(rt.driver.as_str(), "echo" | "assistant") {
        label.push_str(&format!(" · {} MiB memory", rt.memory_mb));
        if rt.boot_timeout_secs > 0 {
            label.push_str(&format!(", starts within {} s", rt.boot_timeout_secs));
        }
    }
    label
}

/// One ledger row.
pub(super) struct ChargeRow {
    pub when: When,
    pub kind: &'static str,
    pub amount: String,
    pub credit: bool,
    pub balance: String,
    pub description: String,
    pub instance_id: String,
}

impl From<roost_proto::v1::Charge> for ChargeRow {
    fn from(c: roost_proto::v1::Charge) -> Self {
        Self {
            when: When::timestamp(c.created_at.as_ref()),
            kind: roost_proto::v1::ChargeKind::json_name(c.kind).unwrap_or("unknown"),
            amount: usd_exact(c.amount_nanocents),
            credit: c.amount_nanocents > 0,
            balance: usd_exact(c.balance_after_nanocents),
            description: c.description,
            instance_id: c.instance_id,
        }
    }
}

/// The JSON name of an instance status (`running`).
pub(super) fn status_name(status: i32) -> &'static str {
    InstanceStatus::json_name(status).unwrap_or("unknown")
}

/// Whether an agent is between states (the page should look again soon).
pub(super) fn settling(status: &str) -> bool {
    matches!(status, "provisioning" | "restarting")
}

/// `/`: the user's home, the operator's overview, or the sign-in form (module doc).
pub(crate) async fn home(State(core): State<Core>, page: PageCall) -> Response {
    let mut refused = None;
    if cookies::get(page.headers(), cookies::SESSION).is_some() {
        match signed_in(&core, &page).await {
            Ok(user) => return render_home(&core, &page, &user).await,
            Err(answer) => refused = Some(answer),
        }
    }
    // No session (or an ended one): the operator's overview, if the dashboard answers them.
    match core.access.check(&Method::GET, "/dashboard", None, page.headers(), page.peer()) {
        Ok(()) => crate::pages::overview::overview(State(core), page).await,
        Err(_) => refused.unwrap_or_else(|| Redirect::to("/login").into_response()),
    }
}

async fn render_home(core: &Core, page: &PageCall, user: &Signed) -> Response {
    let (agents, runtimes, charges) = tokio::join!(
        page.load("GET /api/instances", core.agents.list_instances(page.request(ListInstancesRequest {}))),
        page.load("GET /api/runtimes", core.agents.list_runtimes(page.request(ListRuntimesRequest {}))),
        page.load(
            "GET /api/account/ledger?limit=10",
            core.accounts.list_ledger(page.request(ListLedgerRequest { limit: 10 }))
        ),
    );
    let agents: Result<Vec<AgentRow>, Failure> =
        agents.map(|a| a.instances.into_iter().map(AgentRow::from).collect()).map_err(Failure::from);
    let settling = agents.as_ref().is_ok_and(|rows| rows.iter().any(|a| settling(a.status)));
    let view = Home {
        chrome: user.chrome(page, "Your agents", "/"),
        balance: usd_exact(user.account.balance_nanocents),
        first_agent_free: user.account.first_agent_free,
        agents,
        runtimes: runtimes
            .map(|r| r.runtimes.into_iter().map(|rt| RuntimeChoice { label: runtime_label(&rt), id: rt.id }).collect())
            .map_err(Failure::from),
        charges: charges.map(|l| l.charges.into_iter().map(ChargeRow::from).collect()).map_err(Failure::from),
        settling,
    };
    page.render(&view)
}

#[derive(Debug, Deserialize)]
struct NewAgent {
    #[serde(default)]
    runtime: String,
    #[serde(default)]
    brief: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    model_mode: String,
    #[serde(default)]
    csrf: String,
}

csrf_field!(NewAgent);

async fn provision(State(core): State<Core>, Posted(page, form): Posted<NewAgent>) -> Response {
    if let Err(answer) = signed_in(&core, &page).await {
        return answer;
    }
    let model_mode = ModelMode::from_json_name(form.model_mode.trim()).unwrap_or(ModelMode::Managed as i32);
    let req = ProvisionRequest { runtime: form.runtime, brief: form.brief, model_mode, name: form.name };
    submit_to(&page, "POST /api/provision", core.agents.provision(page.request(req)), |done| {
        let id = done.instance.map(|i| i.id).unwrap_or_default();
        let notice = format!(
            "Created {id}; charged {}, balance {}.",
            usd_exact(done.charged_nanocents),
            usd_exact(done.balance_nanocents)
        );
        (format!("/instances/{id}"), notice)
    })
    .await
}
