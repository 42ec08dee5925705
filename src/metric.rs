//! A named, unit-carrying measurement, and which names are *evidence*.
//!
//! A run's metrics are of two sorts, told apart by name alone (no stored
//! flag, so every store and every merge agrees):
//!
//! * **workload metrics**, named by the workload kind (`files_per_s`,
//!   `wall_s`, a fio job's `seqread/read/bw_kib_s`, a command's own
//!   `fslab-metric` lines). Its kind decides which of them decide the
//!   workload ([`crate::workload`]'s `is_decisive`).
//! * **evidence metrics**, under one of the fixed namespaces of
//!   [`EVIDENCE_NAMESPACES`] (`disk/busy_s`, `cpu/sys_pct`, `blk/…`,
//!   `media/…`, `vm/instructions`, `fs/…`): what the device, the CPU and
//!   the kernel did while the workload ran. They are stored and compared
//!   like workload metrics (same statistics, same verdicts), shown in their
//!   own group, and decide nothing unless the workload names them in
//!   `decisive = [...]` (or, for variants run under emulation, the first
//!   of [`EMULATED_DECIDERS`] both sides have, by default).
//!
//! A user-named metric may therefore not start with an evidence namespace:
//! [`check_user_metric_name`] is the one check.

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

    /// Is this an evidence metric (see the module docs)?
    pub fn is_evidence(&self) -> bool {
        is_evidence(&self.name)
    }
}

/// The namespaces of evidence metrics, each with what fills it.
pub const EVIDENCE_NAMESPACES: &[(&str, &str)] = &[
    ("disk", "device totals of the measured part, from /proc/diskstats (iostat's counters)"),
    ("cpu", "CPU use during the measured part, from /proc/stat (whole machine or guest)"),
    ("blk", "the block trace of the testbed's device (requests as issued, their sizes and latencies)"),
    ("media", "the media model's own account (flash AUs, garbage collection, seeks)"),
    ("vm", "the guest's instruction count under emulation (QEMU TCG plugin)"),
    ("fs", "filesystem internals, after minus before (ext4 allocator, XFS stats, btrfs allocation)"),
];

/// Guest instructions of the measured part (TCG plugin), all of them:
/// decided under emulation until the profile could name the background.
pub const INSTRUCTIONS: &str = "vm/instructions";
/// [`INSTRUCTIONS`] less the guest's background (the idle loop, the timer
/// tick, clock reads, spinning on another vCPU: `vm::profile::background`),
/// from the run's profile; exactly the total minus those functions. A
/// name of its own so that stored `vm/instructions` keep their meaning.
pub const WORK_INSTRUCTIONS: &str = "vm/instructions_work";
/// The instruction counts that decide an emulated comparison by default,
/// preferred first: the first both sides have decides.
pub const EMULATED_DECIDERS: &[&str] = &[WORK_INSTRUCTIONS, INSTRUCTIONS];
/// The device time a media model charged (`media/busy_s`): decides an
/// emulated comparison beside the instruction count where both sides ran on
/// a media model. Measured (BENCHMARKS.md, "An I/O-bound comparison under
/// emulation"): as steady as the instruction count where the kernel's I/O
/// is (CV 0.1% on 6.1 over 10 runs, against 15-28% for wall time and the
/// guest's own busy time at load 2-4), and it sees what the device had to
/// do, which an instruction count misses (request sizes, seeks, flash
/// garbage collection).
pub const EMULATED_DEVICE_TIME: &str = "media/busy_s";

/// Is `name` one of the metrics that decide an emulated comparison by
/// default ([`EMULATED_DECIDERS`], [`EMULATED_DEVICE_TIME`])?
pub fn decides_emulated(name: &str) -> bool {
    EMULATED_DECIDERS.contains(&name) || name == EMULATED_DEVICE_TIME
}

