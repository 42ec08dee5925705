//! Whole-machine CPU time from the aggregate `cpu ` line of `/proc/stat`.
//!
//! Percentages follow sysstat's `sar -u ALL` / `mpstat` definitions
//! (`pr_stats.c:print_cpu_stats()`, `mpstat.c:write_cpu_stats()`): guest time
//! is reported on its own and subtracted from user/nice because the kernel
//! already counts it inside them, and the interval is computed like
//! `rd_stats.c:get_per_cpu_interval()`.
//!
//! Parsed here rather than with `procfs-core`'s `KernelStats`: that reads
//! the whole file and requires its `ctxt`, `btime` and `processes` lines,
//! where only the aggregate `cpu ` line matters (and a guest's or a
//! fixture's text may hold only that), and its errors name no line.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::CpuSample;

/// Where the kernel publishes CPU time counters.
pub const PROC_STAT_PATH: &str = "/proc/stat";

/// The aggregate `cpu ` line of `/proc/stat`, in USER_HZ ticks.
///
/// Fields a kernel does not print (old kernels lack steal/guest) read as 0,
/// as sysstat's `read_stat_cpu()` does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuStat {
    /// Includes `guest`.
    pub user: u64,
    /// Includes `guest_nice`.
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
    pub guest: u64,
    pub guest_nice: u64,
}

const CPU_FIELDS: [&str; 10] =
    ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice"];

/// Parses the first `cpu ` line (all CPUs together) of `/proc/stat` text.
///
/// At least user, nice, system and idle must be present; more than ten fields
/// (future kernels) are ignored.
pub fn parse_proc_stat(text: &str) -> Result<CpuStat> {
    for (i, line) in text.lines().enumerate() {
        let mut toks = line.split_whitespace();
        // "cpu" alone, not "cpu0": the per-CPU lines follow the aggregate one.
        if toks.next() != Some("cpu") {
            continue;
        }
        let mut v = [0u64; 10];
        let mut n = 0;
        for (idx, tok) in toks.take(10).enumerate() {
            v[idx] = tok.parse::<u64>().with_context(|| {
                format!(
                    "{PROC_STAT_PATH} line {}: cpu field {} ({}) is not a number: {tok:?}",
                    i + 1,
                    idx + 1,
                    CPU_FIELDS[idx]
                )
            })?;
            n = idx + 1;
        }
        if n < 4 {
            bail!("{PROC_STAT_PATH} line {}: aggregate cpu line has {n} fields, expected at least 4: {line:?}", i + 1);
        }
        return Ok(CpuStat {
            user: v[0],
            nice: v[1],
            system: v[2],
            idle: v[3],
            iowait: v[4],
            irq: v[5],
            softirq: v[6],
            steal: v[7],
            guest: v[8],
            guest_nice: v[9],
        });
    }
    bail!("{PROC_STAT_PATH}: no aggregate \"cpu \" line")
}

/// Reads `/proc/stat` and parses its aggregate CPU line.
pub fn read_cpu_stat() -> Result<CpuStat> {
    let text = std::fs::read_to_string(PROC_STAT_PATH).with_context(|| format!("reading {PROC_STAT_PATH}"))?;
    parse_proc_stat(&text)
}

/// sysstat's guard for values "probably overflowed" rather than reset.
const NEAR_MAX: u64 = u64::MAX - 0x7ffff;

/// Mirrors `rd_stats.c:get_per_cpu_interval()`: total ticks in the interval,
/// correcting `prev` in place for counters that went backwards (iowait/idle
/// after CPU hotplug or inaccurate iowait accounting).
fn interval_ticks(cur: &CpuStat, prev: &mut CpuStat) -> u64 {
    let mut ishift = 0u64;
    // Guest ticks can briefly exceed what user/nice include; widen the interval.
    let (pu, cu) = (prev.user.saturating_sub(prev.guest), cur.user.saturating_sub(cur.guest));
    if cur.user >= prev.user && cu < pu {
        ishift += pu - cu;
    }
    let (pn, cn) = (prev.nice.saturating_sub(prev.guest_nice), cur.nice.saturating_sub(cur.guest_nice));
    if cur.nice >= prev.nice && cn < pn {
        ishift += pn - cn;
    }
    if cur.iowait < prev.iowait && prev.iowait < NEAR_MAX {
        // iowait moved to idle (idle grew) → trust the new iowait; otherwise a
        // CPU came back online with iowait restarted from zero.
        prev.iowait = if cur.idle > prev.idle || prev.idle >= NEAR_MAX { cur.iowait } else { 0 };
    }
    if cur.idle < prev.idle && prev.idle < NEAR_MAX {
        prev.idle = 0;
    }
    // Guest fields are not added: user/nice already contain them.
    let d = |p: u64, c: u64| c.saturating_sub(p);
    d(prev.user, cur.user)
        + d(prev.nice, cur.nice)
        + d(prev.system, cur.system)
        + d(prev.iowait, cur.iowait)
        + d(prev.idle, cur.idle)
        + d(prev.steal, cur.steal)
        + d(prev.irq, cur.irq)
        + d(prev.softirq, cur.softirq)
        + ishift
}

