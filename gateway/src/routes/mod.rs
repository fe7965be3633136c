//! The REST routes, one module per core service.

pub(crate) mod system;
