//! `--format json`: the documents' serde shapes, pretty-printed, for scripts.

use anyhow::Result;
use serde::Serialize;

use super::data::ReportData;
use super::{unsupported, CompareReport, Exporter, Format};
use crate::store::{ExperimentSummary, Store};

pub struct Json;

/// Pretty-printed JSON with a final newline.
pub fn pretty<T: Serialize + ?Sized>(value: &T) -> Result<String> {
    Ok(serde_json::to_string_pretty(value)? + "\n")
}

impl Exporter for Json {
    /// An array of [`crate::analysis::ComparisonRow`]s.
    fn comparison(&self, report: &CompareReport) -> Result<String> {
        pretty(&report.comparison.rows)
    }

    fn report(&self, _: &ReportData) -> Result<String> {
        unsupported(Format::Json, "a report (use `fslab export --format json`)")
    }

    /// See [`crate::store::export::to_json`] for the shape.
    fn runs(&self, store: &Store, experiment_id: i64) -> Result<String> {
        Ok(crate::store::export::to_json(store, experiment_id)? + "\n")
    }

    /// An array of `{id, name, created_at, status, runs_ok, runs_failed}`.
    fn experiments(&self, list: &[ExperimentSummary]) -> Result<String> {
        pretty(list)
    }
}
