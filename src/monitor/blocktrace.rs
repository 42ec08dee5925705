//! Block-trace monitor: the `block_rq_issue` / `block_rq_complete`
//! tracepoints of one device, summarised per run.
//!
//! Each tracer uses a private tracefs instance
//! (`instances/fslab-tb-<pid>-bt<n>`), so parallel runs and other tracing
//! users do not see each other's events, and `fslab cleanup` finds
//! leftovers by the marker. Events are read in binary form from each CPU's
//! `trace_pipe_raw`; the ring-buffer page layout comes from `header_page`
//! and every record field (dev, sector, nr_sector, bytes, rwbs, …) from the
//! event's `format` file — no offsets are hard-coded.
//!
//! The summary holds request-size histograms (log2 buckets, read and write
//! separately), device latency percentiles (issue → complete matched by
//! device + sector), sync/meta/flush/FUA counts from the `rwbs` flags, and
//! how many events were seen and lost. When tracefs cannot be used the
//! monitor is "off" and [`BlockTraceSummary::reason`] says why; the run goes on.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::{self, File};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::sys::blockdev::DevNum;
use crate::sys::marker::MARKER;

/// Where tracefs is normally found, in order of preference.
pub const TRACEFS_CANDIDATES: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// How often the reader thread drains the per-CPU buffers.
const POLL: Duration = Duration::from_millis(100);

/// Events younger than this (relative to the start of a drain) are kept back
/// before matching, so an issue still sitting in another CPU's buffer is not
/// overtaken by its completion.
const REORDER_WINDOW_NS: u64 = 500_000_000;

/// Per-CPU ring buffer size of the private instance: large enough for a
/// 100 ms poll at a few hundred thousand IOPS.
const BUFFER_SIZE_KB: u32 = 4096;

/// Latencies kept per direction; beyond this, percentiles use the first ones.
const MAX_LATENCY_SAMPLES: usize = 20_000_000;

// ---------------------------------------------------------------------------
// Summary types

/// Everything the block-trace monitor reports for one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BlockTraceSummary {
    /// False when the monitor was off; then `reason` says why.
    pub enabled: bool,
    #[serde(default)]
    pub reason: Option<String>,
    /// Traced device as `major:minor`.
    #[serde(default)]
    pub device: Option<String>,
    #[serde(default)]
    pub duration_s: f64,
    /// Issue and completion records decoded for the device.
    #[serde(default)]
    pub total_events: u64,
    /// Events the kernel dropped or overwrote (ring buffer full), as far as it tells.
    #[serde(default)]
    pub lost_events: u64,
    /// Completions with no matching issue (issued before the trace started, or lost).
    #[serde(default)]
    pub unmatched_completions: u64,
    /// Events of other devices that reached the reader (the kernel-side
    /// filter should keep this at 0); they are not counted anywhere else.
    #[serde(default)]
    pub other_device_events: u64,
    #[serde(default)]
    pub read: DirectionStats,
    #[serde(default)]
    pub write: DirectionStats,
    /// Discard / secure-erase requests issued.
    #[serde(default)]
    pub discards: u64,
    #[serde(default)]
    pub flags: FlagCounts,
}

/// Request sizes and latencies of one direction.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DirectionStats {
    /// Requests issued.
    pub requests: u64,
    pub bytes: u64,
    /// Issued request sizes in log2 buckets: bucket `min_bytes = 2^k` counts
    /// sizes in `[2^k, 2^(k+1))`. Only non-empty buckets, ascending.
    pub size_histogram: Vec<SizeBucket>,
    /// Issue → complete device latency; `None` without matched completions.
    pub latency: Option<LatencyPercentiles>,
}

/// One log2 request-size bucket.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SizeBucket {
    pub min_bytes: u64,
    pub count: u64,
}

pub use crate::stats::percentile::LatencyPercentiles;

/// Requests issued with each `rwbs` flag.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlagCounts {
    /// `S`: REQ_SYNC.
    pub sync: u64,
    /// `M`: REQ_META.
    pub meta: u64,
    /// A leading `F` (pre-flush) or a flush operation.
    pub flush: u64,
    /// A trailing `F` after the operation: REQ_FUA.
    pub fua: u64,
}

impl BlockTraceSummary {
    /// The summary of a monitor that did not run, with the reason.
    pub fn off(reason: impl Into<String>) -> BlockTraceSummary {
        BlockTraceSummary { enabled: false, reason: Some(reason.into()), ..BlockTraceSummary::default() }
    }
}

impl DirectionStats {
    /// The bucket holding the most requests, if any.
    pub fn dominant_bucket(&self) -> Option<&SizeBucket> {
        self.size_histogram.iter().max_by_key(|b| b.count)
    }
}

// ---------------------------------------------------------------------------
// Format files

/// One field of an event record, as the `format` file describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldFormat {
    pub name: String,
    /// The C declaration without the name (e.g. `unsigned int`, `char[10]`).
    pub decl: String,
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
}

