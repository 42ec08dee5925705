//! Cheap managed flash (SD cards, eMMC, USB sticks): allocation units,
//! a few open at a time, garbage collection when one more is opened.
//!
//! The medium writes in allocation units (AUs, erase blocks as the host
//! sees them) and keeps at most `open_aus` of them open. Writing into an AU
//! that is not open opens it, closing the least recently used one when all
//! slots are taken; closing an AU copies the part of it the host did not
//! write in this opening from the old block into the new one (`gc =
//! "au-copy"`), which is what makes the flashbench open-AU test fall off a
//! cliff at one AU more than the card keeps open. On `linear_only` media an
//! open AU can only be written forwards: skipping ahead copies the gap, and
//! writing backwards closes and reopens the AU. Writes that continue at the
//! AU's write pointer are programmed as they come (the card buffers the
//! partial page); scattered ones program whole pages.
//!
//! Costs: every write command pays `program_latency` once, plus the
//! programmed bytes at `write_mbps` (both under "program"); GC copies run
//! at `copy_mbps`; reads pay `read_latency` plus the bytes at `read_mbps`
//! ("transfer").

use serde::{Deserialize, Serialize};

use super::{transfer_s, Cost, Counters, Model, Op};

/// What closing an AU costs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Gc {
    /// Copy the AU's unwritten remainder into the new block.
    AuCopy,
    /// Nothing (a medium with enough spare blocks to hide it).
    None,
}

/// Every parameter of a flash medium; rates in MB/s (10^6 bytes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlashParams {
    pub au: u64,
    pub page: u64,
    pub open_aus: u32,
    pub linear_only: bool,
    pub write_mbps: f64,
    pub read_mbps: f64,
    /// Seconds per read command.
    pub read_latency: f64,
    /// Seconds per write command.
    pub program_latency: f64,
    /// Internal copy rate while closing an AU.
    pub copy_mbps: f64,
    pub gc: Gc,
}

#[derive(Clone, Debug)]
struct OpenAu {
    index: u64,
    /// Next byte (within the AU) a linear write continues at.
    write_pointer: u64,
    /// Bytes of the AU that are in the new block in this opening.
    written: u64,
    last_use: u64,
}

pub struct Flash {
    params: FlashParams,
    open: Vec<OpenAu>,
    clock: u64,
    counters: Counters,
}

impl Flash {
    pub fn new(params: FlashParams) -> Flash {
        Flash { params, open: Vec::new(), clock: 0, counters: Counters::default() }
    }

    /// Close the open AU at `slot`: the GC copy of its unwritten remainder.
    fn close(&mut self, slot: usize, cost: &mut Cost) {
        let au = self.open.remove(slot);
        self.counters.au_evictions += 1;
        self.copy(self.params.au.saturating_sub(au.written), cost);
    }

    fn copy(&mut self, bytes: u64, cost: &mut Cost) {
        if self.params.gc == Gc::AuCopy && bytes > 0 {
            self.counters.gc_bytes += bytes;
            cost.gc += transfer_s(bytes, self.params.copy_mbps);
        }
    }

    /// The slot of AU `index`, opening it (and closing the least recently
    /// used one when all slots are taken) when it is not open.
    fn slot(&mut self, index: u64, start: u64, cost: &mut Cost) -> usize {
        if let Some(slot) = self.open.iter().position(|a| a.index == index) {
            return slot;
        }
        if self.open.len() >= self.params.open_aus.max(1) as usize {
            let lru = (0..self.open.len()).min_by_key(|&i| self.open[i].last_use).unwrap();
            self.close(lru, cost);
        }
        self.counters.aus_opened += 1;
        self.open.push(OpenAu { index, write_pointer: start, written: 0, last_use: self.clock });
        self.open.len() - 1
    }

    /// Write `len` bytes at `start` within AU `index`.
    fn write_in_au(&mut self, index: u64, start: u64, len: u64, cost: &mut Cost) {
        let mut slot = self.slot(index, start, cost);
        let pointer = self.open[slot].write_pointer;
        let sequential = start == pointer;
        if self.params.linear_only && start > pointer {
            // The gap is copied from the old block so the AU stays linear.
            let gap = start - pointer;
            self.copy(gap, cost);
            self.open[slot].written += gap;
        } else if self.params.linear_only && start < pointer {
            // Backwards: the AU is closed and opened again from here.
            self.close(slot, cost);
            slot = self.slot(index, start, cost);
        }
        let page = self.params.page.max(1);
        let programmed = if sequential { len } else { (start + len).div_ceil(page) * page - start / page * page };
        self.counters.programmed_bytes += programmed;
        cost.program += transfer_s(programmed, self.params.write_mbps);
        let au = &mut self.open[slot];
        au.write_pointer = start + len;
        au.written = (au.written + len).min(self.params.au);
        au.last_use = self.clock;
    }
}

impl Model for Flash {
    fn charge(&mut self, op: Op, offset: u64, len: u64) -> Cost {
        let mut cost = Cost::default();
        match op {
            Op::Flush => {}
            Op::Read => {
                cost.latency = self.params.read_latency;
                cost.transfer = transfer_s(len, self.params.read_mbps);
            }
            Op::Write => {
                self.clock += 1;
                cost.program = self.params.program_latency;
                let au = self.params.au.max(1);
                let (mut at, end) = (offset, offset + len);
                while at < end {
                    let index = at / au;
                    let piece = (end - at).min((index + 1) * au - at);
                    self.write_in_au(index, at - index * au, piece, &mut cost);
                    at += piece;
                }
            }
        }
        cost
    }

