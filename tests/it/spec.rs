//! Experiment files: the issue's example parses exactly as written; bad
//! input is rejected with file, line and key; plans have the promised order.

use fslab::experiment::{self, plan_rounds, FsKind, Repetitions, RunOrder, UntarSource, WorkloadParams};

pub(crate) const ISSUE_EXAMPLE: &str = r#"
name = "throttle sanity"
repetitions = 5                 # or { min = 5, max = 20 } (see below)

[[variant]]
name = "fast"
fs = "ext4"
size = "1GiB"
mkfs = ["-E", "lazy_itable_init=0,lazy_journal_init=0"]
mount = "noatime,mb_optimize_scan=0"
throttle = { write_bps = "64MiB" }

[[variant]]
name = "slow"
fs = "ext4"
size = "1GiB"
mkfs = ["-E", "lazy_itable_init=0,lazy_journal_init=0"]
mount = "noatime,mb_optimize_scan=0"
throttle = { write_bps = "32MiB" }

[[workload]]
kind = "untar"
profile = "small"
"#;

#[test]
fn the_issue_example_parses_as_written() {
    let exp = experiment::parse(ISSUE_EXAMPLE, None).unwrap();
    assert_eq!(exp.name, "throttle sanity");
    assert_eq!(exp.repetitions, Repetitions::Fixed(5));
    assert_eq!(exp.order, RunOrder::Interleaved);
    assert_eq!(exp.baseline, "fast");
    assert_eq!(exp.variants.len(), 2);
    let slow = &exp.variants[1];
    assert_eq!(slow.testbed.fs, FsKind::Ext4);
    assert_eq!(slow.testbed.size.0, 1 << 30);
    assert_eq!(slow.testbed.mkfs, vec!["-E", "lazy_itable_init=0,lazy_journal_init=0"]);
    assert_eq!(slow.testbed.mount, "noatime,mb_optimize_scan=0");
    assert_eq!(slow.testbed.throttle.write_bps.unwrap().0, 32 << 20);
    assert_eq!(exp.workloads[0].label, "untar");
    assert!(matches!(
        &exp.workloads[0].params,
        WorkloadParams::Untar(u) if u.source == UntarSource::Profile("small".into())
    ));
}

#[test]
fn defaults_are_inherited_and_overridden() {
    let text = r#"
name = "d"
repetitions = { min = 3, max = 9 }
order = "grouped"
[defaults]
fs = "xfs"
size = "512MiB"
mount = "noatime"
throttle = { write_bps = "10MiB", write_iops = 100 }
sysfs = { mb_max_to_scan = 100 }
[[variant]]
name = "a"
[[variant]]
name = "b"
fs = "btrfs"
mount = "compress=zstd"
[[workload]]
kind = "command"
command = "true"
timeout = "30s"
cache = "warm"
"#;
    let exp = experiment::parse(text, None).unwrap();
    assert_eq!(exp.repetitions, Repetitions::Adaptive { min: 3, max: 9 });
    assert_eq!(exp.variants[0].testbed.fs, FsKind::Xfs);
    assert_eq!(exp.variants[0].testbed.mount, "noatime");
    assert_eq!(exp.variants[1].testbed.fs, FsKind::Btrfs);
    assert_eq!(exp.variants[1].testbed.mount, "compress=zstd");
    assert_eq!(exp.variants[1].testbed.size.0, 512 << 20);
    assert_eq!(exp.variants[1].testbed.throttle.write_iops, Some(100));
    assert_eq!(exp.variants[0].testbed.sysfs, vec![("mb_max_to_scan".to_string(), "100".to_string())]);
    assert_eq!(exp.workloads[0].timeout, Some(std::time::Duration::from_secs(30)));
}

