//! `fslab device probe`: probe consistency (issue 17, part 5). The probe
//! runs against each flash preset served through fslab's own path (FUSE
//! server, direct-I/O loop device), end to end through the CLI, and must
//! recover the preset's open-AU limit exactly and its AU size within a
//! factor of 2; the `device` line it prints must parse back to a model
//! with those figures. Needs root and /dev/fuse.

use std::path::Path;
use std::process::{Command, Stdio};

use fslab::media::presets;
use fslab::media::spec::MediaParams;

use crate::common;

/// Every flash preset, probed at the same time (each model serves one
/// request at a time and mostly sleeps, so they barely disturb each
/// other): the slowest, `usb-stick` (8 MiB AUs copied at 15 MB/s), takes
/// about 35 s with `--quick`.
#[test]
fn timing_device_probe_recovers_each_flash_presets_au_and_open_au_limit() {
    if !common::root_or_skip() {
        return;
    }
    if !Path::new("/dev/fuse").exists() {
        fslab::testsupport::skip("device probe --model needs /dev/fuse");
        return;
    }
    let work = common::workdir("fslab-probe");
    let probes: Vec<(&str, std::process::Child)> = ["sdcard", "emmc", "usb-stick"]
        .into_iter()
        .map(|preset| {
            // One of them asks with the hidden `--json`, the others with `--format json`.
            let json: &[&str] = if preset == "usb-stick" { &["--json"] } else { &["--format", "json"] };
            let child = Command::new(common::fslab_bin())
                .args(["device", "probe", "--model", preset, "--quick"])
                .args(json)
                .arg("--workdir")
                .arg(work.path())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (preset, child)
        })
        .collect();
    let mut failures = Vec::new();
    for (preset, child) in probes {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{preset}: {}", String::from_utf8_lossy(&out.stderr));
        let probe: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let MediaParams::Flash(want) = presets::find(preset).unwrap().params else { panic!("{preset} is flash") };
        let au = probe["au"].as_u64();
        let open = probe["open_aus"].as_u64();
        eprintln!(
            "{preset}: au {au:?} (preset {}), open_aus {open:?} (preset {}), page {} (preset {}), linear_only {} \
             (preset {}), write {} read {} copy {} MB/s, {:.1} s",
            want.au,
            want.open_aus,
            probe["page"],
            want.page,
            probe["linear_only"],
            want.linear_only,
            probe["write"]["mbps"],
            probe["read"]["mbps"],
            probe["copy_mbps"],
            probe["elapsed_s"].as_f64().unwrap_or(0.0)
        );
        // The line `--format toml` prints is one an experiment file takes.
        let line = probe["device_line"].as_str().unwrap();
        let doc: toml::Table = toml::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        let parsed = fslab::media::DeviceSpec::parse(&doc["device"]).unwrap_or_else(|e| panic!("{line}: {e:?}"));
        let MediaParams::Flash(emulated) = parsed.params else { panic!("{line} is not a flash model") };
        assert_eq!((Some(emulated.au), Some(u64::from(emulated.open_aus))), (au, open), "{line}");
        if open != Some(u64::from(want.open_aus)) {
            failures.push(format!("{preset}: open AUs {open:?}, preset {}", want.open_aus));
        }
        let ratio = au.map_or(f64::INFINITY, |a| a as f64 / want.au as f64);
        if !(0.5..=2.0).contains(&ratio) {
            failures.push(format!("{preset}: AU {au:?}, preset {}", want.au));
        }
    }
    assert!(failures.is_empty(), "{failures:?}");
    assert_eq!(common::testbed_dirs(work.path()), Vec::<String>::new());
}

#[test]
fn device_probe_refuses_a_device_without_destroy_data_and_anything_not_a_block_device() {
    let work = common::workdir("fslab-probe-refuse");
    let file = work.path().join("not-a-device");
    std::fs::write(&file, b"x").unwrap();
    let run = |args: &[&str]| Command::new(common::fslab_bin()).args(args).output().unwrap();
    let path = file.to_str().unwrap();
    if !common::root_or_skip() {
        return;
    }
    let out = run(&["device", "probe", path]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--destroy-data"));
    let out = run(&["device", "probe", path, "--destroy-data"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not a block device"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&["device", "probe", "--model", "floppy"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown model"));
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
}

/// A real block device (a loop device on a sparse file, no model): the
/// probe writes only inside `--region`, which the file's allocated
/// extents show (SEEK_DATA/SEEK_HOLE), and finds no AU behaviour on it.
#[test]
fn device_probe_writes_only_inside_its_region() {
    if !common::root_or_skip() {
        return;
    }
    let work = common::workdir("fslab-probe-region");
    let image = work.path().join("disk");
    let size: u64 = 7 << 30;
    std::fs::File::create(&image).unwrap().set_len(size).unwrap();
    let dev = fslab::testbed::loopdev::attach(&image).unwrap();
    struct Detach(std::path::PathBuf);
    impl Drop for Detach {
        fn drop(&mut self) {
            let _ = fslab::testbed::loopdev::detach(&self.0);
        }
    }
    let _detach = Detach(dev.clone());
    let (start, len): (u64, u64) = (1 << 30, 5504 << 20);
    let region = format!("{start}:{len}");
    let out = Command::new(common::fslab_bin())
        .args(["device", "probe", "--quick", "--format", "json", "--destroy-data", "--region", &region])
        .arg(&dev)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let probe: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(probe["au"].is_null(), "a plain loop device has no AUs: {}", probe["au_steps"]);
    assert!(probe["device_line"].as_str().unwrap().contains("model = \"ssd\""), "{}", probe["device_line"]);
    // Every allocated extent of the backing file lies inside the region.
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(&image).unwrap();
    let fd = file.as_raw_fd();
    let mut at: i64 = 0;
    let mut extents = 0;
    loop {
        let data = unsafe { libc::lseek(fd, at, libc::SEEK_DATA) };
        if data < 0 {
            break; // ENXIO: no data after `at`
        }
        let hole = unsafe { libc::lseek(fd, data, libc::SEEK_HOLE) };
        assert!(
            data as u64 >= start && hole as u64 <= start + len,
            "data at {data}..{hole}, outside the region {start}..{}",
            start + len
        );
        extents += 1;
        at = hole;
    }
    assert!(extents > 0, "the probe wrote nothing");
    // The same device without --region but a region that does not fit: refused.
    let out = Command::new(common::fslab_bin())
        .args(["device", "probe", "--destroy-data", "--region", "2GiB:5504MiB"])
        .arg(&dev)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("beyond the device"));
}
