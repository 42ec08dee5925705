//! Turning time-ordered issue/complete events into the run's summary:
//! size histograms, issue→complete latencies of reads and writes matched
//! by device, sector and operation, `rwbs` flag counts.
//!
//! Only requests that move data are matched. A flush is issued at sector 0
//! and completes at sector `u64::MAX`, and the empty pre-flush of an
//! `fsync` completes at sector 0 without ever being issued; matched by
//! sector alone, they took the place of a superblock write at sector 0,
//! whose latency was lost and whose issue was left to be matched by a
//! later completion, giving it a latency it never had.

use std::collections::{BTreeMap, HashMap, VecDeque};

use super::*;

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
    /// Reads and writes issued, not yet completed: (dev, sector, op) →
    /// issue time.
    pub(super) inflight: HashMap<InFlight, u64>,
    /// Further requests in flight at an already used key, oldest first.
    /// Kept apart so the common case allocates nothing per event.
    pub(super) inflight_more: HashMap<InFlight, VecDeque<u64>>,
}

/// What a completion is matched on: device, sector, operation (`R`/`W`).
pub(super) type InFlight = (u64, u64, char);

#[derive(Debug, Default)]
pub(super) struct DirAcc {
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
                if !moves_data(e) {
                    return;
                }
                let key = (e.dev, e.sector, rwbs.op);
                if let std::collections::hash_map::Entry::Vacant(v) = self.inflight.entry(key) {
                    v.insert(e.ts_ns);
                } else {
                    self.inflight_more.entry(key).or_default().push_back(e.ts_ns);
                }
            }
            EventKind::Complete => {
                if !moves_data(e) {
                    return;
                }
                let key = (e.dev, e.sector, rwbs.op);
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
                    Some(t0) => {
                        let lat = e.ts_ns.saturating_sub(t0);
                        let d = if rwbs.op == 'R' { &mut self.read } else { &mut self.write };
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

/// A read or write with data: the requests whose latency is measured (a
/// flush, a discard or the empty completion of a pre-flush is not).
fn moves_data(e: &BlockEvent) -> bool {
    matches!(e.rwbs.op, 'R' | 'W') && e.nr_sector > 0
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