/// Computes CPU percentages between two `/proc/stat` snapshots.
///
/// Each field is `common.c:ll_sp_value()`: its tick delta over the total
/// (0 when the counter went backwards). `%user`/`%nice` exclude guest time as
/// in `sar -u ALL`; `%sys` is system time only (irq/softirq have their own
/// fields). A zero-tick interval reports 100 % idle, as sysstat does for a
/// tickless CPU.
pub fn cpu_between(prev: &CpuStat, cur: &CpuStat, t_s: f64) -> CpuSample {
    let mut p = *prev;
    let total = interval_ticks(cur, &mut p);
    if total == 0 {
        return CpuSample { t_s, idle_pct: 100.0, ..Default::default() };
    }
    let pct = |a: u64, b: u64| {
        if b < a {
            0.0
        } else {
            (b - a) as f64 / total as f64 * 100.0
        }
    };
    CpuSample {
        t_s,
        user_pct: pct(p.user.saturating_sub(p.guest), cur.user.saturating_sub(cur.guest)),
        nice_pct: pct(p.nice.saturating_sub(p.guest_nice), cur.nice.saturating_sub(cur.guest_nice)),
        sys_pct: pct(p.system, cur.system),
        iowait_pct: pct(p.iowait, cur.iowait),
        irq_pct: pct(p.irq, cur.irq),
        softirq_pct: pct(p.softirq, cur.softirq),
        steal_pct: pct(p.steal, cur.steal),
        idle_pct: pct(p.idle, cur.idle),
        guest_pct: pct(p.guest, cur.guest),
        guest_nice_pct: pct(p.guest_nice, cur.guest_nice),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn parses_aggregate_line_only() {
        let text = "cpu  14503 1 6589 68889 1595 2 90 641 3 4\ncpu0 1 2 3 4 5 6 7 8 9 10\nintr 5\n";
        let s = parse_proc_stat(text).unwrap();
        assert_eq!(
            s,
            CpuStat {
                user: 14503,
                nice: 1,
                system: 6589,
                idle: 68889,
                iowait: 1595,
                irq: 2,
                softirq: 90,
                steal: 641,
                guest: 3,
                guest_nice: 4
            }
        );
        // Old kernel: only 4 fields; the rest are zero.
        let s = parse_proc_stat("cpu 1 2 3 4\n").unwrap();
        assert_eq!((s.idle, s.iowait, s.guest_nice), (4, 0, 0));
    }

    #[test]
    fn malformed_stat_is_an_error() {
        assert!(parse_proc_stat("cpu0 1 2 3 4\n").unwrap_err().to_string().contains("no aggregate"));
        assert!(parse_proc_stat("cpu 1 2 3\n").unwrap_err().to_string().contains("3 fields"));
        let e = parse_proc_stat("cpu 1 2 x 4\n").unwrap_err().to_string();
        assert!(e.contains("system") && e.contains("line 1"), "{e}");
    }

    /// Hand-made pair:
    ///
    /// ```text
    ///          user nice  sys idle iowait irq soft steal guest gnice
    /// prev     1000   50  300 8000    100  10   20     5   200    10
    /// cur      1400   60  380 8456    140  14   26     9   300    12
    /// delta     400   10   80  456     40   4    6     4   100     2
    /// ```
    ///
    /// total = 400+10+80+456+40+4+6+4 = 1000 ticks (guest not added).
    /// %user = ((1400-300)-(1000-200))/1000 = 300/1000 = 30 %
    /// %nice = ((60-12)-(50-10))/1000 = 8/1000 = 0.8 %
    /// %sys 8, %iowait 4, %irq 0.4, %soft 0.6, %steal 0.4, %idle 45.6,
    /// %guest 10, %gnice 0.2 — sum 100.
    #[test]
    fn cpu_formulas_match_hand_computation() {
        let prev = parse_proc_stat("cpu  1000 50 300 8000 100 10 20 5 200 10\n").unwrap();
        let cur = parse_proc_stat("cpu  1400 60 380 8456 140 14 26 9 300 12\n").unwrap();
        let s = cpu_between(&prev, &cur, 3.0);
        assert_eq!(s.t_s, 3.0);
        let got = [
            s.user_pct,
            s.nice_pct,
            s.sys_pct,
            s.iowait_pct,
            s.irq_pct,
            s.softirq_pct,
            s.steal_pct,
            s.idle_pct,
            s.guest_pct,
            s.guest_nice_pct,
        ];
        let want = [30.0, 0.8, 8.0, 4.0, 0.4, 0.6, 0.4, 45.6, 10.0, 0.2];
        for (g, w) in got.iter().zip(want) {
            assert!(close(*g, w), "got {got:?}, want {want:?}");
        }
        assert!(close(got.iter().sum::<f64>(), 100.0));
    }

    #[test]
    fn backwards_counters_follow_sysstat() {
        // iowait went down while idle went up: prev iowait is replaced by the
        // current value, so %iowait is 0 and the interval is user+idle = 100.
        let prev = parse_proc_stat("cpu 100 0 0 1000 50 0 0 0 0 0").unwrap();
        let cur = parse_proc_stat("cpu 150 0 0 1050 45 0 0 0 0 0").unwrap();
        let s = cpu_between(&prev, &cur, 1.0);
        assert!(close(s.user_pct, 50.0) && close(s.idle_pct, 50.0) && s.iowait_pct == 0.0, "{s:?}");

        // No ticks at all: report idle, never NaN.
        let s = cpu_between(&prev, &prev, 1.0);
        assert_eq!((s.user_pct, s.idle_pct), (0.0, 100.0));

        // Guest larger than user (kernel accounting skew): no underflow.
        let prev = parse_proc_stat("cpu 100 0 0 1000 0 0 0 0 90 0").unwrap();
        let cur = parse_proc_stat("cpu 110 0 0 1090 0 0 0 0 105 0").unwrap();
        let s = cpu_between(&prev, &cur, 1.0);
        assert_eq!(s.user_pct, 0.0);
        assert!(s.idle_pct > 0.0 && s.idle_pct <= 100.0);
    }
}