/// A parsed `events/<system>/<event>/format` (or `header_page`) file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventFormat {
    pub name: String,
    /// Event id, matched against each record's `common_type`.
    pub id: Option<u16>,
    pub fields: Vec<FieldFormat>,
}

impl EventFormat {
    /// The field called `name`.
    pub fn field(&self, name: &str) -> Option<&FieldFormat> {
        self.fields.iter().find(|f| f.name == name)
    }

    fn need(&self, name: &str) -> Result<&FieldFormat> {
        self.field(name).ok_or_else(|| anyhow!("event {} has no field `{name}` in its format", self.name))
    }
}

/// Parses a tracefs `format` file; `label` names it in errors.
///
/// Field lines look like
/// `field:unsigned int nr_sector; offset:24; size:4; signed:0;`; the
/// `print fmt:` line and anything unknown are ignored.
pub fn parse_format(text: &str, label: &str) -> Result<EventFormat> {
    let mut fmt = EventFormat::default();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        let lineno = i + 1;
        if let Some(name) = line.strip_prefix("name:") {
            fmt.name = name.trim().to_string();
        } else if let Some(id) = line.strip_prefix("ID:") {
            let id = id.trim();
            fmt.id = Some(id.parse().with_context(|| format!("{label}:{lineno}: bad event ID {id:?}"))?);
        } else if line.starts_with("field:") {
            fmt.fields.push(parse_field(line).with_context(|| format!("{label}:{lineno}: bad field line {line:?}"))?);
        }
    }
    if fmt.fields.is_empty() {
        bail!("{label}: no fields found; not a tracefs format file");
    }
    Ok(fmt)
}

fn parse_field(line: &str) -> Result<FieldFormat> {
    let mut decl = None;
    let (mut offset, mut size, mut signed) = (None, None, false);
    for part in line.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = part.split_once(':').ok_or_else(|| anyhow!("`{part}` is not key:value"))?;
        let value = value.trim();
        match key.trim() {
            "field" => decl = Some(value.to_string()),
            "offset" => offset = Some(value.parse::<usize>().with_context(|| format!("offset {value:?}"))?),
            "size" => size = Some(value.parse::<usize>().with_context(|| format!("size {value:?}"))?),
            "signed" => signed = value == "1",
            _ => {}
        }
    }
    let decl = decl.ok_or_else(|| anyhow!("no field declaration"))?;
    // The name is the last word, minus any array suffix (`rwbs[10]`).
    let last = decl.split_whitespace().last().ok_or_else(|| anyhow!("empty field declaration"))?;
    let (name, array) = match last.find('[') {
        Some(i) => (&last[..i], &last[i..]),
        None => (last, ""),
    };
    if name.is_empty() {
        bail!("field declaration {decl:?} has no name");
    }
    let ty = decl[..decl.len() - last.len()].trim();
    Ok(FieldFormat {
        name: name.to_string(),
        decl: format!("{ty}{array}"),
        offset: offset.ok_or_else(|| anyhow!("no offset"))?,
        size: size.ok_or_else(|| anyhow!("no size"))?,
        signed,
    })
}

/// Reads an unsigned integer field of 1, 2, 4 or 8 bytes (host byte order).
fn read_uint(data: &[u8], offset: usize, size: usize) -> Option<u64> {
    let b = data.get(offset..offset.checked_add(size)?)?;
    Some(match size {
        1 => u64::from(b[0]),
        2 => u64::from(u16::from_ne_bytes(b.try_into().ok()?)),
        4 => u64::from(u32::from_ne_bytes(b.try_into().ok()?)),
        8 => u64::from_ne_bytes(b.try_into().ok()?),
        _ => return None,
    })
}

fn read_field(data: &[u8], f: &FieldFormat) -> Option<u64> {
    read_uint(data, f.offset, f.size)
}

// ---------------------------------------------------------------------------
// Ring-buffer pages

/// Layout of one ring-buffer page, from `events/header_page`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageLayout {
    ts: FieldFormat,
    commit: FieldFormat,
    data_offset: usize,
}

/// `commit` flag: events were lost before this page.
const MISSED_EVENTS: u64 = 1 << 31;
/// `commit` flag: the number of lost events is stored after the data.
const MISSED_STORED: u64 = 1 << 30;
/// The data length bits of `commit` (as libtraceevent's kbuffer masks them).
const COMMIT_MASK: u64 = (1 << 27) - 1;

/// Compressed event header types (`header_event`).
const TYPE_PADDING: u32 = 29;
const TYPE_TIME_EXTEND: u32 = 30;
const TYPE_TIME_STAMP: u32 = 31;
const TS_SHIFT: u32 = 27;

impl PageLayout {
    /// Builds the layout from the text of `events/header_page`.
    pub fn parse(text: &str, label: &str) -> Result<PageLayout> {
        let fmt = parse_format(text, label)?;
        let get = |n: &str| fmt.field(n).cloned().ok_or_else(|| anyhow!("{label}: no `{n}` field"));
        Ok(PageLayout { ts: get("timestamp")?, commit: get("commit")?, data_offset: get("data")?.offset })
    }

