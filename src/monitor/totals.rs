//! Whole-run summaries: device totals and mean CPU use, as run metrics.

use crate::metric::Metric;

use super::diskstats::{DiskStats, SECTOR_BYTES};
use super::{CpuSample, DiskTotals};

const MIB: f64 = 1024.0 * 1024.0;

impl DiskTotals {
    /// Totals between the first and last snapshot of a run.
    ///
    /// Megabytes are MiB and kilobytes KiB, as iostat's `-m`/`-k` units. A
    /// counter that went backwards contributes 0; if the device looks reset
    /// (see [`DiskStats::was_reset_since`]) the last snapshot counts from zero.
    pub fn between(first: &DiskStats, last: &DiskStats, duration_s: f64) -> DiskTotals {
        let zero = DiskStats::default();
        let first = if last.was_reset_since(first) { &zero } else { first };
        let d = |a: u64, b: u64| b.saturating_sub(a);
        let (fd, ld) = (first.discard.unwrap_or_default(), last.discard.unwrap_or_default());
        let (ff, lf) = (first.flush.unwrap_or_default(), last.flush.unwrap_or_default());

        let reads = d(first.reads, last.reads);
        let writes = d(first.writes, last.writes);
        let rd_sect = d(first.sectors_read, last.sectors_read);
        let wr_sect = d(first.sectors_written, last.sectors_written);
        let dc_sect = d(fd.sectors, ld.sectors);
        let mean_kb = |sect: u64, ios: u64| {
            if ios == 0 {
                0.0
            } else {
                sect as f64 / 2.0 / ios as f64
            }
        };
        DiskTotals {
            read_mb: rd_sect as f64 * SECTOR_BYTES as f64 / MIB,
            written_mb: wr_sect as f64 * SECTOR_BYTES as f64 / MIB,
            discarded_mb: dc_sect as f64 * SECTOR_BYTES as f64 / MIB,
            reads,
            writes,
            discards: d(fd.ios, ld.ios),
            flushes: d(ff.ios, lf.ios),
            mean_read_kb: mean_kb(rd_sect, reads),
            mean_write_kb: mean_kb(wr_sect, writes),
            busy_s: d(first.io_ticks_ms, last.io_ticks_ms) as f64 / 1000.0,
            duration_s: if duration_s.is_finite() && duration_s > 0.0 { duration_s } else { 0.0 },
        }
    }

    /// Share of the run the device was busy, in percent (0 for a zero-length run).
    pub fn util_pct(&self) -> f64 {
        if self.duration_s > 0.0 {
            self.busy_s / self.duration_s * 100.0
        } else {
            0.0
        }
    }

    /// The totals as evidence metrics (`disk/…`, see [`crate::metric`]).
    ///
    /// All are lower-is-better: for a fixed workload, less device traffic and
    /// less busy time mean the filesystem did the same work more cheaply.
    /// Utilisation and discards are left out: the first is busy time over
    /// the run's length (already a metric), the second is rarely non-zero.
    pub fn metrics(&self) -> Vec<Metric> {
        vec![
            Metric::lower("disk/busy_s", "s", self.busy_s),
            Metric::lower("disk/reads", "count", self.reads as f64),
            Metric::lower("disk/writes", "count", self.writes as f64),
            Metric::lower("disk/read_mb", "MiB", self.read_mb),
            Metric::lower("disk/written_mb", "MiB", self.written_mb),
            Metric::lower("disk/mean_read_kb", "KiB", self.mean_read_kb),
            Metric::lower("disk/mean_write_kb", "KiB", self.mean_write_kb),
            Metric::lower("disk/flushes", "count", self.flushes as f64),
        ]
    }
}

