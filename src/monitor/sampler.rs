//! The background thread that samples diskstats and CPU while a workload runs.

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use super::cpu::{cpu_between, read_cpu_stat, CpuStat};
use super::diskstats::{diskstats_name, iostat_between, read_diskstats, DiskStats};
use super::{CpuSample, DiskTotals, IostatSample, MonitorData};

/// Shortest sampling interval accepted: below this, jiffy-granular kernel
/// counters (io_ticks, CPU ticks) make per-interval numbers mostly noise.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// A final partial interval shorter than this is not turned into a sample
/// (its rates would be dominated by tick granularity); its I/O still counts
/// in [`DiskTotals`], which use the final snapshot. A run that ended before
/// the first tick is the exception: its one interval, start..end, is kept
/// however short, so a short run still has CPU and device figures.
const MIN_FINAL_INTERVAL: Duration = Duration::from_millis(10);

/// What the sampler thread hands back.
struct Collected {
    disk: Vec<IostatSample>,
    cpu: Vec<CpuSample>,
    first: Option<DiskStats>,
    last: Option<DiskStats>,
    duration_s: f64,
}

/// One snapshot of everything sampled.
struct Snapshot {
    disk: Option<DiskStats>,
    cpu: CpuStat,
}

fn snapshot(device: Option<&str>) -> Result<Snapshot> {
    let disk = device.map(read_diskstats).transpose()?;
    let cpu = read_cpu_stat()?;
    Ok(Snapshot { disk, cpu })
}

/// A running sampler. Call [`Monitor::stop`] to get the data; dropping it
/// without `stop` still stops and joins the thread (data discarded).
pub struct Monitor {
    device: Option<String>,
    interval: Duration,
    stop_tx: Option<Sender<()>>,
    handle: Option<JoinHandle<Result<Collected>>>,
}

impl Monitor {
    /// Takes a first snapshot and starts sampling every `interval`.
    ///
    /// `device` is a block device as a kernel name (`loop3`) or path
    /// (`/dev/loop3`); `None` samples CPU only. Fails if `interval` is below
    /// [`MIN_INTERVAL`], or if the device or `/proc/stat` cannot be read now
    /// (so a bad device name surfaces before the workload runs).
    pub fn start(device: Option<String>, interval: Duration) -> Result<Monitor> {
        if interval < MIN_INTERVAL {
            bail!(
                "monitor interval {} ms is too short; the minimum is {} ms",
                interval.as_millis(),
                MIN_INTERVAL.as_millis()
            );
        }
        let device = device.as_deref().map(diskstats_name).transpose()?;
        let first = snapshot(device.as_deref()).context("monitor: first snapshot")?;
        let start = Instant::now();
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let dev = device.clone();
        let handle = std::thread::Builder::new()
            .name("fslab-monitor".into())
            .spawn(move || sample_loop(dev, interval, start, first, stop_rx))
            .context("monitor: spawning sampler thread")?;
        Ok(Monitor { device, interval, stop_tx: Some(stop_tx), handle: Some(handle) })
    }

    /// The `/proc/diskstats` name being sampled, if any.
    pub fn device(&self) -> Option<&str> {
        self.device.as_deref()
    }

    /// The sampling interval.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Stops sampling, takes the final (partial-interval) sample and returns
    /// everything collected, with whole-run device totals.
    ///
    /// Fails if any snapshot failed during the run (e.g. the device vanished):
    /// the sampler stops at the first failure rather than leave silent gaps.
    pub fn stop(mut self) -> Result<MonitorData> {
        let collected = self.shutdown().ok_or_else(|| anyhow!("monitor already stopped"))??;
        let disk_totals = match (&collected.first, &collected.last) {
            (Some(f), Some(l)) => Some(DiskTotals::between(f, l, collected.duration_s)),
            _ => None,
        };
        Ok(MonitorData {
            device: self.device.clone(),
            interval_s: self.interval.as_secs_f64(),
            disk: collected.disk,
            cpu: collected.cpu,
            disk_totals,
        })
    }

    /// Signals the thread and joins it; `None` if already done.
    fn shutdown(&mut self) -> Option<Result<Collected>> {
        // A send error only means the thread already exited (on error); join tells why.
        if let Some(tx) = self.stop_tx.take() {
            let _ = tx.send(());
        }
        let handle = self.handle.take()?;
        Some(match handle.join() {
            Ok(r) => r,
            Err(_) => Err(anyhow!("monitor sampler thread panicked")),
        })
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        // Never leave a sampler running after its owner is gone.
        let _ = self.shutdown();
    }
}

