//! The `shell1`, `metadata` and `fio` workloads: validation of their keys,
//! fio report parsing on real captured output, and each workload run on a
//! real testbed (small sizes), including the shell1 fidelity check against
//! a plain shell loop.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fslab::experiment::{self, FioJob, WorkloadParams};
use fslab::metric::Metric;
use fslab::workload::fio::FioParams;
use fslab::workload::metadata::MetadataParams;
use fslab::workload::shell1::Shell1Params;
use fslab::workload::{fio, shell1, RunContext};

// ---------------------------------------------------------------- helpers

use crate::common::bed::*;

fn fixture(name: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fio").join(name)).unwrap()
}

// ------------------------------------------------------------- validation

#[test]
fn defaults_of_the_new_kinds() {
    assert_eq!(
        params("kind = \"shell1\""),
        WorkloadParams::Shell1(Shell1Params { concurrency: vec![1], duration: Duration::from_secs(60) })
    );
    assert_eq!(
        params("kind = \"shell1\"\nconcurrency = [1, 2, 4, 8]\nduration = \"5s\""),
        WorkloadParams::Shell1(Shell1Params { concurrency: vec![1, 2, 4, 8], duration: Duration::from_secs(5) })
    );
    assert_eq!(
        params("kind = \"metadata\""),
        WorkloadParams::Metadata(MetadataParams { files: 100_000, file_size: 0, dirs: 100, threads: 1, fsync: false })
    );
    assert_eq!(
        params("kind = \"metadata\"\nfiles = 5000\nfile_size = \"4k\"\ndirs = 10\nthreads = 4\nfsync = true"),
        WorkloadParams::Metadata(MetadataParams { files: 5000, file_size: 4096, dirs: 10, threads: 4, fsync: true })
    );
    let WorkloadParams::Fio(FioParams { job }) =
        params("kind = \"fio\"\njob = { rw = \"randwrite\", bs = \"4k\", size = \"64M\", direct = true, iodepth = 8 }")
    else {
        panic!()
    };
    let args = fio::Fio::new(job).job_args();
    assert_eq!(args, ["--name=job", "--bs=4k", "--direct=1", "--iodepth=8", "--rw=randwrite", "--size=64M"]);
    let WorkloadParams::Fio(FioParams { job }) = params("kind = \"fio\"\njob = { name = \"rnd\", rw = \"randread\" }")
    else {
        panic!()
    };
    assert_eq!(job, FioJob::Inline { name: "rnd".into(), options: vec![("rw".into(), "randread".into())] });
}

#[test]
fn jobfile_is_relative_to_the_experiment_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("seq.fio"), "[seq]\nrw=read\nsize=1M\n").unwrap();
    let path = dir.path().join("exp.toml");
    std::fs::write(&path, spec("fs = \"tmpfs\"", "kind = \"fio\"\njobfile = \"seq.fio\"")).unwrap();
    let exp = experiment::load(&path).unwrap();
    assert_eq!(
        exp.workloads[0].params,
        WorkloadParams::Fio(FioParams { job: FioJob::File(dir.path().join("seq.fio")) })
    );
    assert_eq!(exp.workloads[0].kind(), "fio");
}