    fn counters(&self) -> Counters {
        self.counters
    }
}

/// flashbench's open-AU test (`--open-au`) replayed on a model: `streams`
/// AUs written round-robin in `block`-sized steps, each from its start,
/// over several generations of fresh AUs so the rate is the steady state
/// rather than the first opens' (flashbench repeats too); MB/s.
pub fn open_au_rate(model: &mut dyn Model, au: u64, streams: u64, block: u64) -> f64 {
    const GENERATIONS: u64 = 8;
    let mut seconds = 0.0;
    let mut bytes = 0;
    for generation in 0..GENERATIONS {
        for step in 0..au / block {
            for stream in 0..streams {
                let offset = (64 + generation * streams + stream) * au + step * block;
                seconds += model.charge(Op::Write, offset, block).total();
                bytes += block;
            }
        }
    }
    bytes as f64 / seconds / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    const OPEN_AU_GENERATIONS: u64 = 8;

    fn card(open_aus: u32, linear_only: bool) -> Flash {
        Flash::new(FlashParams {
            au: 4 * MIB,
            page: 16 << 10,
            open_aus,
            linear_only,
            write_mbps: 10.0,
            read_mbps: 20.0,
            read_latency: 0.001,
            program_latency: 0.002,
            copy_mbps: 20.0,
            gc: Gc::AuCopy,
        })
    }

    #[test]
    fn within_the_open_limit_nothing_is_copied() {
        let mut f = card(2, true);
        let rate = open_au_rate(&mut f, 4 * MIB, 2, 256 << 10);
        assert_eq!(f.counters().gc_bytes, 0);
        assert_eq!(f.counters().aus_opened, 2 * OPEN_AU_GENERATIONS);
        // 256 KiB at 10 MB/s plus 2 ms per command.
        let expected = (256 << 10) as f64 / ((256 << 10) as f64 / 10e6 + 0.002) / 1e6;
        assert!((rate - expected).abs() < 1e-6, "{rate} vs {expected}");
    }

    #[test]
    fn one_stream_more_than_open_copies_the_remainder_at_every_switch() {
        let mut f = card(2, true);
        let fast = open_au_rate(&mut card(2, true), 4 * MIB, 2, 256 << 10);
        let slow = open_au_rate(&mut f, 4 * MIB, 3, 256 << 10);
        let c = f.counters();
        // Every write opens an AU and (after the first two) evicts one
        // whose only new data is one 256 KiB block.
        let writes = OPEN_AU_GENERATIONS * 16 * 3;
        assert_eq!(c.aus_opened, writes);
        assert_eq!(c.au_evictions, writes - 2);
        assert_eq!(c.gc_bytes, (writes - 2) * (4 * MIB - (256 << 10)));
        assert!(slow < fast / 5.0, "{slow} vs {fast}");
    }

    #[test]
    fn linear_only_makes_scattered_writes_cost_more_than_sequential() {
        let scattered = |linear| {
            let mut f = card(2, linear);
            let mut t = 0.0;
            for i in 0..64u64 {
                // Backwards through one AU in 4 KiB steps.
                t += f.charge(Op::Write, (64 - i) * 4096 * 8, 4096).total();
            }
            (t, f.counters())
        };
        let mut seq = card(2, true);
        let sequential: f64 = (0..64u64).map(|i| seq.charge(Op::Write, i * 4096, 4096).total()).sum();
        let (linear, lc) = scattered(true);
        let (random_capable, rc) = scattered(false);
        assert_eq!(seq.counters().gc_bytes, 0);
        assert_eq!(rc.gc_bytes, 0);
        assert!(lc.gc_bytes > 0);
        assert!(linear > random_capable && random_capable > sequential, "{linear} {random_capable} {sequential}");
        // Scattered 4 KiB writes program whole 16 KiB pages.
        // (The first opens the AU where it starts, so it counts as sequential.)
        assert_eq!(rc.programmed_bytes, 63 * (16 << 10) + 4096);
        assert_eq!(seq.counters().programmed_bytes, 64 * 4096);
    }

    #[test]
    fn skipping_ahead_copies_the_gap() {
        let mut f = card(2, true);
        f.charge(Op::Write, 0, 4096);
        f.charge(Op::Write, 8192, 4096);
        assert_eq!(f.counters().gc_bytes, 4096);
    }

    #[test]
    fn reads_cost_latency_plus_transfer() {
        let mut f = card(2, true);
        let c = f.charge(Op::Read, 0, 20_000);
        assert!((c.total() - (0.001 + 0.001)).abs() < 1e-12);
        assert_eq!(f.charge(Op::Flush, 0, 0).total(), 0.0);
    }

    #[test]
    fn writes_across_an_au_boundary_open_both() {
        let mut f = card(2, true);
        f.charge(Op::Write, 4 * MIB - 4096, 8192);
        assert_eq!(f.counters().aus_opened, 2);
    }
}