    /// Walks the events of one page, calling `sink(timestamp_ns, payload)`.
    /// Returns the number of events the kernel says were lost before this
    /// page (1 when it only says "some"). Malformed pages end early, never panic.
    pub fn parse_page(&self, page: &[u8], mut sink: impl FnMut(u64, &[u8])) -> u64 {
        let (Some(mut ts), Some(commit)) = (read_field(page, &self.ts), read_field(page, &self.commit)) else {
            return 0;
        };
        let size = (commit & COMMIT_MASK) as usize;
        let Some(data) = page.get(self.data_offset..).and_then(|d| d.get(..size.min(d.len()))) else {
            return 0;
        };
        let mut lost = 0;
        if commit & MISSED_EVENTS != 0 {
            lost = 1;
            if commit & MISSED_STORED != 0 {
                let word = self.commit.size.min(8);
                if let Some(n) = read_uint(page, self.data_offset + size, word) {
                    lost = n.max(1);
                }
            }
        }
        let u32_at = |pos: usize| read_uint(data, pos, 4).map(|v| v as u32);
        let mut pos = 0usize;
        while let Some(header) = u32_at(pos) {
            let type_len = header & 0x1f;
            let delta = u64::from(header >> 5);
            match type_len {
                TYPE_PADDING => {
                    // A zero delta marks the rest of the page as padding.
                    if delta == 0 {
                        break;
                    }
                    let Some(len) = u32_at(pos + 4) else { break };
                    ts = ts.wrapping_add(delta);
                    pos += 4 + len as usize;
                }
                TYPE_TIME_EXTEND => {
                    let Some(ext) = u32_at(pos + 4) else { break };
                    ts = ts.wrapping_add((u64::from(ext) << TS_SHIFT) | delta);
                    pos += 8;
                }
                TYPE_TIME_STAMP => {
                    let Some(ext) = u32_at(pos + 4) else { break };
                    // Absolute stamp; the top bits come from the page stamp.
                    let top = ts & !((1u64 << (TS_SHIFT + 32)) - 1);
                    ts = top | (u64::from(ext) << TS_SHIFT) | delta;
                    pos += 8;
                }
                0 => {
                    // Large event: its length (including this word) follows.
                    let Some(len) = u32_at(pos + 4) else { break };
                    let Some(dlen) = (len as usize).checked_sub(4) else { break };
                    let dlen = (dlen + 3) & !3;
                    let Some(payload) = data.get(pos + 8..pos + 8 + dlen) else { break };
                    ts = ts.wrapping_add(delta);
                    sink(ts, payload);
                    pos += 8 + dlen;
                }
                n => {
                    let dlen = n as usize * 4;
                    let Some(payload) = data.get(pos + 4..pos + 4 + dlen) else { break };
                    ts = ts.wrapping_add(delta);
                    sink(ts, payload);
                    pos += 4 + dlen;
                }
            }
        }
        lost
    }
}

// ---------------------------------------------------------------------------
// Decoding block events

/// What kind of block event a record is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    Issue,
    Complete,
}

/// One decoded block request event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockEvent {
    pub kind: EventKind,
    pub ts_ns: u64,
    /// Kernel-internal dev_t (`major << 20 | minor`).
    pub dev: u64,
    pub sector: u64,
    pub nr_sector: u64,
    /// `bytes` where the event has it, else `nr_sector * 512`.
    pub bytes: u64,
    /// The decoded `rwbs` flags.
    pub rwbs: Rwbs,
}

/// Field positions for the two block events, from their format files.
#[derive(Clone, Debug)]
pub struct BlockDecoder {
    type_field: FieldFormat,
    issue: EventFields,
    complete: EventFields,
}

#[derive(Clone, Debug)]
struct EventFields {
    id: u16,
    dev: FieldFormat,
    sector: FieldFormat,
    nr_sector: FieldFormat,
    bytes: Option<FieldFormat>,
    rwbs: FieldFormat,
}

impl EventFields {
    fn from(fmt: &EventFormat) -> Result<EventFields> {
        Ok(EventFields {
            id: fmt.id.ok_or_else(|| anyhow!("event {} has no ID in its format", fmt.name))?,
            dev: fmt.need("dev")?.clone(),
            sector: fmt.need("sector")?.clone(),
            nr_sector: fmt.need("nr_sector")?.clone(),
            bytes: fmt.field("bytes").cloned(),
            rwbs: fmt.need("rwbs")?.clone(),
        })
    }
}

impl BlockDecoder {
    /// From the parsed `block_rq_issue` and `block_rq_complete` formats.
    pub fn new(issue: &EventFormat, complete: &EventFormat) -> Result<BlockDecoder> {
        Ok(BlockDecoder {
            type_field: issue.need("common_type")?.clone(),
            issue: EventFields::from(issue)?,
            complete: EventFields::from(complete)?,
        })
    }

