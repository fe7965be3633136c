//! Feature APIs (docs/architecture.md#observing): presentation-shaped answers for the dashboard's
//! pages, built on the same store as q/1, served by `FeatureService`.
//!
//! A feature that cannot answer (its store query failed) answers empty with a `warning`
//! rather than failing, as the seed requires; `roost status` reports the truth.

pub mod alerts;
pub mod channels;
pub mod crons;
pub mod failures;
pub mod guard;
pub mod health;
pub mod schedule;
pub mod service;
pub mod skills;
pub mod usage;
pub mod workers;

/// Runs `pass` every `interval` until `stop`; a failed pass is logged and the next one
/// runs on time (the workers of alerts and guard).
pub(crate) async fn every<F, Fut>(
    what: &'static str,
    interval: std::time::Duration,
    stop: tokio_util::sync::CancellationToken,
    mut pass: F,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = crate::Result<()>>,
{
    loop {
        if let Err(err) = pass().await {
            tracing::warn!(error = %err, "{what} check failed");
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
    }
}