/// Each bad file must fail with `<file>:<line>:<col>` and the key named.
#[test]
fn bad_input_names_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str, &str)] = &[
        // (text, expected line, expected key/word in message)
        ("name = \"x\"\nrepititions = 3\n", ":2:", "repititions"),
        ("name = \"x\"\n[[variant]]\nname = \"a\"\nfs = \"zfs\"\n[[workload]]\nkind = \"untar\"\n", ":4:", "fs"),
        ("name = \"x\"\n[[variant]]\nname = \"a\"\nfs = \"ext4\"\nsize = \"1 parsec\"\n[[workload]]\nkind = \"untar\"\n", ":5:", "parsec"),
        ("name = \"x\"\n[[variant]]\nname = \"a\"\nfs = \"ext4\"\nthrottle = { write_bsp = \"1M\" }\n[[workload]]\nkind = \"untar\"\n", ":5:", "write_bsp"),
        ("name = \"x\"\n[[variant]]\nname = \"a\"\nfs = \"ext4\"\n[[variant]]\nname = \"a\"\nfs = \"xfs\"\n[[workload]]\nkind = \"untar\"\n", ":6:", "defined twice"),
        ("name = \"x\"\n[[variant]]\nname = \"a\"\nfs = \"ext4\"\n[[workload]]\nkind = \"untar\"\ncommand = \"ls\"\n", ":7:", "command"),
        ("name = \"x\"\n[[variant]]\nname = \"a\"\nfs = \"ext4\"\n[[workload]]\nkind = \"dance\"\n", ":6:", "kind"),
        ("name = \"x\"\n[[variant]]\nname = \"a\"\nfs = \"tmpfs\"\nthrottle = { write_bps = \"1M\" }\n[[workload]]\nkind = \"untar\"\n", ":4:", "throttle"),
        ("name = \"x\"\nrepetitions = { min = 5, max = 2 }\n[[variant]]\nname = \"a\"\nfs = \"ext4\"\n[[workload]]\nkind = \"untar\"\n", ":2:", "repetitions"),
        ("name = \"x\"\nbaseline = \"nope\"\n[[variant]]\nname = \"a\"\nfs = \"ext4\"\n[[workload]]\nkind = \"untar\"\n", ":2:", "baseline"),
        ("name = \"x\"\nsample_interval = \"10ms\"\n[[variant]]\nname = \"a\"\nfs = \"ext4\"\n[[workload]]\nkind = \"untar\"\n", ":2:", "sample_interval"),
        ("name = \"x\"\n[[variant]]\nname = \"a\"\nfs = \"ext4\"\n[[workload]]\nkind = \"untar\"\nscale = 3.0\n", ":7:", "scale"),
        ("name = \"x\"\n[[variant]]\nname = \"a\"\nfs = \"ext4\"\nscheduler = \"cfq\"\n[[workload]]\nkind = \"untar\"\n", ":5:", "scheduler"),
        ("name = \"x\"\n[[variant]]\nname = \"a\"\nfs = \"ext4\"\n[[workload]]\nkind = \"untar\"\ntimeout = \"soon\"\n", ":7:", "duration"),
        ("name = \"x\"\n[[variant]]\nname = \"a\"\n[[workload]]\nkind = \"untar\"\n", ":3:", "fs"),
        ("name = \"x\"\n[[variant]\n", ":2:", "x"),
        // One rule for names (issue 20 item 9): `/` and `,` cannot be addressed later.
        ("name = \"x\"\n[[variant]]\nname = \"a/b\"\nfs = \"ext4\"\n[[workload]]\nkind = \"untar\"\n", ":3:", "name"),
        ("name = \"x\"\n[[variant]]\nname = \"a,b\"\nfs = \"ext4\"\n[[workload]]\nkind = \"untar\"\n", ":3:", "letters, digits and `. _ - = +`"),
        ("name = \"x\"\n[[variant]]\nname = \"a\"\nfs = \"ext4\"\n[[workload]]\nkind = \"untar\"\nname = \"../../w\"\n", ":7:", "name"),
        ("name = \"x\"\n[[variant]]\nname = \"a\\u0007\"\nfs = \"ext4\"\n[[workload]]\nkind = \"untar\"\n", ":3:", "name"),
        // A leading `-` would be taken for a flag (`--variants -a`, `--baseline -a`; issue 28 item 6).
        ("name = \"x\"\n[[variant]]\nname = \"-a\"\nfs = \"ext4\"\n[[workload]]\nkind = \"untar\"\n", ":3:8: `name`", "starts with `-`"),
        ("name = \"x\"\n[[variant]]\nname = \"a\"\nfs = \"ext4\"\n[[workload]]\nkind = \"untar\"\nname = \"--w\"\n", ":7:8: `name`", "starts with `-`"),
        ("name = \"x\"\n[[variant]]\nname = \"a\"\nfs = \"ext4\"\ndevice = { model = \"floppy\" }\n[[workload]]\nkind = \"untar\"\n", ":5:", "device.model"),
        ("name = \"x\"\n[[variant]]\nname = \"a\"\nfs = \"ext4\"\ndevice = { model = \"sdcard\", rpm = 5400 }\n[[workload]]\nkind = \"untar\"\n", ":5:", "device.rpm"),
        ("name = \"x\"\n[defaults]\ndevice = { model = \"hdd\", seek_full = \"fast\" }\n[[variant]]\nname = \"a\"\nfs = \"ext4\"\n[[workload]]\nkind = \"untar\"\n", ":3:", "device.seek_full"),
        ("name = \"x\"\n[[variant]]\nname = \"a\"\nfs = \"tmpfs\"\ndevice = { model = \"sdcard\" }\n[[workload]]\nkind = \"untar\"\n", ":4:", "device"),
    ];
    for (i, (text, line, word)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("bad{i}.toml"));
        std::fs::write(&path, text).unwrap();
        let err = format!("{:#}", experiment::load(&path).unwrap_err());
        assert!(err.starts_with(&format!("{}{line}", path.display())), "case {i}: {err}");
        if *word != "x" {
            assert!(err.contains(word), "case {i}: `{word}` missing in: {err}");
        }
    }
}

