//! Samplers that run beside a measured workload.
//!
//! Shared types live here; the sampling and formulas live in the submodules.

use serde::{Deserialize, Serialize};

pub mod blocktrace;
pub mod cpu;
pub mod diskstats;
pub mod sampler;
pub mod totals;

pub use cpu::{cpu_between, parse_proc_stat, read_cpu_stat, CpuStat};
pub use diskstats::{
    diskstats_name, iostat_between, parse_diskstats, read_diskstats, DiscardStats, DiskStats, FlushStats,
};
pub use sampler::{Monitor, MIN_INTERVAL};
pub use totals::cpu_metrics;

/// One iostat `-x` interval for one device, computed with sysstat's formulas.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IostatSample {
    /// Seconds since the monitor started, at the end of the interval.
    pub t_s: f64,
    pub r_s: f64,
    pub w_s: f64,
    pub d_s: f64,
    pub f_s: f64,
    pub rkb_s: f64,
    pub wkb_s: f64,
    pub dkb_s: f64,
    pub rrqm_s: f64,
    pub wrqm_s: f64,
    pub drqm_s: f64,
    pub rrqm_pct: f64,
    pub wrqm_pct: f64,
    pub drqm_pct: f64,
    pub r_await: f64,
    pub w_await: f64,
    pub d_await: f64,
    pub f_await: f64,
    pub aqu_sz: f64,
    pub rareq_sz: f64,
    pub wareq_sz: f64,
    pub dareq_sz: f64,
    pub util_pct: f64,
}

/// One CPU interval from `/proc/stat`, as percentages of all CPU time.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuSample {
    pub t_s: f64,
    pub user_pct: f64,
    pub nice_pct: f64,
    pub sys_pct: f64,
    pub iowait_pct: f64,
    pub irq_pct: f64,
    pub softirq_pct: f64,
    pub steal_pct: f64,
    pub idle_pct: f64,
    /// Time running guest VMs (already excluded from `user_pct`, as in sysstat).
    #[serde(default)]
    pub guest_pct: f64,
    /// Time running niced guest VMs (already excluded from `nice_pct`).
    #[serde(default)]
    pub guest_nice_pct: f64,
}

/// Whole-run device totals, from the first and last diskstats snapshot.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DiskTotals {
    pub read_mb: f64,
    pub written_mb: f64,
    pub discarded_mb: f64,
    pub reads: u64,
    pub writes: u64,
    pub discards: u64,
    pub flushes: u64,
    /// Mean read request size in KiB (0 when no reads).
    pub mean_read_kb: f64,
    pub mean_write_kb: f64,
    /// Time the device had I/O in flight (diskstats field 10), seconds.
    pub busy_s: f64,
    pub duration_s: f64,
}

/// Everything the monitors collected for one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MonitorData {
    /// Device name as in `/proc/diskstats` (e.g. `loop3`), if a device was monitored.
    pub device: Option<String>,
    pub interval_s: f64,
    pub disk: Vec<IostatSample>,
    pub cpu: Vec<CpuSample>,
    pub disk_totals: Option<DiskTotals>,
}
