//! `ControlService`: the dashboard's actions on processes: restart roost, pause or resume
//! any hosted agent (as the operator, so no account key; the access policy guards it).

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use roost_proto::{
    ApiError,
    v1::{
        PauseAgentRequest, PauseAgentResponse, RestartRequest, RestartResponse, ResumeAgentRequest,
        ResumeAgentResponse, control_service_server::ControlService,
    },
};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};
use tracing::info;

use crate::{
    Result,
    agents::{Hosting, instances::InstanceRow, limits},
    store::Store,
};

static RESTART: AtomicBool = AtomicBool::new(false);

/// Asks for a restart in place once serving stopped (the updater, after an install, on a
/// node nothing supervises).
pub fn request_restart() {
    RESTART.store(true, Ordering::Release);
}

/// Whether a restart was asked for: the binary starts itself again once serving stopped.
pub fn restart_requested() -> bool {
    RESTART.load(Ordering::Acquire)
}

/// The control actions of one server.
pub struct ControlCore {
    store: Store,
    hosting: Arc<Hosting>,
    shutdown: CancellationToken,
}

impl ControlCore {
    /// Controls over `hosting`; a restart cancels `shutdown`.
    pub fn new(store: Store, hosting: Arc<Hosting>, shutdown: CancellationToken) -> Self {
        Self { store, hosting, shutdown }
    }

    async fn live_instance(&self, id: &str) -> Result<InstanceRow> {
        let id = limits::instance_id(id)?;
        let row = self.store.instance(id).await?.filter(|row| row.destroyed_at.is_none());
        Ok(row.ok_or_else(|| ApiError::not_found(format!("no hosted agent {id}")))?)
    }
}

#[tonic::async_trait]
impl ControlService for ControlCore {
    async fn restart(&self, _req: Request<RestartRequest>) -> Result<Response<RestartResponse>, Status> {
        info!("restart requested from the dashboard");
        RESTART.store(true, Ordering::Release);
        // Let this answer go out before the graceful stop begins.
        let shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            shutdown.cancel();
        });
        Ok(Response::new(RestartResponse { restarting: true, pid: i64::from(std::process::id()) }))
    }

    async fn pause_agent(&self, req: Request<PauseAgentRequest>) -> Result<Response<PauseAgentResponse>, Status> {
        let row = self.live_instance(&req.get_ref().instance_id).await?;
        self.hosting.pause(&row.account_id, &row.id).await?;
        let instance = self.live_instance(&row.id).await?.to_proto();
        Ok(Response::new(PauseAgentResponse { instance: Some(instance) }))
    }

    async fn resume_agent(&self, req: Request<ResumeAgentRequest>) -> Result<Response<ResumeAgentResponse>, Status> {
        let row = self.live_instance(&req.get_ref().instance_id).await?;
        self.hosting.resume(&row.account_id, &row.id).await?;
        let instance = self.live_instance(&row.id).await?.to_proto();
        Ok(Response::new(ResumeAgentResponse { instance: Some(instance) }))
    }
}
