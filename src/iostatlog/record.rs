//! `fslab iostat record`: live diskstats of one block device, written as
//! `iostat -x -t -k` (sysstat 12.3+ layout) text that [`super::parse_log`]
//! reads back.
//!
//! Like iostat, the first report holds averages since boot (the banner marks
//! the log as a complete capture, so `summarize` drops it by default); the
//! rest are interval reports computed by [`crate::monitor::iostat_between`].
//! No `avg-cpu` blocks are written.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};

use crate::monitor::{diskstats_name, iostat_between, read_diskstats, DiskStats, IostatSample};

/// Column names written, in sysstat 12.3+ order.
pub const RECORD_COLUMNS: [&str; 22] = [
    "r/s", "rkB/s", "rrqm/s", "%rrqm", "r_await", "rareq-sz", "w/s", "wkB/s", "wrqm/s", "%wrqm", "w_await", "wareq-sz",
    "d/s", "dkB/s", "drqm/s", "%drqm", "d_await", "dareq-sz", "f/s", "f_await", "aqu-sz", "%util",
];

/// What to record.
#[derive(Clone, Debug)]
pub struct RecordOptions {
    /// Device: `loop3`, `/dev/loop3`, `/dev/mapper/x` …
    pub device: String,
    /// Time between reports: whole seconds, at least 1 s.
    pub interval: Duration,
    /// Interval reports to write after the since-boot one; `None`: until `stop`.
    pub count: Option<u64>,
}

fn values(s: &IostatSample) -> [f64; 22] {
    [
        s.r_s, s.rkb_s, s.rrqm_s, s.rrqm_pct, s.r_await, s.rareq_sz, s.w_s, s.wkb_s, s.wrqm_s, s.wrqm_pct, s.w_await,
        s.wareq_sz, s.d_s, s.dkb_s, s.drqm_s, s.drqm_pct, s.d_await, s.dareq_sz, s.f_s, s.f_await, s.aqu_sz,
        s.util_pct,
    ]
}

/// Writes one report: timestamp line, header, the device row, a blank line.
pub fn write_report(out: &mut dyn Write, time: &str, device: &str, s: &IostatSample) -> std::io::Result<()> {
    writeln!(out, "{time}")?;
    write!(out, "{:<16}", "Device")?;
    for c in RECORD_COLUMNS {
        write!(out, " {c:>9}")?;
    }
    write!(out, "\n{device:<16}")?;
    for v in values(s) {
        write!(out, " {v:>9.2}")?;
    }
    writeln!(out, "\n")
}

/// iostat's banner: `Linux <release> (<host>) \t<date> \t_<arch>_\t(<n> CPU)`.
pub fn banner(now: SystemTime) -> String {
    let read = |p: &str| std::fs::read_to_string(p).map(|s| s.trim().to_string()).unwrap_or_else(|_| "?".into());
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let date = local_time(now, "%m/%d/%y");
    format!(
        "Linux {} ({}) \t{date} \t_{}_\t({cpus} CPU)",
        read("/proc/sys/kernel/osrelease"),
        read("/proc/sys/kernel/hostname"),
        std::env::consts::ARCH
    )
}

/// Formats `t` in local time with strftime `fmt` (iostat `-t` in the C locale
/// prints `%m/%d/%y %H:%M:%S`).
pub fn local_time(t: SystemTime, fmt: &str) -> String {
    let secs = t.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0) as libc::time_t;
    let cfmt = std::ffi::CString::new(fmt).unwrap_or_default();
    let mut buf = [0u8; 128];
    // SAFETY: localtime_r writes into our zeroed tm; strftime writes at most
    // buf.len() bytes into buf and returns how many it wrote.
    let n = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&secs, &mut tm).is_null() {
            return String::new();
        }
        libc::strftime(buf.as_mut_ptr().cast(), buf.len(), cfmt.as_ptr(), &tm)
    };
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

const TIME_FMT: &str = "%m/%d/%y %H:%M:%S";

fn uptime_s() -> Result<f64> {
    let text = std::fs::read_to_string("/proc/uptime").context("reading /proc/uptime")?;
    text.split_whitespace().next().and_then(|t| t.parse().ok()).context("parsing /proc/uptime")
}

