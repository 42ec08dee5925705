//! Block-trace monitor: format-file parsing and binary records on captured
//! fixtures, and real traces of a loop-device testbed.

use crate::common;

use std::path::Path;
use std::process::Command;

use fslab::experiment::{self, VariantConfig};
use fslab::monitor::blocktrace::{
    kernel_dev, parse_format, parse_rwbs, Accumulator, BlockDecoder, BlockEvent, BlockTracer, EventFormat, EventKind,
    PageLayout,
};
use fslab::sys::blockdev::DevNum;
use fslab::testbed::Testbed;

const FIX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/blocktrace");

fn fixture(name: &str) -> String {
    std::fs::read_to_string(Path::new(FIX).join(name)).unwrap()
}

fn formats() -> (EventFormat, EventFormat, PageLayout) {
    (
        parse_format(&fixture("block_rq_issue.format"), "issue").unwrap(),
        parse_format(&fixture("block_rq_complete.format"), "complete").unwrap(),
        PageLayout::parse(&fixture("header_page"), "header_page").unwrap(),
    )
}

/// Writes `value` into `rec` at the field's offset with the field's size.
fn put(rec: &mut [u8], fmt: &EventFormat, name: &str, value: u64) {
    let f = fmt.field(name).unwrap();
    let bytes = value.to_ne_bytes();
    rec[f.offset..f.offset + f.size].copy_from_slice(&bytes[..f.size]);
}

/// One synthetic record laid out purely from the format file.
fn record(fmt: &EventFormat, dev: u64, sector: u64, bytes: u64, rwbs: &str) -> Vec<u8> {
    let len = fmt.fields.iter().map(|f| f.offset + f.size).max().unwrap();
    let mut rec = vec![0u8; (len + 3) & !3];
    put(&mut rec, fmt, "common_type", u64::from(fmt.id.unwrap()));
    put(&mut rec, fmt, "dev", dev);
    put(&mut rec, fmt, "sector", sector);
    put(&mut rec, fmt, "nr_sector", bytes / 512);
    if fmt.field("bytes").is_some() {
        put(&mut rec, fmt, "bytes", bytes);
    }
    let f = fmt.field("rwbs").unwrap();
    rec[f.offset..f.offset + rwbs.len()].copy_from_slice(rwbs.as_bytes());
    rec
}

/// A ring-buffer page as `trace_pipe_raw` hands it out, using the
/// `header_page` fixture's offsets: (delta ns, payload) events, with a time
/// extend, a discarded (padding) event and one large-format event mixed in.
fn page(events: &[(u32, Vec<u8>)]) -> Vec<u8> {
    let hp = parse_format(&fixture("header_page"), "header_page").unwrap();
    let ts = hp.field("timestamp").unwrap();
    let commit = hp.field("commit").unwrap();
    let data_off = hp.field("data").unwrap().offset;
    let mut data = Vec::new();
    // Time extend of 2^27 ns.
    data.extend_from_slice(&30u32.to_ne_bytes());
    data.extend_from_slice(&1u32.to_ne_bytes());
    for (i, (delta, payload)) in events.iter().enumerate() {
        assert_eq!(payload.len() % 4, 0);
        if i == 1 {
            // A discarded event: padding with a non-zero delta and a length.
            data.extend_from_slice(&(29u32 | (1 << 5)).to_ne_bytes());
            data.extend_from_slice(&8u32.to_ne_bytes());
            data.extend_from_slice(&[0u8; 4]);
        }
        if i == 2 || payload.len() > 28 * 4 {
            data.extend_from_slice(&(delta << 5).to_ne_bytes());
            data.extend_from_slice(&(payload.len() as u32 + 4).to_ne_bytes());
        } else {
            data.extend_from_slice(&(((payload.len() / 4) as u32) | (delta << 5)).to_ne_bytes());
        }
        data.extend_from_slice(payload);
    }
    let mut p = vec![0u8; 4096];
    p[ts.offset..ts.offset + 8].copy_from_slice(&1_000_000u64.to_ne_bytes());
    p[commit.offset..commit.offset + 8].copy_from_slice(&(data.len() as u64).to_ne_bytes());
    p[data_off..data_off + data.len()].copy_from_slice(&data);
    p
}

