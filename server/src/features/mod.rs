//! Feature APIs (DESIGN.md "Feature APIs"): presentation-shaped answers for the dashboard's
//! pages, built on the same store as q/1, served by `FeatureService`.
//!
//! A feature that cannot answer (its store query failed) answers empty with a `warning`
//! rather than failing, as the seed requires; `roost status` reports the truth.

pub mod alerts;
pub mod channels;
pub mod crons;
pub mod guard;
pub mod health;
pub mod schedule;
pub mod service;
pub mod usage;
pub mod workers;
