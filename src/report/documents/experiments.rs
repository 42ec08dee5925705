//! `fslab list`: the experiments of a store.

use std::fmt::Write;

use serde::Serialize;

use crate::report::Document;
use crate::store::ExperimentSummary;

/// Every experiment, oldest first.
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct ExperimentList(pub Vec<ExperimentSummary>);

impl Document for ExperimentList {
    fn what(&self) -> &'static str {
        "the experiment list"
    }

    /// `   1  2026-01-01T00:00:00Z  complete      10 ok   0 failed  name`.
    fn text(&self) -> String {
        let mut out = String::new();
        for e in &self.0 {
            let _ = writeln!(
                out,
                "{:>4}  {}  {:<11}  {:>3} ok {:>3} failed  {}",
                e.id, e.created_at, e.status, e.runs_ok, e.runs_failed, e.name
            );
        }
        out
    }
}
