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
//!
//! The parser streams: [`Parser`] takes one line at a time and returns the
//! device row it held, [`LogReader`] does that over any reader, so memory
//! stays the same however long the log is. [`parse_log`] collects a whole
//! text for callers that want every sample.

use std::fmt;
use std::io::{BufRead, Read};
use std::sync::Arc;

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
    /// The `-t` timestamp text of the report, if any (shared by its rows).
    #[serde(serialize_with = "ser_opt_str")]
    pub time: Option<Arc<str>>,
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
    /// Every column as printed, by header name (not normalised).
    #[serde(skip)]
    pub columns: Columns,
}

fn ser_opt_str<S: serde::Serializer>(v: &Option<Arc<str>>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(t) => s.serialize_str(t),
        None => s.serialize_none(),
    }
}

/// The values of one row under its header's names. The names are shared
/// by every row of a header, so a row costs one vector of numbers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Columns {
    names: Arc<[String]>,
    values: Vec<f64>,
}

impl Columns {
    /// The value of column `name` as printed.
    pub fn get(&self, name: &str) -> Option<f64> {
        self.names.iter().position(|n| n == name).map(|i| self.values[i])
    }

    /// (name, value) in header order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, f64)> {
        self.names.iter().map(String::as_str).zip(self.values.iter().copied())
    }
}

impl std::ops::Index<&str> for Columns {
    type Output = f64;

    /// Panics when the row has no such column (like a map's index).
    fn index(&self, name: &str) -> &f64 {
        let i = self.names.iter().position(|n| n == name).unwrap_or_else(|| panic!("no column `{name}`"));
        &self.values[i]
    }
}

/// What is known about a log apart from its rows.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LogInfo {
    /// The banner line, if present. Its presence means the log starts with
    /// iostat's first (since-boot) report; see [`super::FirstReport`].
    pub banner: Option<String>,
    /// Layout of the first device header.
    pub layout: Option<Layout>,
    /// Throughput unit of the first device header.
    pub unit: Option<Unit>,
    /// Number of device blocks (reports).
    pub reports: usize,
    /// Device rows read.
    pub samples: usize,
    /// Lines read.
    pub lines: usize,
}

/// A parsed log held in memory.
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

impl IostatLog {
    /// The log's description without its rows.
    pub fn info(&self) -> LogInfo {
        LogInfo {
            banner: self.banner.clone(),
            layout: self.layout,
            unit: self.unit,
            reports: self.reports,
            samples: self.samples.len(),
            lines: 0,
        }
    }
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

/// How a header's columns map onto [`Sample`] fields (positions found once
/// per header, not per row).
#[derive(Clone, Debug)]
struct Header {
    names: Arc<[String]>,
    layout: Layout,
    unit: Unit,
    rkb: (usize, f64),
    wkb: (usize, f64),
    r_s: Option<usize>,
    w_s: Option<usize>,
    rareq: Option<usize>,
    wareq: Option<usize>,
    aqu: Option<usize>,
    r_await: Option<usize>,
    w_await: Option<usize>,
    util: Option<usize>,
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
        let at = |n: &[&str]| find(&names, n);
        Ok(Header {
            layout,
            unit: r.2,
            rkb: (r.0, r.1),
            wkb: (w.0, w.1),
            r_s: at(&["r/s"]),
            w_s: at(&["w/s"]),
            rareq: at(&["rareq-sz"]),
            wareq: at(&["wareq-sz"]),
            aqu: at(&["aqu-sz", "avgqu-sz"]),
            r_await: at(&["r_await"]).or_else(|| at(&["await"])),
            w_await: at(&["w_await"]).or_else(|| at(&["await"])),
            util: at(&["%util"]),
            names: names.into(),
        })
    }

