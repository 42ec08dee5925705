//! Parser for sysstat `iostat` text output of any era.
//!
//! Recognised line kinds, in any order:
//!
//! * the banner (`Linux 5.19.0 (host) 08/25/2022 _aarch64_ (4 CPU)`);
//! * `-t` timestamps (any line holding an `HH:MM:SS` token, optionally with
//!   a date, `AM`/`PM` or an ISO `T`/zone), attached to the next report;
//! * `avg-cpu:` blocks (header plus one line of numbers), skipped;
//! * device blocks: a `Device`/`Device:` header, then one row per device
//!   until a blank line. Columns are looked up by header name only.
//!
//! Every device block is one *report*. Values keep their meaning across
//! layouts: throughput is normalised to kB/s (KiB, as iostat prints it),
//! old `avgrq-sz` (sectors) to kB, and request sizes missing from a layout
//! are derived from throughput / IOPS.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

/// Which generation of iostat's `-x` header a block has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    /// sysstat ≤ 11.4: `avgrq-sz`, `avgqu-sz`, `svctm`.
    Sysstat11,
    /// sysstat 11.5–12.0: `rareq-sz`, `wareq-sz`, `svctm`, no discard.
    Sysstat11_5,
    /// sysstat 12.1–12.2: discard columns (`d/s`, `dkB/s` …).
    Sysstat12_1,
    /// sysstat 12.3+: flush columns (`f/s`, `f_await`).
    Sysstat12_3,
    /// Non-extended report (`tps kB_read/s kB_wrtn/s …`): no `%util`.
    Basic,
}

/// The throughput unit the log was printed in (before normalising to kB).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// `-k` (and the 12.x default): kilobytes.
    Kb,
    /// `-m`: megabytes.
    Mb,
    /// ≤ 11.x default without `-k`/`-m`: 512-byte sectors.
    Sectors,
}

/// One device row of one report, normalised.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sample {
    /// 0-based index of the report (device block) in the file.
    pub report: usize,
    /// 1-based line number of the row.
    pub line: usize,
    /// The `-t` timestamp text of the report, if any.
    pub time: Option<String>,
    /// Seconds since the first timestamp in the file (from `-t` lines).
    pub t_s: Option<f64>,
    /// Device name as printed.
    pub device: String,
    /// Reads completed per second.
    pub r_s: Option<f64>,
    /// Writes completed per second.
    pub w_s: Option<f64>,
    /// kB read per second.
    pub rkb_s: f64,
    /// kB written per second.
    pub wkb_s: f64,
    /// Mean read request size in kB (printed, or derived).
    pub rareq_kb: Option<f64>,
    /// Mean write request size in kB (printed, or derived).
    pub wareq_kb: Option<f64>,
    /// Mean queue length (`aqu-sz` / `avgqu-sz`).
    pub aqu_sz: Option<f64>,
    /// Mean read latency in ms.
    pub r_await: Option<f64>,
    /// Mean write latency in ms.
    pub w_await: Option<f64>,
    /// `%util`.
    pub util_pct: Option<f64>,
    /// Every column as printed, keyed by header name (not normalised).
    #[serde(skip)]
    pub columns: BTreeMap<String, f64>,
}

/// A parsed log.
#[derive(Clone, Debug, Default, Serialize)]
pub struct IostatLog {
    /// The banner line, if present. Its presence means the log starts with
    /// iostat's first (since-boot) report; see [`super::FirstReport`].
    pub banner: Option<String>,
    /// Layout of the first device header.
    pub layout: Option<Layout>,
    /// Throughput unit of the first device header.
    pub unit: Option<Unit>,
    /// Number of device blocks (reports).
    pub reports: usize,
    /// All device rows, in file order.
    pub samples: Vec<Sample>,
    /// Lines skipped in lenient mode.
    pub warnings: Vec<ParseIssue>,
}

/// A malformed line: its 1-based number and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ParseIssue {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ParseIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for ParseIssue {}

/// How a header's columns map onto [`Sample`] fields.
#[derive(Clone, Debug)]
struct Header {
    names: Vec<String>,
    layout: Layout,
    unit: Unit,
    rkb: (usize, f64),
    wkb: (usize, f64),
}

fn find(names: &[String], wanted: &[&str]) -> Option<usize> {
    names.iter().position(|n| wanted.contains(&n.as_str()))
}

