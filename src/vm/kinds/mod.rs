//! The request kinds the guest agent answers: one file per kind, one line
//! per kind in [`KINDS`]. A handler takes the request body and returns the
//! reply body; its error (with context) travels back to the host.

mod ping;
pub mod probe;

use serde_json::Value;

/// Answers one request kind.
pub type Handler = fn(Value) -> anyhow::Result<Value>;

/// Every request kind but `shutdown` (which the agent loop handles itself).
const KINDS: &[(&str, Handler)] = &[("probe", probe::handle), ("ping", ping::handle)];

/// The handler of `kind`, if the agent knows it.
pub fn handler(kind: &str) -> Option<Handler> {
    KINDS.iter().find(|(k, _)| *k == kind).map(|(_, h)| *h)
}

/// Names of the known kinds, for error messages.
pub fn names() -> Vec<&'static str> {
    KINDS.iter().map(|(k, _)| *k).collect()
}
