//! `fslab iostat`: parse and summarize hand-written logs of every sysstat
//! layout, a real log from this machine, malformed logs, a fuzzed parser, and
//! a record → parse round trip on a loop device.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use fslab::iostatlog::{
    compare, parse_file, parse_log, record, summarize, FirstReport, IntervalSource, Layout, RecordOptions,
    SummaryOptions, Unit,
};
use proptest::prelude::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/iostat").join(name)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

const GOOD: [&str; 7] = [
    "sysstat-10.2-x-k-t-ampm-2dev.log",
    "sysstat-11.2-x-de-comma-sectors.log",
    "sysstat-11.6-x-m-t.log",
    "sysstat-12.2-x-k-discard-nots.log",
    "sysstat-12.6-x-k-t-iso-y.log",
    "sysstat-12.6-d-k-basic.log",
    "real-12.6.1-vm-xtk.log",
];

#[test]
fn every_fixture_parses_strictly() {
    let expect = [
        (Layout::Sysstat11, Unit::Kb, 6, 12),
        (Layout::Sysstat11, Unit::Sectors, 3, 3),
        (Layout::Sysstat11_5, Unit::Mb, 4, 4),
        (Layout::Sysstat12_1, Unit::Kb, 4, 8),
        (Layout::Sysstat12_3, Unit::Kb, 3, 3),
        (Layout::Basic, Unit::Kb, 3, 3),
        (Layout::Sysstat12_3, Unit::Kb, 3, 0),
    ];
    for (name, (layout, unit, reports, samples)) in GOOD.iter().zip(expect) {
        let log = parse_file(&fixture(name), false).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        assert_eq!(log.layout, Some(layout), "{name}");
        assert_eq!(log.unit, Some(unit), "{name}");
        assert_eq!(log.reports, reports, "{name}");
        if samples > 0 {
            assert_eq!(log.samples.len(), samples, "{name}");
        }
        assert!(log.banner.is_some() && log.warnings.is_empty(), "{name}");
    }
}

/// ≤ 11.4 layout, 2 s interval from AM/PM stamps, two devices, avg-cpu blocks.
#[test]
fn sysstat_10_busy_phase() {
    let log = parse_file(&fixture("sysstat-10.2-x-k-t-ampm-2dev.log"), false).unwrap();
    let s = summarize("a", &log, &SummaryOptions::default());
    assert!(s.dropped_first_report);
    assert_eq!(s.interval_source, IntervalSource::Timestamps);
    let names: Vec<_> = s.devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["mmcblk0", "sda"]);
    let d = &s.devices[0];
    assert_eq!((d.samples, d.interval_s, d.duration_s), (5, 2.0, 10.0));
    assert!(close(d.written_mb, 6500.0 * 2.0 / 1024.0), "{}", d.written_mb);
    assert!(close(d.read_mb, 24.0 * 2.0 / 1024.0));
    assert_eq!((d.busy.samples, d.busy.seconds, d.busy.starts_at_s), (3, 6.0, Some(2.0)));
    assert!(close(d.busy.written_mb, 12.5));
    // avgrq-sz layout: per-direction sizes derived from kB/s ÷ IOPS: 64, 64, 32.
    assert!(close(d.busy.mean_wareq_kb.unwrap(), 160.0 / 3.0));
    assert_eq!(d.busy.mean_rareq_kb, Some(4.0));
    assert!(close(d.busy.weighted_wareq_kb.unwrap(), 6400.0 / 110.0));
    assert_eq!(s.devices[1].busy.samples, 0);
    assert_eq!(s.devices[1].busy.mean_wareq_kb, None);

    let w = summarize("a", &log, &SummaryOptions { window_s: Some(4.0), ..Default::default() });
    assert_eq!(w.devices[0].busy.seconds, 4.0);
    assert!(close(w.devices[0].busy.written_mb, 11.25));
    let t = summarize("a", &log, &SummaryOptions { util_threshold: 99.0, ..Default::default() });
    assert_eq!(t.devices[0].busy.samples, 2);
}

