//! A rotating disk: seek time growing with the square root of the distance
//! between track-to-track and full-stroke, rotational latency, transfer.
//!
//! The head stays where the last request ended. A request that starts
//! there costs only transfer (the sectors pass under the head in order);
//! one within the same track costs half a revolution on average; anything
//! farther adds `seek_track + (seek_full - seek_track) * sqrt(distance /
//! capacity)`, the usual square-root fit of seek curves (Ruemmler &
//! Wilkes, "An introduction to disk drive modeling", 1994). Latencies are
//! their expected values, so the same requests always cost the same.

use serde::{Deserialize, Serialize};

use super::{transfer_s, Cost, Model, Op};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HddParams {
    pub rpm: u32,
    /// Seconds for a full-stroke seek.
    pub seek_full: f64,
    /// Seconds for a track-to-track seek.
    pub seek_track: f64,
    /// Media transfer rate, MB/s (10^6 bytes).
    pub mbps: f64,
}

pub struct Hdd {
    params: HddParams,
    capacity: u64,
    head: Option<u64>,
}

impl Hdd {
    /// A disk of `capacity` bytes (the testbed's size: the full stroke
    /// spans it).
    pub fn new(params: HddParams, capacity: u64) -> Hdd {
        Hdd { params, capacity: capacity.max(1), head: None }
    }

    fn revolution_s(&self) -> f64 {
        60.0 / f64::from(self.params.rpm.max(1))
    }

    /// Bytes passing under the head in one revolution.
    fn track_bytes(&self) -> u64 {
        (self.params.mbps * 1e6 * self.revolution_s()) as u64
    }

    /// Seek and rotational latency to reach `offset` from the head.
    fn position(&self, offset: u64, cost: &mut Cost) {
        let Some(head) = self.head else {
            cost.rotation = self.revolution_s() / 2.0;
            return;
        };
        if head == offset {
            return;
        }
        let distance = head.abs_diff(offset);
        cost.rotation = self.revolution_s() / 2.0;
        if distance >= self.track_bytes() {
            let fraction = (distance as f64 / self.capacity as f64).min(1.0);
            cost.seek =
                self.params.seek_track + (self.params.seek_full - self.params.seek_track).max(0.0) * fraction.sqrt();
        }
    }
}

impl Model for Hdd {
    fn charge(&mut self, op: Op, offset: u64, len: u64) -> Cost {
        let mut cost = Cost::default();
        if op == Op::Flush {
            return cost;
        }
        self.position(offset, &mut cost);
        cost.transfer = transfer_s(len, self.params.mbps);
        self.head = Some(offset + len);
        cost
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disk() -> Hdd {
        Hdd::new(HddParams { rpm: 6000, seek_full: 0.018, seek_track: 0.001, mbps: 100.0 }, 1 << 30)
    }

    #[test]
    fn sequential_requests_cost_only_transfer() {
        let mut d = disk();
        d.charge(Op::Read, 0, 4096);
        let c = d.charge(Op::Read, 4096, 1_000_000);
        assert_eq!(c.seek, 0.0);
        assert_eq!(c.rotation, 0.0);
        assert!((c.transfer - 0.01).abs() < 1e-12);
    }

    #[test]
    fn seek_grows_with_the_square_root_of_distance() {
        let seek_to = |to: u64| {
            let mut d = disk();
            d.charge(Op::Write, 0, 0);
            d.charge(Op::Write, to, 4096).seek
        };
        let full = seek_to(1 << 30);
        let quarter = seek_to(1 << 28);
        assert!((full - 0.018).abs() < 1e-12);
        assert!((quarter - (0.001 + 0.017 * 0.5)).abs() < 1e-12);
        // Within one track (6000 rpm at 100 MB/s = 1 MB a revolution): no seek.
        assert_eq!(seek_to(500_000), 0.0);
    }

    #[test]
    fn a_random_request_waits_half_a_revolution() {
        let mut d = disk();
        d.charge(Op::Read, 0, 4096);
        let c = d.charge(Op::Read, 1 << 29, 4096);
        assert!((c.rotation - 0.005).abs() < 1e-12);
        assert!(c.seek > 0.001);
    }
}
