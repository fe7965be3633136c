//! What replicas on one PostgreSQL tell each other at once, over one LISTEN connection per
//! replica:
//! - `roost_live`: rows a replica stored, for the others' live streams
//!   ([`crate::streams::fanout`]);
//! - `roost_leases`: a replica stopping cleanly gave its agent leases up, so the others
//!   take them now rather than at their next look (a third of the lease TTL later).
//!
//! Notifications are not kept for a listener that is away. After its connection is lost,
//! the listener is connected again (with backoff while the store is out of reach), the
//! live streams catch up from the store, and the agent leases get one more look, in case a
//! release was missed. SQLite is one process: nothing listens.

use std::{sync::Arc, time::Duration};

use sqlx::{PgPool, postgres::PgListener};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::{
    Result,
    streams::{
        Live,
        fanout::{self, Fanout},
    },
};

/// The channel agent lease releases are announced on.
pub const LEASES: &str = "roost_leases";

/// First wait before connecting again; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Listens until `stop`: other replicas' rows go to `live`, lease releases wake `freed`.
pub async fn run(pool: PgPool, live: Arc<Live>, freed: Arc<Notify>, stop: CancellationToken) {
    let mut fanout: Option<Fanout> = None;
    let mut backoff = FIRST_BACKOFF;
    loop {
        match listen(&pool).await {
            Ok(mut listener) => {
                backoff = FIRST_BACKOFF;
                match &mut fanout {
                    // The marks are read once listening, so no row falls between the two.
                    None => match Fanout::start(pool.clone(), live.clone()).await {
                        Ok(started) => fanout = Some(started),
                        Err(err) => warn!(error = %err, "could not start the live streams' fanout; retrying"),
                    },
                    Some(fanout) => caught_up(fanout, &freed).await,
                }
                if let Some(fanout) = &mut fanout
                    && hear(&mut listener, fanout, &freed, &stop).await
                {
                    return;
                }
            }
            Err(err) => warn!(error = %err, "could not listen for other replicas' notices; retrying"),
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

async fn listen(pool: &PgPool) -> Result<PgListener> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen_all([fanout::CHANNEL, LEASES]).await?;
    Ok(listener)
}

/// Handles notices until `stop` (true) or until the connection fails (false).
async fn hear(listener: &mut PgListener, fanout: &mut Fanout, freed: &Notify, stop: &CancellationToken) -> bool {
    loop {
        let next = tokio::select! {
            () = stop.cancelled() => return true,
            next = listener.try_recv() => next,
        };
        match next {
            Ok(Some(notice)) if notice.channel() == fanout::CHANNEL => fanout.heard(notice.payload()).await,
            Ok(Some(notice)) if notice.channel() == LEASES => freed.notify_one(),
            Ok(Some(_)) => {}
            // Lost and already connected again (sqlx's eager reconnect): catch up.
            Ok(None) => caught_up(fanout, freed).await,
            Err(err) => {
                warn!(error = %err, "lost the connection other replicas' notices arrive on");
                return false;
            }
        }
    }
}

/// Makes up for notices missed while not listening.
async fn caught_up(fanout: &mut Fanout, freed: &Notify) {
    match fanout.catch_up().await {
        Ok(()) => info!("listening for other replicas' notices again; live streams caught up"),
        Err(err) => warn!(error = %err, "could not catch the live streams up after listening again"),
    }
    freed.notify_one();
}
