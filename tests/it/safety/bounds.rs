//! Bounded plans, lists and memory; responsive to Ctrl-C while planning and
//! preparing; bad values name their key.

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Child, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use super::{fslab, fslab_cmd, run_args};
use crate::common;
use fslab::experiment;

/// The largest experiment file fslab accepts: 1000 repetitions of 64
/// variants × 64 workloads (4 096 000 planned runs), on `dir:` testbeds.
fn largest_spec(dir: &Path) -> std::path::PathBuf {
    let mut text = format!("name = \"largest\"\nrepetitions = 1000\nworkdir = \"{}\"\n", dir.join("work").display());
    for v in 0..64 {
        let target = dir.join(format!("v{v}"));
        std::fs::create_dir_all(&target).unwrap();
        let _ = write!(text, "[[variant]]\nname = \"v{v}\"\nfs = \"dir:{}\"\n", target.display());
    }
    for w in 0..64 {
        let _ = write!(text, "[[workload]]\nkind = \"command\"\nname = \"w{w}\"\ncommand = \"true\"\n");
    }
    common::write_spec(dir, "largest.toml", &text)
}

/// Exit code and peak RSS (KiB) of a child: its own high-water mark
/// (`VmHWM` in `/proc/<pid>/status`), polled until it exits. Not wait4's
/// `ru_maxrss`: that starts at the RSS of the process that spawned the
/// child, and this test binary runs every integration test, so it is often
/// above the bound by itself.
fn wait_rss(child: Child) -> (Option<i32>, i64) {
    let pid = child.id() as i32;
    let status_path = format!("/proc/{pid}/status");
    let hwm_kib = || -> Option<i64> {
        let text = std::fs::read_to_string(&status_path).ok()?;
        let line = text.lines().find(|l| l.starts_with("VmHWM:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    let mut peak = 0;
    let mut status = 0;
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        // Read before reaping: a zombie's status has no memory lines.
        peak = peak.max(hwm_kib().unwrap_or(0));
        // SAFETY: waiting for our own child, without blocking; no rusage wanted.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, std::ptr::null_mut()) };
        if r == pid {
            break;
        }
        assert!(Instant::now() < deadline, "fslab did not finish");
        sleep(Duration::from_millis(20));
    }
    assert!(peak > 0, "no VmHWM read for pid {pid}");
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    (code, peak)
}

/// Generous bound on fslab's peak memory for a plan of millions of runs: a
/// plan held (or serialized) whole takes gigabytes.
const MAX_RSS_KIB: i64 = 256 * 1024;

/// `fslab run --dry-run` of `spec` with `extra` arguments: its stdout, and
/// its peak memory in KiB (exit 0 asserted).
fn dry_run(dir: &std::path::Path, spec: &std::path::Path, extra: &[&str]) -> (String, i64) {
    let out = dir.join("plan.out");
    let args = [&["--dry-run"][..], extra].concat();
    let child = fslab_cmd(run_args(dir, spec, &args))
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (code, rss) = wait_rss(child);
    assert_eq!(code, Some(0));
    (std::fs::read_to_string(&out).unwrap(), rss)
}

#[test]
fn the_largest_allowed_file_plans_small_and_dry_runs_short() {
    let dir = common::workdir("fslab-safety-bounds");
    let spec = largest_spec(dir.path());
    let (text, rss) = dry_run(dir.path(), &spec, &[]);
    assert!(
        text.contains("plan (4096000 runs)") && text.contains("… and 4095800 more runs"),
        "{}",
        &text[..2000.min(text.len())]
    );
    assert!(text.lines().count() < 400, "{} lines", text.lines().count());
    assert!(rss < MAX_RSS_KIB, "dry run peaked at {rss} KiB");
    // The JSON plan too: counted in full, listed in part.
    let (json, rss) = dry_run(dir.path(), &spec, &["--format", "json"]);
    let plan: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(plan["total_runs"], 4096000);
    assert_eq!(plan["runs"].as_array().map(Vec::len), Some(200));
    assert!(rss < MAX_RSS_KIB, "JSON dry run peaked at {rss} KiB");
}

#[test]
fn the_largest_allowed_file_runs_in_bounded_memory_and_stops_on_sigint() {
    let dir = common::workdir("fslab-safety-bounds");
    let spec = largest_spec(dir.path());
    let err = dir.path().join("stderr.txt");
    let child = fslab_cmd(run_args(dir.path(), &spec, &[]))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(240);
    while !std::fs::read_to_string(&err).unwrap_or_default().contains("run 3/4096000") {
        assert!(Instant::now() < deadline, "runs never started: {}", std::fs::read_to_string(&err).unwrap_or_default());
        sleep(Duration::from_millis(50));
    }
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    let (code, rss) = wait_rss(child);
    let stderr = std::fs::read_to_string(&err).unwrap();
    assert_eq!(code, Some(130), "{stderr}");
    assert!(rss < MAX_RSS_KIB, "run peaked at {rss} KiB");
    // Stopped within a run or two of the signal.
    let store = fslab::store::Store::open(&dir.path().join("results.db")).unwrap();
    let id = store.latest_experiment().unwrap().unwrap();
    assert!(store.runs(id).unwrap().len() < 20, "{stderr}");
}

#[test]
fn sigint_while_generating_inputs_stops_the_generation() {
    let dir = common::workdir("fslab-safety-bounds");
    let spec = super::cleanup::uncached_untar_spec(dir.path());
    let mut child = fslab_cmd(run_args(dir.path(), &spec, &[])).spawn().unwrap();
    let cache = dir.path().join("work/cache");
    let tmp = super::cleanup::wait_for_temporary(&mut child, &cache);
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    let ran = super::finish(child);
    ran.expect(130).says("interrupted");
    assert!(!tmp.exists(), "the temporary archive is removed");
    // The archive was not finished first: the signal stopped the generation itself.
    let finished: Vec<_> = std::fs::read_dir(&cache).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(finished.is_empty(), "{finished:?}");
}

fn error_of(text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("exp.toml");
    std::fs::write(&path, text).unwrap();
    format!("{:#}", experiment::load(&path).expect_err("should be rejected"))
}

fn with_top(line: &str) -> String {
    format!("name = \"t\"\n{line}\n[[variant]]\nname = \"a\"\nfs = \"ext4\"\n[[workload]]\nkind = \"command\"\ncommand = \"true\"\n")
}

#[test]
fn oversized_values_and_lists_are_refused_naming_the_key() {
    let e = error_of(&with_top("repetitions = 100000000"));
    assert!(e.contains("exp.toml:2:15: `repetitions`: 100000000 is more than 1000"), "{e}");
    let e = error_of(&with_top("repetitions = { min = 2, max = 5000 }"));
    assert!(e.contains("`repetitions`") && e.contains("more than 1000"), "{e}");
    let levels: Vec<String> = (1..=65).map(|i| i.to_string()).collect();
    let e = error_of(&format!(
        "name = \"t\"\n[[variant]]\nname = \"a\"\nfs = \"ext4\"\n[[workload]]\nkind = \"coldstart\"\nreaders = [{}]\n",
        levels.join(", ")
    ));
    assert!(e.contains("exp.toml:7:11: `readers`: has 65 levels; at most 64"), "{e}");
    let mut many = String::from("name = \"t\"\n");
    for v in 0..65 {
        let _ = write!(many, "[[variant]]\nname = \"v{v}\"\nfs = \"tmpfs\"\n");
    }
    many.push_str("[[workload]]\nkind = \"command\"\ncommand = \"true\"\n");
    assert!(error_of(&many).contains("`variant`: at most 64"));
}

#[test]
fn a_wrong_type_names_the_key() {
    for (line, key) in [
        ("repetitions = \"five\"", "repetitions"),
        ("repetitions = true", "repetitions"),
        ("seed = \"x\"", "seed"),
        ("theta = \"big\"", "theta"),
        ("order = 3", "order"),
    ] {
        let e = error_of(&with_top(line));
        assert!(e.contains("exp.toml:2:") && e.contains(&format!("`{key}`")), "{line}: {e}");
    }
    for (line, key) in [("size = true", "size"), ("throttle = \"fast\"", "throttle"), ("mkfs = \"-b 4096\"", "mkfs")] {
        let e = error_of(&format!(
            "name = \"t\"\n[[variant]]\nname = \"a\"\nfs = \"ext4\"\n{line}\n[[workload]]\nkind = \"command\"\ncommand = \"true\"\n"
        ));
        assert!(e.contains("exp.toml:5:") && e.contains(&format!("`{key}`")), "{line}: {e}");
    }
    let e = error_of("name = \"t\"\n[[variant]]\nname = \"a\"\nfs = \"ext4\"\n[[workload]]\nkind = \"command\"\ncommand = \"true\"\ntimeout = \"forever\"\n");
    assert!(e.contains("exp.toml:8:") && e.contains("`timeout`"), "{e}");
    // The binary exits 2 for them.
    let dir = common::workdir("fslab-safety-bounds");
    let spec = common::write_spec(dir.path(), "exp.toml", &with_top("repetitions = \"five\""));
    fslab(run_args(dir.path(), &spec, &[])).expect(2).says("`repetitions`");
}
