//! `/proc/diskstats` snapshots and the iostat `-x` formulas over two of them.
//!
//! Field layout (Documentation/admin-guide/iostats.rst): after `major minor name`
//! come 11 fields on every kernel since 2.6, 4 discard fields since 4.18 and
//! 2 flush fields since 5.5. All `*_ticks_ms` fields are milliseconds; all
//! sector fields count 512-byte units regardless of the device's block size.
//!
//! The formulas in [`iostat_between`] mirror sysstat's `iostat.c`
//! (`write_ext_stat()`, `write_stats()`) and `rd_stats.c`
//! (`compute_ext_disk_stats()`), with the `S_VALUE` macro from `common.h`
//! expressed in seconds instead of 1/100 s.
//!
//! Parsed here rather than with `procfs-core`'s `DiskStat::from_line`:
//! sysstat clamps the transiently negative in-flight count old kernels
//! print (that parser fails on it), errors must name the line and field,
//! and only the device's own line may fail a snapshot.

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::IostatSample;

/// Where the kernel publishes per-device I/O counters.
pub const DISKSTATS_PATH: &str = "/proc/diskstats";

/// Bytes per diskstats sector (fixed by the kernel ABI, not the device).
pub const SECTOR_BYTES: u64 = 512;

/// Discard counters (kernel ≥ 4.18, fields 15–18).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiscardStats {
    /// Discard requests completed.
    pub ios: u64,
    /// Discard requests merged.
    pub merges: u64,
    /// Sectors discarded.
    pub sectors: u64,
    /// Milliseconds spent on discards.
    pub ticks_ms: u64,
}

/// Flush counters (kernel ≥ 5.5, fields 19–20).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlushStats {
    /// Flush requests completed.
    pub ios: u64,
    /// Milliseconds spent on flushes.
    pub ticks_ms: u64,
}

/// One snapshot of one device's line in `/proc/diskstats`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskStats {
    /// Device major number.
    pub major: u32,
    /// Device minor number.
    pub minor: u32,
    /// Device name as the kernel prints it (e.g. `loop3`, `nvme0n1p2`).
    pub name: String,
    /// Reads completed.
    pub reads: u64,
    /// Reads merged with an adjacent queued request.
    pub reads_merged: u64,
    /// 512-byte sectors read.
    pub sectors_read: u64,
    /// Milliseconds spent by all reads (summed over requests).
    pub read_ticks_ms: u64,
    /// Writes completed.
    pub writes: u64,
    /// Writes merged with an adjacent queued request.
    pub writes_merged: u64,
    /// 512-byte sectors written.
    pub sectors_written: u64,
    /// Milliseconds spent by all writes (summed over requests).
    pub write_ticks_ms: u64,
    /// Requests in flight at the moment of the snapshot (a gauge, not a counter).
    pub in_flight: u64,
    /// Milliseconds the device had at least one request in flight.
    pub io_ticks_ms: u64,
    /// Weighted milliseconds: request count × time, summed (`aqu-sz` source).
    pub time_in_queue_ms: u64,
    /// Absent on kernels before 4.18.
    pub discard: Option<DiscardStats>,
    /// Absent on kernels before 5.5.
    pub flush: Option<FlushStats>,
}

impl DiskStats {
    /// Reads + writes + discards + flushes completed (sysstat's reset check sums these).
    pub fn total_ios(&self) -> u64 {
        self.reads
            .saturating_add(self.writes)
            .saturating_add(self.discard.map_or(0, |d| d.ios))
            .saturating_add(self.flush.map_or(0, |f| f.ios))
    }