#[test]
fn megabytes_decimal_commas_discard_iso_and_basic() {
    // -m: MB/s normalised to kB; 1 s from 24 h stamps.
    let d = &summarize("m", &parse_file(&fixture("sysstat-11.6-x-m-t.log"), false).unwrap(), &Default::default())
        .devices[0];
    assert_eq!((d.samples, d.interval_s), (3, 1.0));
    assert!(close(d.written_mb, 4.5) && close(d.busy.written_mb, 4.0));
    assert!(close(d.busy.mean_wareq_kb.unwrap(), 48.0));

    // de_DE: decimal commas, dd.mm.yyyy stamps, sectors.
    let d = &summarize(
        "de",
        &parse_file(&fixture("sysstat-11.2-x-de-comma-sectors.log"), false).unwrap(),
        &Default::default(),
    )
    .devices[0];
    assert_eq!((d.samples, d.interval_s), (2, 2.0));
    assert!(close(d.written_mb, (6400.0 + 1600.0) * 2.0 / 1024.0), "{}", d.written_mb);
    assert!(close(d.busy.mean_wareq_kb.unwrap(), 48.0));

    // 12.1+ discard layout, no -t: 1 s assumed unless given.
    let log = parse_file(&fixture("sysstat-12.2-x-k-discard-nots.log"), false).unwrap();
    let s = summarize("d", &log, &Default::default());
    assert_eq!(s.interval_source, IntervalSource::Assumed);
    let d = &s.devices[0];
    assert_eq!((d.name.as_str(), d.samples), ("nvme0n1", 3));
    assert!(close(d.read_mb, 26000.0 / 1024.0));
    assert!(close(d.busy.mean_rareq_kb.unwrap(), 66.0));
    let s5 = summarize("d", &log, &SummaryOptions { interval_s: Some(5.0), ..Default::default() });
    assert!(close(s5.devices[0].read_mb, 5.0 * 26000.0 / 1024.0));
    assert_eq!(s5.interval_source, IntervalSource::Option);

    // ISO stamps crossing midnight, log taken with -y: keep the first report.
    let log = parse_file(&fixture("sysstat-12.6-x-k-t-iso-y.log"), false).unwrap();
    assert_eq!(log.samples.iter().map(|s| s.t_s.unwrap()).collect::<Vec<_>>(), [0.0, 2.0, 4.0]);
    let d =
        &summarize("iso", &log, &SummaryOptions { first_report: FirstReport::Keep, ..Default::default() }).devices[0];
    assert_eq!((d.samples, d.interval_s, d.busy.seconds), (3, 2.0, 4.0));
    assert!(close(d.written_mb, 19200.0 * 2.0 / 1024.0));
    assert!(close(d.busy.mean_wareq_kb.unwrap(), 96.0));

    // Basic (-d) report: throughput only, no busy phase.
    let d = &summarize("b", &parse_file(&fixture("sysstat-12.6-d-k-basic.log"), false).unwrap(), &Default::default())
        .devices[0];
    assert_eq!(d.samples, 2);
    assert!(close(d.written_mb, 1.0) && close(d.read_mb, 0.5));
    assert_eq!((d.mean_util_pct, d.busy.samples), (None, 0));
}

#[test]
fn real_log_from_this_machine() {
    let log = parse_file(&fixture("real-12.6.1-vm-xtk.log"), false).unwrap();
    let s = summarize("real", &log, &Default::default());
    assert!(s.dropped_first_report);
    assert_eq!(s.interval_source, IntervalSource::Timestamps);
    assert!(s.devices.iter().any(|d| d.name == "vda"));
    for d in &s.devices {
        assert_eq!((d.samples, d.interval_s), (2, 1.0), "{}", d.name);
        assert!(d.read_mb.is_finite() && d.read_mb >= 0.0);
    }
}