    /// Decodes one record payload; `None` for other events or short records.
    pub fn decode(&self, ts_ns: u64, data: &[u8]) -> Option<BlockEvent> {
        let ty = read_field(data, &self.type_field)?;
        let (kind, f) = if ty == u64::from(self.issue.id) {
            (EventKind::Issue, &self.issue)
        } else if ty == u64::from(self.complete.id) {
            (EventKind::Complete, &self.complete)
        } else {
            return None;
        };
        let nr_sector = read_field(data, &f.nr_sector)?;
        let bytes = match &f.bytes {
            Some(b) => read_field(data, b)?,
            None => nr_sector * 512,
        };
        let raw = data.get(f.rwbs.offset..f.rwbs.offset + f.rwbs.size)?;
        let end = raw.iter().position(|&c| c == 0).unwrap_or(raw.len());
        Some(BlockEvent {
            kind,
            ts_ns,
            dev: read_field(data, &f.dev)?,
            sector: read_field(data, &f.sector)?,
            nr_sector,
            bytes,
            rwbs: parse_rwbs_bytes(&raw[..end]),
        })
    }
}

/// The kernel-internal dev_t block tracepoints record (`MKDEV`).
pub fn kernel_dev(dev: DevNum) -> u64 {
    (u64::from(dev.major) << 20) | u64::from(dev.minor)
}

// ---------------------------------------------------------------------------
// rwbs flags

/// Operation and flags decoded from an `rwbs` string (see `blk_fill_rwbs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rwbs {
    /// `R`, `W`, `D` (discard), `F` (flush), `N` (other), or `?`.
    pub op: char,
    pub preflush: bool,
    pub fua: bool,
    pub sync: bool,
    pub meta: bool,
}

/// Parses `rwbs`: `[F]<op>[F][A][S][M]`, where op is one of R W D F N
/// (`DE` = secure erase). A leading `F` is a pre-flush unless it is the op.
pub fn parse_rwbs(s: &str) -> Rwbs {
    parse_rwbs_bytes(s.as_bytes())
}

/// [`parse_rwbs`] on the raw bytes of the record (no allocation: this runs per event).
pub fn parse_rwbs_bytes(c: &[u8]) -> Rwbs {
    let is_op = |ch: u8| matches!(ch, b'R' | b'W' | b'D' | b'F' | b'N');
    let mut r = Rwbs { op: '?', ..Rwbs::default() };
    let mut i = 0;
    if c.first() == Some(&b'F') && c.get(1).is_some_and(|&n| is_op(n)) {
        r.preflush = true;
        i = 1;
    }
    if let Some(&op) = c.get(i) {
        if is_op(op) {
            r.op = char::from(op);
            i += 1;
        }
    }
    for &ch in c.iter().skip(i) {
        match ch {
            b'F' => r.fua = true,
            b'S' => r.sync = true,
            b'M' => r.meta = true,
            _ => {}
        }
    }
    r
}

// ---------------------------------------------------------------------------
// Accumulating events into a summary

/// Turns time-ordered block events into a [`BlockTraceSummary`].
#[derive(Debug, Default)]
pub struct Accumulator {
    dev: Option<u64>,
    total: u64,
    other_devices: u64,
    read: DirAcc,
    write: DirAcc,
    discards: u64,
    flags: FlagCounts,
    unmatched: u64,
    /// Issued, not yet completed: (dev, sector) → issue time and direction.
    inflight: HashMap<(u64, u64), (u64, char)>,
    /// Further requests in flight at an already used (dev, sector), oldest
    /// first. Kept apart so the common case allocates nothing per event.
    inflight_more: HashMap<(u64, u64), VecDeque<(u64, char)>>,
}

#[derive(Debug, Default)]
struct DirAcc {
    requests: u64,
    bytes: u64,
    buckets: BTreeMap<u32, u64>,
    latencies_ns: Vec<u64>,
}

impl Accumulator {
    /// `dev`: only events of this kernel dev_t count (others are tallied in
    /// [`Accumulator::other_devices`]); `None` takes everything.
    pub fn new(dev: Option<u64>) -> Accumulator {
        Accumulator { dev, ..Accumulator::default() }
    }

    /// Events seen from devices other than the traced one (should stay 0:
    /// the kernel-side filter already drops them).
    pub fn other_devices(&self) -> u64 {
        self.other_devices
    }