    /// Whether `self` (a later snapshot) looks like the device was removed and
    /// re-added since `prev`: its counters restarted from zero.
    ///
    /// Mirrors the check in sysstat's `iostat.c:write_stats()`: the total I/O
    /// count went down and every sector counter either went down or was zero
    /// before.
    pub fn was_reset_since(&self, prev: &DiskStats) -> bool {
        let went_down = |p: u64, c: u64| p == 0 || c < p;
        let p_dc = prev.discard.map_or(0, |d| d.sectors);
        let c_dc = self.discard.map_or(0, |d| d.sectors);
        self.total_ios() < prev.total_ios()
            && went_down(prev.sectors_read, self.sectors_read)
            && went_down(prev.sectors_written, self.sectors_written)
            && went_down(p_dc, c_dc)
    }
}

/// Names of the fields after `major minor name`, for error messages.
const FIELD_NAMES: [&str; 17] = [
    "reads completed",
    "reads merged",
    "sectors read",
    "ms reading",
    "writes completed",
    "writes merged",
    "sectors written",
    "ms writing",
    "I/Os in progress",
    "ms doing I/O",
    "weighted ms doing I/O",
    "discards completed",
    "discards merged",
    "sectors discarded",
    "ms discarding",
    "flush requests completed",
    "ms flushing",
];

/// Normalises a device argument to its `/proc/diskstats` name.
///
/// Accepts `loop3`, `/dev/loop3`, or a symlink such as `/dev/mapper/vg-lv`
/// (resolved to `dm-N`), because callers naturally hold device paths.
pub fn diskstats_name(device: &str) -> Result<String> {
    if device.is_empty() {
        bail!("empty block device name");
    }
    if !device.starts_with('/') {
        return Ok(device.to_string());
    }
    // Resolve symlinks (/dev/mapper/*, /dev/disk/by-*) to the kernel name.
    let resolved = std::fs::canonicalize(device).unwrap_or_else(|_| Path::new(device).to_path_buf());
    let name = resolved
        .strip_prefix("/dev")
        .ok()
        .and_then(|p| p.to_str())
        .map(str::to_string)
        .or_else(|| resolved.file_name().and_then(|n| n.to_str()).map(str::to_string))
        .with_context(|| format!("cannot derive a /proc/diskstats name from device path {device}"))?;
    if name.is_empty() {
        bail!("cannot derive a /proc/diskstats name from device path {device}");
    }
    // diskstats prints names like "cciss/c0d0" with the slash kept, so keep sub-paths.
    Ok(name)
}

/// Parses a counter; a leading `-` is clamped to 0 because old kernels could
/// print a transiently negative in-flight count (sysstat notes the same).
fn parse_field(tok: &str, idx: usize, line_no: usize, device: &str) -> Result<u64> {
    if let Ok(v) = tok.parse::<u64>() {
        return Ok(v);
    }
    if let Ok(v) = tok.parse::<i64>() {
        if v < 0 {
            return Ok(0);
        }
    }
    bail!(
        "{DISKSTATS_PATH} line {line_no} ({device}): field {} ({}) is not a number: {tok:?}",
        idx + 4,
        FIELD_NAMES.get(idx).copied().unwrap_or("extra field"),
    )
}