#[test]
fn plans_interleave_group_and_shuffle_reproducibly() {
    let base = "name = \"p\"\nrepetitions = 3\nseed = 7\n[[variant]]\nname = \"a\"\nfs = \"ext4\"\n[[variant]]\nname = \"b\"\nfs = \"ext4\"\n[[workload]]\nkind = \"command\"\ncommand = \"true\"\n";
    let exp = experiment::parse(base, None).unwrap();
    let order: Vec<usize> = plan_rounds(&exp, 0, 3).iter().map(|r| r.variant).collect();
    assert_eq!(order, vec![0, 1, 0, 1, 0, 1]);

    let grouped = experiment::parse(&base.replace("seed = 7", "seed = 7\norder = \"grouped\""), None).unwrap();
    let order: Vec<usize> = plan_rounds(&grouped, 0, 3).iter().map(|r| r.variant).collect();
    assert_eq!(order, vec![0, 0, 0, 1, 1, 1]);

    let random = experiment::parse(&base.replace("seed = 7", "seed = 7\norder = \"randomized\""), None).unwrap();
    let plan = plan_rounds(&random, 0, 3);
    assert_eq!(plan, plan_rounds(&random, 0, 3), "same seed, same plan");
    // Every round still runs each variant exactly once.
    for round in 0..3 {
        let mut vs: Vec<usize> = plan.iter().filter(|r| r.round == round).map(|r| r.variant).collect();
        vs.sort();
        assert_eq!(vs, vec![0, 1]);
    }
    let seqs: Vec<usize> = plan.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, (0..6).collect::<Vec<_>>());
    // Rounds planned later continue the numbering, as adaptive repetition needs.
    assert_eq!(plan_rounds(&exp, 3, 1)[0].seq, 6);
}