    fn sample(&self, values: Vec<f64>, device: &str, report: usize, line: usize) -> Sample {
        let col = |i: Option<usize>| i.map(|i| values[i]);
        let r_s = col(self.r_s);
        let w_s = col(self.w_s);
        let rkb_s = values[self.rkb.0] * self.rkb.1;
        let wkb_s = values[self.wkb.0] * self.wkb.1;
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
            rareq_kb: col(self.rareq).or_else(|| derive(rkb_s, r_s)),
            wareq_kb: col(self.wareq).or_else(|| derive(wkb_s, w_s)),
            aqu_sz: col(self.aqu),
            r_await: col(self.r_await),
            w_await: col(self.w_await),
            util_pct: col(self.util),
            columns: Columns { names: Arc::clone(&self.names), values },
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

/// The line-by-line parser: feed it every line in order.
pub struct Parser {
    state: State,
    pending_time: Option<(Arc<str>, f64)>,
    report_time: Option<(Arc<str>, f64)>,
    // For timestamps: first time of day, last time, days crossed.
    first_tod: Option<f64>,
    last_tod: f64,
    day_offset: f64,
    in_report: bool,
    info: LogInfo,
    /// Token positions of the current line (reused: no allocation per line).
    spans: Vec<(usize, usize)>,
    /// The last header line and its parsed form: every report repeats the
    /// header, and parsing it again is most of the cost of a short report.
    last_header: Option<(String, Header)>,
}

/// Whether `b` is Unicode White_Space (the ASCII part: tab, LF, VT, FF, CR, space).
fn is_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ')
}

/// Token positions of `line` exactly as `str::split_whitespace` splits it:
/// a byte scan for ASCII lines (nearly all), the Unicode splitter otherwise.
fn split_tokens(line: &str, spans: &mut Vec<(usize, usize)>) {
    spans.clear();
    let b = line.as_bytes();
    if !line.is_ascii() {
        let base = line.as_ptr() as usize;
        spans.extend(line.split_whitespace().map(|t| {
            let at = t.as_ptr() as usize - base;
            (at, at + t.len())
        }));
        return;
    }
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && is_space(b[i]) {
            i += 1;
        }
        let start = i;
        while i < b.len() && !is_space(b[i]) {
            i += 1;
        }
        if i > start {
            spans.push((start, i));
        }
    }
}

impl Default for Parser {
    fn default() -> Self {
        Parser::new()
    }
}

impl Parser {
    pub fn new() -> Parser {
        Parser {
            state: State::Outside,
            pending_time: None,
            report_time: None,
            first_tod: None,
            last_tod: 0.0,
            day_offset: 0.0,
            in_report: false,
            info: LogInfo::default(),
            spans: Vec::with_capacity(32),
            last_header: None,
        }
    }

    /// What the lines so far said about the log.
    pub fn info(&self) -> &LogInfo {
        &self.info
    }

    /// Parses the next line (without its line break). A device row is
    /// returned; a malformed line is an error, after which parsing may go
    /// on (lenient) or stop (strict).
    pub fn line(&mut self, raw: &str) -> Result<Option<Sample>, ParseIssue> {
        let line = raw.trim_end_matches('\r');
        let mut spans = std::mem::take(&mut self.spans);
        split_tokens(line, &mut spans);
        let result = self.tokens(line, &spans);
        self.spans = spans;
        result
    }

