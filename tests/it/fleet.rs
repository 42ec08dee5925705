//! Fleets: `fslab run --shard K/N` processes against one PostgreSQL server
//! (`FSLAB_TEST_POSTGRES`, started by `scripts/test`), a killed shard that
//! resumes, and a server that goes away mid-run (a private server of this
//! test's own, stopped and started again).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use fslab::record::RunStatus;
use fslab::store::Store;
use fslab::stored::ExperimentStatus;

use crate::common;

/// A database of its own on the test server, dropped even if the test fails.
struct Scratch {
    admin: String,
    name: String,
    url: String,
}

impl Scratch {
    fn new(tag: &str) -> Option<Scratch> {
        let Ok(admin) = std::env::var("FSLAB_TEST_POSTGRES") else {
            fslab::testsupport::skip("fleet tests need FSLAB_TEST_POSTGRES (./scripts/test starts a server)");
            return None;
        };
        let name = format!("fslab_fleet_{tag}_{}", std::process::id());
        let mut c = postgres::Client::connect(&admin, postgres::NoTls).unwrap();
        c.batch_execute(&format!("DROP DATABASE IF EXISTS {name}")).unwrap();
        c.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
        let url = format!("{}/{name}", admin.rsplit_once('/').unwrap().0);
        Some(Scratch { admin, name, url })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.admin, postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name));
        }
    }
}

/// An experiment of `dir:` testbeds (variants a, b) and `workloads`
/// command workloads running `command`, `repetitions` rounds.
fn spec(dir: &Path, repetitions: &str, workloads: usize, command: &str) -> PathBuf {
    let mut text =
        format!("name = \"fleet\"\nrepetitions = {repetitions}\nworkdir = \"{}\"\n", dir.join("work").display());
    for v in ["a", "b"] {
        std::fs::create_dir_all(dir.join(v)).unwrap();
        text.push_str(&format!("[[variant]]\nname = \"{v}\"\nfs = \"dir:{}\"\n", dir.join(v).display()));
    }
    for w in 0..workloads {
        text.push_str(&format!("[[workload]]\nkind = \"command\"\nname = \"w{w}\"\ncommand = \"{command}\"\n"));
    }
    common::write_spec(dir, "fleet.toml", &text)
}

fn fslab(spec: &Path, db: &str, extra: &[&str]) -> Command {
    let mut c = Command::new(common::fslab_bin());
    c.arg("run").arg(spec).args(["--db", db]).args(extra).env_remove("FSLAB_DB");
    for var in ["GITHUB_RUN_ID", "SLURM_ARRAY_JOB_ID", "CI_PIPELINE_ID", "BUILDKITE_BUILD_ID", "FSLAB_CAMPAIGN_RUN"] {
        c.env_remove(var);
    }
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

fn shard(spec: &Path, db: &str, k: usize, n: usize) -> Child {
    fslab(spec, db, &["--shard", &format!("{k}/{n}"), "--campaign", "fleet-test"]).spawn().unwrap()
}

fn ended(what: &str, out: Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains("panicked"), "{what} panicked:\n{err}");
    assert!(out.status.success(), "{what} exited {:?}:\n{err}", out.status.code());
    err
}

/// seq → (status, shard) of every stored run of experiment `id`.
fn stored(store: &Store, id: i64) -> BTreeMap<usize, (RunStatus, Option<usize>)> {
    let mut seen = BTreeMap::new();
    for r in store.runs(id).unwrap() {
        assert!(store.run_machine(r.id).unwrap().is_some(), "run {} carries no machine", r.seq);
        assert!(seen.insert(r.seq, (r.status, r.shard)).is_none(), "seq {} stored twice", r.seq);
    }
    seen
}

/// Polls until experiment `id`… any experiment of `db` holds `n` ok runs.
fn wait_for_runs(db: &str, n: usize, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        if let Ok(store) = Store::open_existing(db) {
            let ok: usize = store.list_experiments().unwrap_or_default().iter().map(|e| e.runs_ok).sum();
            if ok >= n {
                return;
            }
        }
        assert!(child.try_wait().unwrap().is_none(), "fslab ended before {n} runs were stored");
        sleep(Duration::from_millis(100));
    }
    panic!("{n} runs never appeared in {db}");
}

