//! Every cost zero: the FUSE path alone, to measure what fslab's own
//! serving costs (the accuracy section of BENCHMARKS.md) and as a baseline
//! that still records the requests the device saw.

use super::{Cost, Model, Op};

pub struct Passthrough;

impl Model for Passthrough {
    fn charge(&mut self, _op: Op, _offset: u64, _len: u64) -> Cost {
        Cost::default()
    }
}