#[test]
fn format_fixture_fields_are_found_by_name() {
    let (issue, complete, _) = formats();
    for f in [&issue, &complete] {
        for name in ["common_type", "dev", "sector", "nr_sector", "rwbs"] {
            assert!(f.field(name).is_some(), "{} lacks {name}", f.name);
        }
    }
    assert!(issue.field("bytes").is_some());
    assert!(complete.field("error").is_some());
    assert_ne!(issue.id, complete.id);
}

#[test]
fn synthetic_binary_records_decode_and_summarise() {
    let (issue, complete, layout) = formats();
    let decoder = BlockDecoder::new(&issue, &complete).unwrap();
    let dev = kernel_dev(DevNum { major: 7, minor: 3 });
    let other = kernel_dev(DevNum { major: 8, minor: 0 });
    let events = vec![
        (10, record(&issue, dev, 100, 65536, "WS")),
        (5, record(&issue, dev, 300, 4096, "R")),
        (1000, record(&complete, dev, 100, 65536, "WS")),
        (2000, record(&complete, dev, 300, 4096, "R")),
        (10, record(&issue, dev, 0, 0, "FF")),
        (10, record(&issue, dev, 900, 8192, "FWFSM")),
        (10, record(&issue, other, 5, 512, "W")),
        (3000, record(&complete, dev, 900, 8192, "FWFSM")),
    ];
    let p = page(&events);
    let mut decoded = Vec::new();
    let lost = layout.parse_page(&p, |ts, data| decoded.extend(decoder.decode(ts, data)));
    assert_eq!(lost, 0);
    assert_eq!(decoded.len(), events.len());
    // Page stamp + time extend + deltas (+1 for the discarded event).
    assert_eq!(decoded[0].ts_ns, 1_000_000 + (1 << 27) + 10);
    assert_eq!(decoded[1].ts_ns, decoded[0].ts_ns + 1 + 5);
    assert_eq!(decoded[2].kind, EventKind::Complete);
    assert_eq!((decoded[0].sector, decoded[0].bytes, decoded[0].rwbs), (100, 65536, parse_rwbs("WS")));

    let mut acc = Accumulator::new(Some(dev));
    decoded.iter().for_each(|e| acc.add(e));
    assert_eq!(acc.other_devices(), 1);
    let s = acc.summary();
    assert_eq!(s.total_events, 7);
    assert_eq!(s.write.requests, 2);
    assert_eq!(s.read.requests, 1);
    assert_eq!(
        s.write.size_histogram.iter().map(|b| (b.min_bytes, b.count)).collect::<Vec<_>>(),
        vec![(8192, 1), (65536, 1)]
    );
    assert_eq!(s.read.latency.as_ref().unwrap().p50_us, 3.0);
    assert_eq!(s.write.latency.as_ref().unwrap().count, 2);
    assert_eq!((s.flags.sync, s.flags.meta, s.flags.flush, s.flags.fua), (2, 1, 2, 1));
    assert_eq!(s.unmatched_completions, 0);

    // Lost-event flags in `commit`, with the count stored after the data.
    let mut p = page(&events[..1]);
    let hp = parse_format(&fixture("header_page"), "h").unwrap();
    let (c, d) = (hp.field("commit").unwrap().offset, hp.field("data").unwrap().offset);
    let size = u64::from_ne_bytes(p[c..c + 8].try_into().unwrap());
    p[c..c + 8].copy_from_slice(&(size | (1 << 31) | (1 << 30)).to_ne_bytes());
    p[d + size as usize..d + size as usize + 8].copy_from_slice(&42u64.to_ne_bytes());
    let mut n = 0;
    assert_eq!(layout.parse_page(&p, |_, _| n += 1), 42);
    assert_eq!(n, 1);
}