#[test]
fn bad_keys_are_rejected_with_file_line_and_key() {
    // `kind` is on line 7, the first key after it on line 8.
    let cases: &[(&str, usize, &str)] = &[
        ("kind = \"shell1\"\nconcurrency = [1, 0]", 8, "concurrency"),
        ("kind = \"shell1\"\nconcurrency = []", 8, "concurrency"),
        ("kind = \"shell1\"\nconcurrency = [2, 2]", 8, "concurrency"),
        ("kind = \"shell1\"\nduration = \"10ms\"", 8, "duration"),
        ("kind = \"shell1\"\nfiles = 10", 8, "files"),
        ("kind = \"metadata\"\nthreads = 0", 8, "threads"),
        ("kind = \"metadata\"\nfiles = -5", 8, "files"),
        ("kind = \"metadata\"\nfiles = 10\ndirs = 20", 9, "dirs"),
        ("kind = \"metadata\"\nfile_size = \"2GiB\"", 8, "file_size"),
        ("kind = \"metadata\"\nconcurrency = [1]", 8, "concurrency"),
        ("kind = \"untar\"\nfsync = true", 8, "fsync"),
        ("kind = \"fio\"\njob = { rw = \"read\" }\njobfile = \"x.fio\"", 8, "job"),
        ("kind = \"fio\"\njobfile = \"missing.fio\"", 8, "jobfile"),
        ("kind = \"fio\"\njob = { rw = [\"read\"] }", 8, "job.rw"),
        ("kind = \"fio\"\njob = { output = \"x\" }", 8, "job.output"),
        ("kind = \"fio\"\njob = { name = \"a b\" }", 8, "job.name"),
        ("kind = \"fio\"\nduration = \"5s\"", 8, "duration"),
        ("kind = \"fio\"", 7, "job"),
    ];
    for (workload, line, key) in cases {
        let err = error_of(workload);
        assert_points_at(&err, *line, key);
    }
    let err = error_of("kind = \"fsmark\"");
    assert!(err.contains("shell1, metadata, fio"), "{err}");
}

// ------------------------------------------------------------ shell1 input

#[test]
fn shell1_input_is_deterministic_and_unixbench_sized() {
    let text = shell1::input_text();
    assert_eq!(text, shell1::input_text());
    assert_eq!(text.lines().count(), 360);
    assert!((8000..=9000).contains(&text.len()), "{} bytes", text.len());
    assert!(text.starts_with("#!/bin/sh\n"));
    let the = text.lines().filter(|l| l.contains("the")).count();
    assert!(the > 30, "only {the} lines for `grep the`");
    assert_eq!(shell1::parse_loops("x\nfslab-shell1-loops 42\n"), Some(42));
    assert_eq!(shell1::parse_loops("nothing"), None);
}

// ------------------------------------------------------- fio report parsing

fn value(metrics: &[Metric], name: &str) -> f64 {
    metric(metrics, name).value
}

#[test]
fn fio_report_with_read_and_write() {
    let text = fixture("randrw.json");
    let json = fio::extract_json(&text).unwrap();
    let m = fio::parse_report(&json).unwrap();
    let raw: serde_json::Value = serde_json::from_str(&text).unwrap();
    let job = &raw["jobs"][0];
    for dir in ["read", "write"] {
        assert_eq!(value(&m, &format!("mixed/{dir}/bw_kib_s")), job[dir]["bw"].as_f64().unwrap());
        assert_eq!(value(&m, &format!("mixed/{dir}/iops")), job[dir]["iops"].as_f64().unwrap());
        assert_eq!(
            value(&m, &format!("mixed/{dir}/clat_mean_us")),
            job[dir]["clat_ns"]["mean"].as_f64().unwrap() / 1000.0
        );
        let p = &job[dir]["clat_ns"]["percentile"];
        assert_eq!(value(&m, &format!("mixed/{dir}/clat_p50_us")), p["50.000000"].as_f64().unwrap() / 1000.0);
        assert_eq!(value(&m, &format!("mixed/{dir}/clat_p99_us")), p["99.000000"].as_f64().unwrap() / 1000.0);
        assert_eq!(value(&m, &format!("mixed/{dir}/clat_p99_9_us")), p["99.900000"].as_f64().unwrap() / 1000.0);
        assert!(value(&m, &format!("mixed/{dir}/bw_kib_s")) > 0.0);
    }
    assert!(metric(&m, "mixed/read/bw_kib_s").higher_is_better);
    assert!(!metric(&m, "mixed/read/clat_p99_us").higher_is_better);
    assert_eq!(value(&m, "mixed/usr_cpu_pct"), job["usr_cpu"].as_f64().unwrap());
    assert_eq!(value(&m, "mixed/sys_cpu_pct"), job["sys_cpu"].as_f64().unwrap());
    assert!(!m.iter().any(|x| x.name.contains("/trim/")), "trim did no I/O");
}

