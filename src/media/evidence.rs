//! What the device went through during a run: requests by size, the
//! model's internal counters, time per cost, busy fraction. The server
//! keeps one [`Ledger`]; the run's media monitor resets it before the
//! measured part and reads it after, and stores it as `media/…` metrics.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::{Cost, Counters, Op};
use crate::metric::Metric;

/// Request-size buckets: up to 4 KiB, 8 KiB, … 1 MiB, larger.
const BUCKETS: usize = 10;

/// Totals since the last reset.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// Read and write requests per size bucket (`size_label(i)`).
    pub reads_by_size: [u64; BUCKETS],
    pub writes_by_size: [u64; BUCKETS],
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub flushes: u64,
    pub aus_opened: u64,
    pub au_evictions: u64,
    pub gc_bytes: u64,
    pub programmed_bytes: u64,
    /// Seconds charged per cost.
    pub latency_s: f64,
    pub transfer_s: f64,
    pub program_s: f64,
    pub gc_s: f64,
    pub seek_s: f64,
    pub rotation_s: f64,
    /// Seconds the device was busy, and the wall time they are part of.
    pub busy_s: f64,
    pub wall_s: f64,
    /// Seconds replies were late against the model (the server could not
    /// keep up); should stay near zero.
    pub late_s: f64,
}

impl Evidence {
    /// Physical bytes written (host data as programmed plus GC copies) per
    /// host byte; 0 when nothing was written.
    pub fn write_amplification(&self) -> f64 {
        if self.write_bytes == 0 {
            return 0.0;
        }
        (self.programmed_bytes + self.gc_bytes) as f64 / self.write_bytes as f64
    }

    /// A run note when replies were late by more than 1% of the wall time
    /// (the server could not keep up with `device`).
    pub fn late_note(&self, device: &impl std::fmt::Display) -> Option<String> {
        (self.late_s > 0.01 * self.wall_s.max(1.0)).then(|| {
            format!(
                "media model: replies were {:.2}s late in total (the server could not keep up with {device})",
                self.late_s
            )
        })
    }

    pub fn requests(&self) -> u64 {
        self.reads_by_size.iter().chain(&self.writes_by_size).sum()
    }

    /// Stored with the run, all under `media/`; lower is better for every
    /// cost (they are what the device had to do).
    pub fn metrics(&self) -> Vec<Metric> {
        let mut m = vec![
            Metric::lower("media/requests", "count", self.requests() as f64),
            Metric::lower("media/read_mb", "MB", self.read_bytes as f64 / 1e6),
            Metric::lower("media/write_mb", "MB", self.write_bytes as f64 / 1e6),
            Metric::lower("media/aus_opened", "count", self.aus_opened as f64),
            Metric::lower("media/au_evictions", "count", self.au_evictions as f64),
            Metric::lower("media/gc_mb", "MB", self.gc_bytes as f64 / 1e6),
            Metric::lower("media/write_amplification", "ratio", self.write_amplification()),
            Metric::lower("media/program_s", "s", self.program_s),
            Metric::lower("media/gc_s", "s", self.gc_s),
            Metric::lower("media/seek_s", "s", self.seek_s + self.rotation_s),
            Metric::lower("media/transfer_s", "s", self.transfer_s + self.latency_s),
            // The device time charged for the run's requests, all costs
            // together: set by what was asked of the device, not by the
            // host's load (`metric::EMULATED_DEVICE_TIME`).
            Metric::lower(crate::metric::EMULATED_DEVICE_TIME, "s", self.busy_s),
            Metric::lower(
                "media/busy_fraction",
                "ratio",
                if self.wall_s > 0.0 { self.busy_s / self.wall_s } else { 0.0 },
            ),
        ];
        for (i, label) in (0..BUCKETS).map(|i| (i, size_label(i))) {
            let n = self.reads_by_size[i] + self.writes_by_size[i];
            if n > 0 {
                m.push(Metric::lower(&format!("media/requests_{label}"), "count", n as f64));
            }
        }
        m
    }
}

/// Bucket `i`'s name: `4k` (up to 4 KiB), `8k`, … `1m`, `big`.
pub fn size_label(i: usize) -> String {
    match i {
        0..=7 => format!("{}k", 4u64 << i),
        8 => "1m".to_string(),
        _ => "big".to_string(),
    }
}

fn bucket(len: u64) -> usize {
    let kib = len.div_ceil(4096).max(1);
    (kib.next_power_of_two().trailing_zeros() as usize).min(BUCKETS - 1)
}

/// The running account of one served device.
pub struct Ledger {
    pub evidence: Evidence,
    since: Instant,
    /// Counters of the model at the last reset.
    base: Counters,
}

impl Ledger {
    pub fn new() -> Ledger {
        Ledger { evidence: Evidence::default(), since: Instant::now(), base: Counters::default() }
    }

    /// Start counting afresh (the model's state, such as open AUs, stays).
    pub fn reset(&mut self, counters: Counters) {
        *self = Ledger { evidence: Evidence::default(), since: Instant::now(), base: counters };
    }

    pub fn record(&mut self, op: Op, len: u64, cost: &Cost, counters: Counters) {
        let e = &mut self.evidence;
        match op {
            Op::Read => {
                e.reads_by_size[bucket(len)] += 1;
                e.read_bytes += len;
            }
            Op::Write => {
                e.writes_by_size[bucket(len)] += 1;
                e.write_bytes += len;
            }
            Op::Flush => e.flushes += 1,
        }
        e.latency_s += cost.latency;
        e.transfer_s += cost.transfer;
        e.program_s += cost.program;
        e.gc_s += cost.gc;
        e.seek_s += cost.seek;
        e.rotation_s += cost.rotation;
        e.busy_s += cost.total();
        e.aus_opened = counters.aus_opened - self.base.aus_opened;
        e.au_evictions = counters.au_evictions - self.base.au_evictions;
        e.gc_bytes = counters.gc_bytes - self.base.gc_bytes;
        e.programmed_bytes = counters.programmed_bytes - self.base.programmed_bytes;
    }

    pub fn late(&mut self, seconds: f64) {
        self.evidence.late_s += seconds;
    }

    /// The evidence so far, with the wall time filled in.
    pub fn snapshot(&self) -> Evidence {
        let mut e = self.evidence.clone();
        e.wall_s = self.since.elapsed().as_secs_f64();
        e
    }
}

impl Default for Ledger {
    fn default() -> Self {
        Ledger::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets() {
        assert_eq!(bucket(512), 0);
        assert_eq!(bucket(4096), 0);
        assert_eq!(bucket(4097), 1);
        assert_eq!(bucket(64 << 10), 4);
        assert_eq!(bucket(1 << 20), 8);
        assert_eq!(bucket(1280 << 10), 9);
        assert_eq!(size_label(4), "64k");
    }

    #[test]
    fn amplification_and_reset() {
        let mut l = Ledger::new();
        let counters = Counters { aus_opened: 3, au_evictions: 1, gc_bytes: 3000, programmed_bytes: 1000 };
        l.record(Op::Write, 1000, &Cost { program: 0.5, gc: 0.25, ..Cost::default() }, counters);
        let e = l.snapshot();
        assert_eq!(e.write_amplification(), 4.0);
        assert_eq!(e.busy_s, 0.75);
        l.reset(counters);
        l.record(Op::Read, 4096, &Cost::default(), counters);
        assert_eq!(l.snapshot().aus_opened, 0);
        assert_eq!(l.snapshot().requests(), 1);
    }
}
