//! What the block-trace monitor reports for one run (stored as JSON).

use serde::{Deserialize, Serialize};

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
    /// Completions with no matching issue (issued before the trace started, or lost).
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
    /// Issue → complete device latency; `None` without matched completions.
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

impl DirectionStats {
    /// The bucket holding the most requests, if any.
    pub fn dominant_bucket(&self) -> Option<&SizeBucket> {
        self.size_histogram.iter().max_by_key(|b| b.count)
    }
}