    /// Adds one event; events must arrive in timestamp order for latencies.
    pub fn add(&mut self, e: &BlockEvent) {
        if self.dev.is_some_and(|d| d != e.dev) {
            self.other_devices += 1;
            return;
        }
        self.total += 1;
        let rwbs = e.rwbs;
        match e.kind {
            EventKind::Issue => {
                if rwbs.sync {
                    self.flags.sync += 1;
                }
                if rwbs.meta {
                    self.flags.meta += 1;
                }
                if rwbs.fua {
                    self.flags.fua += 1;
                }
                if rwbs.preflush || rwbs.op == 'F' {
                    self.flags.flush += 1;
                }
                match rwbs.op {
                    'R' | 'W' => {
                        let d = if rwbs.op == 'R' { &mut self.read } else { &mut self.write };
                        d.requests += 1;
                        d.bytes += e.bytes;
                        if e.bytes > 0 {
                            *d.buckets.entry(63 - e.bytes.leading_zeros()).or_default() += 1;
                        }
                    }
                    'D' => self.discards += 1,
                    _ => {}
                }
                let key = (e.dev, e.sector);
                if let std::collections::hash_map::Entry::Vacant(v) = self.inflight.entry(key) {
                    v.insert((e.ts_ns, rwbs.op));
                } else {
                    self.inflight_more.entry(key).or_default().push_back((e.ts_ns, rwbs.op));
                }
            }
            EventKind::Complete => {
                let key = (e.dev, e.sector);
                let issued = self.inflight.remove(&key);
                if issued.is_some() {
                    // Promote the next request in flight at this sector, if any.
                    if let Some(q) = self.inflight_more.get_mut(&key) {
                        if let Some(next) = q.pop_front() {
                            self.inflight.insert(key, next);
                        }
                        if q.is_empty() {
                            self.inflight_more.remove(&key);
                        }
                    }
                }
                match issued {
                    Some((t0, op)) => {
                        let lat = e.ts_ns.saturating_sub(t0);
                        let d = match op {
                            'R' => &mut self.read,
                            'W' => &mut self.write,
                            _ => return,
                        };
                        if d.latencies_ns.len() < MAX_LATENCY_SAMPLES {
                            d.latencies_ns.push(lat);
                        }
                    }
                    None => self.unmatched += 1,
                }
            }
        }
    }

    /// The summary so far (`enabled: true`).
    pub fn summary(&mut self) -> BlockTraceSummary {
        BlockTraceSummary {
            enabled: true,
            reason: None,
            device: self.dev.map(|d| format!("{}:{}", d >> 20, d & ((1 << 20) - 1))),
            duration_s: 0.0,
            total_events: self.total,
            lost_events: 0,
            unmatched_completions: self.unmatched,
            other_device_events: self.other_devices,
            read: self.read.stats(),
            write: self.write.stats(),
            discards: self.discards,
            flags: self.flags.clone(),
        }
    }
}

impl DirAcc {
    fn stats(&mut self) -> DirectionStats {
        DirectionStats {
            requests: self.requests,
            bytes: self.bytes,
            size_histogram: self
                .buckets
                .iter()
                .map(|(&k, &count)| SizeBucket { min_bytes: 1u64 << k, count })
                .collect(),
            latency: percentiles(&mut self.latencies_ns),
        }
    }
}

/// Nearest-rank percentiles of `ns` (sorted in place), in microseconds.
pub fn percentiles(ns: &mut [u64]) -> Option<LatencyPercentiles> {
    LatencyPercentiles::from_ns(ns)
}

// ---------------------------------------------------------------------------
// tracefs mount and instances

/// Process-wide: tracers using tracefs, and whether this process mounted it.
static TRACEFS: Mutex<(usize, Option<PathBuf>)> = Mutex::new((0, None));
/// Distinguishes instances of one process.
static INSTANCE_COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A reference to a usable tracefs root; mounts it if needed and unmounts on
/// the last release if this process mounted it.
struct TracefsRef {
    root: PathBuf,
}

fn find_tracefs() -> Option<PathBuf> {
    TRACEFS_CANDIDATES.iter().map(PathBuf::from).find(|p| p.join("instances").is_dir())
}

impl TracefsRef {
    fn acquire() -> Result<TracefsRef> {
        let mut g = TRACEFS.lock().map_err(|_| anyhow!("tracefs state lock poisoned"))?;
        let root = match find_tracefs() {
            Some(root) => root,
            None => {
                let target = Path::new(TRACEFS_CANDIDATES[0]);
                nix::mount::mount(Some("tracefs"), target, Some("tracefs"), nix::mount::MsFlags::empty(), None::<&str>)
                    .with_context(|| {
                        format!("tracefs is not mounted and mounting it on {} failed", target.display())
                    })?;
                g.1 = Some(target.to_path_buf());
                target.to_path_buf()
            }
        };
        g.0 += 1;
        Ok(TracefsRef { root })
    }
}

impl Drop for TracefsRef {
    fn drop(&mut self) {
        let Ok(mut g) = TRACEFS.lock() else { return };
        g.0 = g.0.saturating_sub(1);
        if g.0 > 0 {
            return;
        }
        if let Some(target) = g.1.take() {
            // Another fslab process may be tracing through our mount.
            let others = fs::read_dir(target.join("instances"))
                .into_iter()
                .flatten()
                .flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with(MARKER));
            if others {
                return;
            }
            // Detach: a reader elsewhere keeps working until it closes.
            let _ = nix::mount::umount2(&target, nix::mount::MntFlags::MNT_DETACH);
        }
    }
}