#[test]
fn fio_report_with_two_jobs() {
    let m = fio::parse_report(&fio::extract_json(&fixture("two-jobs.json")).unwrap()).unwrap();
    assert!(value(&m, "randw/write/iops") > 0.0);
    assert!(value(&m, "seqr/read/bw_kib_s") > 0.0);
    assert!(!m.iter().any(|x| x.name.starts_with("randw/read/") || x.name.starts_with("seqr/write/")));
}

#[test]
fn fio_report_with_text_around_the_json() {
    let clean = fio::parse_report(&fio::extract_json(&fixture("randrw.json")).unwrap()).unwrap();
    let noisy_text = fixture("garbage-around.txt");
    assert!(serde_json::from_str::<serde_json::Value>(&noisy_text).is_err(), "fixture must not be plain JSON");
    let noisy = fio::parse_report(&fio::extract_json(&noisy_text).unwrap()).unwrap();
    assert_eq!(clean, noisy);
}

#[test]
fn fio_note_printed_on_stdout_before_the_json() {
    // Real fio 3.33 output: with a sync engine and iodepth > 1 fio prints a
    // "note:" line on stdout ahead of the JSON.
    let text = fixture("randrw-note-on-stdout.txt");
    assert!(text.starts_with("note: "));
    let m = fio::parse_report(&fio::extract_json(&text).unwrap()).unwrap();
    assert!(value(&m, "mixed/read/iops") > 0.0 && value(&m, "mixed/write/iops") > 0.0, "{m:?}");
}

#[test]
fn fio_output_without_a_report_is_a_clear_error() {
    let err = format!("{:#}", fio::extract_json("fio: engine libaio not loadable\n{ \"x\": 1 }\n").unwrap_err());
    assert!(err.contains("no fio JSON report"), "{err}");
    assert!(err.contains("libaio"), "{err}");
}

/// Run in a child test process whose PATH has no fio (see below).
#[test]
#[ignore = "run by fio_missing_is_a_clear_error with PATH emptied"]
fn fio_missing_child() {
    let w = "kind = \"fio\"\njob = { rw = \"read\", size = \"1M\" }";
    let exp = experiment::parse(&spec("fs = \"tmpfs\"", w), None).unwrap();
    let mut fio = exp.workloads[0].build(exp.seed);
    let dir = tempfile::tempdir().unwrap();
    let err = format!("{:#}", fio.prepare_inputs(dir.path()).unwrap_err());
    assert!(err.contains("fio, which is not installed"), "{err}");
    let ctx = RunContext::new(dir.path(), dir.path().join("cache"));
    let err = format!("{:#}", fio.run(&ctx).unwrap_err());
    assert!(err.contains("install the `fio` package"), "{err}");
}

#[test]
fn fio_missing_is_a_clear_error() {
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "fio_missing_child", "--ignored", "--test-threads=1"])
        .env("PATH", "/nonexistent")
        .status()
        .unwrap();
    assert!(status.success(), "fio_missing_child failed");
}

// ------------------------------------------------------------ real testbeds

/// Testbed tests run one at a time: they measure, and this machine has 2 cores.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[test]
fn shell1_runs_on_tmpfs_at_two_levels() {
    if !common::root_or_skip() {
        return;
    }
    let _serial = serial();
    let bed = Bed::new("fs = \"tmpfs\"\nsize = \"64MiB\"");
    let m = run_on(&bed, "kind = \"shell1\"\nconcurrency = [1, 2]\nduration = \"2s\"");
    let one = metric(&m, "shell1-1");
    let two = metric(&m, "shell1-2");
    assert_eq!(one.unit, "lpm");
    assert!(one.higher_is_better);
    // A loop is ~10 short processes: hundreds to thousands per minute on any machine.
    assert!(one.value > 60.0 && one.value < 1e6, "{m:?}");
    assert!(two.value > 60.0, "{m:?}");
    assert_eq!(leftovers(&bed.root()), Vec::<String>::new());
}

