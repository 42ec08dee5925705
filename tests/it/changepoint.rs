//! `fslab simulate-changepoints` (hidden): the simulation behind the
//! change-point, gate and oracle error rates runs end to end and reports
//! every table, in JSON and Markdown.

use std::process::Command;

use super::common;

fn simulate(extra: &[&str]) -> std::process::Output {
    let small = ["simulate-changepoints", "--series", "20", "--checks", "20", "--steps", "20"];
    Command::new(common::fslab_bin()).args(small).args(extra).output().unwrap()
}

#[test]
fn simulation_reports_every_table() {
    let out = simulate(&["--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["changepoint"]["window"], 50);
    assert_eq!(v["changepoint"]["min_segment"], 3);
    assert_eq!(v["gate"]["max_history"], 64);
    assert_eq!(v["changepoints"].as_array().unwrap().len(), 8);
    assert_eq!(v["gates"].as_array().unwrap().len(), 9);
    assert_eq!(v["oracles"].as_array().unwrap().len(), 7);
    // A 5σ step in the middle is found in (nearly) every series even with 20.
    let five = v["changepoints"].as_array().unwrap().iter().find(|r| r["step_sd"] == 5.0).unwrap();
    assert!(five["found_pct"].as_f64().unwrap() >= 90.0, "{five}");
    // Stationary rows have no detection rate (null, not 0).
    assert!(v["changepoints"][0]["found_pct"].is_null());

    let text = simulate(&["--min-segment", "1"]);
    assert!(text.status.success());
    let text = String::from_utf8(text.stdout).unwrap();
    for needle in ["min segment 1", "| found ±2 |", "false alarms / 1000", "Bisection oracle", "| halfway "] {
        assert!(text.contains(needle), "{needle} missing from:\n{text}");
    }
}

#[test]
fn bad_arguments_exit_2() {
    let out = simulate(&["--series", "many"]);
    assert_eq!(out.status.code(), Some(2));
}