#[test]
fn json_has_the_documented_keys() {
    let log = parse_file(&fixture("sysstat-11.6-x-m-t.log"), false).unwrap();
    let v = serde_json::json!({ "files": [summarize("p", &log, &Default::default())] });
    let d = &v["files"][0]["devices"][0];
    assert_eq!(v["files"][0]["path"], "p");
    for k in ["name", "samples", "interval_s", "duration_s", "read_mb", "written_mb"] {
        assert!(!d[k].is_null(), "{k}");
    }
    for k in ["seconds", "read_mb", "written_mb", "mean_wareq_kb"] {
        assert!(d["busy"][k].is_number(), "busy.{k}");
    }
    assert!(d["busy"].get("mean_rareq_kb").is_some());
}

#[test]
fn compare_pairs_single_devices_and_computes_changes() {
    let opts = SummaryOptions::default();
    let a = summarize("a", &parse_file(&fixture("sysstat-11.6-x-m-t.log"), false).unwrap(), &opts);
    let b = summarize("b", &parse_file(&fixture("sysstat-11.2-x-de-comma-sectors.log"), false).unwrap(), &opts);
    let c = compare(&a, &b, None);
    assert_eq!(c.devices.len(), 1);
    let row = |m: &str| c.devices[0].rows.iter().find(|r| r.metric == m).unwrap().clone();
    let w = row("busy.written_mb");
    assert!(close(w.a.unwrap(), 4.0) && close(w.b.unwrap(), 15.625));
    assert!(close(w.change_pct.unwrap(), (15.625 - 4.0) / 4.0 * 100.0));
    assert_eq!(row("busy.mean_rareq_kb").change, None);
    // Two devices vs one: pair by name only.
    let two = summarize("t", &parse_file(&fixture("sysstat-10.2-x-k-t-ampm-2dev.log"), false).unwrap(), &opts);
    let c = compare(&two, &a, None);
    assert_eq!(c.devices.len(), 1);
    assert_eq!(c.unpaired, ["t: sda"]);
    let text = fslab::iostatlog::render_comparison(&c);
    assert!(text.contains("busy.written_mb"), "{text}");
}

#[test]
fn malformed_log_errors_with_file_and_line_or_warns_when_lenient() {
    let p = fixture("malformed-cut-row.log");
    let e = format!("{:#}", parse_file(&p, false).unwrap_err());
    assert!(e.contains("malformed-cut-row.log:9:"), "{e}");
    assert!(e.contains("6 fields, the header has 16"), "{e}");
    let log = parse_file(&p, true).unwrap();
    assert_eq!(log.warnings.iter().map(|w| w.line).collect::<Vec<_>>(), [9, 10]);
    assert_eq!(log.samples.len(), 3);
    let e = format!("{:#}", parse_file(&fixture("no-such.log"), false).unwrap_err());
    assert!(e.contains("no-such.log"), "{e}");
}

// ---------------------------------------------------------------- fuzzing

fn fixtures_text() -> Vec<String> {
    GOOD.iter().map(|n| std::fs::read_to_string(fixture(n)).unwrap()).collect()
}

/// Parse (strict and lenient) and summarise; everything must stay finite and
/// errors must point inside the text.
fn check_no_panic(text: &str) {
    let lines = text.lines().count();
    for lenient in [false, true] {
        match parse_log(text, lenient) {
            Ok(log) => {
                assert!(!log.samples.is_empty());
                for w in &log.warnings {
                    assert!(w.line >= 1 && w.line <= lines, "{w}");
                }
                for s in &log.samples {
                    assert!(s.rkb_s.is_finite() && s.wkb_s.is_finite());
                }
                for window in [None, Some(1.0)] {
                    let sum = summarize("f", &log, &SummaryOptions { window_s: window, ..Default::default() });
                    for d in &sum.devices {
                        assert!(d.read_mb.is_finite() && d.busy.written_mb.is_finite());
                        assert!(d.busy.samples <= d.samples);
                    }
                }
            }
            Err(e) => assert!(e.line <= lines.max(1), "{e} (of {lines})"),
        }
    }
}