/// The `block_rq_issue`/`block_rq_complete` lines of tracefs' text
/// `trace` (`… 3199.595171: block_rq_issue: 7,0 WSM 524288 () 3932168 +
/// 1024 …`) as events.
fn text_events(text: &str) -> Vec<BlockEvent> {
    let event = |line: &str| -> Option<BlockEvent> {
        let (head, event) = line.split_once(": block_rq_")?;
        let ts: f64 = head.rsplit(' ').next()?.parse().ok()?;
        let mut words = event.split_whitespace();
        let kind = match words.next()? {
            "issue:" => EventKind::Issue,
            "complete:" => EventKind::Complete,
            _ => return None,
        };
        let (major, minor) = words.next()?.split_once(',')?;
        let rwbs = parse_rwbs(words.next()?);
        if kind == EventKind::Issue {
            words.next()?; // bytes
        }
        words.next()?; // the command, `()`
        let sector = words.next()?.parse().ok()?;
        words.next()?; // `+`
        let nr_sector: u64 = words.next()?.parse().ok()?;
        let dev = kernel_dev(DevNum { major: major.parse().ok()?, minor: minor.parse().ok()? });
        Some(BlockEvent {
            kind,
            ts_ns: (ts * 1e9).round() as u64,
            dev,
            sector,
            nr_sector,
            bytes: nr_sector * 512,
            rwbs,
        })
    };
    text.lines().filter(|l| !l.starts_with('#')).map(|l| event(l).unwrap_or_else(|| panic!("{l}"))).collect()
}

/// A real trace of the quickstart's sync and unmount (issue 28 item 6):
/// flushes are issued at sector 0 and complete at sector `u64::MAX`, and
/// an fsync's empty pre-flush completes at sector 0 unissued. Matched by
/// sector alone those took the place of umount's superblock write at
/// sector 0 (its latency lost, its issue left for a later completion to
/// match) and counted as unmatched; every write is matched now.
#[test]
fn a_real_sync_with_flushes_at_sector_zero_matches_every_write() {
    let events = text_events(&fixture("quickstart-sync.trace"));
    let dev = kernel_dev(DevNum { major: 7, minor: 0 });
    let mut acc = Accumulator::new(Some(dev));
    events.iter().for_each(|e| acc.add(e));
    let s = acc.summary();
    assert_eq!((s.total_events, s.write.requests, s.read.requests, s.flags.flush), (65, 17, 0, 11));
    let latency = s.write.latency.clone().unwrap();
    assert_eq!(latency.count, 17, "every write issued is matched to its completion");
    assert_eq!(s.unmatched_completions, 0, "a flush or an empty pre-flush is not a write left unmatched");
    // jbd2's commit behind the card's garbage collection: 1.27 s.
    assert!((latency.max_us - 1_270_229.0).abs() < 1.0, "{latency:?}");
    assert!(s.metrics().iter().all(|m| m.name != "blk/write_p99_ms"), "17 latencies make no p99");
}

fn variant(body: &str) -> VariantConfig {
    let text = format!(
        "name = \"t\"\n[[variant]]\nname = \"v\"\n{body}\n[[workload]]\nkind = \"command\"\ncommand = \"true\"\n"
    );
    experiment::parse(&text, None).unwrap().variants.remove(0)
}

