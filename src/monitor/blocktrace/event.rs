//! Decoding `block_rq_issue` / `block_rq_complete` records with the
//! field offsets of their format files, and their `rwbs` flags.

use anyhow::{anyhow, Result};

use super::*;
use crate::sys::blockdev::DevNum;

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
pub(super) struct EventFields {
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
