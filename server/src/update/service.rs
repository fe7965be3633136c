//! `UpdateService` over the [`Updater`] (REST: `/api/update-check/*`).

use std::sync::Arc;

use roost_proto::{
    ApiError,
    v1::{
        CheckNowRequest, CheckNowResponse, DismissRequest, DismissResponse, GetUpdateConfigRequest,
        GetUpdateConfigResponse, GetUpdateStatusRequest, GetUpdateStatusResponse, HeldVersion,
        ListUpdateHistoryRequest, ListUpdateHistoryResponse, RollbackRecord as RollbackProto, SetUpdateConfigRequest,
        SetUpdateConfigResponse, UpdateConfig, UpdateEvent, update_service_server::UpdateService,
    },
};
use tonic::{Request, Response, Status};

use super::{Event, State, Updater, guard};
use crate::time::timestamp_ms;

/// The update API of one server.
pub struct UpdateCore {
    updater: Arc<Updater>,
}

impl UpdateCore {
    /// The API over `updater`.
    pub fn new(updater: Arc<Updater>) -> Self {
        Self { updater }
    }
}

fn event(event: &Event) -> UpdateEvent {
    UpdateEvent {
        at: Some(timestamp_ms(event.at_ms)),
        kind: event.kind.clone(),
        version: event.version.clone(),
        outcome: event.outcome.clone(),
        detail: event.detail.clone(),
    }
}

/// The status answer, also what `roost status` and `roost update` show.
pub async fn status(updater: &Updater) -> GetUpdateStatusResponse {
    let state = updater.state().await;
    let settings = updater.settings();
    let update_available = updater.newer_available(&state);
    let rollback = updater.rollback_record().map(|r| RollbackProto {
        time: r.time.parse().ok(),
        from: r.from,
        to: r.to,
        reason: r.reason,
        boots: i64::try_from(r.boots).unwrap_or_default(),
        installed: r.installed,
        detail: r.detail,
    });
    let now = crate::time::now_ms();
    GetUpdateStatusResponse {
        current: settings.version.clone(),
        update_available,
        show_banner: update_available && !state.dismissed.contains(&state.latest),
        latest: state.latest.clone(),
        last_check: state.last_check.as_ref().map(event),
        last_attempt: state.last_attempt.as_ref().map(event),
        rollback,
        role: settings.role.as_str().into(),
        check_every_secs: i64::try_from(settings.check_every.as_secs()).unwrap_or_default(),
        min_age_hours: settings.min_age.as_secs_f64() / 3600.0,
        retry_secs: i64::try_from(settings.retry.as_secs()).unwrap_or_default(),
        kill_switch: settings.kill_switch,
        auto_update: settings.may_install() && updater.auto_update_of(&state),
        restart: settings.restart.as_str().into(),
        package: updater.package_of(&state),
        index_url: settings.index_url.clone(),
        held: state
            .holds
            .iter()
            .filter(|h| h.until_ms > now)
            .map(|h| HeldVersion {
                version: h.version.clone(),
                until: Some(timestamp_ms(h.until_ms)),
                reason: h.reason.clone(),
            })
            .collect(),
        guard_armed: guard::read(updater.data_dir()).is_some(),
        installing: updater.is_installing(),
        repository: super::identity::REPOSITORY.into(),
        public_key: settings.public_key.clone().unwrap_or_default(),
    }
}

fn config(updater: &Updater, state: &State) -> (UpdateConfig, bool, bool) {
    let config = UpdateConfig {
        auto_update: state.auto_update,
        auto_update_source: state.auto_update_source.clone(),
        plan: state.plan.clone(),
        dismissed: state.dismissed.clone(),
    };
    let effective = updater.settings().may_install() && updater.auto_update_of(state);
    (config, effective, updater.settings().kill_switch)
}

#[tonic::async_trait]
impl UpdateService for UpdateCore {
    async fn get_update_status(
        &self,
        _req: Request<GetUpdateStatusRequest>,
    ) -> Result<Response<GetUpdateStatusResponse>, Status> {
        Ok(Response::new(status(&self.updater).await))
    }

    async fn get_update_config(
        &self,
        _req: Request<GetUpdateConfigRequest>,
    ) -> Result<Response<GetUpdateConfigResponse>, Status> {
        let (config, effective_auto_update, kill_switch) = config(&self.updater, &self.updater.state().await);
        let kill_switch_value =
            if kill_switch { self.updater.settings().auto_update_env.clone() } else { String::new() };
        Ok(Response::new(GetUpdateConfigResponse {
            config: Some(config),
            effective_auto_update,
            kill_switch,
            kill_switch_value,
        }))
    }

    async fn set_update_config(
        &self,
        req: Request<SetUpdateConfigRequest>,
    ) -> Result<Response<SetUpdateConfigResponse>, Status> {
        let Some(auto_update) = req.into_inner().auto_update else {
            return Err(ApiError::invalid_argument("auto_update (a boolean) is required").into());
        };
        let state = self.updater.set_auto_update(auto_update).await;
        let (config, effective_auto_update, kill_switch) = config(&self.updater, &state);
        Ok(Response::new(SetUpdateConfigResponse { config: Some(config), effective_auto_update, kill_switch }))
    }

    async fn check_now(&self, _req: Request<CheckNowRequest>) -> Result<Response<CheckNowResponse>, Status> {
        let outcome = self.updater.poll().await;
        Ok(Response::new(CheckNowResponse {
            check: Some(event(&outcome.check)),
            install: outcome.install.as_ref().map(event),
            status: Some(status(&self.updater).await),
        }))
    }

    async fn dismiss(&self, req: Request<DismissRequest>) -> Result<Response<DismissResponse>, Status> {
        let version = req.into_inner().version;
        let version = version.trim();
        if semver::Version::parse(version).is_err() {
            return Err(ApiError::invalid_argument(format!("version {version:?} is not a version like 0.3.0")).into());
        }
        Ok(Response::new(DismissResponse { dismissed: self.updater.dismiss(version).await }))
    }

    async fn list_update_history(
        &self,
        req: Request<ListUpdateHistoryRequest>,
    ) -> Result<Response<ListUpdateHistoryResponse>, Status> {
        let limit = match req.into_inner().limit {
            0 => 50,
            n => n.clamp(1, 100),
        };
        let state = self.updater.state().await;
        let events = state.history.iter().rev().take(usize::try_from(limit).unwrap_or(50)).map(event).collect();
        Ok(Response::new(ListUpdateHistoryResponse { events }))
    }
}
