//! Per-run extra evidence (block trace, filesystem-internal snapshots).
// STUB: replaced by h-blocktrace

use anyhow::Result;

use super::Store;

impl Store {
    /// Extra evidence recorded for one run, as `(kind, JSON)` pairs.
    ///
    /// Kinds: `blocktrace`, `fs_before`, `fs_after`, `fs_delta`.
    // STUB: replaced by h-blocktrace
    pub fn run_extras(&self, _run_id: i64) -> Result<Vec<(String, serde_json::Value)>> {
        Ok(vec![])
    }
}