/// Finds and parses `device`'s line in the text of `/proc/diskstats`.
///
/// Returns `Ok(None)` when no line names the device. Lines for other devices
/// are not validated (a quirk elsewhere must not break monitoring here). The
/// device's own line must have 14, 18 or 20+ fields; fields beyond the 20th
/// (future kernels) are ignored.
pub fn parse_diskstats(text: &str, device_name: &str) -> Result<Option<DiskStats>> {
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        let toks: Vec<&str> = line.split_whitespace().collect();
        if toks.len() < 3 || toks[2] != device_name {
            continue;
        }
        let n = toks.len();
        if n < 14 || (n > 14 && n < 18) || n == 19 {
            bail!("{DISKSTATS_PATH} line {line_no} ({device_name}): expected 14, 18 or 20 fields, found {n}: {line:?}");
        }
        let major = toks[0].parse::<u32>().with_context(|| {
            format!("{DISKSTATS_PATH} line {line_no} ({device_name}): major number is not a number: {:?}", toks[0])
        })?;
        let minor = toks[1].parse::<u32>().with_context(|| {
            format!("{DISKSTATS_PATH} line {line_no} ({device_name}): minor number is not a number: {:?}", toks[1])
        })?;
        let limit = n.min(20);
        let mut v = [0u64; 17];
        for (idx, tok) in toks[3..limit].iter().enumerate() {
            v[idx] = parse_field(tok, idx, line_no, device_name)?;
        }
        let discard = (n >= 18).then_some(DiscardStats { ios: v[11], merges: v[12], sectors: v[13], ticks_ms: v[14] });
        let flush = (n >= 20).then_some(FlushStats { ios: v[15], ticks_ms: v[16] });
        return Ok(Some(DiskStats {
            major,
            minor,
            name: toks[2].to_string(),
            reads: v[0],
            reads_merged: v[1],
            sectors_read: v[2],
            read_ticks_ms: v[3],
            writes: v[4],
            writes_merged: v[5],
            sectors_written: v[6],
            write_ticks_ms: v[7],
            in_flight: v[8],
            io_ticks_ms: v[9],
            time_in_queue_ms: v[10],
            discard,
            flush,
        }));
    }
    Ok(None)
}

/// Reads `/proc/diskstats` and returns `device_name`'s snapshot.
///
/// `device_name` may be a kernel name (`loop3`) or a device path (`/dev/loop3`).
pub fn read_diskstats(device_name: &str) -> Result<DiskStats> {
    let name = diskstats_name(device_name)?;
    let text = std::fs::read_to_string(DISKSTATS_PATH).with_context(|| format!("reading {DISKSTATS_PATH}"))?;
    parse_diskstats(&text, &name)?.with_context(|| format!("device {name} not found in {DISKSTATS_PATH}"))
}

/// Increase of an `unsigned long` kernel counter (I/Os, merges, sectors).
///
/// A decrease yields 0: on 64-bit kernels these never wrap in practice, so a
/// decrease means a reset. This generalises the explicit guard sysstat puts on
/// the sector rates in `write_ext_stat()` so no rate can go negative or huge.
fn counter_delta(prev: u64, cur: u64) -> u64 {
    cur.saturating_sub(prev)
}

/// Increase of a kernel `unsigned int` millisecond field (per-direction ticks,
/// time_in_queue), which wraps at 2^32 ms (~49.7 days).
///
/// sysstat stores these as `unsigned int`, so plain subtraction wraps. We
/// only accept a decrease as a wrap when it spans more than half the 32-bit
/// range (a counter near 2^32 restarting near 0); a small step backwards, or a
/// value that does not fit 32 bits, yields 0 rather than a ~49-day delta.
fn ticks_delta(prev: u64, cur: u64) -> u64 {
    const HALF: u64 = 1 << 31;
    if cur >= prev {
        cur - prev
    } else if prev <= u64::from(u32::MAX) && prev - cur > HALF {
        u64::from((cur as u32).wrapping_sub(prev as u32))
    } else {
        0
    }
}

/// sysstat's `S_VALUE(m, n, p)`: per-second rate of a delta. sysstat's
/// `get_interval()` forces the interval to at least one tick to avoid a
/// division by zero; we return 0 for a non-positive interval instead.
fn per_s(delta: u64, interval_s: f64) -> f64 {
    if interval_s > 0.0 && interval_s.is_finite() {
        delta as f64 / interval_s
    } else {
        0.0
    }
}

/// `a / b`, or 0 when `b` is 0 (sysstat's `x_ios > 0 ? … : 0.0` pattern).
fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Per-direction deltas over one interval.
struct Dir {
    ios: u64,
    merges: u64,
    sectors: u64,
    ticks: u64,
}