impl Header {
    /// `toks` is the header line split on whitespace, `Device`/`Device:` first.
    fn new(toks: &[&str]) -> Result<Header, String> {
        let names: Vec<String> = toks[1..].iter().map(|s| s.to_string()).collect();
        let mut seen = std::collections::HashSet::new();
        if let Some(d) = names.iter().find(|n| !seen.insert(n.as_str())) {
            return Err(format!("device header repeats column `{d}`"));
        }
        // (column, factor to kB) — -m prints MB (1024 kB), old default prints sectors.
        let unit_col = |kb: &[&str], mb: &[&str], sec: &[&str]| {
            find(&names, kb)
                .map(|i| (i, 1.0, Unit::Kb))
                .or_else(|| find(&names, mb).map(|i| (i, 1024.0, Unit::Mb)))
                .or_else(|| find(&names, sec).map(|i| (i, 0.5, Unit::Sectors)))
        };
        let r = unit_col(&["rkB/s", "kB_read/s"], &["rMB/s", "MB_read/s"], &["rsec/s", "Blk_read/s"]);
        let w = unit_col(&["wkB/s", "kB_wrtn/s"], &["wMB/s", "MB_wrtn/s"], &["wsec/s", "Blk_wrtn/s"]);
        let (Some(r), Some(w)) = (r, w) else {
            return Err("device header has no read/write throughput columns (rkB/s, rMB/s, rsec/s, kB_read/s …)".into());
        };
        let has = |n: &str| names.iter().any(|c| c == n);
        let layout = if has("avgrq-sz") {
            Layout::Sysstat11
        } else if has("f/s") {
            Layout::Sysstat12_3
        } else if has("d/s") {
            Layout::Sysstat12_1
        } else if has("rareq-sz") {
            Layout::Sysstat11_5
        } else if has("%util") {
            Layout::Sysstat11
        } else {
            Layout::Basic
        };
        Ok(Header { names, layout, unit: r.2, rkb: (r.0, r.1), wkb: (w.0, w.1) })
    }

    fn sample(&self, vals: &[f64], device: &str, report: usize, line: usize) -> Sample {
        let col = |n: &[&str]| find(&self.names, n).map(|i| vals[i]);
        let r_s = col(&["r/s"]);
        let w_s = col(&["w/s"]);
        let rkb_s = vals[self.rkb.0] * self.rkb.1;
        let wkb_s = vals[self.wkb.0] * self.wkb.1;
        // Layouts without per-direction sizes: derive as iostat does (kB / requests).
        let derive = |kb: f64, ios: Option<f64>| ios.map(|n| if n > 0.0 { kb / n } else { 0.0 });
        Sample {
            report,
            line,
            time: None,
            t_s: None,
            device: device.to_string(),
            r_s,
            w_s,
            rkb_s,
            wkb_s,
            rareq_kb: col(&["rareq-sz"]).or_else(|| derive(rkb_s, r_s)),
            wareq_kb: col(&["wareq-sz"]).or_else(|| derive(wkb_s, w_s)),
            aqu_sz: col(&["aqu-sz", "avgqu-sz"]),
            r_await: col(&["r_await"]).or_else(|| col(&["await"])),
            w_await: col(&["w_await"]).or_else(|| col(&["await"])),
            util_pct: col(&["%util"]),
            columns: self.names.iter().cloned().zip(vals.iter().copied()).collect(),
        }
    }
}

/// Parses one number as iostat prints it. A decimal comma (iostat honours
/// LC_NUMERIC, e.g. de_DE) is accepted; non-finite values are not.
fn number(tok: &str) -> Option<f64> {
    let v = match tok.parse::<f64>() {
        Ok(v) => v,
        Err(_) if tok.matches(',').count() == 1 && !tok.contains('.') => tok.replace(',', ".").parse().ok()?,
        Err(_) => return None,
    };
    // "inf"/"nan" parse as f64 but iostat never prints them; nor anything
    // near 1e12 (a petabyte per second), which could overflow sums after
    // MB → kB scaling.
    (v.is_finite() && v.abs() < 1e12 && tok.bytes().any(|b| b.is_ascii_digit())).then_some(v)
}

