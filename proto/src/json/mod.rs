//! serde helpers that `build.rs` attaches to generated fields, so that a message's JSON is
//! the REST body users expect (plain numbers, lower-case enum names, RFC 3339 times).

pub mod base64;
pub mod enums;
pub mod mapping;
pub mod timestamp;
pub mod value;