/// The instance directories fslab tracers currently have (or left behind),
/// under every mounted tracefs.
pub fn marker_instances() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for root in TRACEFS_CANDIDATES {
        for e in fs::read_dir(Path::new(root).join("instances")).into_iter().flatten().flatten() {
            if e.file_name().to_string_lossy().starts_with(MARKER) {
                out.push(e.path());
            }
        }
    }
    out
}

/// Removes a trace instance directory (its events stop with it).
pub fn remove_instance(dir: &Path) -> Result<()> {
    // Disabling first makes rmdir less likely to hit EBUSY from a pending read.
    let _ = fs::write(dir.join("tracing_on"), "0");
    let _ = fs::write(dir.join("events/enable"), "0");
    fs::remove_dir(dir).with_context(|| format!("removing trace instance {}", dir.display()))
}

fn write_file(path: &Path, value: &str) -> Result<()> {
    fs::write(path, value).with_context(|| format!("writing {value:?} to {}", path.display()))
}

fn read_file(path: &Path) -> Result<String> {
    fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// Reads a file with a single `read`: `header_page` returns EOF for any
/// read at a non-zero offset, so a chunked read would truncate it.
fn read_in_one_call(path: &Path) -> Result<String> {
    let mut f = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut buf = vec![0u8; 64 * 1024];
    let n = f.read(&mut buf).with_context(|| format!("reading {}", path.display()))?;
    buf.truncate(n);
    String::from_utf8(buf).with_context(|| format!("{} is not UTF-8", path.display()))
}

/// CLOCK_MONOTONIC in ns: the instance's `mono` trace clock.
fn mono_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    if rc != 0 {
        // Without a clock, hold everything back until the final drain.
        return 0;
    }
    (t.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(t.tv_nsec as u64)
}

// ---------------------------------------------------------------------------
// The tracer

/// A running block tracer on one device. [`BlockTracer::stop`] returns the
/// summary; dropping it (also while unwinding) stops the reader and removes
/// the trace instance.
pub struct BlockTracer {
    instance: PathBuf,
    dev: u64,
    started: Instant,
    stop_tx: Option<Sender<()>>,
    handle: Option<JoinHandle<Result<Collected>>>,
    _tracefs: TracefsRef,
}

struct Collected {
    acc: Accumulator,
    page_lost: u64,
}

impl BlockTracer {
    /// Starts tracing `device` (a block device node such as `/dev/loop3`).
    pub fn start(device: &Path) -> Result<BlockTracer> {
        let devnum = DevNum::of(device)?;
        let tracefs = TracefsRef::acquire()?;
        let events = tracefs.root.join("events/block");
        for ev in ["block_rq_issue", "block_rq_complete"] {
            if !events.join(ev).join("format").is_file() {
                bail!("tracepoint block:{ev} is not available in {}", tracefs.root.display());
            }
        }
        let name = format!("{MARKER}{}-bt{}", std::process::id(), INSTANCE_COUNTER.fetch_add(1, Ordering::SeqCst));
        let instance = tracefs.root.join("instances").join(&name);
        fs::create_dir(&instance).with_context(|| format!("creating trace instance {}", instance.display()))?;
        // From here on, the instance is removed on every error path by Drop.
        let mut tracer = BlockTracer {
            instance,
            dev: kernel_dev(devnum),
            started: Instant::now(),
            stop_tx: None,
            handle: None,
            _tracefs: tracefs,
        };
        tracer.configure_and_spawn().with_context(|| format!("starting block trace on {}", device.display()))?;
        Ok(tracer)
    }

    /// The private tracefs instance directory.
    pub fn instance_dir(&self) -> &Path {
        &self.instance
    }

    fn configure_and_spawn(&mut self) -> Result<()> {
        let inst = self.instance.clone();
        write_file(&inst.join("tracing_on"), "0")?;
        // `mono` timestamps are comparable across CPUs and with CLOCK_MONOTONIC.
        write_file(&inst.join("trace_clock"), "mono")?;
        let _ = write_file(&inst.join("buffer_size_kb"), &BUFFER_SIZE_KB.to_string());
        let issue =
            parse_format(&read_file(&inst.join("events/block/block_rq_issue/format"))?, "block_rq_issue/format")?;
        let complete =
            parse_format(&read_file(&inst.join("events/block/block_rq_complete/format"))?, "block_rq_complete/format")?;
        let decoder = BlockDecoder::new(&issue, &complete)?;
        let header_path = inst.join("events/header_page");
        let layout = PageLayout::parse(&read_in_one_call(&header_path)?, "events/header_page")?;
        let page_size = match read_file(&inst.join("buffer_subbuf_size_kb")) {
            Ok(kb) => kb.trim().parse::<usize>().map(|kb| kb * 1024).unwrap_or(4096),
            // Older kernels: one page of data plus header.
            Err(_) => layout.data_offset + 4080,
        };
        for ev in ["block_rq_issue", "block_rq_complete"] {
            let dir = inst.join("events/block").join(ev);
            // The filter runs in the kernel, so other devices cost no buffer space.
            write_file(&dir.join("filter"), &format!("dev == {}", self.dev))?;
            write_file(&dir.join("enable"), "1")?;
        }
        let mut files = Vec::new();
        for e in fs::read_dir(inst.join("per_cpu")).with_context(|| format!("listing {}/per_cpu", inst.display()))? {
            let path = e?.path().join("trace_pipe_raw");
            let f = fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&path)
                .with_context(|| format!("opening {}", path.display()))?;
            files.push(f);
        }
        let (tx, rx) = mpsc::channel::<()>();
        let dev = self.dev;
        let handle = std::thread::Builder::new()
            .name("fslab-blocktrace".into())
            .spawn(move || reader(files, layout, decoder, page_size, dev, rx))
            .context("spawning block-trace reader thread")?;
        self.stop_tx = Some(tx);
        self.handle = Some(handle);
        write_file(&inst.join("tracing_on"), "1")?;
        self.started = Instant::now();
        Ok(())
    }

    /// Stops tracing and returns the summary. Never fails: a reader failure
    /// gives a summary with `enabled: false` and the error as reason.
    pub fn stop(mut self) -> BlockTraceSummary {
        let duration_s = self.started.elapsed().as_secs_f64();
        let _ = fs::write(self.instance.join("tracing_on"), "0");
        let collected = self.join();
        let lost_stats = overruns(&self.instance);
        let removed = remove_instance(&self.instance);
        let mut summary = match collected {
            Some(Ok(mut c)) => {
                let mut s = c.acc.summary();
                s.lost_events = c.page_lost.max(lost_stats);
                s
            }
            Some(Err(e)) => BlockTraceSummary::off(format!("block trace failed during the run: {e:#}")),
            None => BlockTraceSummary::off("block trace reader was not running"),
        };
        summary.duration_s = duration_s;
        if let Err(e) = removed {
            // The data is fine; `fslab cleanup` removes the leftover.
            summary.reason.get_or_insert_with(|| format!("{e:#}"));
        }
        summary
    }

    fn join(&mut self) -> Option<Result<Collected>> {
        if let Some(tx) = self.stop_tx.take() {
            let _ = tx.send(());
        }
        let handle = self.handle.take()?;
        Some(handle.join().unwrap_or_else(|_| Err(anyhow!("block-trace reader thread panicked"))))
    }
}

