//! Verdicts end to end: a `command` workload reporting its own metrics
//! (`fslab-metric` lines), the sequential rule stopping an adaptive
//! experiment, and `fslab compare` / `fslab plan` on the result. Directory
//! testbeds with warm caches: no root needed.

use std::process::Command;

use fslab::analysis::{compare_config, compare_series, Roles};
use fslab::experiment;
use fslab::runner::{self, RunOptions, Silent};
use fslab::stats::{Stopping, Verdict};
use fslab::store::Store;

use crate::common;

/// Two directory variants; in `slow` the command sleeps ten times longer
/// and reports half the score (a `dir:` testbed runs the command in a fresh
/// directory two levels below the variant's, hence `../../slow`).
fn spec(dir: &std::path::Path, command: &str) -> String {
    let (fast, slow) = (dir.join("fast"), dir.join("slow"));
    std::fs::create_dir_all(&fast).unwrap();
    std::fs::create_dir_all(&slow).unwrap();
    std::fs::write(slow.join("slow"), "").unwrap();
    format!(
        "name = \"reported\"\nrepetitions = {{ min = 5, max = 6 }}\nworkdir = \"{}\"\n\
         [[variant]]\nname = \"fast\"\nfs = \"dir:{}\"\n[[variant]]\nname = \"slow\"\nfs = \"dir:{}\"\n\
         [[workload]]\nkind = \"command\"\nname = \"bench\"\ncache = \"warm\"\ncommand = '{command}'\n",
        dir.join("work").display(),
        fast.display(),
        slow.display()
    )
}

const BENCH: &str = "if [ -e ../../slow ]; then sleep 0.5; s=50; else sleep 0.02; s=100; fi; \
                     echo \"warming up\"; echo \"fslab-metric score $s points higher\"";

#[test]
fn reported_metrics_decide_and_the_sequential_rule_stops_at_the_first_look() {
    let dir = common::workdir("fslab-verdicts");
    let path = common::write_spec(dir.path(), "bench.toml", &spec(dir.path(), BENCH));
    let exp = experiment::load(&path).unwrap();
    let db = dir.path().join("r.db");
    let mut store = Store::open(&db).unwrap();
    let summary = runner::run(&exp, &mut store, &RunOptions::default(), &mut Silent).unwrap();
    // Both decisive metrics (wall_s and the reported score) are decided at
    // the first look; user_s/sys_s (noise) do not hold the experiment open.
    // The first look is at n = 5 because its boundary (one-sided
    // 0.025·(5/6)³ = 1.4%) is one a rank test of 5 fully separated runs per
    // side can pass (p = 1/252) whatever the machine's load does to the
    // spread; at n = 3 the boundary of a longer design needs a t interval
    // with 2 degrees of freedom, which a loaded machine's noise defeats.
    assert_eq!((summary.rounds, summary.runs_ok, summary.runs_failed), (5, 10, 0), "{summary:?}");

    let cfg = compare_config(&exp);
    assert_eq!(cfg.stopping, Stopping::Sequential { min: 5, max: 6 });
    // The roles the runner decided by (wall_s and score; not user_s/sys_s).
    let roles = Roles { workloads: &exp.workloads, emulated_variants: &[] };
    let rows = compare_series(&store.metric_series(summary.experiment_id).unwrap(), "fast", &cfg, roles);
    let score = rows.iter().find(|r| r.metric == "score").expect("reported metric stored");
    assert_eq!((score.unit.as_str(), score.higher_is_better), ("points", true));
    assert_eq!(score.values_variant, vec![50.0; 5]);
    assert_eq!(score.verdict, Verdict::Regressed, "{score:?}");
    assert_eq!(score.decided_by.describe(), "sequential 5..6, look 1 of 2 at n = 5");
    let wall = rows.iter().find(|r| r.metric == "wall_s").unwrap();
    assert_eq!(wall.verdict, Verdict::Regressed, "{wall:?}");

    // `fslab compare --json` carries the rule that decided and every field.
    let out = Command::new(common::fslab_bin()).args(["compare", "--json", "--db"]).arg(&db).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = json.as_array().unwrap().iter().find(|r| r["metric"] == "score").unwrap();
    for key in ["decided_by", "ci_level", "equivalence_low_pct", "method", "ratio", "baseline_summary", "drift"] {
        assert!(row.get(key).is_some(), "missing {key} in {row}");
    }

    // The text says which rule decided, at which look, with which boundary.
    let out = Command::new(common::fslab_bin()).args(["compare", "--db"]).arg(&db).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Rule: sequential 5..6, look 1 of 2 at n = 5: boundary 97.1% CI"), "{text}");

    // `fslab plan` reads the noise of that run (same file).
    let out = Command::new(common::fslab_bin())
        .args(["plan", "--detect", "10%", "--db"])
        .arg(&db)
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}{}", text, String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("bench/wall_s") && text.contains("bench/score"), "{text}");
    assert!(!text.contains("bench/user_s"), "CPU side metrics are not planned for: {text}");
    // Issue 20 item 10: the legend is a line of its own; warnings go to stderr.
    assert!(text.ends_with("when nothing changed.\n") && !text.contains("warning:"), "{text}");
}

#[test]
fn a_bad_metric_line_fails_the_run_naming_the_line() {
    let dir = common::workdir("fslab-verdicts");
    let text = spec(dir.path(), "echo ok; echo \"fslab-metric score nan points higher\"");
    let exp = experiment::parse(&text, None).unwrap();
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    let summary = runner::run(&exp, &mut store, &RunOptions::default(), &mut Silent).unwrap();
    assert_eq!(summary.runs_ok, 0);
    let runs = store.runs(summary.experiment_id).unwrap();
    let error = runs[0].error.as_deref().unwrap_or_default();
    assert!(error.contains("stdout line 2") && error.contains("not a finite number"), "{error}");
}

#[test]
fn plan_without_history_asks_for_a_pilot_and_runs_one() {
    let dir = common::workdir("fslab-verdicts");
    let path = common::write_spec(dir.path(), "bench.toml", &spec(dir.path(), BENCH));
    let db = dir.path().join("empty.db");
    let out = Command::new(common::fslab_bin()).args(["plan", "--db"]).arg(&db).arg(&path).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--pilot"), "{}", String::from_utf8_lossy(&out.stderr));

    let out = Command::new(common::fslab_bin())
        .args(["plan", "--pilot", "2", "--json", "--db"])
        .arg(&db)
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let wall = lines.as_array().unwrap().iter().find(|l| l["metric"] == "wall_s").expect("wall_s planned");
    assert!(wall["sd_log"].as_f64().unwrap() > 0.0, "{wall}");
    assert_eq!(wall["max"], 6);
}
