//! SIGINT/SIGTERM handling: the first signal starts a graceful shutdown, a second one ends
//! the process at once.

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Cancels `token` on the first SIGINT or SIGTERM; exits with 130 on the second.
pub fn cancel_on_signal(token: CancellationToken) {
    tokio::spawn(async move {
        wait_for_signal().await;
        info!("shutdown signal received; finishing in-flight work");
        token.cancel();
        wait_for_signal().await;
        warn!("second shutdown signal; exiting now");
        std::process::exit(130);
    });
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(err) => {
                warn!(error = %err, "cannot listen for SIGTERM; only Ctrl-C stops roost");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