#[test]
fn four_shards_in_parallel_store_the_whole_matrix_once() {
    let Some(db) = Scratch::new("four") else { return };
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-fleet4");
    // 2 variants × 2 workloads × 5 rounds = 20 runs in 10 blocks: shares of 3, 3, 2, 2 blocks.
    let spec = spec(dir.path(), "5", 2, "true");
    let children: Vec<Child> = (1..=4).map(|k| shard(&spec, &db.url, k, 4)).collect();
    for (k, child) in children.into_iter().enumerate() {
        ended(&format!("shard {}", k + 1), child.wait_with_output().unwrap());
    }
    let store = Store::open_existing(&db.url).unwrap();
    let list = store.list_experiments().unwrap();
    assert_eq!(list.len(), 1, "all shards join one experiment: {list:?}");
    let id = list[0].id;
    assert_eq!(list[0].status, ExperimentStatus::Complete);
    let runs = stored(&store, id);
    assert_eq!(runs.keys().copied().collect::<Vec<_>>(), (0..20).collect::<Vec<_>>());
    assert!(runs.values().all(|(s, _)| *s == RunStatus::Ok), "{runs:?}");
    let mut per_shard = [0; 5];
    for (_, shard) in runs.values() {
        per_shard[shard.expect("every run names its shard")] += 1;
    }
    assert_eq!(per_shard[1..], [6, 6, 4, 4]);
    let status = store.campaign_status(id).unwrap().unwrap();
    assert!(status.is_complete(), "{}", status.describe());
    assert_eq!(store.machines(id).unwrap().len(), 1);
}

#[test]
fn a_killed_shard_continues_where_it_stopped() {
    let Some(db) = Scratch::new("kill") else { return };
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-fleetkill");
    // Shard 1 of 2 owns rounds 0 and 2: four runs of half a second.
    let spec = spec(dir.path(), "4", 1, "sleep 0.5");
    let mut first = shard(&spec, &db.url, 1, 2);
    wait_for_runs(&db.url, 1, &mut first);
    first.kill().unwrap();
    let _ = first.wait();
    let needle = format!("fslab-tb-{}-", first.id());
    Command::new(common::fslab_bin()).args(["cleanup", "--workdir"]).arg(dir.path().join("work")).output().unwrap();
    assert!(common::leftovers(&needle).is_empty(), "{:?}", common::leftovers(&needle));

    let store = Store::open_existing(&db.url).unwrap();
    let id = store.list_experiments().unwrap()[0].id;
    let status = store.campaign_status(id).unwrap().unwrap();
    assert_eq!(status.running, vec![1], "{}", status.describe());
    let before = stored(&store, id).len();
    assert!(before < 4, "the kill came too late to test anything ({before} runs)");

    // The same command again: joins the campaign as shard 1 and runs only what is missing.
    let err = ended(
        "shard 1 again",
        fslab(&spec, &db.url, &["--shard", "1/2", "--campaign", "fleet-test"]).output().unwrap(),
    );
    assert!(err.contains(&format!("{before} already done")), "{err}");
    let status = store.campaign_status(id).unwrap().unwrap();
    assert_eq!(status.describe(), "campaign fleet-test: 1/2 shards complete; missing 2");
    assert_eq!(store.experiment(id).unwrap().status, ExperimentStatus::Running, "shard 2 has not run yet");

    ended("shard 2", shard(&spec, &db.url, 2, 2).wait_with_output().unwrap());
    let runs = stored(&store, id);
    assert_eq!(runs.keys().copied().collect::<Vec<_>>(), (0..8).collect::<Vec<_>>());
    assert!(runs.values().all(|(s, _)| *s == RunStatus::Ok));
    assert_eq!(store.experiment(id).unwrap().status, ExperimentStatus::Complete);
}

#[test]
fn adaptive_shards_add_rounds_only_in_their_own_slice() {
    let Some(db) = Scratch::new("adapt") else { return };
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-fleetadapt");
    // One workload: round r is shard (r mod 2) + 1's. Two equal variants of
    // `true`: the comparison may or may not be decided early; either way
    // every run must be its owner's and no round may exceed max.
    let spec = spec(dir.path(), "{ min = 2, max = 7 }", 1, "true");
    let children: Vec<Child> = (1..=2).map(|k| shard(&spec, &db.url, k, 2)).collect();
    for (k, child) in children.into_iter().enumerate() {
        ended(&format!("shard {}", k + 1), child.wait_with_output().unwrap());
    }
    let store = Store::open_existing(&db.url).unwrap();
    let id = store.list_experiments().unwrap()[0].id;
    let runs = store.runs(id).unwrap();
    assert!(runs.len() >= 4 && runs.len() <= 14, "{} runs", runs.len());
    for r in &runs {
        let owner = r.round % 2 + 1;
        assert_eq!(r.shard, Some(owner), "round {} ran on the wrong shard", r.round);
        assert!(r.round < 7 && r.seq == r.round * 2 + usize::from(r.variant == "b"), "{r:?}");
    }
    // Both fixed rounds are there; extra rounds come in whole blocks.
    for round in 0..2 {
        assert_eq!(runs.iter().filter(|r| r.round == round).count(), 2);
    }
    assert!(runs.len().is_multiple_of(2));
    assert_eq!(store.experiment(id).unwrap().status, ExperimentStatus::Complete);
}

