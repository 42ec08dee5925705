//! `--format json`: the documents' serde shapes, pretty-printed, for scripts.

use anyhow::Result;
use serde::Serialize;

use super::data::ReportData;
use super::{unsupported, CompareReport, Document, Exporter, Format};

pub struct Json;

/// Pretty-printed JSON with a final newline.
pub fn pretty<T: Serialize + ?Sized>(value: &T) -> Result<String> {
    Ok(serde_json::to_string_pretty(value)? + "\n")
}

impl Exporter for Json {
    /// An array of [`crate::analysis::ComparisonRow`]s: workload metrics,
    /// then evidence (`"evidence": true`), each with `"decisive"`.
    /// The verdict rows; a row whose sides ran in different places (or
    /// emulated) carries `place_marks`, and `places` says where each ran.
    fn comparison(&self, report: &CompareReport) -> Result<String> {
        let mut rows = Vec::with_capacity(report.comparison.rows.len());
        for r in &report.comparison.rows {
            let mut row = serde_json::to_value(r)?;
            if r.emulated && !r.evidence && !r.decisive {
                row["not_decisive_because"] = serde_json::json!(
                    "emulated (TCG): wall time follows the host's load; the guest's instruction count decides unless the workload names `decisive`"
                );
            }
            let marks = report.places.marks(&r.baseline, &r.variant);
            if !marks.is_empty() {
                row["place_marks"] = serde_json::json!(marks);
            }
            if !report.places.all_host() {
                row["places"] = serde_json::json!({
                    "baseline": report.places.variants.get(&r.baseline),
                    "variant": report.places.variants.get(&r.variant),
                });
            }
            rows.push(row);
        }
        pretty(&rows)
    }

    fn report(&self, _: &ReportData) -> Result<String> {
        unsupported(Format::Json, "a report (use `fslab export --format json`)")
    }

    fn document(&self, doc: &dyn Document) -> Result<String> {
        doc.to_json()
    }
}
