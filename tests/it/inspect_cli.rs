//! `fslab doctor`, `kconfig diff`, `compare` and `iostat` as a user calls
//! them: bad input is refused with a message that names it, and offline
//! findings say what was decided.

use std::path::Path;
use std::process::{Command, Output};

use crate::common::fslab_bin;

fn fslab(args: &[&str]) -> Output {
    Command::new(fslab_bin()).args(args).env("FSLAB_DB", "/nonexistent/fslab-inspect-cli.db").output().unwrap()
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn write(dir: &Path, name: &str, body: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p.display().to_string()
}

#[test]
fn bad_inputs_are_refused_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let empty = write(dir.path(), "empty.config", "");
    let cfg = write(dir.path(), "a.config", "CONFIG_EXT4_FS=y\nCONFIG_PREEMPT_NONE=y\n");

    let o = fslab(&["kconfig", "diff", &empty, &cfg]);
    let (out, err) = text(&o);
    assert!(!o.status.success(), "{out}");
    assert!(err.contains("empty.config") && err.contains("no kernel config options"), "{err}");

    let o = fslab(&["doctor", "--kconfig", &cfg, "--fs", "nonsensefs"]);
    let (_, err) = text(&o);
    assert!(!o.status.success());
    assert!(err.contains("`nonsensefs` is not a Linux filesystem type"), "{err}");

    for bad in ["--theta=-5", "--theta=0", "--theta=abc", "--theta=150"] {
        let o = fslab(&["compare", bad]);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{bad}: {out}{err}");
        assert!(err.contains("--theta") && err.contains("percentage"), "{bad}: {err}");
        assert!(!out.contains("θ"), "{bad}: went on: {out}");
    }

    let log = write(dir.path(), "x.log", "Device r/s w/s rkB/s wkB/s %util\nsda 1 2 4 64 50\n");
    let o = fslab(&["iostat", "summarize", "--util-threshold", "150", &log]);
    let (_, err) = text(&o);
    assert!(!o.status.success());
    assert!(err.contains("--util-threshold 150"), "{err}");

    let o = fslab(&["doctor", "--kconfig", &cfg, "--device-kind", "floppy"]);
    assert_eq!(o.status.code(), Some(2), "{:?}", text(&o));
    let o = fslab(&["doctor", "--kconfig", &cfg, "--fs-size", "lots"]);
    let (_, err) = text(&o);
    assert!(!o.status.success() && err.contains("--fs-size"), "{err}");
}

/// The ext4 thread's case: a 5.19 config with ext4 is likely affected by
/// the mb_optimize_scan regression until the device and size say otherwise.
#[test]
fn offline_doctor_reports_likely_then_confirmed() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(dir.path(), "rpi-5.19.config", "CONFIG_EXT4_FS=y\nCONFIG_PREEMPT_NONE=y\n");
    let o = fslab(&["doctor", "--kconfig", &cfg, "--kernel-release", "5.19.0"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(!out.contains("No known issues found"), "{out}");
    assert!(out.contains("[LIKELY HIGH] ext4 mb_optimize_scan"), "{out}");
    let confirm = out.lines().find(|l| l.trim_start().starts_with("confirm:")).unwrap_or_default();
    for flag in ["--device-kind sdcard|emmc|hdd|ssd", "--fs-size SIZE", "--fs TYPE"] {
        assert!(confirm.contains(flag), "{out}");
    }

    let o = fslab(&[
        "doctor",
        "--kconfig",
        &cfg,
        "--kernel-release",
        "5.19.0",
        "--fs",
        "ext4",
        "--device-kind",
        "sdcard",
        "--fs-size",
        "32GiB",
        "--json",
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ids: Vec<&str> = v["findings"].as_array().unwrap().iter().filter_map(|f| f["id"].as_str()).collect();
    assert!(ids.contains(&"ext4-mb-optimize-scan-spreading"), "{out}");
    assert_eq!(v["facts"]["device_kind"], "sdcard");
    assert_eq!(v["likely"].as_array().map(Vec::len), Some(0), "{out}");
}