/// A PostgreSQL server of this test's own, so it can be stopped mid-run;
/// stopped and removed on drop (also when the test fails).
struct PrivateServer {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
}

impl PrivateServer {
    fn start() -> Option<PrivateServer> {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path().join("bin"))
            .filter(|p| p.join("initdb").exists())
            .max();
        let Some(bin) = bin else {
            fslab::testsupport::skip("PostgreSQL is not installed (./scripts/test installs it)");
            return None;
        };
        let dir = tempfile::Builder::new().prefix("fslab-fleet-pg-").tempdir_in("/var/tmp").unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let server = PrivateServer { bin, dir, port };
        server.as_postgres("chown", &["-R", "postgres:", server.dir.path().to_str().unwrap()], false);
        let data = server.data();
        // initdb refuses root; Debian's postgres user runs the server.
        server.as_postgres("initdb", &["-D", &data, "-U", "postgres", "-A", "trust", "--no-sync"], true);
        server.up();
        Some(server)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn as_postgres(&self, tool: &str, args: &[&str], postgres_tool: bool) {
        let out = if postgres_tool {
            Command::new("runuser").args(["-u", "postgres", "--"]).arg(self.bin.join(tool)).args(args).output()
        } else {
            Command::new(tool).args(args).output()
        }
        .unwrap();
        assert!(out.status.success(), "{tool} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    fn up(&self) {
        let opts =
            format!("-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off", self.port, self.dir.path().display());
        let log = self.dir.path().join("server.log").display().to_string();
        self.as_postgres("pg_ctl", &["-D", &self.data(), "-l", &log, "-w", "-t", "60", "-o", &opts, "start"], true);
    }

    fn down(&self) {
        self.as_postgres("pg_ctl", &["-D", &self.data(), "-m", "immediate", "-w", "stop"], true);
    }

    /// A clean, quick stop (`-m fast`: sessions are disconnected), as an
    /// administrator's restart does.
    fn down_fast(&self) {
        self.as_postgres("pg_ctl", &["-D", &self.data(), "-m", "fast", "-w", "stop"], true);
    }

    fn url(&self) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/postgres?connect_timeout=5", self.port)
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        let _ = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(self.bin.join("pg_ctl"))
            .args(["-D", &self.data(), "-m", "immediate", "stop"])
            .output();
    }
}

/// A server that stays away past the write retry window (shortened to 2 s
/// with the test-only `FSLAB_TEST_STORE_RETRY_S`): the measured run is kept
/// in the work directory's spool, the run fails naming the write and the
/// server, and `--resume` with the server back stores the spooled run
/// (once) before measuring the rest.
#[test]
fn a_server_that_goes_away_fails_the_write_and_resume_recovers() {
    if !common::root_or_skip() {
        return;
    }
    let Some(server) = PrivateServer::start() else { return };
    let dir = common::workdir("fslab-fleetgone");
    let spec = spec(dir.path(), "3", 1, "sleep 0.5");
    let url = server.url();
    let mut run = fslab(&spec, &url, &[]).env("FSLAB_TEST_STORE_RETRY_S", "2").spawn().unwrap();
    wait_for_runs(&url, 1, &mut run);
    server.down();
    let out = run.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && !err.contains("panicked"), "{err}");
    assert!(err.contains("cannot record run "), "the failed write is named: {err}");
    assert!(err.contains("127.0.0.1") && err.contains(&server.port.to_string()), "the server is named: {err}");
    assert!(err.contains("retrying for up to 2 s") && err.contains("is kept in "), "{err}");
    let spool = dir.path().join("work/spool");
    let kept: Vec<_> = std::fs::read_dir(&spool).unwrap().flatten().collect();
    assert_eq!(kept.len(), 1, "one measured run is spooled: {kept:?}");

    server.up();
    let err = ended("--resume", fslab(&spec, &url, &["--resume"]).output().unwrap());
    assert!(err.contains("resuming experiment") && err.contains("already done"), "{err}");
    assert!(err.contains("kept in ") && err.contains("while the database was away"), "{err}");
    assert_eq!(std::fs::read_dir(&spool).unwrap().count(), 0, "the spool is emptied");
    let store = Store::open_existing(&url).unwrap();
    let list = store.list_experiments().unwrap();
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!((list[0].status.as_str(), list[0].runs_ok, list[0].runs_failed), ("complete", 6, 0), "{list:?}");
    assert_eq!(stored(&store, list[0].id).len(), 6);
}