/// The sampler thread body: sleeps until `start + k·interval` (so timing does
/// not drift with sampling cost), or until told to stop.
fn sample_loop(
    device: Option<String>,
    interval: Duration,
    start: Instant,
    first: Snapshot,
    stop_rx: mpsc::Receiver<()>,
) -> Result<Collected> {
    let dev = device.as_deref();
    let mut out = Collected {
        disk: Vec::new(),
        cpu: Vec::new(),
        first: first.disk.clone(),
        last: first.disk.clone(),
        duration_s: 0.0,
    };
    let mut prev = first;
    let mut prev_t = 0.0_f64;
    let mut k: u32 = 1;
    loop {
        let now = Instant::now();
        let tick = |k: u32| interval.checked_mul(k).and_then(|d| start.checked_add(d));
        let mut deadline = tick(k);
        if deadline.is_some_and(|d| d <= now) {
            // We fell behind (overloaded host): skip to the next future tick
            // instead of firing a burst of near-zero intervals.
            let behind = now.duration_since(start).as_nanos() / interval.as_nanos().max(1);
            k = u32::try_from(behind + 1).unwrap_or(u32::MAX);
            deadline = tick(k);
        }
        let woke = match deadline {
            Some(d) => stop_rx.recv_timeout(d.saturating_duration_since(now)),
            // An interval too large to represent: nothing to do but wait for stop.
            None => stop_rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        let stopping = match woke {
            Ok(()) | Err(RecvTimeoutError::Disconnected) => true,
            Err(RecvTimeoutError::Timeout) => false,
        };
        let cur = snapshot(dev);
        let t = start.elapsed().as_secs_f64();
        let cur = cur.with_context(|| format!("monitor: snapshot at t={t:.3} s"))?;
        let itv = t - prev_t;
        let first_sample = out.cpu.is_empty();
        if !stopping || first_sample || itv >= MIN_FINAL_INTERVAL.as_secs_f64() {
            if let (Some(p), Some(c)) = (&prev.disk, &cur.disk) {
                out.disk.push(iostat_between(p, c, itv, t));
            }
            out.cpu.push(cpu_between(&prev.cpu, &cur.cpu, t));
            prev_t = t;
        }
        out.last = cur.disk.clone();
        out.duration_s = t;
        prev = cur;
        if stopping {
            return Ok(out);
        }
        k = k.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::process::Command;

    #[test]
    fn rejects_short_interval_and_unknown_device() {
        let e = Monitor::start(None, Duration::from_millis(99)).err().unwrap().to_string();
        assert!(e.contains("too short"), "{e}");
        let e = Monitor::start(Some("fslab-test-no-such-dev".into()), Duration::from_millis(100)).err().unwrap();
        assert!(format!("{e:#}").contains("not found"), "{e:#}");
    }

    #[test]
    fn cpu_only_samples_on_schedule() {
        let m = Monitor::start(None, Duration::from_millis(100)).unwrap();
        std::thread::sleep(Duration::from_millis(550));
        let data = m.stop().unwrap();
        assert_eq!(data.device, None);
        assert!(data.disk.is_empty() && data.disk_totals.is_none());
        // 5 scheduled samples plus the ~50 ms tail; allow for a loaded host.
        assert!((3..=7).contains(&data.cpu.len()), "{} samples", data.cpu.len());
        for (i, s) in data.cpu.iter().enumerate() {
            let sum = s.user_pct
                + s.nice_pct
                + s.sys_pct
                + s.iowait_pct
                + s.irq_pct
                + s.softirq_pct
                + s.steal_pct
                + s.idle_pct
                + s.guest_pct
                + s.guest_nice_pct;
            assert!((sum - 100.0).abs() < 1e-6 || s.guest_pct > 0.0, "sample {i}: {s:?}");
        }
        // Scheduled against the start instant: sample k lands near k·100 ms.
        let s2 = &data.cpu[1];
        assert!(s2.t_s >= 0.2 && s2.t_s < 0.45, "t_s {}", s2.t_s);
        assert!(data.cpu.windows(2).all(|w| w[1].t_s > w[0].t_s));
    }

    /// A run shorter than one interval (and than `MIN_FINAL_INTERVAL`) still
    /// gets its one start..end sample: a loaded host once gave a 7 ms
    /// command no CPU figures at all.
    #[test]
    fn a_run_shorter_than_any_interval_still_has_one_sample() {
        let m = Monitor::start(None, Duration::from_secs(1)).unwrap();
        let data = m.stop().unwrap();
        assert_eq!(data.cpu.len(), 1, "{:?}", data.cpu);
        assert!(data.cpu[0].t_s > 0.0 && data.cpu[0].t_s < 1.0, "{:?}", data.cpu);
        assert_eq!(crate::monitor::cpu_metrics(&data.cpu).len(), 3);
    }

    #[test]
    fn drop_without_stop_ends_the_thread() {
        let m = Monitor::start(None, Duration::from_secs(3600)).unwrap();
        let t0 = Instant::now();
        drop(m);
        // Drop joins the thread; with a 1 h interval it must have been woken.
        crate::testsupport::did_not_hang(t0, Duration::from_secs(5), "dropping a running sampler");
    }

    /// Detaches the loop device even if the test panics.
    struct LoopGuard(String);

    impl Drop for LoopGuard {
        fn drop(&mut self) {
            for _ in 0..5 {
                match Command::new("losetup").arg("-d").arg(&self.0).status() {
                    Ok(s) if s.success() => return,
                    _ => std::thread::sleep(Duration::from_millis(200)),
                }
            }
            eprintln!("warning: could not detach {}", self.0);
        }
    }

    fn attach(image: &std::path::Path) -> LoopGuard {
        let mut last_err = String::new();
        for _ in 0..5 {
            let out = Command::new("losetup").arg("--find").arg("--show").arg(image).output().expect("run losetup");
            if out.status.success() {
                let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
                assert!(dev.starts_with("/dev/loop"), "losetup printed {dev:?}");
                return LoopGuard(dev);
            }
            // Another test may have raced us for the same free device.
            last_err = String::from_utf8_lossy(&out.stderr).into_owned();
            std::thread::sleep(Duration::from_millis(300));
        }
        panic!("losetup --find --show failed: {last_err}");
    }

    #[test]
    fn real_loop_device_sees_direct_writes() {
        if !crate::testsupport::root_or_skip("real_loop_device_sees_direct_writes (losetup)") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("fslab-test-monitor.img");
        File::create(&image).unwrap().set_len(64 << 20).unwrap();
        let guard = attach(&image);
        let dev = guard.0.clone();

        let m = Monitor::start(Some(dev.clone()), Duration::from_millis(100)).unwrap();
        assert_eq!(m.device(), Some(dev.trim_start_matches("/dev/")));
        // 4 × 4 MiB with pauses, so writes land in several sampling intervals.
        for chunk in 0..4 {
            let st = Command::new("dd")
                .arg("if=/dev/zero")
                .arg(format!("of={dev}"))
                .args(["bs=1M", "count=4", "oflag=direct", "conv=notrunc", "status=none"])
                .arg(format!("seek={}", chunk * 4))
                .status()
                .unwrap();
            assert!(st.success(), "dd failed on {dev}");
            std::thread::sleep(Duration::from_millis(250));
        }
        let data = m.stop().unwrap();

        let totals = data.disk_totals.clone().expect("disk totals");
        assert!((totals.written_mb - 16.0).abs() < 0.5, "written_mb {}", totals.written_mb);
        assert!(totals.writes > 0 && totals.mean_write_kb > 0.0, "{totals:?}");
        let busy = data.disk.iter().filter(|s| s.w_s > 0.0).count();
        assert!(busy >= 3, "only {busy} samples with writes: {:?}", data.disk);
        // Per-interval kB/s integrate back to roughly the total written.
        let mut prev_t = 0.0;
        let kb: f64 = data
            .disk
            .iter()
            .map(|s| {
                let kb = s.wkb_s * (s.t_s - prev_t);
                prev_t = s.t_s;
                kb
            })
            .sum();
        assert!((kb / 1024.0 - totals.written_mb).abs() < 0.5, "sum {kb} KiB vs {totals:?}");
        assert_eq!(data.disk.len(), data.cpu.len());
        drop(guard);
    }
}
