//! `fslab export`: one experiment whole. JSON is its serde shape
//! ([`Export`]); CSV is one row per run × metric, for spreadsheets and
//! pandas, its header and rows from one struct ([`CsvRow`]).

use anyhow::{Context, Result};
use serde::Serialize;

use crate::metric::Metric;
use crate::report::Document;
use crate::store::export::Export;

impl Document for Export {
    fn what(&self) -> &'static str {
        "an export"
    }

    fn text(&self) -> String {
        let e = &self.experiment;
        format!("experiment {} {:?}: {} runs (export it as JSON or CSV)\n", e.id, e.name, self.runs.len())
    }

    fn csv(&self) -> Option<Result<String>> {
        Some(to_csv(self))
    }
}

/// One CSV line: the header is these field names, in this order.
#[derive(Default, Serialize)]
struct CsvRow<'a> {
    experiment_id: i64,
    experiment: &'a str,
    run_seq: usize,
    round: usize,
    variant: &'a str,
    workload: &'a str,
    status: &'a str,
    /// Why a failed run failed; empty for ok runs.
    error: Option<&'a str>,
    metric: Option<&'a str>,
    unit: Option<&'a str>,
    higher_is_better: Option<bool>,
    /// Formatted with Rust's shortest round-trip form (`3`, not `3.0`);
    /// empty when not finite.
    value: Option<String>,
}

/// The experiment's runs as CSV: a header, then one row per run × metric in
/// seq order.
///
/// A run without metrics (typically a failed one) still gets one row, with
/// the metric columns empty, so failures stay visible. Lines end in `\n`;
/// fields are quoted per RFC 4180 when needed.
fn to_csv<'a>(export: &'a Export) -> Result<String> {
    let e = &export.experiment;
    let mut w = csv::WriterBuilder::new().terminator(csv::Terminator::Any(b'\n')).from_writer(Vec::new());
    for r in export.runs.iter().map(|r| &r.run) {
        let row = |m: Option<&'a Metric>| CsvRow {
            experiment_id: e.id,
            experiment: &e.name,
            run_seq: r.seq,
            round: r.round,
            variant: &r.variant,
            workload: &r.workload,
            status: r.status.as_str(),
            error: r.error.as_deref(),
            metric: m.map(|m| m.name.as_str()),
            unit: m.map(|m| m.unit.as_str()),
            higher_is_better: m.map(|m| m.higher_is_better),
            value: m.and_then(|m| m.value.is_finite().then(|| m.value.to_string())),
        };
        if r.metrics.is_empty() {
            w.serialize(row(None))?;
        }
        for m in &r.metrics {
            w.serialize(row(Some(m)))?;
        }
    }
    if export.runs.is_empty() {
        // serde writes the header with the first row; an empty export still has one.
        w.write_record(csv_header())?;
    }
    let bytes = w.into_inner().map_err(|e| anyhow::anyhow!("cannot finish the CSV: {e}"))?;
    String::from_utf8(bytes).context("CSV output is not UTF-8")
}

/// Column names of the CSV, in order: the fields of its row struct.
pub fn csv_header() -> Vec<String> {
    // serde writes the header, from the field names, with the first row.
    let mut w = csv::Writer::from_writer(Vec::new());
    if w.serialize(CsvRow::default()).is_err() {
        return Vec::new();
    }
    let bytes = w.into_inner().unwrap_or_default();
    String::from_utf8_lossy(&bytes).lines().next().unwrap_or_default().split(',').map(str::to_string).collect()
}
