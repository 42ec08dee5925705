//! The `shell1`, `metadata` and `fio` workloads: validation of their keys,
//! fio report parsing on real captured output, and each workload run on a
//! real testbed (small sizes), including shell1's process structure and
//! rate against UnixBench's own procedure.

use crate::common;

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

/// Loops per minute of UnixBench's procedure, with this test as `looper`:
/// like `looper.c`, fork and exec `/bin/sh multi.sh PER_LOOP` and wait,
/// again and again, for `seconds`; an iteration still running at the end is
/// not counted, and the rate is counts over the elapsed time, as UnixBench's
/// `Run` computes it. The scripts are the ones fslab's `prepare` wrote.
fn unixbench_looper_lpm(dir: &Path, seconds: f64, per_loop: u32) -> f64 {
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(seconds);
    let mut loops = 0u64;
    loop {
        let status = Command::new("/bin/sh")
            .arg(format!("./{}", shell1::MULTI_NAME))
            .arg(per_loop.to_string())
            .current_dir(dir)
            .stdin(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "multi.sh failed: {status}");
        if Instant::now() > end {
            break;
        }
        loops += 1;
    }
    loops as f64 * 60.0 / start.elapsed().as_secs_f64().max(seconds)
}

/// A benchmark, not part of the suite: fslab's `shell1-1` against
/// UnixBench's own procedure (this test acting as `looper`) in the same
/// directory, over the *same* 3 s (both at once, twice); the ratio must be
/// within ±15%. On this shared 2-core machine, under load, two loads sharing
/// the CPUs converge in rate whatever they cost (the old single-shell loop
/// also passed then), so the process structure is what the suite checks
/// (`shell1_has_unixbench_s_process_structure`) and the rate is measured on a
/// quiet machine against UnixBench's real `looper` (BENCHMARKS.md).
/// Run: `cargo test --test it shell1_scores -- --ignored --nocapture`.
#[test]
#[ignore = "benchmark: needs a quiet machine"]
fn shell1_scores_like_unixbench_s_procedure() {
    if !common::root_or_skip() {
        return;
    }
    let _serial = serial();
    let bed = Bed::new("fs = \"tmpfs\"\nsize = \"64MiB\"");
    let mut w = shell1::Shell1::new(vec![1], Duration::from_secs(3));
    let ctx = bed.ctx();
    fslab::workload::Workload::prepare(&mut w, &ctx).unwrap();
    let root = bed.root();
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (mut fslab_same, mut ub_same) = (Vec::new(), Vec::new());
    for _ in 0..2 {
        let (f, u) = std::thread::scope(|s| {
            let ub = s.spawn(|| unixbench_looper_lpm(&root, 3.0, 1));
            let fslab = w.measure(&ctx, 1);
            (fslab, ub.join().unwrap())
        });
        fslab_same.push(f.unwrap());
        ub_same.push(u);
    }
    fslab::workload::Workload::cleanup(&mut w, &ctx).unwrap();
    let ratio = mean(&fslab_same) / mean(&ub_same);
    eprintln!("shell1 vs UnixBench procedure, same 3 s: fslab {fslab_same:.0?} lpm, looper {ub_same:.0?} lpm, ratio {ratio:.3}");
    assert!(
        (0.85..=1.15).contains(&ratio),
        "fslab {fslab_same:.0?} lpm vs UnixBench procedure {ub_same:.0?} lpm (ratio {ratio:.3})"
    );
    assert_eq!(leftovers(&root), Vec::<String>::new());
}

/// One process as strace saw it: its parent and what it exec'd.
#[derive(Debug, Default, Clone)]
struct Traced {
    parent: Option<u32>,
    exec: Vec<Vec<String>>,
}

/// `strace -f -e trace=execve,clone,clone3,fork,vfork` output → processes.
/// dash starts commands with vfork, so calls come split in two
/// (`vfork( <unfinished ...>` … `<... vfork resumed>) = 123`), and PATH
/// lookups leave failed execve calls (`= -1 ENOENT`) that do not count.
fn parse_strace(text: &str) -> std::collections::BTreeMap<u32, Traced> {
    let mut procs: std::collections::BTreeMap<u32, Traced> = Default::default();
    let mut pending: std::collections::BTreeMap<u32, Vec<String>> = Default::default();
    for line in text.lines() {
        let Some((pid, rest)) = line.split_once(' ') else { continue };
        let Ok(pid) = pid.trim().parse::<u32>() else { continue };
        let rest = rest.trim_start();
        procs.entry(pid).or_default();
        // The result follows the last ` = ` (strace pads resumed calls with spaces).
        let result = rest.rsplit_once(" = ").map(|(_, r)| r.split_whitespace().next().unwrap_or(""));
        let forked = ["clone", "fork"].iter().any(|c| {
            rest.starts_with(c) || rest.starts_with(&format!("<... v{c}")) || rest.starts_with(&format!("<... {c}"))
        });
        if forked {
            if let Some(child) = result.and_then(|r| r.parse::<u32>().ok()) {
                procs.entry(child).or_default().parent = Some(pid);
            }
            continue;
        }
        if rest.starts_with("execve(") {
            // execve("/bin/sh", ["/bin/sh", "./shell1.multi.sh", "1"], …
            let argv = rest.split_once('[').and_then(|(_, r)| r.split_once(']')).map(|(a, _)| a).unwrap_or("");
            pending.insert(pid, argv.split(", ").map(|a| a.trim_matches('"').to_string()).collect());
        }
        if rest.starts_with("execve(") || rest.starts_with("<... execve resumed>") {
            match result {
                Some("0") => {
                    if let Some(argv) = pending.remove(&pid) {
                        procs.entry(pid).or_default().exec.push(argv);
                    }
                }
                Some(_) => {
                    pending.remove(&pid);
                }
                None => {}
            }
        }
    }
    procs
}

