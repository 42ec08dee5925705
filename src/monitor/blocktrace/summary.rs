//! What the block-trace monitor reports for one run (stored as JSON).

use serde::{Deserialize, Serialize};

use crate::metric::Metric;

/// Everything the block-trace monitor reports for one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BlockTraceSummary {
    /// False when the monitor was off; then `reason` says why.
    pub enabled: bool,
    #[serde(default)]
    pub reason: Option<String>,
    /// Traced device as `major:minor`.
    #[serde(default)]
    pub device: Option<String>,
    #[serde(default)]
    pub duration_s: f64,
    /// Issue and completion records decoded for the device.
    #[serde(default)]
    pub total_events: u64,
    /// Events the kernel dropped or overwrote (ring buffer full), as far as it tells.
    #[serde(default)]
    pub lost_events: u64,
    /// Completions of reads and writes with no matching issue (issued
    /// before the trace started, or lost).
    #[serde(default)]
    pub unmatched_completions: u64,
    /// Events of other devices that reached the reader (the kernel-side
    /// filter should keep this at 0); they are not counted anywhere else.
    #[serde(default)]
    pub other_device_events: u64,
    #[serde(default)]
    pub read: DirectionStats,
    #[serde(default)]
    pub write: DirectionStats,
    /// Discard / secure-erase requests issued.
    #[serde(default)]
    pub discards: u64,
    #[serde(default)]
    pub flags: FlagCounts,
}

/// Request sizes and latencies of one direction.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DirectionStats {
    /// Requests issued.
    pub requests: u64,
    pub bytes: u64,
    /// Issued request sizes in log2 buckets: bucket `min_bytes = 2^k` counts
    /// sizes in `[2^k, 2^(k+1))`. Only non-empty buckets, ascending.
    pub size_histogram: Vec<SizeBucket>,
    /// Issue → complete device latency (the time the request spent in the
    /// device, its queue included); `None` without matched completions.
    pub latency: Option<LatencyPercentiles>,
}

/// One log2 request-size bucket.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SizeBucket {
    pub min_bytes: u64,
    pub count: u64,
}

pub use crate::stats::percentile::LatencyPercentiles;

/// Requests issued with each `rwbs` flag.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlagCounts {
    /// `S`: REQ_SYNC.
    pub sync: u64,
    /// `M`: REQ_META.
    pub meta: u64,
    /// A leading `F` (pre-flush) or a flush operation.
    pub flush: u64,
    /// A trailing `F` after the operation: REQ_FUA.
    pub fua: u64,
}

impl BlockTraceSummary {
    /// The summary of a monitor that did not run, with the reason.
    pub fn off(reason: impl Into<String>) -> BlockTraceSummary {
        BlockTraceSummary { enabled: false, reason: Some(reason.into()), ..BlockTraceSummary::default() }
    }
}

/// Latencies a p99 needs: below 100 the nearest-rank p99 is the largest
/// value (of the quickstart's 2 reads, the slower one), not a percentile.
pub const MIN_P99_SAMPLES: u64 = 100;

impl BlockTraceSummary {
    /// What the trace adds to the device totals as evidence metrics
    /// (`blk/…`, see [`crate::metric`]): device latency and the request
    /// flags diskstats cannot see. Nothing when the trace was off; a
    /// latency only for a direction with [`MIN_P99_SAMPLES`] completed
    /// requests (the summary keeps every percentile of fewer).
    pub fn metrics(&self) -> Vec<Metric> {
        if !self.enabled {
            return Vec::new();
        }
        let mut m = Vec::new();
        for (name, dir) in [("blk/read_p99_ms", &self.read), ("blk/write_p99_ms", &self.write)] {
            if let Some(l) = dir.latency.as_ref().filter(|l| l.count >= MIN_P99_SAMPLES) {
                m.push(Metric::lower(name, "ms", l.p99_us / 1000.0));
            }
        }
        m.push(Metric::lower("blk/sync_requests", "count", self.flags.sync as f64));
        m.push(Metric::lower("blk/meta_requests", "count", self.flags.meta as f64));
        m.push(Metric::lower("blk/fua_requests", "count", self.flags.fua as f64));
        m
    }
}

impl DirectionStats {
    /// The bucket holding the most requests, if any.
    pub fn dominant_bucket(&self) -> Option<&SizeBucket> {
        self.size_histogram.iter().max_by_key(|b| b.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_evidence_is_latency_and_flags_and_nothing_when_off() {
        assert!(BlockTraceSummary::off("no tracefs").metrics().is_empty());
        let latency = LatencyPercentiles { count: 100, p99_us: 2500.0, ..LatencyPercentiles::default() };
        // Two reads: their "p99" would be the slower one.
        let few = LatencyPercentiles { count: 2, p99_us: 23_507_542.0, ..LatencyPercentiles::default() };
        let s = BlockTraceSummary {
            enabled: true,
            read: DirectionStats { requests: 2, latency: Some(few), ..DirectionStats::default() },
            write: DirectionStats { requests: 100, latency: Some(latency), ..DirectionStats::default() },
            flags: FlagCounts { meta: 2, ..FlagCounts::default() },
            ..BlockTraceSummary::default()
        };
        let m = s.metrics();
        let names: Vec<&str> = m.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["blk/write_p99_ms", "blk/sync_requests", "blk/meta_requests", "blk/fua_requests"]);
        assert_eq!((m[0].value, m[2].value), (2.5, 2.0));
        assert!(m.iter().all(|m| crate::metric::is_known_evidence(&m.name)));
    }
}