/// Seconds of day from a timestamp line, or `None` if it holds no `HH:MM:SS`.
fn time_of_day(line: &str) -> Option<f64> {
    let toks: Vec<&str> = line.split(|c: char| c.is_whitespace() || c == 'T').filter(|t| !t.is_empty()).collect();
    for (i, tok) in toks.iter().enumerate() {
        // Strip an ISO zone suffix like +0200 / Z.
        let core = tok.split(['+', 'Z']).next().unwrap_or("");
        let parts: Vec<&str> = core.split(':').collect();
        if parts.len() != 3
            || !parts.iter().all(|p| (1..=2).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()))
        {
            continue;
        }
        let (h, m, s): (u32, u32, u32) = (parts[0].parse().ok()?, parts[1].parse().ok()?, parts[2].parse().ok()?);
        if h > 23 || m > 59 || s > 60 {
            return None;
        }
        let mut h = h;
        match toks.get(i + 1).map(|t| t.to_ascii_uppercase()) {
            Some(ref p) if p == "PM" && h < 12 => h += 12,
            Some(ref p) if p == "AM" && h == 12 => h = 0,
            _ => {}
        }
        return Some(f64::from(h * 3600 + m * 60 + s));
    }
    None
}

enum State {
    Outside,
    /// Saw `avg-cpu:`; the next non-blank line holds its numbers.
    Cpu,
    Devices(Header),
}

/// Parses iostat text. Strict mode stops at the first malformed line; lenient
/// mode records it in [`IostatLog::warnings`] and goes on.
///
/// A log without any device report is an error in both modes.
pub fn parse_log(text: &str, lenient: bool) -> Result<IostatLog, ParseIssue> {
    let mut log = IostatLog::default();
    let mut state = State::Outside;
    let mut pending_time: Option<(String, f64)> = None;
    let mut report_time: Option<(String, f64)> = None;
    // For timestamps: first time of day, last time, days crossed.
    let mut first_tod: Option<f64> = None;
    let mut last_tod = 0.0;
    let mut day_offset = 0.0;
    let mut in_report = false;

    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = raw.trim_end_matches('\r');
        let toks: Vec<&str> = line.split_whitespace().collect();
        let issue = |message: String| ParseIssue { line: line_no, message };
        let result: Result<(), ParseIssue> = (|| {
            if toks.is_empty() {
                // A blank line ends a device block or an avg-cpu block.
                if matches!(state, State::Devices(_)) {
                    state = State::Outside;
                }
                return Ok(());
            }
            if toks[0] == "Device:" || toks[0] == "Device" {
                let h = Header::new(&toks).map_err(&issue)?;
                log.layout.get_or_insert(h.layout);
                log.unit.get_or_insert(h.unit);
                report_time = pending_time.take();
                log.reports += 1;
                in_report = true;
                state = State::Devices(h);
                return Ok(());
            }
            if toks[0] == "avg-cpu:" {
                state = State::Cpu;
                return Ok(());
            }
            match &state {
                State::Cpu => {
                    state = State::Outside;
                    if toks.iter().all(|t| number(t).is_some()) {
                        return Ok(());
                    }
                    Err(issue(format!("avg-cpu values expected, found {:?}", truncate(line))))
                }
                State::Devices(h) => {
                    if toks.len() != h.names.len() + 1 {
                        // A device block may be followed directly by a timestamp (no blank line).
                        if let Some(tod) = time_of_day(line) {
                            state = State::Outside;
                            set_time(line, tod, &mut pending_time, &mut first_tod, &mut last_tod, &mut day_offset);
                            return Ok(());
                        }
                        return Err(issue(format!(
                            "device row has {} fields, the header has {}",
                            toks.len(),
                            h.names.len() + 1
                        )));
                    }
                    let mut vals = Vec::with_capacity(h.names.len());
                    for (k, t) in toks[1..].iter().enumerate() {
                        match number(t) {
                            Some(v) => vals.push(v),
                            None => {
                                return Err(issue(format!(
                                    "column {} of {}: not a number: {:?}",
                                    h.names[k],
                                    toks[0],
                                    truncate(t)
                                )))
                            }
                        }
                    }
                    let mut s = h.sample(&vals, toks[0], log.reports - 1, line_no);
                    if let Some((text, t)) = &report_time {
                        s.time = Some(text.clone());
                        s.t_s = Some(*t);
                    }
                    log.samples.push(s);
                    Ok(())
                }
                State::Outside => {
                    if log.banner.is_none() && !in_report && pending_time.is_none() && toks[0] == "Linux" {
                        log.banner = Some(line.trim().to_string());
                        return Ok(());
                    }
                    if let Some(tod) = time_of_day(line) {
                        set_time(line, tod, &mut pending_time, &mut first_tod, &mut last_tod, &mut day_offset);
                        return Ok(());
                    }
                    Err(issue(format!("unrecognised line: {:?}", truncate(line))))
                }
            }
        })();
        if let Err(e) = result {
            if !lenient {
                return Err(e);
            }
            log.warnings.push(e);
        }
    }
    if log.samples.is_empty() {
        return Err(ParseIssue {
            line: text.lines().count(),
            message: "no iostat device report found (expected a `Device` header and rows)".into(),
        });
    }
    Ok(log)
}

