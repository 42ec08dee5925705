//! Nearest-rank percentiles (the definition fio, iostat tools and most
//! latency reports use: the smallest value with at least p% of values at or
//! below it), and the latency summary several monitors and workloads report.

use serde::{Deserialize, Serialize};

/// The `fraction` (0..=1) nearest-rank percentile of `sorted` (ascending).
pub fn nearest_rank<T: Copy>(sorted: &[T], fraction: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    // The epsilon keeps 99.9% of 1000 at rank 999 despite float error.
    let rank = (fraction * sorted.len() as f64 - 1e-9).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Latency distribution of a set of operations, in microseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyPercentiles {
    /// Operations measured.
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p99_9_us: f64,
    pub max_us: f64,
}

impl LatencyPercentiles {
    /// The summary of latencies in nanoseconds (`ns` is sorted in place).
    pub fn from_ns(ns: &mut [u64]) -> Option<LatencyPercentiles> {
        ns.sort_unstable();
        let at = |p: f64| nearest_rank(ns, p).map_or(0.0, |v| v as f64 / 1000.0);
        let n = ns.len();
        let sum: u128 = ns.iter().map(|&v| u128::from(v)).sum();
        (n > 0).then(|| LatencyPercentiles {
            count: n as u64,
            mean_us: sum as f64 / n as f64 / 1000.0,
            p50_us: at(0.50),
            p90_us: at(0.90),
            p99_us: at(0.99),
            p99_9_us: at(0.999),
            max_us: ns[n - 1] as f64 / 1000.0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_matches_the_definition() {
        let v: Vec<u64> = (1..=1000).collect();
        assert_eq!(nearest_rank(&v, 0.5), Some(500));
        assert_eq!(nearest_rank(&v, 0.999), Some(999));
        assert_eq!(nearest_rank(&v, 1.0), Some(1000));
        assert_eq!(nearest_rank(&v, 0.0), Some(1));
        assert_eq!(nearest_rank::<u64>(&[], 0.5), None);
        assert_eq!(nearest_rank(&[3.0, 7.0], 0.5), Some(3.0));
        let mut ns = vec![3000, 1000, 2000];
        let l = LatencyPercentiles::from_ns(&mut ns).unwrap();
        assert_eq!((l.count, l.p50_us, l.max_us, l.mean_us), (3, 2.0, 3.0, 2.0));
    }
}