impl Drop for BlockTracer {
    fn drop(&mut self) {
        let _ = self.join();
        if self.instance.exists() {
            let _ = remove_instance(&self.instance);
        }
    }
}

/// Events the kernel overwrote or dropped, summed over CPUs (`per_cpu/*/stats`).
fn overruns(instance: &Path) -> u64 {
    let mut total = 0;
    for e in fs::read_dir(instance.join("per_cpu")).into_iter().flatten().flatten() {
        let Ok(text) = fs::read_to_string(e.path().join("stats")) else { continue };
        for line in text.lines() {
            if let Some((key, value)) = line.split_once(':') {
                if matches!(key.trim(), "overrun" | "dropped events") {
                    total += value.trim().parse::<u64>().unwrap_or(0);
                }
            }
        }
    }
    total
}

/// The reader thread: drains every CPU's `trace_pipe_raw`, reorders events
/// by time within a window and feeds them to the accumulator.
fn reader(
    mut files: Vec<File>,
    layout: PageLayout,
    decoder: BlockDecoder,
    page_size: usize,
    dev: u64,
    stop: mpsc::Receiver<()>,
) -> Result<Collected> {
    let mut acc = Accumulator::new(Some(dev));
    let mut pending: Vec<BlockEvent> = Vec::new();
    let mut page_lost = 0u64;
    let mut buf = vec![0u8; page_size];
    loop {
        let stopping = match stop.recv_timeout(POLL) {
            Ok(()) | Err(RecvTimeoutError::Disconnected) => true,
            Err(RecvTimeoutError::Timeout) => false,
        };
        let round_start = mono_ns();
        for f in &mut files {
            loop {
                match f.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        page_lost += layout.parse_page(&buf[..n], |ts, data| {
                            if let Some(e) = decoder.decode(ts, data) {
                                pending.push(e);
                            }
                        });
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e).context("reading trace_pipe_raw"),
                }
            }
        }
        pending.sort_by_key(|e| e.ts_ns);
        let ready = if stopping {
            pending.len()
        } else {
            let watermark = round_start.saturating_sub(REORDER_WINDOW_NS);
            pending.partition_point(|e| e.ts_ns < watermark)
        };
        for e in pending.drain(..ready) {
            acc.add(&e);
        }
        if stopping {
            return Ok(Collected { acc, page_lost });
        }
    }
}

// ---------------------------------------------------------------------------
// Convenience for the runner

/// A block-trace monitor that is either running or off for a stated reason.
pub enum BlockTraceMonitor {
    Running(BlockTracer),
    Off(String),
}

