//! Evidence metrics end to end (issue 16 part 5): device totals stored as
//! `disk/…` metrics at run end, compared between variants with the same
//! statistics as workload metrics, shown in their own group with their own
//! verdicts, and deciding nothing unless a workload names them in
//! `decisive = [...]`.

use std::process::Command;

use fslab::experiment;
use fslab::runner::{self, RunOptions, Silent};
use fslab::store::Store;

use crate::common;

/// Two ext4 variants on loop devices that differ in device traffic: `sync`
/// mounts the filesystem `sync`, so each of the command's 32 4 KiB writes
/// reaches the device on its own with a journal commit (about 100 write
/// requests, against 4 merged ones). Six runs per variant: the evidence
/// family has about 20 metrics, and with six runs a rank test's smallest p
/// (1/462) stays below α after Benjamini–Hochberg across all of them. The same command runs as two workloads: `plain`
/// leaves evidence out of the decision, `named` names `disk/writes`.
fn spec(dir: &std::path::Path) -> String {
    let command = "dd if=/dev/zero of=f bs=4k count=32 status=none && sync f";
    format!(
        "name = \"evidence\"\nrepetitions = 6\nworkdir = \"{}\"\n\
         [[variant]]\nname = \"async\"\nfs = \"ext4\"\nsize = \"64MiB\"\n\
         [[variant]]\nname = \"sync\"\nfs = \"ext4\"\nsize = \"64MiB\"\nmount = \"sync\"\n\
         [[workload]]\nkind = \"command\"\nname = \"plain\"\ncommand = '{command}'\n\
         [[workload]]\nkind = \"command\"\nname = \"named\"\ncommand = '{command}'\ndecisive = [\"disk/writes\"]\n",
        dir.join("work").display()
    )
}

fn fslab(args: &[&str], db: &std::path::Path) -> (String, String, i32) {
    let out = Command::new(common::fslab_bin()).args(args).arg("--db").arg(db).output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (text(&out.stdout), text(&out.stderr), out.status.code().unwrap_or(-1))
}