/// Records until `count` interval reports are written, `stop` is set, or
/// a stop signal arrives ([`crate::sys::signals`]).
/// Each report is flushed as written, so an interrupted log stays parseable.
/// Returns the number of interval reports written.
pub fn record(opts: &RecordOptions, out: &mut dyn Write, stop: &AtomicBool) -> Result<u64> {
    // iostat's interval is whole seconds and its -t stamps have 1 s
    // resolution; a sub-second interval would be unreadable from the log.
    if opts.interval < Duration::from_secs(1) || opts.interval.subsec_nanos() != 0 {
        bail!(
            "interval {:?} must be a whole number of seconds (iostat -t timestamps have 1 s resolution)",
            opts.interval
        );
    }
    let name = diskstats_name(&opts.device)?;
    let mut prev = read_diskstats(&name)?;
    let start = Instant::now();
    let now = SystemTime::now();
    writeln!(out, "{}\n", banner(now))?;
    // First report: since boot, as iostat prints it without -y.
    let zero = DiskStats { name: name.clone(), ..DiskStats::default() };
    let boot = iostat_between(&zero, &prev, uptime_s()?, 0.0);
    write_report(out, &local_time(now, TIME_FMT), &name, &boot)?;
    out.flush()?;
    let mut last = start;
    let mut written = 0u64;
    while opts.count.is_none_or(|c| written < c) {
        // Deadlines from the start, so sleep overshoot does not accumulate.
        let deadline = start + opts.interval * (written as u32 + 1);
        while Instant::now() < deadline {
            if stop.load(Ordering::Relaxed) || crate::sys::signals::cancelled() {
                return Ok(written);
            }
            std::thread::sleep((deadline - Instant::now()).min(Duration::from_millis(50)));
        }
        let cur = read_diskstats(&name)?;
        let t = Instant::now();
        let s = iostat_between(&prev, &cur, (t - last).as_secs_f64(), (t - start).as_secs_f64());
        write_report(out, &local_time(SystemTime::now(), TIME_FMT), &name, &s)?;
        out.flush()?;
        prev = cur;
        last = t;
        written += 1;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iostatlog::parse::{parse_log, Layout};

    #[test]
    fn written_report_parses_back() {
        let s = IostatSample {
            r_s: 3.0,
            rkb_s: 12.0,
            w_s: 50.0,
            wkb_s: 6400.0,
            wareq_sz: 128.0,
            rareq_sz: 4.0,
            util_pct: 99.5,
            aqu_sz: 1.25,
            f_s: 2.0,
            ..Default::default()
        };
        let mut buf = Vec::new();
        writeln!(buf, "{}\n", banner(SystemTime::now())).unwrap();
        write_report(&mut buf, "12/01/26 01:21:08", "loop7", &s).unwrap();
        write_report(&mut buf, "12/01/26 01:21:09", "loop7", &s).unwrap();
        let log = parse_log(std::str::from_utf8(&buf).unwrap(), false).unwrap();
        assert!(log.banner.is_some());
        assert_eq!(log.layout, Some(Layout::Sysstat12_3));
        assert_eq!(log.samples.len(), 2);
        let p = &log.samples[1];
        assert_eq!(p.device, "loop7");
        assert_eq!((p.r_s, p.w_s, p.rkb_s, p.wkb_s), (Some(3.0), Some(50.0), 12.0, 6400.0));
        assert_eq!((p.wareq_kb, p.util_pct, p.aqu_sz), (Some(128.0), Some(99.5), Some(1.25)));
        assert_eq!(p.t_s, Some(1.0));
        assert_eq!(p.columns["f/s"], 2.0);
    }

    #[test]
    fn sub_second_interval_is_refused() {
        let opts = RecordOptions { device: "no-such-dev".into(), interval: Duration::from_millis(500), count: Some(1) };
        let e = record(&opts, &mut Vec::new(), &AtomicBool::new(false)).unwrap_err();
        assert!(e.to_string().contains("whole number of seconds"), "{e}");
    }

    #[test]
    fn time_format_is_iostat_like() {
        let t = local_time(SystemTime::UNIX_EPOCH + Duration::from_secs(86_400 * 365), TIME_FMT);
        assert_eq!(t.len(), 17, "{t}");
        assert_eq!(t.matches(':').count(), 2);
    }
}
