//! One output path: each newly formatted command, run for real with
//! `--format json`, prints JSON whose fields hold what the command did, and
//! the hidden `--json` prints the same.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::common;

/// Runs fslab; fails the test unless it exits 0.
fn fslab(args: &[&str]) -> String {
    let out = Command::new(common::fslab_bin()).args(args).output().unwrap();
    assert!(out.status.success(), "fslab {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// `args` with `--format json` parsed, after checking `--json` prints the same
/// (`strip` removes what differs between two runs, such as timings).
fn json_both_ways(args: &[&str], strip: fn(&mut Value)) -> Value {
    let parse = |extra: &[&str]| -> Value {
        let text = fslab(&[args, extra].concat());
        let mut v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
        strip(&mut v);
        v
    };
    let formatted = parse(&["--format", "json"]);
    assert_eq!(parse(&["--json"]), formatted, "--json and --format json differ for {args:?}");
    formatted
}

fn keep(_: &mut Value) {}

/// A kernel cache with one unpacked entry and one downloaded package.
fn kernel_cache(dir: &Path) -> std::path::PathBuf {
    let cache = dir.join("cache");
    let entry = cache.join("kernels/abc123");
    std::fs::create_dir_all(&entry).unwrap();
    std::fs::write(entry.join("vmlinuz"), vec![0u8; 4096]).unwrap();
    let debs = cache.join("debian-archive/debs");
    std::fs::create_dir_all(&debs).unwrap();
    std::fs::write(debs.join("linux-image-6.1.0-9-cloud-amd64_6.1.27-1_amd64.deb"), vec![0u8; 8192]).unwrap();
    cache
}

#[test]
fn kernel_list_and_prune_print_json() {
    let dir = common::workdir("fslab-formats-kernel");
    let cache = kernel_cache(dir.path());
    let cache = cache.to_str().unwrap();
    let list = json_both_ways(&["kernel", "--cache", cache, "list"], keep);
    assert!(list["cache"].as_str().unwrap().ends_with("cache/kernels"), "{list}");
    assert_eq!(list["downloaded"]["count"], 1, "{list}");
    assert!(list["downloaded"]["bytes"].as_u64().unwrap() >= 8192, "{list}");
    assert!(list["available"].is_null(), "no --available: {list}");
    let cached = list["cached"].as_array().unwrap();
    assert_eq!(cached.len(), 1, "{list}");
    assert_eq!(cached[0]["entry"], "abc123");

    // An empty store needs nothing: a dry run would remove the entry and the package.
    let db = dir.path().join("empty.db");
    fslab::store::Store::open(&db).unwrap();
    let prune = json_both_ways(&["kernel", "--cache", cache, "prune", "--dry-run", "--db", db.to_str().unwrap()], keep);
    assert_eq!(prune["dry_run"], true, "{prune}");
    assert_eq!(prune["kept"], 0, "{prune}");
    let kinds: Vec<&str> = prune["removed"].as_array().unwrap().iter().map(|p| p["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["kernel", "package"], "{prune}");
    assert_eq!(
        prune["freed_bytes"].as_u64().unwrap(),
        prune["removed"].as_array().unwrap().iter().map(|p| p["bytes"].as_u64().unwrap()).sum::<u64>()
    );
    // A dry run removed nothing.
    assert!(Path::new(cache).join("kernels/abc123").exists());
    // The text is what it always was.
    let text = fslab(&["kernel", "--cache", cache, "prune", "--dry-run", "--db", db.to_str().unwrap()]);
    assert!(text.contains("would remove abc123"), "{text}");
}

#[test]
fn simulations_print_json() {
    let tables = json_both_ways(&["simulate", "--list"], keep);
    let tables = tables.as_array().unwrap();
    assert!(tables.iter().any(|t| t["name"] == "boundaries" && t["default"] == true), "{tables:?}");
    assert!(tables.iter().any(|t| t["name"] == "explore" && t["default"] == false), "{tables:?}");

    // Timings differ from run to run; the tables themselves are seeded.
    fn untimed(v: &mut Value) {
        v["total_s"] = Value::Null;
        for t in v["tables"].as_array_mut().unwrap() {
            t["seconds"] = Value::Null;
            t["markdown"] = Value::Null;
        }
    }
    let sim = json_both_ways(&["simulate", "boundaries", "--experiments", "10", "--threads", "1"], untimed);
    assert_eq!(sim["experiments"], 10);
    assert_eq!(sim["tables"][0]["name"], "boundaries");
    let text = fslab(&["simulate", "boundaries", "--experiments", "10", "--threads", "1", "--format", "json"]);
    let v: Value = serde_json::from_str(&text).unwrap();
    assert!(v["tables"][0]["markdown"].as_str().unwrap().contains('|'), "a Markdown table: {v}");

    let small = ["simulate-changepoints", "--series", "10", "--checks", "10", "--steps", "10"];
    let cp = json_both_ways(&small, keep);
    assert_eq!(cp["oracle"]["min_runs"], 3);
    assert_eq!(cp["gates"].as_array().unwrap().len(), 9);
}

#[test]
fn merge_prints_json() {
    let dir = common::workdir("fslab-formats-merge");
    let source = dir.path().join("source.db");
    fslab::store::Store::open(&source).unwrap();
    let into = dir.path().join("into.db");
    let (source, into) = (source.to_str().unwrap(), into.to_str().unwrap());
    let merged = json_both_ways(&["merge", source, "--into", into], keep);
    assert_eq!(merged["into"], into);
    assert_eq!(merged["sources"][0]["source"], source);
    assert_eq!(merged["sources"][0]["merged"]["experiments_added"], 0);
}

/// Two `dir:` variants and one `command` workload, twice.
fn run_spec(dir: &Path) -> std::path::PathBuf {
    for v in ["a", "b"] {
        std::fs::create_dir_all(dir.join(v)).unwrap();
    }
    common::write_spec(
        dir,
        "formats.toml",
        &format!(
            "name = \"formats\"\nrepetitions = 2\nworkdir = \"{}\"\n\n[[variant]]\nname = \"a\"\nfs = \"dir:{}\"\n\n\
             [[variant]]\nname = \"b\"\nfs = \"dir:{}\"\n\n[[workload]]\nkind = \"command\"\nname = \"w\"\ncommand = \"true\"\n",
            dir.join("work").display(),
            dir.join("a").display(),
            dir.join("b").display()
        ),
    )
}

#[test]
fn run_dry_run_prints_its_plan_as_json() {
    let dir = common::workdir("fslab-formats-dry");
    let spec = run_spec(dir.path());
    let plan = json_both_ways(&["run", spec.to_str().unwrap(), "--dry-run"], keep);
    assert_eq!(plan["experiment"], "formats");
    assert_eq!(plan["baseline"], "a");
    assert_eq!((plan["min_rounds"].as_u64(), plan["max_rounds"].as_u64()), (Some(2), Some(2)));
    let runs = plan["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4, "2 rounds × 2 variants: {plan}");
    assert_eq!(plan["total_runs"], 4, "{plan}");
    let seqs: Vec<u64> = runs.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [0, 1, 2, 3]);
    assert!(runs.iter().all(|r| r["workload"] == "w"), "{plan}");
    assert_eq!(runs.iter().filter(|r| r["variant"] == "b").count(), 2, "{plan}");
    assert!(plan["device"].is_null() && plan["shard"].is_null(), "{plan}");
    let text = fslab(&["run", spec.to_str().unwrap(), "--dry-run"]);
    assert!(text.starts_with("experiment: formats"), "{text}");
}

/// `fslab run --format json` ends with the comparison as JSON rows, and
/// `--json` with the same rows.
#[test]
fn run_prints_its_comparison_as_json() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-formats-run");
    let spec = run_spec(dir.path());
    let db = dir.path().join("run.db");
    let (spec, db) = (spec.to_str().unwrap(), db.to_str().unwrap());
    // Each run measures anew: compare what does not vary, the workload's
    // own metrics (evidence rows come and go with what the host's counters saw).
    let rows = |format: &[&str]| -> Vec<(String, String, String)> {
        let text = fslab(&[&["run", spec, "--db", db][..], format].concat());
        let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
        v.as_array()
            .unwrap()
            .iter()
            .filter(|r| r["evidence"] == false)
            .map(|r| {
                (r["baseline"].as_str().unwrap().into(), r["variant"].as_str().unwrap().into(), r["metric"].to_string())
            })
            .collect()
    };
    let formatted = rows(&["--format", "json"]);
    assert!(formatted.iter().any(|(a, b, _)| a == "a" && b == "b"), "{formatted:?}");
    assert_eq!(rows(&["--json"]), formatted);
}

/// Issue 28 item 8: `fslab run` prints the answer first (the decision, the
/// decisive metric's verdict) and one line naming the command that shows
/// the rest, which works as printed; `--full` adds every row with its
/// detail line, as many as `--format json` has rows.
#[test]
fn run_prints_the_answer_first_and_full_prints_every_row() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-formats-answer");
    let spec = run_spec(dir.path());
    let db = dir.path().join("answer.db");
    let (spec, db) = (spec.to_str().unwrap(), db.to_str().unwrap());
    let json_rows = |id: &str| -> usize {
        let text = fslab(&["compare", "--db", db, "--experiment", id, "--format", "json"]);
        serde_json::from_str::<Value>(&text).unwrap().as_array().unwrap().len()
    };

    let text = fslab(&["run", spec, "--db", db]);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("experiment 1 `formats`"), "{text}");
    assert!(lines[1].starts_with("Decided: ") || lines[1].starts_with("Nothing decided: "), "{text}");
    assert!(lines[3].trim_start().starts_with("decisive ") && lines[3].contains(" verdict"), "{text}");
    let row = lines[4].split_whitespace().collect::<Vec<_>>();
    assert_eq!(row[..2], ["w/wall_s", "b"], "{text}");
    assert!(!text.contains(" n=2+2 "), "detail lines without --full:\n{text}");
    // The way to the rest, run as printed.
    let more: Vec<&str> = lines.iter().copied().filter(|l| l.contains("--full")).collect();
    assert_eq!(more.len(), 1, "{text}");
    let command = more[0].split('`').nth(1).expect(more[0]);
    assert_eq!(command, format!("fslab compare --experiment 1 --db {db} --full"), "{text}");
    let words = shlex::split(command).unwrap();
    let full = fslab(&words[1..].iter().map(String::as_str).collect::<Vec<_>>());
    assert!(full.starts_with(&lines[..5].join("\n")), "--full does not open with the answer:\n{full}");
    assert_eq!(full.matches(" n=2+2 ").count(), json_rows("1"), "{full}");

    // `run --full` prints the same for the experiment it ran.
    let text = fslab(&["run", spec, "--db", db, "--full"]);
    assert!(text.starts_with("experiment 2 `formats`") && !text.contains("--full"), "{text}");
    assert_eq!(text.matches(" n=2+2 ").count(), json_rows("2"), "{text}");
}
