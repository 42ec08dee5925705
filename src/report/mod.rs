//! Turning comparison rows and stored runs into text: the mmtests-style
//! terminal table, JSON, Markdown, the single-file HTML report ([`html`],
//! with hand-written SVG charts in [`svg`]) and run exports.
//!
//! Each output format is an [`Exporter`]; the CLI picks one by name.

pub mod data;
pub mod html;
pub mod markdown;
pub mod svg;
pub mod table;

use anyhow::{bail, Result};

use crate::analysis::ComparisonRow;
use crate::store::Store;

/// Everything a comparison report shows.
pub struct CompareReport<'a> {
    pub experiment_id: i64,
    pub experiment_name: &'a str,
    pub baseline: &'a str,
    /// Variant names in experiment order, baseline first.
    pub variants: Vec<String>,
    pub theta: f64,
    pub alpha: f64,
    pub rows: &'a [ComparisonRow],
}

/// A comparison output format.
pub trait CompareFormat {
    fn render(&self, report: &CompareReport) -> Result<String>;
}

/// `fslab compare --json`: an array of rows.
pub struct JsonRows;

impl CompareFormat for JsonRows {
    fn render(&self, report: &CompareReport) -> Result<String> {
        Ok(serde_json::to_string_pretty(report.rows)? + "\n")
    }
}

/// A run export format (`fslab export --format …`).
pub trait Exporter {
    fn export(&self, store: &Store, experiment_id: i64) -> Result<String>;
}

pub struct JsonExporter;
pub struct CsvExporter;

impl Exporter for JsonExporter {
    fn export(&self, store: &Store, experiment_id: i64) -> Result<String> {
        crate::store::export::to_json(store, experiment_id)
    }
}

impl Exporter for CsvExporter {
    fn export(&self, store: &Store, experiment_id: i64) -> Result<String> {
        crate::store::export::to_csv(store, experiment_id)
    }
}

/// The exporter for a `--format` name.
pub fn exporter(format: &str) -> Result<Box<dyn Exporter>> {
    Ok(match format {
        "json" => Box::new(JsonExporter),
        "csv" => Box::new(CsvExporter),
        other => bail!("unknown export format `{other}` (json, csv)"),
    })
}
