//! `--format toml`: experiment-file text (a `device = { … }` line, …) to
//! paste into an experiment. Only documents that are experiment text have it.

use anyhow::Result;

use super::data::ReportData;
use super::{unsupported, CompareReport, Document, Exporter, Format};

pub struct Toml;

impl Exporter for Toml {
    fn comparison(&self, _: &CompareReport) -> Result<String> {
        unsupported(Format::Toml, "a comparison")
    }

    fn report(&self, _: &ReportData) -> Result<String> {
        unsupported(Format::Toml, "a report")
    }

    fn document(&self, doc: &dyn Document) -> Result<String> {
        doc.toml().map_or_else(|| unsupported(Format::Toml, doc.what()), Ok)
    }
}
