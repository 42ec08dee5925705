//! `--format csv`: one row per run × metric, for spreadsheets and pandas.

use anyhow::Result;

use super::data::ReportData;
use super::{unsupported, CompareReport, Document, Exporter, Format};
use crate::store::{ExperimentSummary, Store};

pub struct Csv;

impl Exporter for Csv {
    fn comparison(&self, _: &CompareReport) -> Result<String> {
        unsupported(Format::Csv, "a comparison")
    }

    fn report(&self, _: &ReportData) -> Result<String> {
        unsupported(Format::Csv, "a report (use `fslab export --format csv`)")
    }

    /// See [`crate::store::export::to_csv`] for the columns.
    fn runs(&self, store: &Store, experiment_id: i64) -> Result<String> {
        crate::store::export::to_csv(store, experiment_id)
    }

    fn experiments(&self, _: &[ExperimentSummary]) -> Result<String> {
        unsupported(Format::Csv, "the experiment list")
    }

    fn document(&self, doc: &dyn Document) -> Result<String> {
        doc.csv().unwrap_or_else(|| unsupported(Format::Csv, doc.what()))
    }
}
