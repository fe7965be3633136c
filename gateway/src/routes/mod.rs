//! The REST routes, one module per core service.

pub(crate) mod accounts;
pub(crate) mod agents;
pub(crate) mod system;