    fn tokens(&mut self, line: &str, spans: &[(usize, usize)]) -> Result<Option<Sample>, ParseIssue> {
        self.info.lines += 1;
        let line_no = self.info.lines;
        let tok = |i: usize| &line[spans[i].0..spans[i].1];
        let issue = |message: String| ParseIssue { line: line_no, message };
        if spans.is_empty() {
            // A blank line ends a device block or an avg-cpu block.
            if matches!(self.state, State::Devices(_)) {
                self.state = State::Outside;
            }
            return Ok(None);
        }
        if tok(0) == "Device:" || tok(0) == "Device" {
            let h = match &self.last_header {
                Some((text, h)) if text == line => h.clone(),
                _ => {
                    let toks: Vec<&str> = (0..spans.len()).map(tok).collect();
                    let h = Header::new(&toks).map_err(issue)?;
                    self.last_header = Some((line.to_string(), h.clone()));
                    h
                }
            };
            self.info.layout.get_or_insert(h.layout);
            self.info.unit.get_or_insert(h.unit);
            self.report_time = self.pending_time.take();
            self.info.reports += 1;
            self.in_report = true;
            self.state = State::Devices(h);
            return Ok(None);
        }
        if tok(0) == "avg-cpu:" {
            self.state = State::Cpu;
            return Ok(None);
        }
        match &self.state {
            State::Cpu => {
                self.state = State::Outside;
                if (0..spans.len()).all(|i| number(tok(i)).is_some()) {
                    return Ok(None);
                }
                Err(issue(format!("avg-cpu values expected, found {:?}", truncate(line))))
            }
            State::Devices(h) => {
                if spans.len() != h.names.len() + 1 {
                    // A device block may be followed directly by a timestamp (no blank line).
                    if let Some(tod) = time_of_day(line) {
                        self.state = State::Outside;
                        self.set_time(line, tod);
                        return Ok(None);
                    }
                    return Err(issue(format!(
                        "device row has {} fields, the header has {}",
                        spans.len(),
                        h.names.len() + 1
                    )));
                }
                let mut values = Vec::with_capacity(h.names.len());
                for k in 1..spans.len() {
                    match number(tok(k)) {
                        Some(v) => values.push(v),
                        None => {
                            return Err(issue(format!(
                                "column {} of {}: not a number: {:?}",
                                h.names[k - 1],
                                tok(0),
                                truncate(tok(k))
                            )))
                        }
                    }
                }
                let mut s = h.sample(values, tok(0), self.info.reports - 1, line_no);
                if let Some((text, t)) = &self.report_time {
                    s.time = Some(Arc::clone(text));
                    s.t_s = Some(*t);
                }
                self.info.samples += 1;
                Ok(Some(s))
            }
            State::Outside => {
                if self.info.banner.is_none() && !self.in_report && self.pending_time.is_none() && tok(0) == "Linux" {
                    self.info.banner = Some(line.trim().to_string());
                    return Ok(None);
                }
                if let Some(tod) = time_of_day(line) {
                    self.set_time(line, tod);
                    return Ok(None);
                }
                Err(issue(format!("unrecognised line: {:?}", truncate(line))))
            }
        }
    }

    /// At the end of the input: a log without any device row is an error.
    pub fn finish(&self) -> Result<(), ParseIssue> {
        if self.info.samples == 0 {
            return Err(ParseIssue {
                line: self.info.lines,
                message: "no iostat device report found (expected a `Device` header and rows)".into(),
            });
        }
        Ok(())
    }

    /// Records a timestamp line; times are made relative to the first one,
    /// and a step backwards is taken as midnight passing.
    fn set_time(&mut self, line: &str, tod: f64) {
        let first_tod = *self.first_tod.get_or_insert(tod);
        if tod + self.day_offset < self.last_tod {
            self.day_offset += 86_400.0;
        }
        self.last_tod = tod + self.day_offset;
        self.pending_time = Some((line.trim().into(), self.last_tod - first_tod));
    }
}

/// Longest line read whole; a longer one is reported and skipped, so a file
/// without line breaks cannot make the reader hold all of it.
pub const MAX_LINE: usize = 1 << 20;

/// What [`LogReader`] yields.
// Rows are the common case and are moved once; boxing them would cost an
// allocation per row for the rare skipped line.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// A device row.
    Sample(Sample),
    /// A malformed line skipped in lenient mode.
    Skipped(ParseIssue),
}

/// Streams a log from any reader: device rows and, in lenient mode,
/// skipped lines, in file order. In strict mode the first malformed line is
/// an error and ends the stream; so does a log without device rows, at its
/// end. Read errors are errors naming the line they happened at.
pub struct LogReader<R> {
    input: R,
    parser: Parser,
    lenient: bool,
    buf: Vec<u8>,
    done: bool,
}

impl<R: BufRead> LogReader<R> {
    pub fn new(input: R, lenient: bool) -> Self {
        LogReader { input, parser: Parser::new(), lenient, buf: Vec::with_capacity(512), done: false }
    }

    /// What the lines read so far said about the log (complete once the
    /// iterator is exhausted).
    pub fn info(&self) -> &LogInfo {
        self.parser.info()
    }

    /// The next line's bytes into `buf`, without the line break; `None` at
    /// the end. An over-long line is cut at [`MAX_LINE`] and the rest skipped.
    fn next_line(&mut self) -> std::io::Result<Option<bool>> {
        self.buf.clear();
        let n = (&mut self.input).take(MAX_LINE as u64 + 1).read_until(b'\n', &mut self.buf)?;
        if n == 0 {
            return Ok(None);
        }
        if self.buf.last() == Some(&b'\n') {
            self.buf.pop();
            return Ok(Some(true));
        }
        if self.buf.len() <= MAX_LINE {
            return Ok(Some(true)); // the last line, without a line break
        }
        // Too long: drop the rest of it in bounded pieces.
        loop {
            let chunk = self.input.fill_buf()?;
            if chunk.is_empty() {
                break;
            }
            match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    self.input.consume(i + 1);
                    break;
                }
                None => {
                    let len = chunk.len();
                    self.input.consume(len);
                }
            }
        }
        Ok(Some(false))
    }
}