#[test]
fn dry_run_prints_the_plan() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.toml");
    std::fs::write(&path, ISSUE_EXAMPLE).unwrap();
    let out =
        std::process::Command::new(env!("CARGO_BIN_EXE_fslab")).args(["run", "--dry-run"]).arg(&path).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("plan (10 runs)"), "{text}");
    assert!(text.contains("write_bps=32MiB/s"), "{text}");
    // Interleaved: fast, slow, fast, slow, …
    let lines: Vec<&str> = text.lines().filter(|l| l.contains(" round ")).collect();
    assert!(lines[0].contains("fast") && lines[1].contains("slow") && lines[2].contains("fast"), "{text}");
}

#[test]
fn media_models_per_variant_and_in_defaults_with_throttle_on_top() {
    let text = r#"
name = "media"
[defaults]
fs = "ext4"
device = { model = "sdcard" }
[[variant]]
name = "card"
throttle = { write_bps = "4MiB" }
[[variant]]
name = "disk"
device = { model = "hdd", rpm = 7200, seek_full = "15ms", seek_track = "1ms", mbps = 150 }
[[variant]]
name = "plain"
device = { model = "passthrough" }
[[workload]]
kind = "untar"
"#;
    let exp = experiment::parse(text, None).unwrap();
    let card = &exp.variants[0].testbed;
    assert_eq!(card.device.as_ref().unwrap().to_string(), "sdcard");
    assert_eq!(card.throttle.write_bps.unwrap().0, 4 << 20);
    assert_eq!(
        exp.variants[1].testbed.device.as_ref().unwrap().to_string(),
        "hdd(rpm=7200, seek_full=15000us, seek_track=1000us, mbps=150)"
    );
    assert_eq!(exp.variants[2].testbed.device.as_ref().unwrap().to_string(), "passthrough");
}

/// The dry run shows each variant's `device`: the preset and its model,
/// what the file changed, or a model given in full; in text and JSON
/// (issue 28 item 6).
#[test]
fn dry_run_shows_each_variants_device() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("media.toml");
    let text = r#"
name = "media"
repetitions = 1
[defaults]
fs = "ext4"
[[variant]]
name = "bare"
[[variant]]
name = "card"
device = { model = "sdcard" }
[[variant]]
name = "faster-card"
device = { model = "sdcard", open_aus = 4, write_mbps = 12.5 }
[[variant]]
name = "disk"
device = { model = "hdd", rpm = 7200, seek_full = "15ms", seek_track = "1ms", mbps = 110 }
[[variant]]
name = "own"
device = { model = "ssd", read_mbps = 500, write_mbps = 400, read_latency = "90us", write_latency = "30us" }
[[workload]]
kind = "command"
command = "true"
"#;
    std::fs::write(&path, text).unwrap();
    let dry_run = |format: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_fslab"))
            .args(["run", "--dry-run", "--format", format])
            .arg(&path)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let text = dry_run("text");
    let devices: Vec<&str> = text.lines().filter(|l| l.trim_start().starts_with("device:")).collect();
    assert_eq!(
        devices,
        [
            "    device: sdcard (flash model preset)",
            "    device: sdcard (flash model preset) with open_aus=4 write_mbps=12.5",
            "    device: hdd preset with rpm=7200 seek_full=15000us",
            "    device: ssd preset with read_mbps=500 write_mbps=400",
        ],
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_str(&dry_run("json")).unwrap();
    let variants = json["variants"].as_array().unwrap();
    assert_eq!(variants.len(), 5);
    assert!(variants[0]["device"].is_null());
    let faster = &variants[2]["device"];
    assert_eq!((faster["name"].as_str(), faster["params"]["model"].as_str()), (Some("sdcard"), Some("flash")));
    assert_eq!(faster["params"]["open_aus"], 4);
    assert_eq!(faster["changed"], serde_json::json!({ "open_aus": "4", "write_mbps": "12.5" }));
    assert_eq!(variants[1]["device"]["changed"], serde_json::json!({}));
}
