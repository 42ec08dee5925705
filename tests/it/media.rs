//! Media models on the real path: FUSE server → loop device (direct I/O)
//! → everything upstream. Needs root, /dev/fuse and fio.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fslab::media::evidence::Evidence;
use fslab::media::host::MediaServer;
use fslab::media::presets;
use fslab::testbed::{loopdev, FsKind, Testbed, TestbedConfig};

use crate::common;

fn ready() -> bool {
    if !common::root_or_skip() {
        return false;
    }
    if !Path::new("/dev/fuse").exists() || Command::new("fio").arg("--version").output().is_err() {
        fslab::testsupport::skip("media tests need /dev/fuse and fio");
        return false;
    }
    // The media server is `fslab media-serve`; this process is the test harness.
    common::children_run_fslab();
    true
}

#[test]
fn a_media_testbed_is_a_loop_device_on_the_served_image_and_leaves_nothing() {
    if !ready() {
        return;
    }
    let work = common::workdir("fslab-media");
    let mut config = TestbedConfig::new(FsKind::Ext4);
    config.size = fslab::units::Bytes(64 << 20);
    config.device = presets::find("sdcard");
    let mut bed = Testbed::provision(&config, work.path(), None).unwrap();
    let name = bed.dir.file_name().unwrap().to_string_lossy().into_owned();
    let dev = bed.device.clone().unwrap();
    let backing = loopdev::backing_file(&dev).unwrap();
    assert_eq!(backing, bed.dir.join("media/image"));
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(mountinfo.lines().any(|l| l.contains(&name) && l.contains(" - fuse fslab-media ")), "{mountinfo}");
    let kernel_name = bed.device_name.clone().unwrap();
    let max = std::fs::read_to_string(format!("/sys/block/{kernel_name}/queue/max_sectors_kb")).unwrap();
    assert_eq!(max.trim(), "1024");
    // mkfs and mount went through the model: AUs were opened.
    let server = bed.media.as_ref().unwrap();
    let before = server.evidence().unwrap();
    assert!(before.aus_opened > 0 && before.write_bytes > 0, "{before:?}");
    server.reset_evidence().unwrap();
    std::fs::write(bed.root().join("f"), vec![7u8; 1 << 20]).unwrap();
    let status = Command::new("sync").arg("-f").arg(bed.root().join("f")).status().unwrap();
    assert!(status.success());
    let after = bed.media.as_ref().unwrap().evidence().unwrap();
    assert!(after.write_bytes >= 1 << 20, "{after:?}");
    bed.teardown().unwrap();
    assert_eq!(common::leftovers(&name), Vec::<String>::new());
    assert!(!bed.dir.exists());
}

/// One fio job file's patterns against the loop device on a served image.
struct Pattern {
    name: &'static str,
    /// fio options after the common ones.
    options: &'static str,
    /// Requests fio issues (all of one size).
    requests: u64,
    /// The size bucket (index into `writes_by_size`) they all fall in.
    bucket: usize,
}

/// fio's run time (ms) of the slowest job, from its JSON.
fn fio_runtime_s(device: &Path, options: &str) -> f64 {
    let mut args: Vec<String> = vec![
        "--name=p".into(),
        format!("--filename={}", device.display()),
        "--direct=1".into(),
        "--ioengine=psync".into(),
        "--output-format=json".into(),
        "--randseed=7".into(),
        "--group_reporting=0".into(),
    ];
    args.extend(options.split_whitespace().map(String::from));
    let out = Command::new("fio").args(&args).stderr(Stdio::inherit()).output().unwrap();
    assert!(out.status.success(), "fio {args:?}: {}", String::from_utf8_lossy(&out.stdout));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let jobs = json["jobs"].as_array().unwrap();
    jobs.iter().map(|j| j["job_runtime"].as_f64().unwrap()).fold(0.0, f64::max) / 1000.0
}