impl Dir {
    /// `%rrqm` etc.: merges as a share of all requests queued (merged + issued),
    /// as in `write_ext_stat()`.
    fn rqm_pct(&self) -> f64 {
        100.0 * ratio(self.merges, self.merges.saturating_add(self.ios))
    }
    /// `r_await` etc.: ms per completed request; 0 without requests
    /// (`write_ext_stat()`).
    fn await_ms(&self) -> f64 {
        ratio(self.ticks, self.ios)
    }
    /// `rareq-sz` etc.: KiB per request (`write_ext_stat()` keeps sectors and
    /// the printers divide by 2).
    fn areq_kb(&self) -> f64 {
        ratio(self.sectors, self.ios) / 2.0
    }
}

/// Computes one iostat `-x` interval from two snapshots of the same device.
///
/// `interval_s` is the time between the snapshots; `t_s` is stored as the
/// sample time. Kilobytes are KiB (sectors / 2), as in iostat. If the counters
/// look restarted (device removed and re-added), `prev` is treated as all
/// zeros, as sysstat's `write_stats()` does; any other decrease counts as no
/// activity for that counter.
pub fn iostat_between(prev: &DiskStats, cur: &DiskStats, interval_s: f64, t_s: f64) -> IostatSample {
    let zero = DiskStats::default();
    let prev = if cur.was_reset_since(prev) { &zero } else { prev };

    let rd = Dir {
        ios: counter_delta(prev.reads, cur.reads),
        merges: counter_delta(prev.reads_merged, cur.reads_merged),
        sectors: counter_delta(prev.sectors_read, cur.sectors_read),
        ticks: ticks_delta(prev.read_ticks_ms, cur.read_ticks_ms),
    };
    let wr = Dir {
        ios: counter_delta(prev.writes, cur.writes),
        merges: counter_delta(prev.writes_merged, cur.writes_merged),
        sectors: counter_delta(prev.sectors_written, cur.sectors_written),
        ticks: ticks_delta(prev.write_ticks_ms, cur.write_ticks_ms),
    };
    // Absent discard/flush fields read as zero, like sysstat's memset() before sscanf().
    let (pd, cd) = (prev.discard.unwrap_or_default(), cur.discard.unwrap_or_default());
    let dc = Dir {
        ios: counter_delta(pd.ios, cd.ios),
        merges: counter_delta(pd.merges, cd.merges),
        sectors: counter_delta(pd.sectors, cd.sectors),
        ticks: ticks_delta(pd.ticks_ms, cd.ticks_ms),
    };
    let (pf, cf) = (prev.flush.unwrap_or_default(), cur.flush.unwrap_or_default());
    let fl_ios = counter_delta(pf.ios, cf.ios);
    let fl_ticks = ticks_delta(pf.ticks_ms, cf.ticks_ms);

    // compute_ext_disk_stats(): a decreasing io_ticks gives 0 %util, not a wrap.
    let busy_ms = counter_delta(prev.io_ticks_ms, cur.io_ticks_ms);
    // write_ext_stat(): aqu-sz = S_VALUE(rq_ticks) / 1000, rq_ticks being unsigned int.
    let queue_ms = ticks_delta(prev.time_in_queue_ms, cur.time_in_queue_ms);

    IostatSample {
        t_s,
        // r/s w/s d/s f/s: S_VALUE(x_ios) in write_ext_stat().
        r_s: per_s(rd.ios, interval_s),
        w_s: per_s(wr.ios, interval_s),
        d_s: per_s(dc.ios, interval_s),
        f_s: per_s(fl_ios, interval_s),
        // rkB/s wkB/s dkB/s: S_VALUE(x_sectors) / 2 in write_ext_stat().
        rkb_s: per_s(rd.sectors, interval_s) / 2.0,
        wkb_s: per_s(wr.sectors, interval_s) / 2.0,
        dkb_s: per_s(dc.sectors, interval_s) / 2.0,
        // rrqm/s wrqm/s drqm/s: S_VALUE(x_merges).
        rrqm_s: per_s(rd.merges, interval_s),
        wrqm_s: per_s(wr.merges, interval_s),
        drqm_s: per_s(dc.merges, interval_s),
        rrqm_pct: rd.rqm_pct(),
        wrqm_pct: wr.rqm_pct(),
        drqm_pct: dc.rqm_pct(),
        r_await: rd.await_ms(),
        w_await: wr.await_ms(),
        d_await: dc.await_ms(),
        // f_await: fl_ticks / fl_ios, 0 without flushes (write_ext_stat()).
        f_await: ratio(fl_ticks, fl_ios),
        aqu_sz: per_s(queue_ms, interval_s) / 1000.0,
        rareq_sz: rd.areq_kb(),
        wareq_sz: wr.areq_kb(),
        dareq_sz: dc.areq_kb(),
        // %util: compute_ext_disk_stats() gives S_VALUE(tot_ticks) in ms/s and
        // the printer divides by 10. Not clamped to 100, like sysstat.
        util_pct: per_s(busy_ms, interval_s) / 10.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const L14: &str = "   8       0 sda 100 10 2000 50 200 20 4000 300 1 250 350";
    const L18: &str = "   8       0 sda 100 10 2000 50 200 20 4000 300 1 250 350 5 1 80 7";
    const L20: &str = "   8       0 sda 100 10 2000 50 200 20 4000 300 1 250 350 5 1 80 7 9 12";

    fn parse_one(line: &str) -> DiskStats {
        let text = format!("   7       0 loop0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n{line}\n");
        parse_diskstats(&text, "sda").unwrap().unwrap()
    }

    #[test]
    fn parses_14_fields() {
        let s = parse_one(L14);
        assert_eq!((s.major, s.minor, s.name.as_str()), (8, 0, "sda"));
        assert_eq!((s.reads, s.reads_merged, s.sectors_read, s.read_ticks_ms), (100, 10, 2000, 50));
        assert_eq!((s.writes, s.writes_merged, s.sectors_written, s.write_ticks_ms), (200, 20, 4000, 300));
        assert_eq!((s.in_flight, s.io_ticks_ms, s.time_in_queue_ms), (1, 250, 350));
        assert_eq!(s.discard, None);
        assert_eq!(s.flush, None);
    }

    #[test]
    fn parses_18_fields() {
        let s = parse_one(L18);
        assert_eq!(s.time_in_queue_ms, 350);
        assert_eq!(s.discard, Some(DiscardStats { ios: 5, merges: 1, sectors: 80, ticks_ms: 7 }));
        assert_eq!(s.flush, None);
    }

    #[test]
    fn parses_20_fields_and_ignores_extras() {
        let s = parse_one(L20);
        assert_eq!(s.discard, Some(DiscardStats { ios: 5, merges: 1, sectors: 80, ticks_ms: 7 }));
        assert_eq!(s.flush, Some(FlushStats { ios: 9, ticks_ms: 12 }));
        let future = parse_one(&format!("{L20} 99 98"));
        assert_eq!(future, s);
    }

    #[test]
    fn missing_device_is_none() {
        assert_eq!(parse_diskstats(L14, "sdb").unwrap(), None);
        assert_eq!(parse_diskstats("", "sda").unwrap(), None);
        // "sd" must not match "sda" by prefix.
        assert_eq!(parse_diskstats(L14, "sd").unwrap(), None);
    }

    #[test]
    fn malformed_lines_are_errors_naming_the_problem() {
        let err = parse_diskstats("8 0 sda 1 2 3", "sda").unwrap_err().to_string();
        assert!(err.contains("found 6"), "{err}");
        let err = parse_diskstats("8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16", "sda").unwrap_err().to_string();
        assert!(err.contains("found 19"), "{err}");
        let err = parse_diskstats("8 0 sda 1 2 x 4 5 6 7 8 9 10 11", "sda").unwrap_err().to_string();
        assert!(err.contains("sectors read") && err.contains("\"x\""), "{err}");
        let err = parse_diskstats("8 q sda 1 2 3 4 5 6 7 8 9 10 11", "sda").unwrap_err().to_string();
        assert!(err.contains("minor"), "{err}");
        // A garbage line for another device does not matter.
        let text = "garbage\n8 1 sdb x y\n8 0 sda 1 2 3 4 5 6 7 8 9 10 11\n";
        assert_eq!(parse_diskstats(text, "sda").unwrap().unwrap().time_in_queue_ms, 11);
    }

    #[test]
    fn negative_in_flight_is_clamped() {
        let s = parse_diskstats("8 0 sda 1 2 3 4 5 6 7 8 -1 10 11", "sda").unwrap().unwrap();
        assert_eq!(s.in_flight, 0);
    }

    #[test]
    fn device_paths_are_normalised() {
        assert_eq!(diskstats_name("loop3").unwrap(), "loop3");
        assert_eq!(diskstats_name("/dev/nonexistent-fslab-test9").unwrap(), "nonexistent-fslab-test9");
        assert!(diskstats_name("").is_err());
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    /// Hand-made pair, 2 s apart, all 20 fields.
    ///
    /// ```text
    /// field        prev     cur   delta
    /// reads        1000    1200     200
    /// rd merges     100     150      50
    /// rd sectors  80000   96000   16000
    /// rd ticks      500    1300     800
    /// writes       2000    2400     400
    /// wr merges     300     400     100
    /// wr sectors 160000  208000   48000
    /// wr ticks     4000    6000    2000
    /// in_flight       0       2
    /// io_ticks     9000   10500    1500
    /// in_queue    12000   15000    3000
    /// discards       10      14       4
    /// dc merges       0       4       4
    /// dc sectors   2048    6144    4096
    /// dc ticks       20      40      20
    /// flushes        50      60      10
    /// fl ticks      100     130      30
    /// ```
    ///
    /// Expected (by hand):
    /// r/s = 200/2 = 100; w/s = 400/2 = 200; d/s = 4/2 = 2; f/s = 10/2 = 5
    /// rkB/s = 16000/2/2 = 4000; wkB/s = 48000/2/2 = 12000; dkB/s = 4096/2/2 = 1024
    /// rrqm/s = 50/2 = 25; wrqm/s = 100/2 = 50; drqm/s = 4/2 = 2
    /// %rrqm = 50/(50+200)*100 = 20; %wrqm = 100/(100+400)*100 = 20; %drqm = 4/(4+4)*100 = 50
    /// r_await = 800/200 = 4; w_await = 2000/400 = 5; d_await = 20/4 = 5; f_await = 30/10 = 3
    /// aqu-sz = 3000/2/1000 = 1.5
    /// rareq-sz = 16000/200/2 = 40; wareq-sz = 48000/400/2 = 60; dareq-sz = 4096/4/2 = 512
    /// %util = 1500/2/10 = 75
    #[test]
    fn iostat_formulas_match_hand_computation() {
        let text = "\
 259 0 nvme0n1 1000 100 80000 500 2000 300 160000 4000 0 9000 12000 10 0 2048 20 50 100
 259 1 nvme0n1p1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1
";
        let text2 = "\
 259 0 nvme0n1 1200 150 96000 1300 2400 400 208000 6000 2 10500 15000 14 4 6144 40 60 130
";
        let prev = parse_diskstats(text, "nvme0n1").unwrap().unwrap();
        let cur = parse_diskstats(text2, "nvme0n1").unwrap().unwrap();
        let s = iostat_between(&prev, &cur, 2.0, 7.5);
        let expect = IostatSample {
            t_s: 7.5,
            r_s: 100.0,
            w_s: 200.0,
            d_s: 2.0,
            f_s: 5.0,
            rkb_s: 4000.0,
            wkb_s: 12000.0,
            dkb_s: 1024.0,
            rrqm_s: 25.0,
            wrqm_s: 50.0,
            drqm_s: 2.0,
            rrqm_pct: 20.0,
            wrqm_pct: 20.0,
            drqm_pct: 50.0,
            r_await: 4.0,
            w_await: 5.0,
            d_await: 5.0,
            f_await: 3.0,
            aqu_sz: 1.5,
            rareq_sz: 40.0,
            wareq_sz: 60.0,
            dareq_sz: 512.0,
            util_pct: 75.0,
        };
        assert_eq!(s, expect);
    }

    #[test]
    fn idle_interval_gives_zeros_not_nan() {
        let a = parse_one(L20);
        let s = iostat_between(&a, &a, 1.0, 1.0);
        assert_eq!(s, IostatSample { t_s: 1.0, ..Default::default() });
        // Zero or nonsense interval: no division by zero either.
        let mut b = a.clone();
        b.reads += 10;
        b.read_ticks_ms += 20;
        for itv in [0.0, -1.0, f64::NAN] {
            let s = iostat_between(&a, &b, itv, 1.0);
            assert_eq!(s.r_s, 0.0);
            assert!(close(s.r_await, 2.0));
        }
    }

    #[test]
    fn counter_decrease_does_not_panic_or_go_negative() {
        let prev = parse_one(L20);
        // Single counters going backwards (not a full reset): those read as no activity.
        let mut cur = prev.clone();
        cur.sectors_read -= 100;
        cur.reads_merged -= 1;
        cur.io_ticks_ms -= 10;
        cur.writes += 10;
        cur.sectors_written += 80;
        let s = iostat_between(&prev, &cur, 1.0, 1.0);
        assert_eq!((s.rkb_s, s.rrqm_s, s.util_pct), (0.0, 0.0, 0.0));
        assert!(close(s.w_s, 10.0) && close(s.wareq_sz, 4.0));

        // Full reset (device removed and re-added): prev counts as zero.
        let reset = parse_diskstats("8 0 sda 3 0 24 6 0 0 0 0 0 5 6 0 0 0 0 0 0", "sda").unwrap().unwrap();
        assert!(reset.was_reset_since(&prev));
        let s = iostat_between(&prev, &reset, 1.0, 1.0);
        assert!(close(s.r_s, 3.0) && close(s.rkb_s, 12.0) && close(s.r_await, 2.0));
        assert!(close(s.util_pct, 0.5) && close(s.aqu_sz, 0.006));

        // Discard/flush fields disappearing (never happens, but must not panic).
        let mut no_ext = prev.clone();
        no_ext.discard = None;
        no_ext.flush = None;
        let s = iostat_between(&prev, &no_ext, 1.0, 1.0);
        assert_eq!((s.d_s, s.f_s), (0.0, 0.0));
    }

    #[test]
    fn ticks_wrap_at_32_bits() {
        let mut prev = parse_one(L14);
        prev.writes = 10;
        prev.write_ticks_ms = u64::from(u32::MAX) - 9;
        prev.time_in_queue_ms = u64::from(u32::MAX);
        let mut cur = prev.clone();
        cur.writes = 20;
        cur.write_ticks_ms = 40; // wrapped: 10 + 40 = 50 ms over 10 writes
        cur.time_in_queue_ms = 999; // wrapped: 1000 ms
        let s = iostat_between(&prev, &cur, 1.0, 1.0);
        assert!(close(s.w_await, 5.0), "{}", s.w_await);
        assert!(close(s.aqu_sz, 1.0), "{}", s.aqu_sz);
        assert_eq!(ticks_delta(u64::MAX, 5), 0);
        // A small step backwards is not a wrap.
        assert_eq!(ticks_delta(1000, 990), 0);
        assert_eq!(counter_delta(10, 5), 0);
    }
}