/// Serialises the tests that trace real devices (2-core CI box).
static REAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn real_trace_of_direct_64k_writes() {
    if !common::root_or_skip() {
        return;
    }
    let _g = REAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::workdir("fslab-bt-test");
    let mut bed = Testbed::provision(&variant("fs = \"ext4\"\nsize = \"128MiB\"").testbed, work.path(), None).unwrap();
    let device = bed.device.clone().unwrap();
    let tracer = BlockTracer::start(&device).unwrap();
    let instance = tracer.instance_dir().to_path_buf();
    assert!(instance.is_dir());
    let out = Command::new("dd")
        .args(["if=/dev/zero", "bs=64k", "count=128", "oflag=direct"])
        .arg(format!("of={}", bed.root().join("data").display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let s = tracer.stop();
    assert!(!instance.exists(), "trace instance left behind");
    bed.teardown().unwrap();

    eprintln!("{}", serde_json::to_string(&s).unwrap());
    assert!(s.enabled, "{s:?}");
    assert_eq!(s.device, Some(DevNum::of(&device).unwrap().to_string()), "{s:?}");
    assert_eq!(s.other_device_events, 0, "the kernel filter let other devices through");
    let dominant = s.write.dominant_bucket().unwrap();
    assert_eq!(dominant.min_bytes, 65536, "{:?}", s.write.size_histogram);
    assert!(dominant.count >= 128, "{:?}", s.write.size_histogram);
    let lat = s.write.latency.as_ref().unwrap();
    assert!(lat.p50_us > 0.0 && lat.p90_us > 0.0 && lat.p99_us > 0.0 && lat.p99_9_us > 0.0, "{lat:?}");
    assert!(lat.p50_us <= lat.p99_9_us);
    assert_eq!(s.lost_events, 0);
}

#[test]
fn trace_instance_is_removed_on_panic() {
    if !common::root_or_skip() {
        return;
    }
    let _g = REAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::workdir("fslab-bt-test");
    let mut bed = Testbed::provision(&variant("fs = \"ext4\"\nsize = \"64MiB\"").testbed, work.path(), None).unwrap();
    let device = bed.device.clone().unwrap();
    let seen = std::sync::Mutex::new(None);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let tracer = BlockTracer::start(&device).unwrap();
        *seen.lock().unwrap() = Some(tracer.instance_dir().to_path_buf());
        panic!("workload blew up");
    }));
    assert!(r.is_err());
    bed.teardown().unwrap();
    let instance = seen.into_inner().unwrap().unwrap();
    assert!(!instance.exists(), "{} survived the panic", instance.display());
}

#[test]
fn runner_stores_blocktrace_and_fs_snapshots_as_extras() {
    if !common::root_or_skip() {
        return;
    }
    let _g = REAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = common::workdir("fslab-bt-run");
    let text = format!(
        "name = \"bt\"\nrepetitions = 1\nworkdir = \"{}\"\n\
         [[variant]]\nname = \"e\"\nfs = \"ext4\"\nsize = \"128MiB\"\n\
         [[workload]]\nkind = \"command\"\ncommand = 'dd if=/dev/zero of=f bs=64k count=64 oflag=direct 2>/dev/null && sync'\n",
        dir.path().join("work").display()
    );
    // Run by the binary: its pid marks its trace instances, so the leak check
    // below cannot see other tests' instances in this process.
    let spec = common::write_spec(dir.path(), "bt.toml", &text);
    let db = dir.path().join("r.db");
    let child = std::process::Command::new(common::fslab_bin())
        .arg("run")
        .arg(&spec)
        .arg("--db")
        .arg(&db)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let store = fslab::store::Store::open(&db).unwrap();
    let id = store.latest_experiment().unwrap().unwrap();
    let runs = store.runs(id).unwrap();
    assert_eq!(runs.len(), 1);
    let extras = store.run_extras(runs[0].id).unwrap();
    let kinds: Vec<&str> = extras.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds, ["blocktrace", "fs_before", "fs_after", "fs_delta", "place"], "{extras:?}");
    let bt: fslab::monitor::blocktrace::BlockTraceSummary = serde_json::from_value(extras[0].1.clone()).unwrap();
    assert!(bt.enabled, "{bt:?}");
    assert!(bt.write.requests >= 64, "{bt:?}");
    assert_eq!(extras[1].1["fstype"], "ext4");
    assert_eq!(extras[3].1["data"]["kind"], "ext4");
    let ours = format!("fslab-tb-{pid}-");
    let left: Vec<_> = fslab::monitor::blocktrace::marker_instances()
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(&ours)))
        .collect();
    assert!(left.is_empty(), "trace instances left behind: {left:?}");
}

