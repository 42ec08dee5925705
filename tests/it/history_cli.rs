//! Results across experiments from the command line, the way a CI job
//! uses them: real `fslab run`s of a `command` workload on a dir: testbed
//! whose duration comes from a throttle file outside the experiment file
//! (so the experiments stay comparable), then `compare --experiments` /
//! `--by`, `history` and `check` with their exit codes and JSON.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common;

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Out {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}\n{}", self.stdout, self.stderr))
    }
}

fn fslab(db: &Path, args: &[&str]) -> Out {
    let out = Command::new(common::fslab_bin()).args(args).arg("--db").arg(db).env_remove("FSLAB_DB").output().unwrap();
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

struct Lab {
    _dir: tempfile::TempDir,
    root: PathBuf,
    db: PathBuf,
    spec: PathBuf,
}

impl Lab {
    fn new() -> Lab {
        let dir = common::workdir("history-cli");
        let root = dir.path().to_path_buf();
        std::fs::create_dir_all(root.join("bed")).unwrap();
        let spec = common::write_spec(&root, "gate.toml", &spec(&root, "sleep \"$(cat {throttle})\""));
        Lab { db: root.join("results.db"), spec, root, _dir: dir }
    }

    /// One experiment of 3 runs sleeping `seconds` each, tagged `build=BUILD`.
    fn run(&self, seconds: f64, build: &str) {
        std::fs::write(self.root.join("throttle"), format!("{seconds}")).unwrap();
        let tag = format!("build={build}");
        let out = fslab(&self.db, &["run", self.spec.to_str().unwrap(), "--tag", &tag]);
        assert_eq!(out.code, 0, "fslab run failed:\n{}", out.stderr);
    }
}

fn spec(root: &Path, command: &str) -> String {
    let command = command.replace("{throttle}", &root.join("throttle").display().to_string());
    format!(
        "name = \"gate\"\nrepetitions = 3\nworkdir = \"{work}\"\n\n[[variant]]\nname = \"a\"\nfs = \"dir:{bed}\"\n\n\
         [[workload]]\nkind = \"command\"\nname = \"w\"\ncommand = '{command}'\n",
        work = root.join("work").display(),
        bed = root.join("bed").display(),
    )
}

fn wall(check: &Value) -> &Value {
    check["report"]["metrics"].as_array().unwrap().iter().find(|m| m["name"] == "w/wall_s").expect("w/wall_s checked")
}

#[test]
fn timing_compare_history_and_check_across_experiments() {
    if !common::root_or_skip() {
        return;
    }
    let lab = Lab::new();
    for _ in 0..6 {
        lab.run(0.2, "old");
    }
    // Six steady experiments: the newest is within its history's noise.
    let ok = fslab(&lab.db, &["check", "--fail-on-regression", "--json"]);
    assert_eq!(ok.code, 0, "{}\n{}", ok.stdout, ok.stderr);
    let j = ok.json();
    assert_eq!(j["experiment"], 6);
    assert_eq!(wall(&j)["evidence"]["baseline_points"], 5, "{j:#}");
    assert!(["ok", "improvement"].contains(&wall(&j)["outcome"].as_str().unwrap()), "{j:#}");

    // A build that doubles the time: exit 1 with --fail-on-regression, 0 without.
    lab.run(0.4, "new");
    let bad = fslab(&lab.db, &["check", "--fail-on-regression", "--json"]);
    assert_eq!(bad.code, 1, "{}\n{}", bad.stdout, bad.stderr);
    let j = bad.json();
    assert_eq!(j["outcome"], "regression");
    assert_eq!(j["exit_status"], 1);
    assert_eq!(wall(&j)["outcome"], "regression");
    assert!(wall(&j)["change_pct"].as_f64().unwrap() > 50.0, "{j:#}");
    let report_only = fslab(&lab.db, &["check"]);
    assert_eq!(report_only.code, 0, "{}", report_only.stderr);
    assert!(report_only.stdout.contains("regression"), "{}", report_only.stdout);
    // The same against one named experiment: the JSON says what it was against.
    let named = fslab(&lab.db, &["check", "--against", "1", "--json"]);
    assert_eq!(named.code, 0, "{}", named.stderr);
    assert_eq!(named.json()["against"]["experiment"], 1);

    lab.run(0.4, "new");
    lab.run(0.4, "new");

    // The history marks the step where build=new starts.
    let h = fslab(&lab.db, &["history", "w/wall_s", "--json"]);
    assert_eq!(h.code, 0, "{}", h.stderr);
    let j = h.json();
    let ids: Vec<i64> = j["points"].as_array().unwrap().iter().map(|p| p["experiment_id"].as_i64().unwrap()).collect();
    assert_eq!(ids, (1..=9).collect::<Vec<_>>());
    let cps = j["change_points"].as_array().unwrap();
    assert_eq!(cps.len(), 1, "{j:#}");
    assert_eq!(cps[0]["index"], 6);
    assert_eq!(j["points"][6]["tags"]["build"], "new");
    let table = fslab(&lab.db, &["history", "w/wall_s"]);
    assert!(table.stdout.contains("◆ +") && table.stdout.contains("regression"), "{}", table.stdout);
    let by = fslab(&lab.db, &["history", "w/wall_s", "--by", "build", "--json"]).json();
    assert_eq!(by["points"].as_array().unwrap().len(), 2);
    assert_eq!(by["points"][0]["n"], 18);
    let html = lab.root.join("history.html");
    let r = fslab(&lab.db, &["report", "--history", "w/wall_s", "-o", html.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<svg") && page.contains("change at #7"), "{page}");

    // Across experiments with compare's statistics and verdicts.
    let two = fslab(&lab.db, &["compare", "--experiments", "1,9", "--json"]);
    assert_eq!(two.code, 0, "{}", two.stderr);
    let j = two.json();
    assert_eq!(j["groups"][1]["label"], "#9");
    let row = j["rows"].as_array().unwrap().iter().find(|r| r["metric"] == "wall_s").unwrap();
    assert_eq!(row["variant"], "#9");
    let pooled = fslab(&lab.db, &["compare", "--by", "build", "--json"]).json();
    let row = pooled["rows"].as_array().unwrap().iter().find(|r| r["metric"] == "wall_s").unwrap();
    assert_eq!(row["verdict"], "regressed", "{pooled:#}");
    assert_eq!(pooled["groups"][0]["experiments"].as_array().unwrap().len(), 6);
    let text = fslab(&lab.db, &["compare", "--by", "build", "--baseline", "new"]);
    let old = text.stdout.lines().find(|l| l.trim_start().starts_with("w/wall_s")).unwrap_or_default();
    assert!(text.stdout.contains("baseline build=new") && old.contains(" build=old "), "{}", text.stdout);
    let rest = format!("`fslab compare --by build --baseline new --db {} --full`", lab.db.display());
    assert!(text.stdout.contains(&rest), "{rest} missing:\n{}", text.stdout);
    let full = fslab(&lab.db, &["compare", "--by", "build", "--baseline", "new", "--full"]);
    assert!(full.stdout.contains("verdict build=old"), "{}", full.stdout);
    // Tags recorded automatically beside --tag.
    let tags = &h.json()["points"][0]["tags"];
    for key in ["kernel", "hostname", "fslab", "machine", "build"] {
        assert!(tags[key].as_str().is_some_and(|v| !v.is_empty()), "{key} missing: {tags}");
    }

    // A different command is a different experiment: refused, naming the key.
    let other = common::write_spec(&lab.root, "other.toml", &spec(&lab.root, "sleep \"$(cat {throttle})\"; true"));
    std::fs::write(lab.root.join("throttle"), "0.01").unwrap();
    let out = fslab(&lab.db, &["run", other.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let refused = fslab(&lab.db, &["compare", "--experiments", "1,10"]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("workload w: params.command") && refused.stderr.contains("--allow-mixed"),
        "{}",
        refused.stderr
    );
    let mixed = fslab(&lab.db, &["compare", "--experiments", "1,10", "--allow-mixed", "--json"]);
    assert_eq!(mixed.code, 0, "{}", mixed.stderr);
    assert!(mixed.json()["mixed"][0].as_str().unwrap().contains("params.command"));
    // Bad usage exits 2.
    assert_eq!(fslab(&lab.db, &["check", "--against", "yesterday"]).code, 2);
    assert_eq!(fslab(&lab.db, &["check", "--experiment", "99"]).code, 2);
    assert_eq!(fslab(&lab.db, &["history", "wall_s"]).code, 2);
    assert_eq!(fslab(&lab.db, &["compare", "--experiments", "1"]).code, 2);
}

/// Writes `0.01` into `fifo` once a reader has it open (a run's `cat`
/// waiting in `open`); false if none came before `deadline`.
fn feed(fifo: &Path, deadline: std::time::Instant) -> bool {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    while std::time::Instant::now() < deadline {
        // Non-blocking: fails with ENXIO while nobody reads, so the test never hangs.
        match std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(fifo) {
            Ok(mut f) => return f.write_all(b"0.01").is_ok(),
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(50)),
        }
    }
    false
}

/// Is a `cat FIFO` running (a run blocked reading its duration)?
fn cat_waits_on(fifo: &Path) -> bool {
    let wanted = format!("cat\0{}\0", fifo.display());
    std::fs::read_dir("/proc").into_iter().flatten().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c.ends_with(wanted.as_bytes()) && c.starts_with(b"cat"))
    })
}

/// A `fslab run` killed with SIGKILL mid-run: `list`, `history`, `check`
/// and `compare --by` all see its experiment as interrupted (the store
/// decides an owner's liveness once, for every command).
#[test]
fn a_killed_experiment_is_interrupted_in_list_history_check_and_compare_by() {
    if !common::root_or_skip() {
        return;
    }
    let lab = Lab::new();
    lab.run(0.01, "old");
    lab.run(0.01, "old");
    // The third experiment's runs read their duration from a FIFO: the
    // first gets one, the second blocks in `cat` until the test writes.
    let fifo = lab.root.join("throttle");
    std::fs::remove_file(&fifo).unwrap();
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let mut child = Command::new(common::fslab_bin())
        .args(["run", lab.spec.to_str().unwrap(), "--tag", "build=killed", "--db"])
        .arg(&lab.db)
        .env_remove("FSLAB_DB")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let fed = feed(&fifo, deadline);
    let one_run = || {
        fslab::store::Store::open_existing(&lab.db)
            .and_then(|s| s.runs(3))
            .is_ok_and(|runs| runs.iter().any(|r| r.status == fslab::record::RunStatus::Ok))
    };
    while !(fed && one_run() && cat_waits_on(&fifo)) {
        if !fed || std::time::Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            panic!("experiment 3 never got to its second run (fed: {fed})");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let running = fslab(&lab.db, &["list", "--json"]).json();
    assert_eq!(running[2]["status"], "running", "{running:#}");

    child.kill().unwrap(); // SIGKILL
    let _ = child.wait();
    // The orphaned `cat` of the second run gets its line and ends; then
    // what the killed fslab left is removed (only this test's work directory).
    assert!(feed(&fifo, std::time::Instant::now() + std::time::Duration::from_secs(30)));
    let work = lab.root.join("work");
    let cleaned = Command::new(common::fslab_bin()).args(["cleanup", "--workdir"]).arg(&work).output().unwrap();
    assert!(cleaned.status.success(), "{}", String::from_utf8_lossy(&cleaned.stderr));

    let list = fslab(&lab.db, &["list", "--json"]).json();
    assert_eq!(list[2]["id"], 3, "{list:#}");
    assert_eq!(list[2]["status"], "interrupted", "{list:#}");

    let h = fslab(&lab.db, &["history", "w/wall_s", "--json"]);
    assert_eq!(h.code, 0, "{}", h.stderr);
    let h = h.json();
    let last = h["points"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (last["experiment_id"].clone(), last["interrupted"].clone()),
        (3.into(), serde_json::json!([3])),
        "{h:#}"
    );

    let c = fslab(&lab.db, &["check", "--json"]);
    assert_eq!(c.code, 0, "{}\n{}", c.stdout, c.stderr);
    let c = c.json();
    assert_eq!((c["experiment"].clone(), c["status"].clone()), (3.into(), "interrupted".into()), "{c:#}");

    let by = fslab(&lab.db, &["compare", "--by", "build", "--json"]);
    assert_eq!(by.code, 0, "{}", by.stderr);
    let by = by.json();
    let killed = by["groups"].as_array().unwrap().iter().find(|g| g["label"] == "build=killed").unwrap().clone();
    assert_eq!(killed["interrupted"], serde_json::json!([3]), "{by:#}");
    let old = by["groups"].as_array().unwrap().iter().find(|g| g["label"] == "build=old").unwrap().clone();
    assert!(old.get("interrupted").is_none(), "{by:#}");
}