impl<R: BufRead> Iterator for LogReader<R> {
    type Item = Result<Item, ParseIssue>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            let whole = match self.next_line() {
                Ok(Some(whole)) => whole,
                Ok(None) => {
                    self.done = true;
                    return self.parser.finish().err().map(Err);
                }
                Err(e) => {
                    self.done = true;
                    let line = self.parser.info().lines + 1;
                    return Some(Err(ParseIssue { line, message: format!("reading: {e}") }));
                }
            };
            let result = if whole {
                // Logs pasted through mail may carry stray bytes; judge them line by line.
                match std::str::from_utf8(&self.buf) {
                    Ok(text) => self.parser.line(text),
                    Err(_) => self.parser.line(&String::from_utf8_lossy(&self.buf)),
                }
            } else {
                self.parser.info.lines += 1;
                Err(ParseIssue {
                    line: self.parser.info.lines,
                    message: format!("line longer than {} MiB", MAX_LINE >> 20),
                })
            };
            match result {
                Ok(Some(s)) => return Some(Ok(Item::Sample(s))),
                Ok(None) => {}
                Err(e) if self.lenient => return Some(Ok(Item::Skipped(e))),
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
        None
    }
}

/// Parses iostat text. Strict mode stops at the first malformed line; lenient
/// mode records it in [`IostatLog::warnings`] and goes on.
///
/// A log without any device report is an error in both modes.
pub fn parse_log(text: &str, lenient: bool) -> Result<IostatLog, ParseIssue> {
    let mut reader = LogReader::new(text.as_bytes(), lenient);
    let mut log = IostatLog::default();
    for item in reader.by_ref() {
        match item? {
            Item::Sample(s) => log.samples.push(s),
            Item::Skipped(w) => log.warnings.push(w),
        }
    }
    let info = reader.info();
    (log.banner, log.layout, log.unit, log.reports) = (info.banner.clone(), info.layout, info.unit, info.reports);
    Ok(log)
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

    #[test]
    fn tokens_split_like_split_whitespace() {
        let mut spans = Vec::new();
        let cases =
            ["", "  ", "a", " a  b\tc\x0bd\x0ce\r", "Device r/s", "x\u{a0}y z", "\u{3000}a\u{85}b ", "é 1,5  x"];
        for line in cases {
            split_tokens(line, &mut spans);
            let ours: Vec<&str> = spans.iter().map(|&(a, b)| &line[a..b]).collect();
            assert_eq!(ours, line.split_whitespace().collect::<Vec<_>>(), "{line:?}");
        }
        proptest::proptest!(|(line in "[ \t\x0b\x0c\ra-z0-9.,\u{a0}\u{3000}]{0,40}")| {
            let mut spans = Vec::new();
            split_tokens(&line, &mut spans);
            let ours: Vec<&str> = spans.iter().map(|&(a, b)| &line[a..b]).collect();
            proptest::prop_assert_eq!(ours, line.split_whitespace().collect::<Vec<_>>());
        });
    }

    #[test]
    fn repeated_headers_are_reused_and_changed_ones_reparsed() {
        let text =
            "Device rkB/s wkB/s\nsda 1 2\n\nDevice rkB/s wkB/s\nsda 3 4\n\nDevice rMB/s wMB/s %util\nsda 1 1 50\n";
        let log = parse_log(text, false).unwrap();
        assert_eq!(log.samples.iter().map(|s| s.wkb_s).collect::<Vec<_>>(), [2.0, 4.0, 1024.0]);
        assert_eq!(log.samples[2].util_pct, Some(50.0));
        assert_eq!(log.samples[1].columns.get("wkB/s"), Some(4.0));
        assert_eq!(log.samples[2].columns.iter().map(|(n, _)| n).collect::<Vec<_>>(), ["rMB/s", "wMB/s", "%util"]);
    }
}
