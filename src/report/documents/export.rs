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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RunStatus;
    use crate::report::{render, Format};
    use crate::store::export::export;
    use crate::store::tests::{new_exp, run, test_dbs, variant, workload};

    /// Minimal RFC 4180 reader, to check the writer's output parses back.
    fn parse_csv(text: &str) -> Vec<Vec<String>> {
        let mut rows = Vec::new();
        let mut row = Vec::new();
        let mut field = String::new();
        let mut chars = text.chars().peekable();
        let mut quoted = false;
        while let Some(c) = chars.next() {
            match (quoted, c) {
                (true, '"') if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                (true, '"') => quoted = false,
                (true, c) => field.push(c),
                (false, '"') => quoted = true,
                (false, ',') => row.push(std::mem::take(&mut field)),
                (false, '\n') => {
                    row.push(std::mem::take(&mut field));
                    rows.push(std::mem::take(&mut row));
                }
                (false, c) => field.push(c),
            }
        }
        assert!(field.is_empty() && row.is_empty(), "CSV must end with a newline");
        rows
    }

    const CSV_COLUMNS: [&str; 12] = [
        "experiment_id",
        "experiment",
        "run_seq",
        "round",
        "variant",
        "workload",
        "status",
        "error",
        "metric",
        "unit",
        "higher_is_better",
        "value",
    ];

    #[test]
    fn csv_export_quotes_awkward_names() {
        for db in test_dbs("csv") {
            let mut store = db.open();
            let mut new = new_exp("sd card, \"slow\"", "h");
            new.variants = vec![variant(0, "ext4\ndefaults")];
            new.workloads = vec![workload(0, "untar,linux")];
            let exp = store.create_experiment(&new).unwrap();
            assert_eq!(
                parse_csv(&render(Format::Csv, &export(&store, exp).unwrap()).unwrap()),
                vec![CSV_COLUMNS.map(String::from).to_vec()]
            );
            store
                .record_run(
                    exp,
                    &run(
                        0,
                        0,
                        "ext4\ndefaults",
                        "untar,linux",
                        RunStatus::Ok,
                        vec![Metric::lower("elapsed, total", "s", 61.25), Metric::higher("rate", "\"MB\"/s", 3.0)],
                    ),
                )
                .unwrap();
            store.record_run(exp, &run(1, 0, "ext4\ndefaults", "untar,linux", RunStatus::Failed, vec![])).unwrap();

            let csv = render(Format::Csv, &export(&store, exp).unwrap()).unwrap();
            let rows = parse_csv(&csv);
            assert_eq!(rows[0], CSV_COLUMNS.map(String::from).to_vec());
            assert_eq!(csv_header(), CSV_COLUMNS.map(String::from).to_vec());
            assert_eq!(rows.len(), 4);
            let id = exp.to_string();
            let row = |v: [&str; 12]| v.map(String::from).to_vec();
            let name = "sd card, \"slow\"";
            assert_eq!(
                rows[1],
                row([
                    &id,
                    name,
                    "0",
                    "0",
                    "ext4\ndefaults",
                    "untar,linux",
                    "ok",
                    "",
                    "elapsed, total",
                    "s",
                    "false",
                    "61.25"
                ])
            );
            assert_eq!(
                rows[2],
                row([&id, name, "0", "0", "ext4\ndefaults", "untar,linux", "ok", "", "rate", "\"MB\"/s", "true", "3"])
            );
            // The failed run without metrics still shows up, with why it failed.
            assert_eq!(
                rows[3],
                row([&id, name, "1", "0", "ext4\ndefaults", "untar,linux", "failed", "mkfs failed", "", "", "", ""])
            );
        }
    }
}
