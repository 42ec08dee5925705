//! `ping`: returns its body. Measures the exchange's round trip and checks
//! that a session still answers.

use serde_json::Value;

pub fn handle(body: Value) -> anyhow::Result<Value> {
    Ok(body)
}
