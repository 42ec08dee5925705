//! Turning comparison rows and stored runs into output, one file per
//! format (hyperfine's `src/export/` shape): [`text`] (the mmtests-style
//! terminal table and plain listings), [`json`], [`csv`], [`markdown`] and
//! [`html`] (one self-contained page, with the SVG charts of [`svg`]).
//!
//! [`Format`] is the one `--format` enum of every command; each format is an
//! [`Exporter`] that renders every document fslab prints, or says it does
//! not. Besides the two documents the exporters know by type (a comparison
//! and a report), every
//! other thing a command prints is a [`Document`]: plain data whose JSON
//! form is its serde shape and whose text (and CSV, Markdown or TOML, where
//! they make sense) it writes itself, rendered through the same trait. What a report says (the headline, the verdict columns, the notes
//! of a row) is decided once in [`summary`]; numbers are written by
//! [`crate::human`].

pub mod csv;
pub mod data;
pub mod describe;
pub mod documents;
#[cfg(test)]
pub mod fixture;
pub mod html;
pub mod json;
pub mod markdown;
pub mod places;
pub mod summary;
pub mod svg;
pub mod text;
pub mod toml;

use std::fmt;

use anyhow::{bail, Result};
use serde::Serialize;

use crate::store::StoredRun;
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
    /// Experiment-file text (TOML), to paste into an experiment.
    Toml,
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
            Format::Toml => &toml::Toml,
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
            Format::Toml => "toml",
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
    /// How much of it the text shows (JSON is always complete).
    pub detail: Detail,
}

/// How much of a comparison the terminal text shows. Either way it opens
/// with the answer ([`summary::Answer`]): the decision, each decisive
/// metric's verdict per variant, and the rows that decide nothing but
/// changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Detail {
    /// The answer, then one line counting what else exists; `more` is how
    /// to see it (the commands, as the caller knows how it was reached).
    Answer { more: String },
    /// The answer, then every row and a detail line per row (p, n, CV, notes).
    Full,
}

/// One output format: renders each document fslab prints. A format that
/// cannot write a document returns [`unsupported`]; the CLI offers each
/// command only the formats that can.
pub trait Exporter: Sync {
    /// `fslab compare` (and the end of `fslab run`).
    fn comparison(&self, report: &CompareReport) -> Result<String>;
    /// `fslab report`: the whole experiment.
    fn report(&self, data: &ReportData) -> Result<String>;
    /// Everything else a command prints.
    fn document(&self, doc: &dyn Document) -> Result<String>;
}

/// A thing a command prints (a kernel list, a merge summary, a device
/// probe …): plain data. JSON is its serde shape (through [`ToJson`]); text
/// it writes itself; the other formats only where they make sense (`None`:
/// the format cannot write it, and the command does not offer it).
pub trait Document: ToJson {
    /// What it is, for the error of a format that cannot write it ("a kernel list").
    fn what(&self) -> &'static str;
    /// Plain text for a terminal.
    fn text(&self) -> String;
    /// Comma-separated values with a header line.
    fn csv(&self) -> Option<Result<String>> {
        None
    }
    /// GitHub-flavoured Markdown.
    fn markdown(&self) -> Option<String> {
        None
    }
    /// One self-contained HTML page.
    fn html(&self) -> Option<String> {
        None
    }
    /// Experiment-file text.
    fn toml(&self) -> Option<String> {
        None
    }
}

/// A document's serde shape as pretty JSON ([`json::pretty`]), callable
/// through `dyn Document` (serde's `Serialize` is not object-safe); every
/// `Serialize` type has it.
pub trait ToJson {
    fn to_json(&self) -> Result<String>;
}

impl<T: Serialize> ToJson for T {
    fn to_json(&self) -> Result<String> {
        json::pretty(self)
    }
}

/// `doc` in `format`: what every command that prints a [`Document`] calls.
pub fn render(format: Format, doc: &dyn Document) -> Result<String> {
    format.exporter().document(doc)
}

/// The error for a document a format cannot write.
pub fn unsupported<T>(format: Format, document: &str) -> Result<T> {
    bail!("{document} cannot be written as {format}")
}
