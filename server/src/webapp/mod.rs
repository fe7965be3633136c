//! The hosted web app's people (docs/architecture.md#pages): users who sign in with an
//! email and password and act for an account, their browser sessions, operator invites,
//! and the bounds on password work (the brake itself is `roost_kit::brake`). The account's keys
//! and credits are the seed's; the pages that use them live with the HTTP adapters
//! (`gateway/src/pages/app/`).

pub mod passwords;
pub mod service;
pub mod sessions;
pub mod users;

pub use service::{WebAppConfig, WebAppCore};
