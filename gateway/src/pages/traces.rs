//! Pages of this group (being built).

use axum::Router;

use crate::Core;

pub(super) fn routes() -> Router<Core> {
    Router::new()
}