#[test]
fn device_evidence_is_compared_beside_the_verdict_and_decides_only_when_named() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-evidence");
    let path = common::write_spec(dir.path(), "evidence.toml", &spec(dir.path()));
    let exp = experiment::load(&path).unwrap();
    let db = dir.path().join("r.db");
    let mut store = Store::open(&db).unwrap();
    let summary = runner::run(&exp, &mut store, &RunOptions::default(), &mut Silent).unwrap();
    assert_eq!((summary.runs_ok, summary.runs_failed), (24, 0), "{summary:?}");

    // `disk/…` are the stored device totals, as metrics of the run.
    for run in store.runs(summary.experiment_id).unwrap() {
        let totals = run.disk_totals.as_ref().expect("device totals stored");
        let metric = |name: &str| run.metrics.iter().find(|m| m.name == name).map(|m| m.value);
        assert_eq!(metric("disk/writes"), Some(totals.writes as f64), "run {}", run.seq);
        assert_eq!(metric("disk/busy_s"), Some(totals.busy_s), "run {}", run.seq);
        assert!(metric("cpu/sys_pct").is_some(), "run {}: {:?}", run.seq, run.metrics);
    }

    let (out, err, code) = fslab(&["compare", "--format", "json"], &db);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    let row = |workload: &str, metric: &str| {
        rows.iter()
            .find(|r| r["workload"] == workload && r["metric"] == metric)
            .unwrap_or_else(|| panic!("no row {workload}/{metric} in {out}"))
    };
    for workload in ["plain", "named"] {
        // The evidence carries its own verdict: the sync mount writes far more often.
        let writes = row(workload, "disk/writes");
        assert_eq!(writes["evidence"], true);
        assert_eq!(writes["verdict"], "regressed", "{writes}");
        assert!(writes["mean_variant"].as_f64().unwrap() > 4.0 * writes["mean_baseline"].as_f64().unwrap());
        // The workload's own metric decides; its CPU time and other evidence do not.
        assert_eq!(row(workload, "wall_s")["decisive"], true);
        assert_eq!(row(workload, "wall_s")["evidence"], false);
        assert_eq!(row(workload, "user_s")["decisive"], false);
        assert_eq!(row(workload, "disk/busy_s")["decisive"], false);
    }
    assert_eq!(row("plain", "disk/writes")["decisive"], false, "evidence decided without being named");
    assert_eq!(row("named", "disk/writes")["decisive"], true, "`decisive` did not make disk/writes decide");
    // Evidence rows come after the workload's metrics of each comparison.
    let first_evidence = rows.iter().position(|r| r["evidence"] == true).unwrap();
    assert!(rows[first_evidence..].iter().all(|r| r["evidence"] == true || r["workload"] != rows[0]["workload"]));

    // The headline counts the decisive rows only: plain/wall_s, named/wall_s
    // and named/disk/writes (regressed); the rest of the evidence is its own line.
    let (text, err, code) = fslab(&["compare"], &db);
    assert_eq!(code, 0, "{err}");
    let decided = text.lines().find(|l| l.starts_with("Decided:") || l.starts_with("Nothing decided:")).unwrap();
    assert!(decided.starts_with("Decided:") && decided.contains("regressed"), "{text}");
    let counted: usize = ["regressed", "improved", "no change", "inconclusive"]
        .iter()
        .filter_map(|w| decided.split(&format!(" {w}")).next()?.rsplit(' ').next()?.parse::<usize>().ok())
        .sum();
    assert_eq!(counted, 3, "the headline counts more than the 3 decisive rows: {decided}");
    // The answer (issue 28 item 8): the decisive rows, `named/disk/writes`
    // among them, then the evidence that changed without deciding.
    let (decisive, changed) = text.split_once(" changed, decides nothing").expect(&text);
    assert!(decisive.lines().any(|l| l.trim_start().starts_with("named/disk/writes")), "{text}");
    // Those are the rows that changed without deciding, the largest changes first, five at most.
    let size = |r: &&serde_json::Value| r["change_pct"].as_f64().map_or(-1.0, f64::abs);
    let mut expected: Vec<&serde_json::Value> = rows
        .iter()
        .filter(|r| r["decisive"] == false && (r["verdict"] == "regressed" || r["verdict"] == "improved"))
        .collect();
    expected.sort_by(|a, b| size(b).total_cmp(&size(a)));
    assert!(expected.iter().any(|r| r["workload"] == "plain" && r["metric"] == "disk/writes"), "{out}");
    let listed: Vec<String> = changed.lines().skip(1).take_while(|l| !l.is_empty()).map(str::to_string).collect();
    assert_eq!(listed.len(), expected.len().min(5), "{text}");
    for (line, r) in listed.iter().zip(&expected) {
        let name = format!("{}/{}", r["workload"].as_str().unwrap(), r["metric"].as_str().unwrap());
        assert!(line.trim_start().starts_with(&name), "expected {name}:\n{text}");
        assert!(line.trim_end().ends_with(r["verdict"].as_str().unwrap()), "{line}");
    }
    assert!(!text.contains(" n=6+6 ") && text.contains("--full"), "{text}");
    // Every row, with its group and role, behind --full.
    let (full, err, code) = fslab(&["compare", "--full"], &db);
    assert_eq!(code, 0, "{err}");
    assert!(full.contains("Evidence (compared like metrics; decides only when named in `decisive`):"), "{full}");
    assert!(full.contains("evidence (decides only when named in `decisive`):"), "{full}");
    assert!(full.contains("[evidence] sync vs async: plain/disk/writes"), "{full}");
    assert!(full.contains("[evidence, decisive] sync vs async: named/disk/writes"), "{full}");
    assert_eq!(full.matches(" n=6+6 ").count(), rows.len(), "a detail line per JSON row: {full}");

    let (md, err, code) = fslab(&["report", "--format", "markdown"], &db);
    assert_eq!(code, 0, "{err}");
    let evidence = md.split("### Evidence").nth(1).expect("an evidence section");
    let verdicts = md.split("### Evidence").next().unwrap();
    assert!(evidence.contains("plain/disk/writes") && !verdicts.contains("plain/disk/writes"), "{md}");
    assert!(evidence.contains("decides: named in \\`decisive\\`"), "{md}");
    let work = dir.path().join("work");
    assert_eq!(common::testbed_dirs(&work), Vec::<String>::new());
    assert_eq!(common::leftovers(&work.to_string_lossy()), Vec::<String>::new());
}

/// `decisive` names evidence fslab records; anything else is an experiment
/// file error (exit 2) naming file, line and key, before any run.
#[test]
fn a_bad_decisive_name_or_a_job_in_an_evidence_namespace_is_an_experiment_file_error() {
    let dir = common::workdir("fslab-evidence");
    let base = "name = \"x\"\n[[variant]]\nname = \"a\"\nfs = \"dir:/tmp\"\n[[workload]]\nkind = \"command\"\ncommand = \"true\"\n";
    let cases = [
        ("decisive = [\"disk/bussy_s\"]\n", "unknown evidence metric `disk/bussy_s`"),
        ("decisive = [\"wall_s\"]\n", "`wall_s` is not an evidence metric"),
        ("decisive = [\"media/*\"]\n", "unknown evidence metric `media/*`"),
    ];
    for (i, (line, why)) in cases.iter().enumerate() {
        let path = common::write_spec(dir.path(), &format!("bad{i}.toml"), &format!("{base}{line}"));
        let out = Command::new(common::fslab_bin()).args(["run", "--dry-run"]).arg(&path).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{line}: {err}");
        let at = format!("{}:8:", path.display());
        assert!(err.contains(&at) && err.contains("`decisive`") && err.contains(why), "{line}: {err}");
    }
    // A fio job named like an evidence namespace would make its metrics evidence.
    let fio = "name = \"x\"\n[[variant]]\nname = \"a\"\nfs = \"dir:/tmp\"\n\
               [[workload]]\nkind = \"fio\"\njob = { name = \"disk\", rw = \"read\", size = \"1M\" }\n";
    let path = common::write_spec(dir.path(), "fio.toml", fio);
    let out = Command::new(common::fslab_bin()).args(["run", "--dry-run"]).arg(&path).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("`job.name`") && err.contains("`disk/…` is reserved"), "{err}");
}