/// Records a timestamp line; times are made relative to the first one, and
/// a step backwards is taken as midnight passing.
fn set_time(
    line: &str,
    tod: f64,
    pending: &mut Option<(String, f64)>,
    first: &mut Option<f64>,
    last: &mut f64,
    day_offset: &mut f64,
) {
    let first_tod = *first.get_or_insert(tod);
    if tod + *day_offset < *last {
        *day_offset += 86_400.0;
    }
    *last = tod + *day_offset;
    *pending = Some((line.trim().to_string(), *last - first_tod));
}

/// Keeps error messages short when a line is garbage.
fn truncate(s: &str) -> String {
    if s.chars().count() > 60 {
        format!("{}…", s.chars().take(60).collect::<String>())
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_of_day_formats() {
        assert_eq!(time_of_day("08/25/2022 09:15:01 PM"), Some(76501.0));
        assert_eq!(time_of_day("08/25/2022 12:00:05 AM"), Some(5.0));
        assert_eq!(time_of_day("12/01/26 01:21:08"), Some(4868.0));
        assert_eq!(time_of_day("2022-08-25T21:15:01+0200"), Some(76501.0));
        assert_eq!(time_of_day("Time: 03:45:02 PM"), Some(56702.0));
        assert_eq!(time_of_day("garbage 1:2"), None);
        assert_eq!(time_of_day("25:00:00"), None);
    }

    #[test]
    fn decimal_comma_and_nonfinite() {
        assert_eq!(number("12,50"), Some(12.5));
        assert_eq!(number("1,000.5"), None);
        assert_eq!(number("inf"), None);
        assert_eq!(number("NaN"), None);
        assert_eq!(number("-1e308"), None);
        assert_eq!(number("-0.00"), Some(-0.0));
    }

    #[test]
    fn columns_by_name_not_position() {
        // Same data, columns shuffled: identical normalised values.
        let a = "Device r/s w/s rkB/s wkB/s %util\nsda 1.00 2.00 4.00 64.00 50.00\n";
        let b = "Device %util wkB/s w/s rkB/s r/s\nsda 50.00 64.00 2.00 4.00 1.00\n";
        let (la, lb) = (parse_log(a, false).unwrap(), parse_log(b, false).unwrap());
        let (sa, sb) = (&la.samples[0], &lb.samples[0]);
        assert_eq!((sa.rkb_s, sa.wkb_s, sa.util_pct, sa.wareq_kb), (sb.rkb_s, sb.wkb_s, sb.util_pct, sb.wareq_kb));
        assert_eq!(sa.wareq_kb, Some(32.0));
        assert_eq!(sa.rareq_kb, Some(4.0));
    }

    #[test]
    fn megabytes_and_sectors_normalised() {
        let m = parse_log("Device: rMB/s wMB/s\nsdb 1.50 0.25\n", false).unwrap();
        assert_eq!((m.samples[0].rkb_s, m.samples[0].wkb_s), (1536.0, 256.0));
        assert_eq!(m.unit, Some(Unit::Mb));
        let s = parse_log("Device: rsec/s wsec/s\nsdb 10.00 4.00\n", false).unwrap();
        assert_eq!((s.samples[0].rkb_s, s.samples[0].wkb_s), (5.0, 2.0));
    }

    #[test]
    fn malformed_rows_report_line() {
        let e = parse_log("Device r/s rkB/s wkB/s\nsda 1 2\n", false).unwrap_err();
        assert_eq!(e.line, 2);
        let e = parse_log("\n\nDevice r/s rkB/s wkB/s\nsda 1 x 3\n", false).unwrap_err();
        assert_eq!(e.line, 4);
        assert!(e.message.contains("rkB/s"), "{e}");
        let e = parse_log("Device r/s w/s\nsda 1 2\n", false).unwrap_err();
        assert_eq!(e.line, 1);
        let lenient = parse_log("Device rkB/s wkB/s\nsda 1 2\nsda 1\nhello world\nsda 3 4\n", true).unwrap();
        assert_eq!(lenient.samples.len(), 2);
        assert_eq!(lenient.warnings.iter().map(|w| w.line).collect::<Vec<_>>(), vec![3, 4]);
        assert!(parse_log("", true).is_err());
    }
}
