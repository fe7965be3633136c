//! roost's end-to-end and storage suite: one test binary (one link) for all of it.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod access;
mod agents;
mod boundary;
mod cluster;
mod durability;
mod fuzz;
mod grpc;
mod mcp;
mod observe;
mod ops;
mod pages;
mod repository;
mod rest_errors;
mod senders;
mod store;
mod system;
mod telegram;
mod updates;
mod webapp;
