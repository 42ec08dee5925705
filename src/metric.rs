//! A named, unit-carrying measurement.

use serde::{Deserialize, Serialize};

/// One number a run produced, stored with its unit and which direction is better.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    pub name: String,
    pub unit: String,
    pub higher_is_better: bool,
    pub value: f64,
}

impl Metric {
    /// A metric where smaller values are better (times, latencies).
    pub fn lower(name: &str, unit: &str, value: f64) -> Self {
        Metric { name: name.to_string(), unit: unit.to_string(), higher_is_better: false, value }
    }

    /// A metric where larger values are better (rates, throughput).
    pub fn higher(name: &str, unit: &str, value: f64) -> Self {
        Metric { name: name.to_string(), unit: unit.to_string(), higher_is_better: true, value }
    }
}