#[derive(Clone, Debug)]
enum Mutation {
    Delete(usize),
    Duplicate(usize),
    Truncate(usize, usize),
    ReplaceToken(usize, usize, String),
    Insert(usize, String),
    Swap(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let junk = prop_oneof![
        "[ -~]{0,40}",
        Just("nan".to_string()),
        Just("inf".to_string()),
        Just("-1e308".to_string()),
        Just("Device".to_string()),
        Just("Device: r/s rkB/s wkB/s %util".to_string()),
        Just("avg-cpu:".to_string()),
        Just("99:99:99".to_string()),
        Just("12:00:00 PM".to_string()),
        Just("1,5".to_string()),
        "\\PC{0,10}",
    ];
    prop_oneof![
        any::<usize>().prop_map(Mutation::Delete),
        any::<usize>().prop_map(Mutation::Duplicate),
        (any::<usize>(), any::<usize>()).prop_map(|(l, c)| Mutation::Truncate(l, c)),
        (any::<usize>(), any::<usize>(), junk.clone()).prop_map(|(l, t, s)| Mutation::ReplaceToken(l, t, s)),
        (any::<usize>(), junk).prop_map(|(l, s)| Mutation::Insert(l, s)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::Swap(a, b)),
    ]
}

fn apply(text: &str, muts: &[Mutation]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for m in muts {
        let n = lines.len().max(1);
        match m {
            Mutation::Delete(i) if !lines.is_empty() => {
                lines.remove(i % n);
            }
            Mutation::Duplicate(i) if !lines.is_empty() => {
                let l = lines[i % n].clone();
                lines.insert(i % n, l);
            }
            Mutation::Truncate(i, c) if !lines.is_empty() => {
                let l = &mut lines[i % n];
                let keep = c % (l.chars().count() + 1);
                *l = l.chars().take(keep).collect();
            }
            Mutation::ReplaceToken(i, t, s) if !lines.is_empty() => {
                let l = &mut lines[i % n];
                let mut toks: Vec<String> = l.split_whitespace().map(str::to_string).collect();
                if !toks.is_empty() {
                    let k = t % toks.len();
                    toks[k] = s.clone();
                }
                *l = toks.join(" ");
            }
            Mutation::Insert(i, s) => lines.insert(i % (lines.len() + 1), s.clone()),
            Mutation::Swap(a, b) if !lines.is_empty() => lines.swap(a % n, b % n),
            _ => {}
        }
    }
    lines.join("\n")
}

/// Runs `cases` proptest cases of `strategy` through [`check_no_panic`] and
/// prints how many ran clean (visible with `--nocapture`).
fn fuzz<S: Strategy>(name: &str, cases: u32, strategy: S, to_text: impl Fn(S::Value) -> String) {
    let ran = AtomicUsize::new(0);
    let config = ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let result = runner.run(&strategy, |v| {
        check_no_panic(&to_text(v));
        ran.fetch_add(1, Ordering::Relaxed);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{name}: {e}");
    }
    let ran = ran.into_inner();
    eprintln!("fuzz {name}: {ran} cases ran clean");
    assert!(ran >= cases as usize);
}

#[test]
fn fuzz_random_bytes() {
    fuzz("random bytes", 3000, proptest::collection::vec(any::<u8>(), 0..2000), |b| {
        String::from_utf8_lossy(&b).into_owned()
    });
}

#[test]
fn fuzz_random_lines() {
    let line = prop_oneof![
        "[ -~]{0,80}",
        "Device:? ([a-z%/_-]{1,8} ){0,6}",
        "[a-z0-9]{1,8}( [0-9]{1,4}\\.[0-9]{2}){0,6}",
        Just(String::new())
    ];
    fuzz("random lines", 3000, proptest::collection::vec(line, 0..40), |l| l.join("\n"));
}

#[test]
fn fuzz_mutated_fixtures() {
    let texts = fixtures_text();
    let strategy = (0usize..texts.len(), proptest::collection::vec(mutation(), 1..8));
    fuzz("mutated fixtures", 6000, strategy, |(which, muts)| apply(&texts[which], &muts));
}

// ---------------------------------------------------------------- record

/// Detaches the loop device even when the test fails.
struct Loop(String);
impl Drop for Loop {
    fn drop(&mut self) {
        let _ = std::process::Command::new("losetup").args(["-d", &self.0]).status();
    }
}

/// Record a loop device while 32 MiB are written to it with O_DIRECT, then
/// parse and summarise the log: the totals must match what was written.
#[test]
fn record_loop_device_round_trip() {
    if !nix::unistd::geteuid().is_root() || std::process::Command::new("losetup").arg("--version").output().is_err() {
        fslab::testsupport::skip("record round trip needs root and losetup");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    std::fs::File::create(&img).unwrap().set_len(64 << 20).unwrap();
    let out = std::process::Command::new("losetup").args(["--find", "--show"]).arg(&img).output().unwrap();
    assert!(out.status.success(), "losetup: {}", String::from_utf8_lossy(&out.stderr));
    let dev = Loop(String::from_utf8(out.stdout).unwrap().trim().to_string());

    let writer = {
        let dev = dev.0.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            let st = std::process::Command::new("dd")
                .args(["if=/dev/zero", &format!("of={dev}"), "bs=1M", "count=32", "oflag=direct", "status=none"])
                .status()
                .unwrap();
            assert!(st.success());
        })
    };
    let mut buf = Vec::new();
    let opts = RecordOptions { device: dev.0.clone(), interval: Duration::from_secs(1), count: Some(3) };
    let n = record(&opts, &mut buf, &AtomicBool::new(false)).unwrap();
    writer.join().unwrap();
    assert_eq!(n, 3);
    let text = String::from_utf8(buf).unwrap();
    let log = parse_log(&text, false).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(log.layout, Some(Layout::Sysstat12_3));
    assert_eq!(log.reports, 4, "{text}");
    let s = summarize("rec", &log, &SummaryOptions::default());
    assert!(s.dropped_first_report);
    let d = &s.devices[0];
    assert_eq!(d.name, dev.0.trim_start_matches("/dev/"));
    assert_eq!((d.samples, d.interval_s), (3, 1.0), "{text}");
    // kB/s is printed with 2 decimals and the real intervals jitter by a few ms.
    assert!((d.written_mb - 32.0).abs() < 0.5, "written {} MB\n{text}", d.written_mb);
    assert!(d.read_mb < 0.5, "{text}");
    assert!(d.busy.mean_wareq_kb.is_none_or(|k| k > 100.0), "{text}");
}

// ---------------------------------------------------------------- streaming

/// Summaries read streaming from the file equal the in-memory ones, with
/// and without a busy window (which takes a second pass), for every
/// fixture and first-report mode.
#[test]
fn streaming_summaries_equal_in_memory_ones() {
    for name in GOOD.iter().chain(&["malformed-cut-row.log"]) {
        let path = fixture(name);
        let log = parse_file(&path, true).unwrap();
        for first_report in [FirstReport::Auto, FirstReport::Keep, FirstReport::Drop] {
            for window_s in [None, Some(2.0), Some(4.0)] {
                let opts = SummaryOptions { window_s, first_report, ..Default::default() };
                let label = path.display().to_string();
                let mem = summarize(&label, &log, &opts);
                let mut skipped = 0;
                let streamed = fslab::iostatlog::summarize_file(&path, &opts, true, &mut |_| skipped += 1).unwrap();
                assert_eq!(
                    serde_json::to_value(&streamed).unwrap(),
                    serde_json::to_value(&mem).unwrap(),
                    "{name} {opts:?}"
                );
                assert_eq!(skipped, log.warnings.len(), "{name}: skipped lines reported once");
            }
        }
    }
}

/// Writes a synthetic `iostat -x -t -k` log of about `bytes` (four devices,
/// one report a second), like scripts/gen-iostat-log.py.
fn synthetic_log(path: &Path, bytes: usize) {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(out, "Linux 5.19.0 (rpi) \t08/25/22 \t_aarch64_\t(4 CPU)\n").unwrap();
    let header: String = std::iter::once(format!("{:<16}", "Device"))
        .chain(fslab::iostatlog::RECORD_COLUMNS.iter().map(|c| format!(" {c:>9}")))
        .collect();
    let (mut written, mut k) = (0usize, 0u64);
    while written < bytes {
        let mut block = format!("08/25/22 {:02}:{:02}:{:02}\n{header}\n", k / 3600 % 24, k / 60 % 60, k % 60);
        for (d, dev) in ["mmcblk0", "nvme0n1", "sda", "sdb"].iter().enumerate() {
            block.push_str(&format!("{dev:<16}"));
            for c in 0..22u64 {
                block.push_str(&format!(" {:>9.2}", ((k * 31 + c * 7 + d as u64 * 13) % 500) as f64 + 0.25));
            }
            block.push('\n');
        }
        block.push('\n');
        out.write_all(block.as_bytes()).unwrap();
        written += block.len();
        k += 1;
    }
}

/// Runs fslab with `args` (output discarded) and returns its peak RSS in MiB.
fn peak_rss_mib(args: &[&std::ffi::OsStr]) -> f64 {
    // Measured by GNU time, not by wait4 here: a child's ru_maxrss starts at
    // the RSS of the process that spawned it (exec takes the high-water mark
    // of the vforked address space), and this test binary runs every
    // integration test, so it is often far above the bound by itself.
    const TIME: &str = "/usr/bin/time";
    if !std::path::Path::new(TIME).exists() {
        fslab::testsupport::skip("GNU time (/usr/bin/time) measures the peak RSS");
        return 0.0;
    }
    let out = std::process::Command::new(TIME)
        .args(["-f", "%M"])
        .arg(env!("CARGO_BIN_EXE_fslab"))
        .args(args)
        .stdout(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "fslab {args:?} failed: {stderr}");
    let kib: f64 = stderr.lines().last().and_then(|l| l.trim().parse().ok()).unwrap_or_else(|| panic!("{stderr}"));
    kib / 1024.0
}

/// Memory does not grow with the log: `iostat parse`, `summarize`,
/// `compare` and `report` of an 8 MB log (≈ 8,000 reports) stay far below
/// what holding its rows would take (the old parser held ≈ 29 bytes of RSS
/// per byte of log: ~230 MB here). Throughput and the 1 GB figures are
/// measured outside the tests (BENCHMARKS.md).
#[test]
fn iostat_commands_stay_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("big.log");
    synthetic_log(&log, 8 << 20);
    let html = dir.path().join("big.html");
    let l = log.as_os_str();
    let cases: Vec<Vec<&std::ffi::OsStr>> = vec![
        vec!["iostat".as_ref(), "parse".as_ref(), l],
        vec!["iostat".as_ref(), "parse".as_ref(), "--format".as_ref(), "csv".as_ref(), l],
        vec!["iostat".as_ref(), "summarize".as_ref(), "--window".as_ref(), "60".as_ref(), l],
        vec!["iostat".as_ref(), "compare".as_ref(), l, l],
        vec!["iostat".as_ref(), "report".as_ref(), l, "-o".as_ref(), html.as_os_str()],
    ];
    for args in cases {
        let rss = peak_rss_mib(&args);
        eprintln!("fslab {args:?}: peak RSS {rss:.1} MiB");
        assert!(rss < 48.0, "fslab {args:?} peaked at {rss:.1} MiB for an 8 MB log");
    }
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.len() < 4 << 20, "report of an 8 MB log is {} bytes", page.len());
}