/// The exec'd children of `pid` (program basename, first script argument).
fn exec_children(procs: &std::collections::BTreeMap<u32, Traced>, pid: u32) -> Vec<(u32, Vec<String>)> {
    procs
        .iter()
        .filter(|(_, p)| p.parent == Some(pid))
        .filter_map(|(c, p)| p.exec.last().map(|argv| (*c, argv.clone())))
        .collect()
}

/// UnixBench's process structure, checked on what fslab really runs: the
/// looper execs `/bin/sh multi.sh N` per iteration, each `multi.sh` execs N
/// `/bin/sh tst.sh INPUT`, each `tst.sh` the seven tools. The old loop ran
/// the tools straight from the looper and fails this.
#[test]
fn shell1_has_unixbench_s_process_structure() {
    if Command::new("strace").arg("-V").output().is_err() {
        fslab::testsupport::skip("strace is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ctx = RunContext::new(dir.path(), dir.path().join("cache"));
    let mut w = shell1::Shell1::new(vec![1], Duration::from_secs(1));
    fslab::workload::Workload::prepare(&mut w, &ctx).unwrap();
    for per_loop in [1u32, 8] {
        let trace = dir.path().join(format!("trace-{per_loop}"));
        let out = Command::new("strace")
            .args(["-f", "-qq", "-s", "200", "-e", "trace=execve,clone,clone3,fork,vfork", "-o"])
            .arg(&trace)
            .args(["/bin/sh", "-c", shell1::LOOP_SCRIPT, "fslab-shell1", "1", &per_loop.to_string()])
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let loops = shell1::parse_loops(&String::from_utf8_lossy(&out.stdout)).unwrap();
        assert!(loops >= 1, "no loop completed under strace");
        let trace_text = std::fs::read_to_string(&trace).unwrap();
        let procs = parse_strace(&trace_text);
        let looper: u32 = trace_text.split_whitespace().next().and_then(|p| p.parse().ok()).unwrap();
        let multis: Vec<_> = exec_children(&procs, looper)
            .into_iter()
            .filter(|(_, argv)| argv.iter().any(|a| a.ends_with(shell1::MULTI_NAME)))
            .collect();
        assert_eq!(multis.len() as u64, loops, "one `/bin/sh multi.sh` per loop");
        for (multi, argv) in &multis {
            assert_eq!(argv, &["/bin/sh".to_string(), format!("./{}", shell1::MULTI_NAME), per_loop.to_string()]);
            let tsts = exec_children(&procs, *multi);
            assert_eq!(tsts.len() as u32, per_loop, "multi.sh {per_loop} starts {per_loop} tst.sh: {tsts:?}");
            for (tst, argv) in &tsts {
                assert_eq!(
                    argv,
                    &["/bin/sh".to_string(), format!("./{}", shell1::TST_NAME), shell1::INPUT_NAME.to_string()]
                );
                let mut tools: Vec<String> = exec_children(&procs, *tst)
                    .into_iter()
                    .map(|(_, argv)| Path::new(&argv[0]).file_name().unwrap().to_string_lossy().into_owned())
                    .collect();
                tools.sort();
                assert_eq!(tools, ["grep", "od", "rm", "sort", "sort", "tee", "wc"], "tst.sh runs the seven tools");
            }
        }
        // The looper itself runs no tool but its timer (sleep).
        let direct: Vec<_> = exec_children(&procs, looper)
            .into_iter()
            .filter(|(_, argv)| !argv.iter().any(|a| a.ends_with(shell1::MULTI_NAME)))
            .collect();
        assert!(direct.iter().all(|(_, argv)| argv[0].ends_with("sleep") || argv[0].ends_with("kill")), "{direct:?}");
    }
}

#[test]
fn timing_shell1_copies_stop_at_the_duration() {
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