/// The evidence namespace `name` is in, if any.
pub fn evidence_namespace(name: &str) -> Option<&'static str> {
    let (first, rest) = name.split_once('/')?;
    EVIDENCE_NAMESPACES.iter().map(|(ns, _)| *ns).find(|ns| *ns == first && !rest.is_empty())
}

/// Is `name` an evidence metric?
pub fn is_evidence(name: &str) -> bool {
    evidence_namespace(name).is_some()
}

/// A metric name the user chose (a fio job name, a command's `fslab-metric`
/// line) must not land in an evidence namespace, where it would be taken
/// for evidence. `Err` says why, naming the namespace.
pub fn check_user_metric_name(name: &str) -> Result<(), String> {
    let first = name.split('/').next().unwrap_or_default();
    match EVIDENCE_NAMESPACES.iter().find(|(ns, _)| *ns == first) {
        Some((ns, what)) => {
            Err(format!("`{name}` would be an evidence metric: `{ns}/…` is reserved for {what}; choose another name"))
        }
        None => Ok(()),
    }
}

/// Every evidence metric fslab records, for validating `decisive = [...]`
/// and for the docs. Names with a `*` stand for a family (`media/requests_*`
/// per request-size bucket; `fs/ext4.*` per filesystem counter).
pub const EVIDENCE_METRICS: &[&str] = &[
    "disk/busy_s",
    "disk/reads",
    "disk/writes",
    "disk/read_mb",
    "disk/written_mb",
    "disk/mean_read_kb",
    "disk/mean_write_kb",
    "disk/flushes",
    "cpu/user_pct",
    "cpu/sys_pct",
    "cpu/iowait_pct",
    "blk/read_p99_ms",
    "blk/write_p99_ms",
    "blk/sync_requests",
    "blk/meta_requests",
    "blk/fua_requests",
    "media/*",
    INSTRUCTIONS,
    WORK_INSTRUCTIONS,
    "fs/ext4.*",
    "fs/xfs.*",
    "fs/btrfs.*",
];

/// Is `name` one of [`EVIDENCE_METRICS`] (a `*` entry matches any non-empty tail)?
pub fn is_known_evidence(name: &str) -> bool {
    EVIDENCE_METRICS.iter().any(|known| match known.strip_suffix('*') {
        Some(prefix) => name.len() > prefix.len() && name.starts_with(prefix),
        None => name == *known,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_is_told_by_namespace_alone() {
        for name in ["disk/busy_s", "cpu/sys_pct", "blk/reads", "media/gc_mb", "vm/instructions", "fs/ext4.x"] {
            assert!(is_evidence(name), "{name}");
        }
        // Workload metrics, including fio jobs and `fslab-metric` names with slashes.
        for name in ["wall_s", "files_per_s", "seqread/read/bw_kib_s", "lat/p99", "disk", "disk/", "diskx/busy_s"] {
            assert!(!is_evidence(name), "{name}");
        }
    }

    #[test]
    fn user_names_may_not_enter_an_evidence_namespace() {
        assert!(check_user_metric_name("seqread").is_ok());
        assert!(check_user_metric_name("lat/p99").is_ok());
        let e = check_user_metric_name("disk").unwrap_err();
        assert!(e.contains("`disk/…` is reserved"), "{e}");
        assert!(check_user_metric_name("vm/instructions").is_err());
        assert!(check_user_metric_name("media/gc_mb").is_err());
    }

    #[test]
    fn known_evidence_matches_families_and_exact_names() {
        assert!(is_known_evidence("disk/busy_s") && is_known_evidence("media/requests_4k"));
        assert!(is_known_evidence("fs/ext4.free_fragments_delta") && is_known_evidence(INSTRUCTIONS));
        assert!(!is_known_evidence("disk/bussy_s") && !is_known_evidence("media/") && !is_known_evidence("fs/zfs.x"));
        // Every catalogue entry is in a namespace.
        assert!(EVIDENCE_METRICS.iter().all(|m| is_evidence(&m.replace('*', "x"))));
    }
}
