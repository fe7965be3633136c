//! Calls between replicas. A call for an agent that another replica owns is forwarded to
//! that replica's `AgentService` (the same public gRPC API, on its advertised address).
//!
//! Why forward rather than share a turn queue in the database: the owner keeps the one
//! in-memory FIFO lock and queue bound per agent, so per-agent order and the 429 bound hold
//! across replicas with no extra round trips or polling on the turn's path, and the reply
//! comes back on the caller's own connection.
//!
//! The forwarding replica has already authenticated the caller; it says who the caller is
//! with the cluster's internal token (a random secret every replica reads from the store,
//! which holds everything it could guard anyway) and the account id. A forwarded call is
//! never forwarded again: a replica that no longer owns the agent answers 503 and the
//! caller retries, so a lease moving mid-call cannot make calls loop.

use std::{collections::HashMap, sync::Mutex, time::Duration};

use roost_proto::{ApiError, ErrorReason, v1::agent_service_client::AgentServiceClient};
use subtle::ConstantTimeEq as _;
use tonic::{metadata::MetadataMap, transport::Channel};

use crate::{Result, store::Store};

/// The metadata carrying the internal token.
pub const INTERNAL_METADATA: &str = "x-roost-internal";
/// The metadata naming the account a forwarded call acts as.
pub const ACCOUNT_METADATA: &str = "x-roost-account";
/// The metadata of a forwarded experiment turn naming the turn id chosen for it (honoured
/// only on forwarded calls from source "experiment").
pub const TURN_METADATA: &str = "x-roost-turn-id";
/// Metadata an adapter sets to say where a message came from ("api" for REST, "mcp", "web"
/// for the web app's chat box). The agent service (`crate::agents::service`) reads it; it
/// is defined here, below that service, because a forwarded call must carry it on to the
/// owner, and the cluster layer does not depend on the agents above it.
pub const SOURCE_METADATA: &str = "x-roost-source";
/// The `roost_meta` key of the internal token.
const TOKEN_KEY: &str = "cluster_internal_token";

tokio::task_local! {
    /// Set while a forwarded call runs: such a call is served here or refused, never
    /// forwarded on.
    static FORWARDED: ();
}

/// Runs `call` as a forwarded call (see [`is_forwarded`]).
pub async fn serve_forwarded<F: Future>(call: F) -> F::Output {
    FORWARDED.scope((), call).await
}

/// Whether the running call was forwarded by another replica.
pub fn is_forwarded() -> bool {
    FORWARDED.try_with(|()| ()).is_ok()
}

/// The other replicas, as seen from this one.
pub struct Peers {
    token: String,
    channels: Mutex<HashMap<String, Channel>>,
}

impl Peers {
    /// Reads (or, first of all replicas, creates) the cluster's internal token.
    pub async fn load(store: &Store) -> Result<Self> {
        let token = store.meta_insert_absent(TOKEN_KEY, &crate::ids::random_base32(40)).await?;
        Ok(Self { token, channels: Mutex::new(HashMap::new()) })
    }

    /// The account a forwarded call acts as, when `metadata` carries the internal token.
    pub fn forwarded_account(&self, metadata: &MetadataMap) -> Option<String> {
        let token = metadata.get(INTERNAL_METADATA)?.to_str().ok()?;
        if !bool::from(token.as_bytes().ct_eq(self.token.as_bytes())) {
            return None;
        }
        Some(metadata.get(ACCOUNT_METADATA).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned())
    }

    /// A request to a peer on behalf of `account` (empty: no account), from `source`.
    pub fn request<T>(&self, message: T, account: &str, source: &str) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        let metadata = request.metadata_mut();
        for (name, value) in
            [(INTERNAL_METADATA, self.token.as_str()), (ACCOUNT_METADATA, account), (SOURCE_METADATA, source)]
        {
            if let Ok(value) = value.parse() {
                metadata.insert(name, value);
            }
        }
        request
    }

    /// The agent service of the replica at `addr`; its connection is made on first use and
    /// kept.
    pub fn agents(&self, addr: &str) -> Result<AgentServiceClient<Channel>> {
        let mut channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(channel) = channels.get(addr) {
            return Ok(AgentServiceClient::new(channel.clone()));
        }
        let endpoint = Channel::from_shared(format!("http://{addr}"))
            .map_err(|e| ApiError::internal(format!("replica address {addr:?}: {e}")))?
            .connect_timeout(Duration::from_secs(2))
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(10))
            .keep_alive_timeout(Duration::from_secs(5));
        let channel = endpoint.connect_lazy();
        channels.insert(addr.to_owned(), channel.clone());
        Ok(AgentServiceClient::new(channel))
    }
}

/// The error a forwarded call's caller gets: the owner's own answer when it gave one, else
/// (the owner could not be reached, or went away mid-call) a 503 that says so.
pub fn forwarded_error(status: &tonic::Status, instance_id: &str) -> ApiError {
    if let Some(api) = ApiError::from_roost_status(status) {
        return api;
    }
    ApiError::new(
        ErrorReason::Unavailable,
        format!(
            "the replica running agent {instance_id} could not be reached or went away during the call ({}); a turn \
             that did not finish is not charged (its next owner lists it as interrupted in the agent's activity); \
             retry in a few seconds",
            status.message()
        ),
    )
}
