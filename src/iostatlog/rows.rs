//! `fslab iostat parse`: every device row of one or more logs as JSON or
//! CSV, written while the logs are read, so a log of any length needs the
//! same memory.
//!
//! Output starts before a log has been read to its end, so a strict-mode
//! error in the middle of a log leaves the output cut short (and fslab
//! exits non-zero naming the file and line), as with any streaming tool.

use std::io::Write;
use std::path::Path;

use anyhow::Result;

use super::parse::{LogInfo, ParseIssue, Sample};

/// CSV columns, in order.
pub const CSV_HEADER: &str =
    "path,report,time,t_s,device,r_s,w_s,rkb_s,wkb_s,rareq_kb,wareq_kb,aqu_sz,r_await,w_await,util_pct";

fn csv_field(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\"")).into()
    } else {
        s.into()
    }
}

/// `,value` (nothing after the comma when there is no value), written
/// straight into `out`: no string per field.
fn opt(out: &mut dyn Write, v: Option<f64>) -> std::io::Result<()> {
    match v {
        Some(x) => write!(out, ",{x}"),
        None => out.write_all(b","),
    }
}

fn csv_row(out: &mut dyn Write, path: &str, s: &Sample) -> std::io::Result<()> {
    write!(out, "{path},{},{}", s.report, csv_field(s.time.as_deref().unwrap_or("")))?;
    opt(out, s.t_s)?;
    write!(out, ",{}", csv_field(&s.device))?;
    for v in
        [s.r_s, s.w_s, Some(s.rkb_s), Some(s.wkb_s), s.rareq_kb, s.wareq_kb, s.aqu_sz, s.r_await, s.w_await, s.util_pct]
    {
        opt(out, v)?;
    }
    out.write_all(b"\n")
}

/// CSV of every row of `logs`, one header line first.
pub fn write_csv(
    logs: &[&Path],
    lenient: bool,
    out: &mut dyn Write,
    skipped: &mut dyn FnMut(&Path, &ParseIssue),
) -> Result<()> {
    writeln!(out, "{CSV_HEADER}")?;
    for &path in logs {
        let label = csv_field(&path.display().to_string()).into_owned();
        super::for_each_sample(path, lenient, &mut |w| skipped(path, w), &mut |s, _| Ok(csv_row(out, &label, &s)?))?;
    }
    out.flush()?;
    Ok(())
}

/// Writes a file's object up to the opening of its `samples` list.
fn json_file_head(out: &mut dyn Write, path: &str, info: &LogInfo) -> Result<()> {
    write!(
        out,
        "    {{\n      \"path\": {},\n      \"banner\": {},\n      \"layout\": {},\n      \"unit\": {},\n      \"samples\": [",
        serde_json::to_string(path)?,
        serde_json::to_string(&info.banner)?,
        serde_json::to_string(&info.layout)?,
        serde_json::to_string(&info.unit)?,
    )?;
    Ok(())
}

/// JSON `{"files": [{"path", "banner", "layout", "unit", "samples": […],
/// "reports"}]}`, one sample object per line.
pub fn write_json(
    logs: &[&Path],
    lenient: bool,
    out: &mut dyn Write,
    skipped: &mut dyn FnMut(&Path, &ParseIssue),
) -> Result<()> {
    // The opening is written with the first file's head, so a first log
    // that is not iostat output fails with nothing on stdout.
    const OPENING: &str = "{\n  \"files\": [";
    for (i, &path) in logs.iter().enumerate() {
        let lead = if i == 0 { format!("{OPENING}\n") } else { ",\n".to_string() };
        let label = path.display().to_string();
        let mut rows = 0usize;
        // Serialised into a reused buffer, then written at once: serde's many
        // small writes are cheaper into a Vec than through `dyn Write`.
        let mut buf: Vec<u8> = Vec::with_capacity(1024);
        let info = super::for_each_sample(path, lenient, &mut |w| skipped(path, w), &mut |s, info| {
            // The banner, layout and unit are known by the first row.
            if rows == 0 {
                out.write_all(lead.as_bytes())?;
                json_file_head(out, &label, info)?;
            }
            buf.clear();
            buf.extend_from_slice(if rows == 0 { b"\n        " } else { b",\n        " });
            serde_json::to_writer(&mut buf, &s)?;
            out.write_all(&buf)?;
            rows += 1;
            Ok(())
        })?;
        if rows == 0 {
            out.write_all(lead.as_bytes())?;
            json_file_head(out, &label, &info)?;
        }
        write!(out, "\n      ],\n      \"reports\": {}\n    }}", info.reports)?;
    }
    if logs.is_empty() {
        write!(out, "{OPENING}")?;
    }
    writeln!(out, "\n  ]\n}}")?;
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_and_csv_stream_every_row() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.log");
        std::fs::write(&a, "Linux 6.1 (h)\n\n12:00:00\nDevice r/s w/s rkB/s wkB/s %util\nsda 1 2 4 64 50\nsdb 0 0 0 0 0\n\n12:00:01\nDevice r/s w/s rkB/s wkB/s %util\nsda 1 2 4 64 99\n").unwrap();
        let b = dir.path().join("b,c.log");
        std::fs::write(&b, "Device rkB/s wkB/s\nx 1 2\nthis is no row at all\n").unwrap();
        let mut out = Vec::new();
        let mut warned = Vec::new();
        write_json(&[&a, &b], true, &mut out, &mut |p, w| warned.push((p.to_path_buf(), w.line))).unwrap();
        let v: serde_json::Value =
            serde_json::from_slice(&out).unwrap_or_else(|e| panic!("{e}\n{}", String::from_utf8_lossy(&out)));
        let files = v["files"].as_array().unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(files[0]["samples"].as_array().unwrap().len(), 3);
        assert_eq!(files[0]["reports"], 2);
        assert_eq!(files[0]["banner"], "Linux 6.1 (h)");
        assert_eq!(files[0]["layout"], "sysstat11");
        assert_eq!(files[0]["samples"][2]["time"], "12:00:01");
        assert_eq!(files[0]["samples"][2]["util_pct"], 99.0);
        assert_eq!(files[1]["samples"][0]["device"], "x");
        assert!(files[1]["banner"].is_null());
        assert_eq!(warned, [(b.clone(), 3)]);

        let mut csv = Vec::new();
        write_csv(&[&a, &b], true, &mut csv, &mut |_, _| {}).unwrap();
        let text = String::from_utf8(csv).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], CSV_HEADER);
        assert_eq!(lines.len(), 1 + 3 + 1);
        assert!(lines[4].starts_with(&format!("\"{}\",0,,,x,", b.display())), "{text}");

        // Strict: the error names the file and line.
        let e = write_json(&[&b], false, &mut Vec::new(), &mut |_, _| {}).unwrap_err().to_string();
        assert!(e.ends_with("b,c.log:3: device row has 6 fields, the header has 3"), "{e}");
    }

    /// Issue 20 item 10: a log that is not iostat output fails with nothing
    /// written (it used to leave `{"files": [` on stdout).
    #[test]
    fn a_garbage_log_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let garbage = dir.path().join("garbage.log");
        std::fs::write(&garbage, "garbage\nmore\n").unwrap();
        let mut out = Vec::new();
        assert!(write_json(&[&garbage], false, &mut out, &mut |_, _| {}).is_err());
        assert!(out.is_empty(), "{}", String::from_utf8_lossy(&out));
        let mut empty = Vec::new();
        write_json(&[], false, &mut empty, &mut |_, _| {}).unwrap();
        assert_eq!(serde_json::from_slice::<serde_json::Value>(&empty).unwrap(), serde_json::json!({ "files": [] }));
    }
}