/// Mean CPU use over a run, weighted by each sample's interval length.
///
/// Returns the evidence metrics `cpu/user_pct`, `cpu/sys_pct` and
/// `cpu/iowait_pct` (lower is better). `cpu/sys_pct` includes irq and
/// softirq time, like iostat's `%system`, so the kernel's whole share shows in
/// one number. Interval lengths come from consecutive `t_s` (the first from 0);
/// if those are not increasing, samples are weighted equally. Empty input
/// gives no metrics.
pub fn cpu_metrics(samples: &[CpuSample]) -> Vec<Metric> {
    if samples.is_empty() {
        return Vec::new();
    }
    let mut weights: Vec<f64> = Vec::with_capacity(samples.len());
    let mut prev_t = 0.0;
    for s in samples {
        weights.push(s.t_s - prev_t);
        prev_t = s.t_s;
    }
    // Time weighting keeps a short final partial interval from counting fully.
    if weights.iter().any(|w| !(w.is_finite() && *w > 0.0)) {
        weights.iter_mut().for_each(|w| *w = 1.0);
    }
    let total: f64 = weights.iter().sum();
    let mean = |f: &dyn Fn(&CpuSample) -> f64| -> f64 {
        samples.iter().zip(&weights).map(|(s, w)| f(s) * w).sum::<f64>() / total
    };
    vec![
        Metric::lower("cpu/user_pct", "%", mean(&|s| s.user_pct)),
        Metric::lower("cpu/sys_pct", "%", mean(&|s| s.sys_pct + s.irq_pct + s.softirq_pct)),
        Metric::lower("cpu/iowait_pct", "%", mean(&|s| s.iowait_pct)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::diskstats::parse_diskstats;

    fn get(ms: &[Metric], name: &str) -> Metric {
        ms.iter().find(|m| m.name == name).unwrap_or_else(|| panic!("no metric {name}")).clone()
    }

    /// first → last deltas: 100 reads / 2048 sectors (1 MiB), 400 writes /
    /// 16384 sectors (8 MiB), 2 discards / 4096 sectors (2 MiB), 3 flushes,
    /// io_ticks +2500 ms over a 10 s run.
    /// mean_read_kb = 1024 KiB / 100 = 10.24; mean_write_kb = 8192 / 400 = 20.48;
    /// busy 2.5 s → util 25 %.
    #[test]
    fn totals_from_hand_made_snapshots() {
        let first = parse_diskstats("7 3 loop3 10 0 100 5 20 0 200 9 0 500 600 1 0 8 1 4 2", "loop3").unwrap().unwrap();
        let last = parse_diskstats("7 3 loop3 110 0 2148 50 420 7 16584 900 0 3000 4000 3 0 4104 3 7 5", "loop3")
            .unwrap()
            .unwrap();
        let t = DiskTotals::between(&first, &last, 10.0);
        assert_eq!((t.reads, t.writes, t.discards, t.flushes), (100, 400, 2, 3));
        assert_eq!((t.read_mb, t.written_mb, t.discarded_mb), (1.0, 8.0, 2.0));
        assert!((t.mean_read_kb - 10.24).abs() < 1e-9 && (t.mean_write_kb - 20.48).abs() < 1e-9);
        assert_eq!((t.busy_s, t.duration_s, t.util_pct()), (2.5, 10.0, 25.0));

        let ms = t.metrics();
        assert_eq!(get(&ms, "disk/written_mb").value, 8.0);
        assert_eq!(get(&ms, "disk/busy_s").value, 2.5);
        assert!(ms.iter().all(|m| !m.higher_is_better && m.is_evidence()));
        assert!(ms.iter().all(|m| crate::metric::is_known_evidence(&m.name)), "{ms:?}");
        for name in ["read_mb", "written_mb", "reads", "writes", "mean_read_kb", "mean_write_kb", "busy_s", "flushes"] {
            get(&ms, &format!("disk/{name}"));
        }

        // Counters all lower at the end looks like a device reset: the end
        // snapshot counts from zero. Zero duration gives 0 % util, not NaN.
        let t = DiskTotals::between(&last, &first, 0.0);
        assert_eq!((t.reads, t.writes, t.util_pct()), (10, 20, 0.0));
        assert!(t.metrics().iter().all(|m| m.value >= 0.0 && m.value.is_finite()));
        // A single counter going backwards (no reset) contributes 0.
        let mut odd = last.clone();
        odd.sectors_read = 0;
        odd.io_ticks_ms = 0;
        let t = DiskTotals::between(&first, &odd, 10.0);
        assert_eq!((t.reads, t.read_mb, t.mean_read_kb, t.busy_s), (100, 0.0, 0.0, 0.0));
    }

    #[test]
    fn cpu_metrics_are_time_weighted() {
        let s = |t_s, user_pct, idle_pct| CpuSample { t_s, user_pct, idle_pct, ..Default::default() };
        // 1 s at 10 % user, 1 s at 30 %, then a 0.5 s tail at 60 %:
        // (10 + 30 + 0.5*60) / 2.5 = 28 %.
        let ms = cpu_metrics(&[s(1.0, 10.0, 90.0), s(2.0, 30.0, 70.0), s(2.5, 60.0, 40.0)]);
        assert!((get(&ms, "cpu/user_pct").value - 28.0).abs() < 1e-9);
        assert!(!get(&ms, "cpu/iowait_pct").higher_is_better);
        assert!(ms.iter().all(|m| crate::metric::is_known_evidence(&m.name)), "{ms:?}");
        assert!(cpu_metrics(&[]).is_empty());
        // Non-increasing times fall back to a plain mean.
        let ms = cpu_metrics(&[s(1.0, 10.0, 90.0), s(1.0, 30.0, 70.0)]);
        assert!((get(&ms, "cpu/user_pct").value - 20.0).abs() < 1e-9);
    }
}
