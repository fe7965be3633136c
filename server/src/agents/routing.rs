//! Where a call for an agent is served: here when this replica owns it, else forwarded to
//! its owner (`crate::cluster::peers` says why forwarding).

use std::{future::Future, sync::Arc};

use roost_proto::{ApiError, ErrorReason, v1::agent_service_client::AgentServiceClient};
use tonic::transport::Channel;

use super::{Hosting, instances::no_such_instance, live::Agent};
use crate::{
    Result,
    cluster::peers::{forwarded_error, is_forwarded},
};

/// Where a call for an agent goes.
pub(crate) enum Route {
    /// This replica runs it.
    Local(Arc<Agent>),
    /// Its owner's agent service.
    Remote(AgentServiceClient<Channel>),
}

/// 503 for an agent that is between owners.
fn moving(id: &str, why: &str) -> ApiError {
    ApiError::new(
        ErrorReason::Unavailable,
        format!("agent {id} is moving between replicas ({why}); retry in a few seconds"),
    )
}

impl Hosting {
    /// Where calls for agent `id` of `account_id` go (an empty account: a call that is not
    /// an account's, such as a Telegram webhook delivery). 404 when this replica runs the
    /// agent and it is not the caller's; the owner checks a forwarded call.
    pub(crate) async fn route(&self, id: &str, account_id: &str) -> Result<Route> {
        if let Some(agent) = self.registry.get(id) {
            if !account_id.is_empty() && agent.account_id != account_id {
                return Err(no_such_instance(id).into());
            }
            return Ok(Route::Local(agent));
        }
        let Some(lease) = self.store.agent_lease(id).await? else {
            // No lease: no such agent (a destroyed one's lease is dropped), or one just
            // provisioned on a replica whose row is not visible yet.
            return Err(no_such_instance(id).into());
        };
        if is_forwarded() {
            return Err(moving(id, "the replica it was sent to no longer runs it").into());
        }
        if lease.owner == self.replica.id {
            return Err(moving(id, "this replica is taking it over").into());
        }
        if lease.expires_in_ms <= 0 {
            return Err(moving(id, "its replica stopped renewing its lease").into());
        }
        if lease.addr.is_empty() {
            return Err(moving(id, "its replica has not said where it is reached").into());
        }
        Ok(Route::Remote(self.peers.agents(&lease.addr)?))
    }

    /// Sends `message` for agent `id` to its owner through `client`, as `account_id` from
    /// `source`: the owner's answer, or a 503 when the owner could not be reached or went
    /// away mid-call.
    pub(crate) async fn forward<Req, Resp, Fut>(
        &self,
        client: AgentServiceClient<Channel>,
        id: &str,
        (account_id, source): (&str, &str),
        message: Req,
        call: impl FnOnce(AgentServiceClient<Channel>, tonic::Request<Req>) -> Fut,
    ) -> Result<Resp>
    where
        Fut: Future<Output = std::result::Result<tonic::Response<Resp>, tonic::Status>>,
    {
        let request = self.peers.request(message, account_id, source);
        match call(client, request).await {
            Ok(response) => Ok(response.into_inner()),
            Err(status) => Err(forwarded_error(&status, id).into()),
        }
    }
}
