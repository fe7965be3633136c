//! The hosted web app's people (DESIGN.md "Web app accounts"): users who sign in with an
//! email and password and act for an account, their browser sessions, operator invites,
//! and the brake on password guessing. The account's keys and credits are the seed's; the
//! pages that use them live in the gateway (`gateway/src/pages/app/`).

pub mod passwords;
pub mod service;
pub mod sessions;
pub mod throttle;
pub mod users;

pub use service::{WebAppConfig, WebAppCore};