impl BlockTraceMonitor {
    /// Starts tracing `device` if there is one and tracefs works; otherwise
    /// the monitor is off and the reason is kept for the summary.
    pub fn start(device: Option<&Path>) -> BlockTraceMonitor {
        match device {
            None => BlockTraceMonitor::Off("the testbed has no block device".into()),
            Some(d) => match BlockTracer::start(d) {
                Ok(t) => BlockTraceMonitor::Running(t),
                Err(e) => BlockTraceMonitor::Off(format!("{e:#}")),
            },
        }
    }

    /// Stops (if running) and returns the summary.
    pub fn stop(self) -> BlockTraceSummary {
        match self {
            BlockTraceMonitor::Running(t) => t.stop(),
            BlockTraceMonitor::Off(reason) => BlockTraceSummary::off(reason),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ISSUE: &str = include_str!("../../tests/fixtures/blocktrace/block_rq_issue.format");
    const COMPLETE: &str = include_str!("../../tests/fixtures/blocktrace/block_rq_complete.format");
    const HEADER: &str = include_str!("../../tests/fixtures/blocktrace/header_page");

    #[test]
    fn parses_fields_by_name() {
        let f = parse_format(ISSUE, "issue").unwrap();
        assert_eq!(f.name, "block_rq_issue");
        assert!(f.id.is_some());
        let rwbs = f.field("rwbs").unwrap();
        assert_eq!(rwbs.decl, "char[10]");
        assert_eq!(f.field("cmd").unwrap().decl, "__data_loc char[]");
        assert!(f.field("sector").unwrap().size == 8);
        assert!(parse_format("print fmt: nothing\n", "x").is_err());
        assert!(parse_format("field:int x;\toffset:zz;\tsize:4;\n", "x").is_err());
    }

    #[test]
    fn rwbs_flags() {
        let r = parse_rwbs("WS");
        assert_eq!((r.op, r.sync, r.fua, r.preflush), ('W', true, false, false));
        let r = parse_rwbs("FWFSM");
        assert_eq!((r.op, r.preflush, r.fua, r.sync, r.meta), ('W', true, true, true, true));
        assert_eq!(parse_rwbs("FF").op, 'F');
        assert!(parse_rwbs("FF").preflush);
        assert_eq!(parse_rwbs("F").op, 'F');
        assert_eq!(parse_rwbs("RA").op, 'R');
        assert_eq!(parse_rwbs("").op, '?');
    }

    #[test]
    fn percentiles_nearest_rank() {
        let mut v: Vec<u64> = (1..=1000).map(|i| i * 1000).collect();
        let p = percentiles(&mut v).unwrap();
        assert_eq!((p.p50_us, p.p90_us, p.p99_us, p.p99_9_us, p.max_us), (500.0, 900.0, 990.0, 999.0, 1000.0));
        assert!(percentiles(&mut []).is_none());
    }

    #[test]
    fn same_sector_requests_match_in_issue_order() {
        let ev = |kind, ts_ns, rwbs: &str| BlockEvent {
            kind,
            ts_ns,
            dev: 1,
            sector: 8,
            nr_sector: 8,
            bytes: 4096,
            rwbs: parse_rwbs(rwbs),
        };
        let mut acc = Accumulator::new(Some(1));
        for e in [
            ev(EventKind::Issue, 1_000, "W"),
            ev(EventKind::Issue, 2_000, "R"),
            ev(EventKind::Complete, 11_000, "W"),
            ev(EventKind::Complete, 42_000, "R"),
            ev(EventKind::Complete, 50_000, "R"),
        ] {
            acc.add(&e);
        }
        let s = acc.summary();
        assert_eq!(s.write.latency.unwrap().max_us, 10.0);
        assert_eq!(s.read.latency.unwrap().max_us, 40.0);
        assert_eq!(s.unmatched_completions, 1);
        assert!(acc.inflight.is_empty() && acc.inflight_more.is_empty());
    }

    #[test]
    fn monitor_off_says_why() {
        let s = BlockTraceMonitor::start(None).stop();
        assert!(!s.enabled);
        assert!(s.reason.unwrap().contains("no block device"));
        let s = BlockTraceMonitor::start(Some(Path::new("/proc/self/stat"))).stop();
        assert!(!s.enabled);
        assert!(s.reason.unwrap().contains("not a block device"));
        let json = serde_json::to_value(BlockTraceSummary::off("x")).unwrap();
        assert_eq!(json["enabled"], false);
        let back: BlockTraceSummary = serde_json::from_value(serde_json::json!({"enabled": false})).unwrap();
        assert_eq!(back.reason, None);
    }

    #[test]
    fn malformed_pages_do_not_panic() {
        let layout = PageLayout::parse(HEADER, "h").unwrap();
        let mut n = 0;
        for len in 0..64 {
            let mut page = vec![0xffu8; len];
            n += layout.parse_page(&page, |_, _| {});
            page.fill(0);
            n += layout.parse_page(&page, |_, _| {});
        }
        let _ = n;
        let d = BlockDecoder::new(&parse_format(ISSUE, "i").unwrap(), &parse_format(COMPLETE, "c").unwrap()).unwrap();
        assert!(d.decode(0, &[1, 2, 3]).is_none());
    }
}