/// Loops per minute of a plain `/bin/sh` loop running the same pipeline in
/// `dir` for `seconds`, timed by this test (not by fslab).
fn plain_loop_lpm(dir: &Path, seconds: f64) -> f64 {
    let script = format!("while :; do\n{}echo done\ndone\n", shell1::PIPELINE);
    let mut child = Command::new("/bin/sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if line.is_err() || tx.send(Instant::now()).is_err() {
                break;
            }
        }
    });
    let end = start + Duration::from_secs_f64(seconds);
    let mut loops = 0u64;
    while let Ok(at) = rx.recv_timeout(end.saturating_duration_since(Instant::now()).max(Duration::from_millis(1))) {
        if at > end {
            break;
        }
        loops += 1;
        if Instant::now() >= end {
            break;
        }
    }
    let pid = child.id();
    child.kill().unwrap();
    child.wait().unwrap();
    // Let the killed loop's children finish, then remove its files ($$ is its pid).
    std::thread::sleep(Duration::from_millis(200));
    for p in ["sort", "od", "grep", "wc"] {
        let _ = std::fs::remove_file(dir.join(format!("{p}.{pid}")));
    }
    loops as f64 * 60.0 / seconds
}

/// fslab's `shell1-1` against a plain `/bin/sh` loop of the same pipeline
/// in the same directory. This 2-core machine is shared and its load swings
/// by ±30% within seconds, so the two are measured over the *same* 3 s
/// (both loops at once, twice) and the ratio must be within ±20%. Back-to-back
/// 3 s slices (plain, fslab, fslab, plain) are measured and printed too.
#[test]
fn shell1_fidelity_against_a_plain_shell_loop() {
    if !common::root_or_skip() {
        return;
    }
    let _serial = serial();
    let bed = Bed::new("fs = \"ext4\"\nsize = \"128MiB\"");
    let mut w = shell1::Shell1::new(vec![1], Duration::from_secs(3));
    let ctx = bed.ctx();
    fslab::workload::Workload::prepare(&mut w, &ctx).unwrap();
    let root = bed.root();
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;

    let (mut fslab_same, mut plain_same) = (Vec::new(), Vec::new());
    for _ in 0..2 {
        let (f, p) = std::thread::scope(|s| {
            let plain = s.spawn(|| plain_loop_lpm(&root, 3.0));
            let fslab = w.measure(&ctx, 1);
            (fslab, plain.join().unwrap())
        });
        fslab_same.push(f.unwrap());
        plain_same.push(p);
    }
    let (mut fslab_seq, mut plain_seq) = (Vec::new(), Vec::new());
    for fslab_turn in [false, true, true, false] {
        if fslab_turn {
            fslab_seq.push(w.measure(&ctx, 1).unwrap());
        } else {
            plain_seq.push(plain_loop_lpm(&root, 3.0));
        }
    }
    fslab::workload::Workload::cleanup(&mut w, &ctx).unwrap();
    let ratio = mean(&fslab_same) / mean(&plain_same);
    let ratio_seq = mean(&fslab_seq) / mean(&plain_seq);
    eprintln!(
        "shell1 fidelity, same 3 s: fslab {fslab_same:.0?} lpm, plain {plain_same:.0?} lpm, ratio {ratio:.3}; \
         back to back: fslab {fslab_seq:.0?} lpm, plain {plain_seq:.0?} lpm, ratio {ratio_seq:.3}"
    );
    assert!(
        (0.8..=1.2).contains(&ratio),
        "fslab {fslab_same:.0?} lpm vs plain {plain_same:.0?} lpm (ratio {ratio:.3})"
    );
}

#[test]
fn shell1_copies_stop_at_the_duration() {
    if !common::root_or_skip() {
        return;
    }
    let _serial = serial();
    let bed = Bed::new("fs = \"tmpfs\"\nsize = \"64MiB\"");
    let start = Instant::now();
    run_on(&bed, "kind = \"shell1\"\nconcurrency = [4]\nduration = \"2s\"");
    let took = start.elapsed().as_secs_f64();
    assert!((2.0..4.0).contains(&took), "4 copies for 2s took {took:.2}s");
}

