//! A solid-state disk: a fixed latency per command plus transfer. Its
//! flash management is hidden behind enough spare area and parallelism
//! that, at the request rates a testbed produces, neither AUs nor GC show.

use serde::{Deserialize, Serialize};

use super::{transfer_s, Cost, Model, Op};

/// Latencies in seconds, rates in MB/s (10^6 bytes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SsdParams {
    pub read_latency: f64,
    pub write_latency: f64,
    pub read_mbps: f64,
    pub write_mbps: f64,
}

pub struct Ssd(pub SsdParams);

impl Model for Ssd {
    fn charge(&mut self, op: Op, _offset: u64, len: u64) -> Cost {
        let p = &self.0;
        match op {
            Op::Read => Cost { latency: p.read_latency, transfer: transfer_s(len, p.read_mbps), ..Cost::default() },
            Op::Write => Cost { latency: p.write_latency, transfer: transfer_s(len, p.write_mbps), ..Cost::default() },
            Op::Flush => Cost::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_plus_transfer() {
        let mut s =
            Ssd(SsdParams { read_latency: 0.0001, write_latency: 0.00002, read_mbps: 500.0, write_mbps: 400.0 });
        assert!((s.charge(Op::Read, 0, 500_000).total() - 0.0011).abs() < 1e-12);
        assert!((s.charge(Op::Write, 9, 400_000).total() - 0.00102).abs() < 1e-12);
    }
}