#[test]
fn cleanup_removes_stale_trace_instances_only() {
    if !common::root_or_skip() {
        return;
    }
    let _g = REAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::workdir("fslab-bt-test");
    let mut bed = Testbed::provision(&variant("fs = \"ext4\"\nsize = \"64MiB\"").testbed, work.path(), None).unwrap();
    let tracer = BlockTracer::start(&bed.device.clone().unwrap()).unwrap();
    let mine = tracer.instance_dir().to_path_buf();
    // A leftover of a process that no longer exists (above any pid_max).
    let stale = mine.parent().unwrap().join("fslab-tb-999999999-bt0");
    std::fs::create_dir(&stale).unwrap();
    let report = fslab::cleanup::cleanup(&[], false);
    let stale_gone = !stale.exists();
    let mine_kept = mine.exists();
    let s = tracer.stop();
    bed.teardown().unwrap();
    assert!(stale_gone, "{report:?}");
    assert!(mine_kept, "{report:?}");
    assert!(report.in_use.iter().any(|l| l.contains(&*mine.to_string_lossy())), "{report:?}");
    assert!(s.enabled);
}

/// CPU time (user + system) of this whole process so far, in seconds.
fn self_cpu_s() -> f64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable rusage.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) }, 0);
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// Busy and total jiffies of all CPUs from `/proc/stat`.
fn system_jiffies() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/stat").unwrap();
    let v: Vec<u64> = text.lines().next().unwrap().split_whitespace().skip(1).map(|x| x.parse().unwrap()).collect();
    let idle = v[3] + v[4];
    let total: u64 = v.iter().take(8).sum();
    (total - idle, total)
}

/// Measures the monitor's CPU cost on fio 4k random writes (O_DIRECT,
/// iodepth 16), alternating off/on: `cargo test --test blocktrace -- --ignored --nocapture`.
#[test]
#[ignore]
fn overhead_on_fio_4k_randwrite() {
    if !common::root_or_skip() {
        return;
    }
    let _g = REAL.lock().unwrap_or_else(|e| e.into_inner());
    let secs: u64 = std::env::var("FSLAB_BT_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(20);
    let work = common::workdir("fslab-bt-overhead");
    let mut bed = Testbed::provision(&variant("fs = \"ext4\"\nsize = \"1GiB\"").testbed, work.path(), None).unwrap();
    let device = bed.device.clone().unwrap();
    let file = bed.root().join("fio.dat");
    for (i, on) in [false, true, false, true, false, true].into_iter().enumerate() {
        let cpu0 = self_cpu_s();
        let (b0, t0) = system_jiffies();
        let tracer = on.then(|| BlockTracer::start(&device).unwrap());
        let out = Command::new("fio")
            .args(["--name=rw", "--rw=randwrite", "--bs=4k", "--size=256M", "--direct=1", "--ioengine=libaio"])
            .args(["--iodepth=16", "--time_based", &format!("--runtime={secs}"), "--output-format=json"])
            .arg(format!("--filename={}", file.display()))
            .output()
            .unwrap();
        let summary = tracer.map(BlockTracer::stop);
        let cpu = self_cpu_s() - cpu0;
        let (b1, t1) = system_jiffies();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let job = &json["jobs"][0];
        let iops = job["write"]["iops"].as_f64().unwrap();
        let fio_cpu = job["usr_cpu"].as_f64().unwrap() + job["sys_cpu"].as_f64().unwrap();
        let busy = (b1 - b0) as f64 / (t1 - t0) as f64 * 100.0;
        let events = summary.as_ref().map_or(0, |s| s.total_events);
        let lost = summary.as_ref().map_or(0, |s| s.lost_events);
        println!(
            "run {i} monitor={} iops={iops:.0} fslab_cpu_s={cpu:.3} fslab_cpu_pct={:.2} fio_cpu_pct={fio_cpu:.1} system_busy_pct={busy:.1} events={events} lost={lost}",
            if on { "on " } else { "off" },
            cpu / secs as f64 * 100.0
        );
    }
    bed.teardown().unwrap();
}
