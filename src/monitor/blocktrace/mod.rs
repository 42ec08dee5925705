//! Block-trace monitor: the `block_rq_issue` / `block_rq_complete`
//! tracepoints of one device, summarised per run.
//!
//! Each tracer uses a private tracefs instance
//! (`instances/fslab-tb-<pid>-bt<n>`), so parallel runs and other tracing
//! users do not see each other's events, and `fslab cleanup` finds
//! leftovers by the marker. Events are read in binary form from each CPU's
//! `trace_pipe_raw`; the ring-buffer page layout comes from `header_page`
//! and every record field (dev, sector, nr_sector, bytes, rwbs, …) from the
//! event's `format` file — no offsets are hard-coded.
//!
//! The summary holds request-size histograms (log2 buckets, read and write
//! separately), device latency percentiles of reads and writes (issue →
//! complete matched by device, sector and operation), sync/meta/flush/FUA
//! counts from the `rwbs` flags, and
//! how many events were seen and lost. When tracefs cannot be used the
//! monitor is "off" and [`BlockTraceSummary::reason`] says why; the run goes on.

use std::path::Path;
use std::time::Duration;

/// Where tracefs is normally found, in order of preference.
pub const TRACEFS_CANDIDATES: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// How often the reader thread drains the per-CPU buffers.
pub(super) const POLL: Duration = Duration::from_millis(100);

/// Events younger than this (relative to the start of a drain) are kept back
/// before matching, so an issue still sitting in another CPU's buffer is not
/// overtaken by its completion.
pub(super) const REORDER_WINDOW_NS: u64 = 500_000_000;

/// Per-CPU ring buffer size of the private instance: large enough for a
/// 100 ms poll at a few hundred thousand IOPS.
pub(super) const BUFFER_SIZE_KB: u32 = 4096;

/// Latencies kept per direction; beyond this, percentiles use the first ones.
pub(super) const MAX_LATENCY_SAMPLES: usize = 20_000_000;

mod accumulate;
mod event;
mod format;
mod ring;
mod summary;
mod tracefs;
mod tracer;

pub use accumulate::*;
pub use event::*;
pub use format::*;
pub use ring::*;
pub use summary::*;
pub use tracefs::*;
pub use tracer::*;

/// A block-trace monitor that is either running or off for a stated reason.
pub enum BlockTraceMonitor {
    Running(BlockTracer),
    Off(String),
}

impl BlockTraceMonitor {
    /// Starts tracing `device` if there is one and tracefs works; otherwise
    /// the monitor is off and the reason is kept for the summary.
    pub fn start(device: Option<&Path>) -> BlockTraceMonitor {
        match device {
            None => BlockTraceMonitor::Off("the testbed has no block device".into()),
            Some(d) => match BlockTracer::start(d) {
                Ok(t) => BlockTraceMonitor::Running(t),
                Err(e) => BlockTraceMonitor::Off(format!("{e:#}")),
            },
        }
    }

    /// Stops (if running) and returns the summary.
    pub fn stop(self) -> BlockTraceSummary {
        match self {
            BlockTraceMonitor::Running(t) => t.stop(),
            BlockTraceMonitor::Off(reason) => BlockTraceSummary::off(reason),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ISSUE: &str = include_str!("../../../tests/fixtures/blocktrace/block_rq_issue.format");
    const COMPLETE: &str = include_str!("../../../tests/fixtures/blocktrace/block_rq_complete.format");
    const HEADER: &str = include_str!("../../../tests/fixtures/blocktrace/header_page");

    #[test]
    fn parses_fields_by_name() {
        let f = parse_format(ISSUE, "issue").unwrap();
        assert_eq!(f.name, "block_rq_issue");
        assert!(f.id.is_some());
        let rwbs = f.field("rwbs").unwrap();
        assert_eq!(rwbs.decl, "char[10]");
        assert_eq!(f.field("cmd").unwrap().decl, "__data_loc char[]");
        assert!(f.field("sector").unwrap().size == 8);
        assert!(parse_format("print fmt: nothing\n", "x").is_err());
        assert!(parse_format("field:int x;\toffset:zz;\tsize:4;\n", "x").is_err());
    }

    #[test]
    fn rwbs_flags() {
        let r = parse_rwbs("WS");
        assert_eq!((r.op, r.sync, r.fua, r.preflush), ('W', true, false, false));
        let r = parse_rwbs("FWFSM");
        assert_eq!((r.op, r.preflush, r.fua, r.sync, r.meta), ('W', true, true, true, true));
        assert_eq!(parse_rwbs("FF").op, 'F');
        assert!(parse_rwbs("FF").preflush);
        assert_eq!(parse_rwbs("F").op, 'F');
        assert_eq!(parse_rwbs("RA").op, 'R');
        assert_eq!(parse_rwbs("").op, '?');
    }

    #[test]
    fn percentiles_nearest_rank() {
        let mut v: Vec<u64> = (1..=1000).map(|i| i * 1000).collect();
        let p = percentiles(&mut v).unwrap();
        assert_eq!((p.p50_us, p.p90_us, p.p99_us, p.p99_9_us, p.max_us), (500.0, 900.0, 990.0, 999.0, 1000.0));
        assert!(percentiles(&mut []).is_none());
    }

    #[test]
    fn same_sector_requests_match_in_issue_order() {
        let ev = |kind, ts_ns, rwbs: &str| BlockEvent {
            kind,
            ts_ns,
            dev: 1,
            sector: 8,
            nr_sector: 8,
            bytes: 4096,
            rwbs: parse_rwbs(rwbs),
        };
        let mut acc = Accumulator::new(Some(1));
        for e in [
            ev(EventKind::Issue, 1_000, "W"),
            ev(EventKind::Issue, 2_000, "R"),
            ev(EventKind::Complete, 11_000, "W"),
            ev(EventKind::Complete, 42_000, "R"),
            ev(EventKind::Complete, 50_000, "R"),
        ] {
            acc.add(&e);
        }
        let s = acc.summary();
        assert_eq!(s.write.latency.unwrap().max_us, 10.0);
        assert_eq!(s.read.latency.unwrap().max_us, 40.0);
        assert_eq!(s.unmatched_completions, 1);
        assert!(acc.inflight.is_empty() && acc.inflight_more.is_empty());
    }

    #[test]
    fn monitor_off_says_why() {
        let s = BlockTraceMonitor::start(None).stop();
        assert!(!s.enabled);
        assert!(s.reason.unwrap().contains("no block device"));
        let s = BlockTraceMonitor::start(Some(Path::new("/proc/self/stat"))).stop();
        assert!(!s.enabled);
        assert!(s.reason.unwrap().contains("not a block device"));
        let json = serde_json::to_value(BlockTraceSummary::off("x")).unwrap();
        assert_eq!(json["enabled"], false);
        let back: BlockTraceSummary = serde_json::from_value(serde_json::json!({"enabled": false})).unwrap();
        assert_eq!(back.reason, None);
    }

    #[test]
    fn malformed_pages_do_not_panic() {
        let layout = PageLayout::parse(HEADER, "h").unwrap();
        let mut n = 0;
        for len in 0..64 {
            let mut page = vec![0xffu8; len];
            n += layout.parse_page(&page, |_, _| {});
            page.fill(0);
            n += layout.parse_page(&page, |_, _| {});
        }
        let _ = n;
        let d = BlockDecoder::new(&parse_format(ISSUE, "i").unwrap(), &parse_format(COMPLETE, "c").unwrap()).unwrap();
        assert!(d.decode(0, &[1, 2, 3]).is_none());
    }
}