/// Path fidelity: the time requests take through loop → FUSE is the time
/// the model charged (±10%), and the model sees each request whole.
#[test]
fn timing_requests_take_the_time_the_model_charged_and_arrive_whole() {
    if !ready() {
        return;
    }
    let work = common::workdir("fslab-media");
    let (dir, _) = fslab::sys::marker::create_marked_dir(work.path()).unwrap();
    let image = dir.join("disk.img");
    std::fs::File::create(&image).unwrap().set_len(256 << 20).unwrap();
    let spec = presets::find(&std::env::var("FSLAB_MEDIA_PRESET").unwrap_or("sdcard".into())).unwrap();
    let mut server = MediaServer::start(&spec, &image, &dir.join("media")).unwrap();
    let device = loopdev::attach(&server.image()).unwrap();
    let name = device.file_name().unwrap().to_string_lossy().into_owned();
    std::fs::write(format!("/sys/block/{name}/queue/max_sectors_kb"), "1024").unwrap();
    let patterns = [
        Pattern { name: "sequential 1 MiB", options: "--rw=write --bs=1M --size=8M", requests: 8, bucket: 8 },
        Pattern {
            name: "random 4 KiB",
            options: "--rw=randwrite --bs=4k --size=64M --number_ios=12",
            requests: 12,
            bucket: 0,
        },
        Pattern {
            name: "random 64 KiB",
            options: "--rw=randwrite --bs=64k --size=64M --number_ios=12",
            requests: 12,
            bucket: 4,
        },
        Pattern {
            name: "3 streams of 256 KiB",
            options: "--rw=write --bs=256k --size=2M --numjobs=3 --offset_increment=4M --offset=64M",
            requests: 24,
            bucket: 6,
        },
    ];
    let mut failures = Vec::new();
    // Completed write requests and sectors of the loop device (what the
    // block trace counts), from /sys/block/NAME/stat.
    let block_writes = || {
        let text = std::fs::read_to_string(format!("/sys/block/{name}/stat")).unwrap();
        let f: Vec<u64> = text.split_whitespace().map(|x| x.parse().unwrap()).collect();
        (f[4], f[6] * 512)
    };
    for p in &patterns {
        server.reset_evidence().unwrap();
        let started = Instant::now();
        let (writes_before, bytes_before) = block_writes();
        let fio_s = fio_runtime_s(&device, p.options);
        let (writes_after, bytes_after) = block_writes();
        let e: Evidence = server.evidence().unwrap();
        let (block_requests, block_bytes) = (writes_after - writes_before, bytes_after - bytes_before);
        let ratio = fio_s / e.busy_s;
        eprintln!(
            "{}: fio {fio_s:.3}s ({:.2} ms/request), model {:.3}s ({:.1}% off), {} requests, GC {} MB, host stalls {:.3}s, wall {:.1}s",
            p.name,
            fio_s * 1000.0 / e.requests().max(1) as f64,
            e.busy_s,
            (ratio - 1.0) * 100.0,
            e.requests(),
            e.gc_bytes / 1_000_000,
            e.late_s,
            started.elapsed().as_secs_f64()
        );
        // Time the host itself held the server up (page-cache writeback of
        // the image on a loaded machine) is recorded as `late_s` and
        // reported with the run; the model's own timing is what is checked.
        let unexplained = (fio_s - e.late_s) / e.busy_s - 1.0;
        if unexplained.abs() > 0.10 {
            failures.push(format!("{}: fio {fio_s:.3}s vs model {:.3}s", p.name, e.busy_s));
        }
        if e.requests() != block_requests || e.write_bytes != block_bytes {
            failures.push(format!(
                "{}: the model saw {} requests ({:?}, {} bytes), the block layer {block_requests} ({block_bytes} bytes)",
                p.name,
                e.requests(),
                e.writes_by_size,
                e.write_bytes
            ));
        }
        if p.bucket < 8 && e.writes_by_size[p.bucket] != p.requests {
            failures.push(format!(
                "{}: model saw {:?}, expected {} in bucket {}",
                p.name, e.writes_by_size, p.requests, p.bucket
            ));
        }
    }
    loopdev::detach(&device).unwrap();
    server.stop().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn sigkill_leaves_a_dead_fuse_mount_that_cleanup_removes() {
    if !ready() {
        return;
    }
    let _serial = crate::safety::cleanup_lock();
    let dir = common::workdir("fslab-media");
    let spec = common::write_spec(
        dir.path(),
        "card.toml",
        &format!(
            "name = \"card\"\nrepetitions = 1\nworkdir = \"{}\"\n[[variant]]\nname = \"a\"\nfs = \"ext4\"\nsize = \"64MiB\"\n\
             device = {{ model = \"sdcard\" }}\n[[workload]]\nkind = \"command\"\ncommand = \"sleep 60\"\n",
            dir.path().join("work").display()
        ),
    );
    let mut child = Command::new(common::fslab_bin())
        .arg("run")
        .arg(&spec)
        .arg("--db")
        .arg(dir.path().join("results.db"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let needle = format!("fslab-tb-{}-", child.id());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        if mountinfo.lines().any(|l| l.contains(&needle) && l.contains(" ext4 ")) {
            break;
        }
        assert!(Instant::now() < deadline, "the testbed never appeared");
        assert!(child.try_wait().unwrap().is_none(), "fslab exited early");
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    let _ = child.wait();
    let left = common::leftovers(&needle);
    assert!(left.iter().any(|l| l.contains(" - fuse fslab-media ")), "SIGKILL leaves the FUSE mount: {left:?}");
    // Its server is still there (its command line names the testbed), and
    // goes when cleanup unmounts it.
    let servers = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
            .filter(|c| {
                String::from_utf8_lossy(c).contains("media-serve") && String::from_utf8_lossy(c).contains(&needle)
            })
            .count()
    };
    assert_eq!(servers(), 1);
    let out = Command::new(common::fslab_bin())
        .arg("cleanup")
        .arg("--workdir")
        .arg(dir.path().join("work"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(common::leftovers(&needle), Vec::<String>::new(), "{stdout}");
    assert_eq!(common::testbed_dirs(&dir.path().join("work")), Vec::<String>::new());
    let deadline = Instant::now() + Duration::from_secs(10);
    while servers() > 0 {
        assert!(Instant::now() < deadline, "the media server outlived its mount");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Where FUSE is missing (here: a private mount namespace whose /dev is an
/// empty tmpfs, as in a container started without /dev/fuse), `fslab
/// quickstart` (the `sdcard` model) stops before its first testbed with
/// exit 3, naming the variant, the model and what to do; so does `fslab
/// run --dry-run` of the same file.
#[test]
fn without_fuse_the_quickstart_stops_before_anything_with_exit_3() {
    if !common::root_or_skip() {
        return;
    }
    let dir = common::workdir("fslab-media");
    let work = dir.path().join("work");
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", "mount -t tmpfs none /dev && exec \"$@\"", "sh"])
        .arg(common::fslab_bin())
        .arg("quickstart")
        .arg("--db")
        .arg(dir.path().join("r.db"))
        .arg("--workdir")
        .arg(&work)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("uses the media model `sdcard`") && stderr.contains("FUSE does not work here: /dev/fuse"),
        "{stderr}"
    );
    assert!(!stderr.contains("run 1/"), "no run started: {stderr}");
    assert_eq!(common::testbed_dirs(&work), Vec::<String>::new());
    assert_eq!(common::leftovers(&work.to_string_lossy()), Vec::<String>::new());
    // A dry run checks it too.
    let quickstart = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/quickstart.toml");
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", "mount -t tmpfs none /dev && exec \"$@\"", "sh"])
        .arg(common::fslab_bin())
        .args(["run", "--dry-run"])
        .arg(&quickstart)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("FUSE does not work here"), "{stderr}");
}

/// The media monitor on the host path: the run stores the model's account
/// as its `media` extra, and its `media/…` metrics are derived from that
/// account (issue 18 part 5: a monitor is one file plus one list line).
#[test]
fn a_run_on_a_model_stores_its_account_as_the_media_extra_and_its_metrics() {
    // No fio needed: the workload is a command.
    if !common::root_or_skip() {
        return;
    }
    if !Path::new("/dev/fuse").exists() {
        fslab::testsupport::skip("the media model needs /dev/fuse");
        return;
    }
    let dir = common::workdir("fslab-media-run");
    let text = format!(
        "name = \"media-extra\"\nrepetitions = 1\nworkdir = \"{}\"\n\
         [[variant]]\nname = \"card\"\nfs = \"ext4\"\nsize = \"64MiB\"\ndevice = {{ model = \"sdcard\" }}\n\
         [[workload]]\nkind = \"command\"\ncommand = 'dd if=/dev/zero of=f bs=64k count=16 status=none && sync f'\n",
        dir.path().join("work").display()
    );
    let spec = common::write_spec(dir.path(), "media.toml", &text);
    let db = dir.path().join("r.db");
    let out = Command::new(common::fslab_bin()).arg("run").arg(&spec).arg("--db").arg(&db).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let store = fslab::store::Store::open(&db).unwrap();
    let id = store.latest_experiment().unwrap().unwrap();
    let runs = store.runs(id).unwrap();
    assert_eq!(runs.len(), 1);
    let extras = store.run_extras(runs[0].id).unwrap();
    let media = extras.iter().find(|(k, _)| k == "media").map(|(_, v)| v.clone());
    let evidence: Evidence =
        serde_json::from_value(media.unwrap_or_else(|| panic!("no media extra: {extras:?}"))).unwrap();
    assert!(evidence.write_bytes >= 1 << 20, "{evidence:?}");
    let stored: Vec<(String, f64)> =
        runs[0].metrics.iter().filter(|m| m.name.starts_with("media/")).map(|m| (m.name.clone(), m.value)).collect();
    let derived: Vec<(String, f64)> = evidence.metrics().into_iter().map(|m| (m.name, m.value)).collect();
    assert_eq!(stored, derived);
    let work = dir.path().join("work");
    assert_eq!(common::testbed_dirs(&work), Vec::<String>::new());
    assert_eq!(common::leftovers(&work.to_string_lossy()), Vec::<String>::new());
}