/// Where the lease tests store: an SQLite file in `dir`, and a database on
/// the test server when `FSLAB_TEST_POSTGRES` names one.
fn lease_dbs(dir: &Path, tag: &str) -> Vec<(String, Option<Scratch>)> {
    let mut dbs = vec![(dir.join("leases.db").display().to_string(), None)];
    if std::env::var("FSLAB_TEST_POSTGRES").is_ok() {
        let scratch = Scratch::new(tag).expect("the server is named");
        dbs.push((scratch.url.clone(), Some(scratch)));
    } else {
        fslab::testsupport::skip("the PostgreSQL half of the lease test needs FSLAB_TEST_POSTGRES");
    }
    dbs
}

/// An experiment `name` in `dir/<name>.toml` whose runs each touch
/// `started` and wait while `gate` exists; work directory `dir/work`.
fn gated(dir: &Path, name: &str, repetitions: usize, started: &Path, gate: &Path) -> PathBuf {
    let mut text =
        format!("name = \"{name}\"\nrepetitions = {repetitions}\nworkdir = \"{}\"\n", dir.join("work").display());
    for v in ["a", "b"] {
        std::fs::create_dir_all(dir.join(v)).unwrap();
        text.push_str(&format!("[[variant]]\nname = \"{v}\"\nfs = \"dir:{}\"\n", dir.join(v).display()));
    }
    text.push_str(&format!(
        "[[workload]]\nkind = \"command\"\ncommand = \"touch {}; while [ -e {} ]; do sleep 0.1; done\"\ntimeout = \"5m\"\n",
        started.display(),
        gate.display()
    ));
    common::write_spec(dir, &format!("{name}.toml"), &text)
}

/// Waits until `path` exists (a run is being measured).
fn wait_for_file(path: &Path, children: &mut [&mut Child]) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !path.exists() {
        assert!(Instant::now() < deadline, "{} never appeared", path.display());
        for c in children.iter_mut() {
            assert!(c.try_wait().unwrap().is_none(), "fslab ended before measuring");
        }
        sleep(Duration::from_millis(50));
    }
}

/// The first of `children` to end within a minute: its index and output.
fn first_to_end(children: &mut [Child]) -> (usize, i32) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        for (i, c) in children.iter_mut().enumerate() {
            if let Some(status) = c.try_wait().unwrap() {
                return (i, status.code().unwrap_or(-1));
            }
        }
        sleep(Duration::from_millis(50));
    }
    panic!("both processes are still measuring the same experiment after a minute");
}