#[test]
fn metadata_create_stat_unlink_on_ext4() {
    if !common::root_or_skip() {
        return;
    }
    let _serial = serial();
    let bed = Bed::new("fs = \"ext4\"\nsize = \"128MiB\"");
    let m = run_on(&bed, "kind = \"metadata\"\nfiles = 3000\nfile_size = \"1k\"\ndirs = 10\nthreads = 2");
    for phase in ["create", "stat", "unlink"] {
        let rate = metric(&m, &format!("{phase}_files_per_s"));
        let secs = metric(&m, &format!("{phase}_s"));
        assert!(rate.higher_is_better && !secs.higher_is_better);
        assert!(rate.value > 100.0, "{m:?}");
        assert!((rate.value * secs.value - 3000.0).abs() < 1.0, "{m:?}");
    }
    assert_eq!(leftovers(&bed.root()), Vec::<String>::new());
}

#[test]
fn metadata_with_fsync_and_empty_files_on_tmpfs() {
    if !common::root_or_skip() {
        return;
    }
    let _serial = serial();
    let bed = Bed::new("fs = \"tmpfs\"\nsize = \"64MiB\"");
    let m = run_on(&bed, "kind = \"metadata\"\nfiles = 2000\ndirs = 7\nfsync = true");
    assert!(metric(&m, "create_files_per_s").value > 100.0, "{m:?}");
    assert!(metric(&m, "stat_files_per_s").value > metric(&m, "create_files_per_s").value / 10.0, "{m:?}");
    assert_eq!(leftovers(&bed.root()), Vec::<String>::new());
}

#[test]
fn fio_inline_job_on_tmpfs() {
    if !common::root_or_skip() {
        return;
    }
    let _serial = serial();
    let bed = Bed::new("fs = \"tmpfs\"\nsize = \"64MiB\"");
    let m = run_on(
        &bed,
        "kind = \"fio\"\njob = { name = \"rw\", rw = \"randwrite\", bs = \"4k\", size = \"4M\", ioengine = \"psync\" }",
    );
    assert!(value(&m, "rw/write/bw_kib_s") > 0.0, "{m:?}");
    assert!(value(&m, "rw/write/iops") > 0.0);
    assert!(value(&m, "rw/write/clat_p99_us") >= value(&m, "rw/write/clat_p50_us"));
    assert!(!m.iter().any(|x| x.name.starts_with("rw/read/")));
    // fio's data file is removed by cleanup.
    assert_eq!(leftovers(&bed.root()), Vec::<String>::new());
}

#[test]
fn fio_jobfile_on_ext4_with_two_jobs() {
    if !common::root_or_skip() {
        return;
    }
    let _serial = serial();
    let bed = Bed::new("fs = \"ext4\"\nsize = \"128MiB\"");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("two.fio"),
        "[global]\nsize=4M\nioengine=psync\n[seqw]\nrw=write\nbs=64k\n[randr]\nstonewall\nrw=randread\nbs=4k\n",
    )
    .unwrap();
    let path = dir.path().join("exp.toml");
    std::fs::write(&path, spec("fs = \"tmpfs\"", "kind = \"fio\"\njobfile = \"two.fio\"")).unwrap();
    let exp = experiment::load(&path).unwrap();
    let mut w = exp.workloads[0].build(exp.seed);
    let ctx = bed.ctx();
    w.prepare_inputs(&ctx.cache_dir).unwrap();
    let result = w.run(&ctx);
    w.cleanup(&ctx).unwrap();
    let m = result.unwrap();
    assert!(value(&m, "seqw/write/bw_kib_s") > 0.0, "{m:?}");
    assert!(value(&m, "randr/read/iops") > 0.0, "{m:?}");
    assert_eq!(leftovers(&bed.root()), Vec::<String>::new());
}
