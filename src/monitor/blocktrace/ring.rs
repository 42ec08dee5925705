//! Ring-buffer pages of `trace_pipe_raw`, laid out as `header_page` says.

use anyhow::{anyhow, Result};

use super::*;

/// Layout of one ring-buffer page, from `events/header_page`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageLayout {
    ts: FieldFormat,
    commit: FieldFormat,
    pub(super) data_offset: usize,
}

/// `commit` flag: events were lost before this page.
pub(super) const MISSED_EVENTS: u64 = 1 << 31;
/// `commit` flag: the number of lost events is stored after the data.
pub(super) const MISSED_STORED: u64 = 1 << 30;
/// The data length bits of `commit` (as libtraceevent's kbuffer masks them).
pub(super) const COMMIT_MASK: u64 = (1 << 27) - 1;

/// Compressed event header types (`header_event`).
pub(super) const TYPE_PADDING: u32 = 29;
pub(super) const TYPE_TIME_EXTEND: u32 = 30;
pub(super) const TYPE_TIME_STAMP: u32 = 31;
pub(super) const TS_SHIFT: u32 = 27;

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
