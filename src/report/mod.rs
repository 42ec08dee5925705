//! Turning comparison rows and stored runs into output, one file per
//! format (hyperfine's `src/export/` shape): [`text`] (the mmtests-style
//! terminal table and plain listings), [`json`], [`csv`], [`markdown`] and
//! [`html`] (one self-contained page, with the SVG charts of [`svg`]).
//!
//! [`Format`] is the one `--format` enum of every command; each format is an
//! [`Exporter`] that renders every document fslab prints, or says it does
//! not. What a report says (the headline, the verdict columns, the notes
//! of a row) is decided once in [`summary`]; numbers are written by
//! [`crate::human`].

pub mod csv;
pub mod data;
pub mod describe;
#[cfg(test)]
pub mod fixture;
pub mod html;
pub mod json;
pub mod markdown;
pub mod places;
pub mod summary;
pub mod svg;
pub mod text;

use std::fmt;

use anyhow::{bail, Result};
use serde::Serialize;

use crate::store::{ExperimentSummary, Store, StoredRun};
use data::{ComparisonData, ReportData};

/// Every output format of fslab; a command accepts the subset it can write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Format {
    /// Plain text for a terminal.
    Text,
    /// Pretty-printed JSON, for scripts.
    Json,
    /// Comma-separated values with a header line.
    Csv,
    /// GitHub-flavoured Markdown, for mail and issue trackers.
    Markdown,
    /// One self-contained HTML page with inline SVG charts.
    Html,
}

impl Format {
    /// The format's writer. Exhaustive: a new format is one file plus one line here.
    pub fn exporter(self) -> &'static dyn Exporter {
        match self {
            Format::Text => &text::Text,
            Format::Json => &json::Json,
            Format::Csv => &csv::Csv,
            Format::Markdown => &markdown::Markdown,
            Format::Html => &html::Html,
        }
    }

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Json => "json",
            Format::Csv => "csv",
            Format::Markdown => "markdown",
            Format::Html => "html",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `fslab compare`: the verdict rows of one experiment.
pub struct CompareReport<'a> {
    pub experiment_id: i64,
    pub experiment_name: &'a str,
    pub comparison: &'a ComparisonData,
    /// The experiment's runs (failed ones are named in the headline).
    pub runs: &'a [StoredRun],
    /// Benchmark-hostile doctor findings recorded when the experiment started.
    pub hostile: Vec<String>,
    /// Where each variant ran.
    pub places: places::Places,
}

/// One output format: renders each document fslab prints. A format that
/// cannot write a document returns [`unsupported`]; the CLI offers each
/// command only the formats that can.
pub trait Exporter: Sync {
    /// `fslab compare` (and the end of `fslab run`).
    fn comparison(&self, report: &CompareReport) -> Result<String>;
    /// `fslab report`: the whole experiment.
    fn report(&self, data: &ReportData) -> Result<String>;
    /// `fslab export`: every run with its metrics.
    fn runs(&self, store: &Store, experiment_id: i64) -> Result<String>;
    /// `fslab list`.
    fn experiments(&self, list: &[ExperimentSummary]) -> Result<String>;
}

/// The error for a document a format cannot write.
pub fn unsupported<T>(format: Format, document: &str) -> Result<T> {
    bail!("{document} cannot be written as {format}")
}

/// Documents whose JSON form is their serde shape and whose text form
/// their own module writes (doctor reports, kconfig diffs, iostat
/// summaries, bisect results), so they follow the same `--format`.
pub fn render_plain<T: Serialize>(
    format: Format,
    document: &str,
    value: &T,
    text: impl FnOnce(&T) -> String,
) -> Result<String> {
    match format {
        Format::Text => Ok(text(value)),
        Format::Json => json::pretty(value),
        other => unsupported(other, document),
    }
}
