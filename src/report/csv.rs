//! `--format csv`: one row per run × metric, for spreadsheets and pandas.

use anyhow::Result;

use super::data::ReportData;
use super::{unsupported, CompareReport, Document, Exporter, Format};

pub struct Csv;

impl Exporter for Csv {
    fn comparison(&self, _: &CompareReport) -> Result<String> {
        unsupported(Format::Csv, "a comparison")
    }

    fn report(&self, _: &ReportData) -> Result<String> {
        unsupported(Format::Csv, "a report (use `fslab export --format csv`)")
    }

    fn document(&self, doc: &dyn Document) -> Result<String> {
        doc.csv().unwrap_or_else(|| unsupported(Format::Csv, doc.what()))
    }
}
