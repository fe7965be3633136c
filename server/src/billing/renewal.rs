//! The renewal worker: at the end of each paid period, charge the next one or suspend.

use std::{sync::Arc, time::Duration};

use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::{agents::Hosting, time::now_ms};

/// Checks for due agents on a cadence of a twentieth of the billing period (between 50 ms
/// and 60 s) until `shutdown`.
pub async fn run(hosting: Arc<Hosting>, shutdown: CancellationToken) {
    let period = hosting.config().billing.period;
    let tick = (period / 20).clamp(Duration::from_millis(50), Duration::from_secs(60));
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(tick) => {}
        }
        let due = match hosting.store().instances_due(now_ms()).await {
            Ok(due) => due,
            Err(err) => {
                warn!(error = %err, "renewal check failed; retrying next tick");
                continue;
            }
        };
        for id in due {
            match hosting.renew(&id).await {
                Ok(outcome) => debug!(instance = %id, ?outcome, "renewal"),
                Err(err) => warn!(instance = %id, error = %err, "renewal failed; retrying next tick"),
            }
        }
    }
}