/// Issue 20 item 4, with real processes on SQLite and PostgreSQL: two
/// `--resume` of one killed experiment started at the same moment: one
/// takes over the dead holder's lease and measures, the other refuses up
/// front (exit 2) naming it; a second process of the same shard is
/// refused; another experiment in the same work directory and database
/// is warned that they share the machine; every run is stored once.
#[test]
fn the_same_work_is_measured_by_one_process_at_a_time() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-leases");
    for (db, _scratch) in lease_dbs(dir.path(), "leases") {
        let (started, gate) = (dir.path().join("started"), dir.path().join("gate"));
        let _ = std::fs::remove_file(&started);
        std::fs::write(&gate, "").unwrap();
        let spec = gated(dir.path(), "leased", 2, &started, &gate);

        // The first holder is SIGKILLed mid-run: its lease stays behind.
        let mut killed = fslab(&spec, &db, &[]).spawn().unwrap();
        wait_for_file(&started, &mut [&mut killed]);
        killed.kill().unwrap();
        let _ = killed.wait();
        std::fs::remove_file(&started).unwrap();

        let mut twins =
            [fslab(&spec, &db, &["--resume"]).spawn().unwrap(), fslab(&spec, &db, &["--resume"]).spawn().unwrap()];
        let (loser, code) = first_to_end(&mut twins);
        let winner = 1 - loser;
        let pids = [twins[0].id(), twins[1].id()];
        let refused =
            std::mem::replace(&mut twins[loser], Command::new("true").spawn().unwrap()).wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&refused.stderr).into_owned();
        assert_eq!(code, 2, "{db}: the second --resume is refused: {err}");
        let holder = format!("pid {} on host ", pids[winner]);
        assert!(err.contains("is still running") && err.contains(&holder) && err.contains(" since "), "{db}: {err}");
        assert!(!err.contains("preparing inputs") && !err.contains("removed what"), "refused up front: {err}");
        wait_for_file(&started, &mut [&mut twins[winner]]);

        // Another experiment on the same work directory and database.
        let other = gated(dir.path(), "other", 1, &dir.path().join("other-started"), &dir.path().join("no-gate"));
        let out = fslab(&other, &db, &[]).output().unwrap();
        let err = ended("another experiment", out);
        assert!(err.contains("share this machine") && err.contains(&format!("pid {}", pids[winner])), "{db}: {err}");

        std::fs::remove_file(&gate).unwrap();
        let winner_child = std::mem::replace(&mut twins[winner], Command::new("true").spawn().unwrap());
        let err = ended("the resume that won", winner_child.wait_with_output().unwrap());
        assert!(
            err.contains(&format!(
                "took over experiment 1 (`leased`) from fslab {} pid {}",
                env!("CARGO_PKG_VERSION"),
                killed.id()
            )),
            "{db}: {err}"
        );
        for t in &mut twins {
            let _ = t.wait();
        }
        let store = Store::open_existing(&db).unwrap();
        let list = store.list_experiments().unwrap();
        assert_eq!((list[0].status.as_str(), list[0].runs_ok), ("complete", 4), "{db}: {list:?}");
        assert_eq!(stored(&store, list[0].id).len(), 4, "{db}");

        // Two processes of one shard: the second is refused while the first measures.
        let _ = std::fs::remove_file(&started);
        std::fs::write(&gate, "").unwrap();
        let sharded = gated(dir.path(), "sharded", 2, &started, &gate);
        let mut first = fslab(&sharded, &db, &["--shard", "1/2", "--campaign", "lease-test"]).spawn().unwrap();
        wait_for_file(&started, &mut [&mut first]);
        let second = fslab(&sharded, &db, &["--shard", "1/2", "--campaign", "lease-test"]).output().unwrap();
        let err = String::from_utf8_lossy(&second.stderr);
        assert_eq!(second.status.code(), Some(2), "{db}: {err}");
        assert!(
            err.contains("shard 1/2 of campaign lease-test") && err.contains(&format!("pid {} on host ", first.id())),
            "{db}: {err}"
        );
        std::fs::remove_file(&gate).unwrap();
        ended("shard 1", first.wait_with_output().unwrap());
    }
}

/// Issue 20 item 5: a PostgreSQL restart (`pg_ctl stop -m fast`, 4 s
/// down, start) during a run loses nothing: the write reconnects and
/// retries, the experiment completes and every run is stored exactly once.
#[test]
fn a_brief_server_restart_loses_no_run() {
    if !common::root_or_skip() {
        return;
    }
    let Some(server) = PrivateServer::start() else { return };
    let dir = common::workdir("fslab-fleetrestart");
    let spec = spec(dir.path(), "3", 1, "sleep 0.5");
    let url = server.url();
    let mut run = fslab(&spec, &url, &[]).spawn().unwrap();
    wait_for_runs(&url, 1, &mut run);
    server.down_fast();
    sleep(Duration::from_secs(4));
    server.up();
    let err = ended("the run across a restart", run.wait_with_output().unwrap());
    assert!(err.contains("reconnecting and retrying") && err.contains("retries"), "the write met the restart: {err}");
    let store = Store::open_existing(&url).unwrap();
    let list = store.list_experiments().unwrap();
    assert_eq!((list.len(), list[0].status.as_str(), list[0].runs_ok), (1, "complete", 6), "{list:?}");
    assert_eq!(stored(&store, list[0].id).len(), 6);
    assert!(!dir.path().join("work/spool").exists(), "nothing spooled");
}
