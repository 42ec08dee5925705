//! Filesystem-internal snapshot parsers on fixtures of each layout, the
//! snapshot/delta/metrics path on fake proc/sys trees, and (as root) on
//! live ext4, XFS and btrfs loop mounts.

use std::path::{Path, PathBuf};
use std::process::Command;

use fslab::fsinternal::{self, btrfs, ext4, xfs, FsData, FsDeltaData, Roots};

fn fx(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fsinternal").join(name)
}

fn text(name: &str) -> String {
    std::fs::read_to_string(fx(name)).unwrap()
}

// ---------------------------------------------------------------- ext4

#[test]
fn case_paste_fragment_size_tree_layout() {
    let s = ext4::parse_mb_structs_summary(&text("ext4-5.15-mb_structs_summary.case-paste.txt"), "paste").unwrap();
    assert_eq!(s.layout(), "fragment_size_tree");
    assert_eq!(s.optimize_scan, Some(true));
    assert_eq!(s.max_free_order_lists, vec![5, 0, 0, 0, 1, 0, 1, 1, 10, 1, 2, 0, 2, 55]);
    assert_eq!(s.groups_in_order_lists(), 78);
    let t = s.fragment_size_tree.as_ref().unwrap();
    assert_eq!((t.tree_min, t.tree_max, t.tree_nodes), (1, 31249, 79));
    assert!(s.avg_fragment_size_lists.is_none());
}

#[test]
fn kernel_5_15_tabbed_layout() {
    let s = ext4::parse_mb_structs_summary(&text("ext4-5.15-mb_structs_summary.txt"), "f").unwrap();
    assert_eq!(s.layout(), "fragment_size_tree");
    assert_eq!(s.optimize_scan, Some(false));
    assert_eq!(s.max_free_order_lists.len(), 14);
    assert_eq!(s.max_free_order_lists[13], 120);
    assert_eq!(s.max_free_order_lists[5], 5);
    assert_eq!(s.fragment_size_tree.unwrap().tree_nodes, 211);
}

#[test]
fn kernel_6_1_avg_fragment_size_lists_layout() {
    let s = ext4::parse_mb_structs_summary(&text("ext4-6.1-mb_structs_summary.txt"), "f").unwrap();
    assert_eq!(s.layout(), "avg_fragment_size_lists");
    assert!(s.fragment_size_tree.is_none());
    assert_eq!(s.max_free_order_lists.len(), 14);
    let avg = s.avg_fragment_size_lists.unwrap();
    assert_eq!(avg.len(), 14);
    assert_eq!(avg.iter().sum::<u64>(), 10 + 4 * 30);
}

#[test]
fn real_6_18_summaries_from_this_machine() {
    // 256 MiB mkfs.ext4 → 1 KiB blocks → 12 orders (0..=11), 32 groups.
    for f in ["ext4-6.18-mb_structs_summary.fresh.txt", "ext4-6.18-mb_structs_summary.used.txt"] {
        let s = ext4::parse_mb_structs_summary(&text(f), f).unwrap();
        assert_eq!(s.layout(), "avg_fragment_size_lists", "{f}");
        assert_eq!(s.max_free_order_lists.len(), 12, "{f}");
        assert_eq!(s.avg_fragment_size_lists.as_ref().unwrap().len(), 12, "{f}");
    }
    let used = ext4::parse_mb_structs_summary(&text("ext4-6.18-mb_structs_summary.used.txt"), "u").unwrap();
    assert_eq!(used.max_free_order_lists, vec![0, 0, 0, 0, 1, 0, 0, 1, 0, 1, 0, 27]);
}

#[test]
fn real_6_18_mb_groups_totals() {
    // Expected totals computed independently with awk over the fixture.
    let fresh = ext4::parse_mb_groups(&text("ext4-6.18-mb_groups.fresh.txt"), "fresh").unwrap();
    assert_eq!((fresh.groups, fresh.free_blocks, fresh.fragments), (32, 235417, 30));
    assert_eq!(fresh.order_counts, vec![9, 2, 9, 9, 8, 9, 10, 10, 2, 8, 9, 107, 0, 0]);
    let used = ext4::parse_mb_groups(&text("ext4-6.18-mb_groups.used.txt"), "used").unwrap();
    assert_eq!((used.groups, used.free_blocks, used.fragments), (32, 220560, 38));
    assert_eq!(used.order_counts, vec![12, 4, 13, 13, 8, 9, 9, 10, 2, 9, 8, 100, 0, 0]);
    assert_eq!(used.largest_free_order(), Some(11));
    assert_eq!(used.io_error_groups, 0);
    // Groups whose `free` column differs between the two files, counted
    // independently with awk: 3. The other way round is the same set.
    assert_eq!(fresh.groups_touched(&used), Some(3));
    assert_eq!(used.groups_touched(&fresh), Some(3));
    assert_eq!(fresh.groups_touched(&fresh), Some(0));
    let metrics = ext4::delta(
        &ext4::Ext4Snapshot { mb_structs_summary: None, mb_groups: Some(fresh.clone()), notes: vec![] },
        &ext4::Ext4Snapshot { mb_structs_summary: None, mb_groups: Some(used.clone()), notes: vec![] },
    )
    .metrics();
    let touched = metrics.iter().find(|m| m.name == "ext4.groups_touched").expect("groups_touched metric");
    assert_eq!(touched.value, 3.0);
    // A snapshot stored before per-group counts existed has none: no figure, not 0.
    let old = ext4::MbGroupsSummary { group_free_blocks: vec![], ..used };
    assert_eq!(fresh.groups_touched(&old), None);
}

#[test]
fn mb_groups_io_error_row_and_4k_orders() {
    let g = ext4::parse_mb_groups(&text("ext4-4k-mb_groups.with-io-error.txt"), "g").unwrap();
    assert_eq!(g.groups, 3);
    assert_eq!(g.io_error_groups, 1);
    assert_eq!(g.free_blocks, 100 + 32768 + 7);
    assert_eq!(g.fragments, 8);
    assert_eq!(g.order_counts[0], 3);
    assert_eq!(g.order_counts[1], 2);
    assert_eq!(g.order_counts[13], 4);
    assert_eq!(g.largest_free_order(), Some(13));
    assert_eq!(g.extents_below_order(4), 6);
    // The I/O-error group keeps its place, so groups line up between snapshots.
    assert_eq!(g.group_free_blocks, vec![Some(100), Some(32768), None, Some(7)]);
}

#[test]
fn mb_groups_columns_found_by_header_name() {
    // Columns reordered: the parser must follow the header, not positions.
    let t = "#group: frags free [ 2^1 2^0 ]\n#0 : 2 10 [ 1 3 ]\n#1 : 1 4 [ 0 1 ]\n";
    let g = ext4::parse_mb_groups(t, "reordered").unwrap();
    assert_eq!((g.free_blocks, g.fragments), (14, 3));
    assert_eq!(g.order_counts, vec![4, 1]);
}

fn err_of<T: std::fmt::Debug, E: std::fmt::Display>(r: Result<T, E>) -> String {
    r.unwrap_err().to_string()
}

#[test]
fn malformed_ext4_names_file_and_line() {
    let e = err_of(ext4::parse_mb_structs_summary(&text("ext4-bad-mb_structs_summary.txt"), "bad-summary"));
    assert!(e.starts_with("bad-summary:4:"), "{e}");
    assert!(e.contains("many"), "{e}");
    let e = err_of(ext4::parse_mb_groups(&text("ext4-bad-mb_groups.txt"), "bad-groups"));
    assert!(e.starts_with("bad-groups:3:"), "{e}");
    // Truncated files and layouts missing their second half.
    let e = err_of(ext4::parse_mb_structs_summary("", "empty"));
    assert!(e.starts_with("empty:"), "{e}");
    let e = err_of(ext4::parse_mb_structs_summary(
        "optimize_scan: 1\nmax_free_order_lists:\n\tlist_order_0_groups: 1\n",
        "half",
    ));
    assert!(e.contains("neither"), "{e}");
    let e = err_of(ext4::parse_mb_structs_summary(
        "max_free_order_lists:\n\tlist_order_0_groups: 1\n\tlist_order_2_groups: 1\navg_fragment_size_lists:\n",
        "gap",
    ));
    assert!(e.starts_with("gap:3:"), "{e}");
    let e =
        err_of(ext4::parse_mb_structs_summary("max_free_order_lists:\nfragment_size_tree:\n\ttree_min: 1\n", "tree"));
    assert!(e.contains("tree_max"), "{e}");
    let e = err_of(ext4::parse_mb_groups("#0 : 1 2 3 [ ]\n", "nohdr"));
    assert!(e.starts_with("nohdr:1:"), "{e}");
    let e = err_of(ext4::parse_mb_groups("#group: free frags [ 2^0 ]\n#x : 1 1 [ 1 ]\n", "grp"));
    assert!(e.starts_with("grp:2:"), "{e}");
    let e = err_of(ext4::parse_mb_groups("#group: free [ 2^0 ]\n", "nofrags"));
    assert!(e.contains("frags"), "{e}");
}

#[test]
fn garbage_never_panics() {
    let inputs = [
        "",
        "\n\n",
        ":",
        "::::",
        "#",
        "#group:",
        "#group: free frags\n#",
        "#group: free frags [ 2^99999999999 ]",
        "#group: free frags [ 2^64 ]\n",
        "list_order__groups: 1",
        "list_order_18446744073709551616_groups: 1",
        "optimize_scan: -1",
        "\u{0}\u{1}\u{fffd}",
        "max_free_order_lists:\n\tlist_order_0_groups: 99999999999999999999999",
        "extent_alloc",
        "1 2 3",
        "xpc 1 2 3 4 5 6 7 8 9 10 18446744073709551615",
    ];
    for t in inputs {
        let _ = ext4::parse_mb_structs_summary(t, "g");
        let _ = ext4::parse_mb_groups(t, "g");
        let _ = xfs::parse_stats(t, "g");
        let _ = btrfs::parse_counter_file(t, "g");
        let _ = btrfs::parse_commit_stats(t, "g");
    }
    // Every prefix of every real fixture: parse or error, never panic.
    for f in [
        "ext4-6.18-mb_groups.used.txt",
        "ext4-6.18-mb_structs_summary.used.txt",
        "ext4-5.15-mb_structs_summary.case-paste.txt",
        "xfs-6.18-stats.after.txt",
    ] {
        let t = text(f);
        for cut in (0..t.len()).step_by(7) {
            let p = &t[..cut];
            let _ = ext4::parse_mb_structs_summary(p, f);
            let _ = ext4::parse_mb_groups(p, f);
            let _ = xfs::parse_stats(p, f);
        }
    }
}

// ---------------------------------------------------------------- XFS

#[test]
fn xfs_stats_by_line_name_6_18_and_5_4() {
    let a = xfs::parse_stats(&text("xfs-6.18-stats.after.txt"), "a").unwrap();
    assert_eq!(a.counters["extent_alloc"], vec![205, 2478, 0, 0]);
    assert_eq!(a.counters["xpc"], vec![10043392, 9630387, 0]);
    assert_eq!(a.counters["rtrefcntbt"].len(), 15);
    assert!(a.counters.contains_key("defer_relog"));
    let h = a.headline();
    assert_eq!(h.alloc_extents, Some(205));
    assert_eq!(h.trans_async, Some(1006));
    assert_eq!(h.log_writes, Some(3));
    assert_eq!(h.ig_attempts, Some(201));
    assert_eq!(h.write_bytes, Some(9630387));

    let old = xfs::parse_stats(&text("xfs-5.4-stats.txt"), "old").unwrap();
    assert!(!old.counters.contains_key("defer_relog"));
    assert_eq!(old.headline().log_forces, Some(13497064));
    // The global /proc/fs/xfs/stat has the same format.
    xfs::parse_stats(&text("xfs-6.18-proc-stat.txt"), "global").unwrap();
}

#[test]
fn xfs_delta_and_metrics() {
    let b = xfs::read_stats_file(&fx("xfs-6.18-stats.before.txt")).unwrap();
    let a = xfs::read_stats_file(&fx("xfs-6.18-stats.after.txt")).unwrap();
    let d = xfs::delta(&b, &a);
    let exp = |name: &str, i: usize| a.stats.counters[name][i] as i64 - b.stats.counters[name][i] as i64;
    assert_eq!(d.get("extent_alloc", 0), Some(exp("extent_alloc", 0)));
    assert!(d.get("extent_alloc", 0).unwrap() > 0, "files were written between the captures");
    assert!(d.unmatched.is_empty());
    let m = d.metrics();
    let get = |n: &str| m.iter().find(|x| x.name == n).unwrap_or_else(|| panic!("no {n} in {m:?}"));
    assert_eq!(get("xfs.alloc_extents").value, exp("extent_alloc", 0) as f64);
    let trans = exp("trans", 0) + exp("trans", 1) + exp("trans", 2);
    assert_eq!(get("xfs.transactions").value, trans as f64);
    assert_eq!(get("xfs.log_writes").value, exp("log", 0) as f64);
    assert_eq!(get("xfs.inode_gets").value, exp("ig", 0) as f64);
    assert!(!get("xfs.log_writes").higher_is_better);
    // Lines on only one side are reported, not subtracted.
    let old = xfs::read_stats_file(&fx("xfs-5.4-stats.txt")).unwrap();
    let d = xfs::delta(&old, &a);
    assert!(d.unmatched.contains(&"defer_relog".to_string()), "{:?}", d.unmatched);
}

#[test]
fn malformed_xfs_names_file_and_line() {
    let e = err_of(xfs::read_stats_file(&fx("xfs-bad-stats.txt")));
    assert!(e.contains("xfs-bad-stats.txt:3:"), "{e}");
    assert!(e.contains("-1"), "{e}");
    let e = err_of(xfs::parse_stats("trans 1 2 3\ntrans 1 2 3\n", "dup"));
    assert!(e.starts_with("dup:2:"), "{e}");
    let e = err_of(xfs::parse_stats("trans\n", "novals"));
    assert!(e.starts_with("novals:1:"), "{e}");
    let e = err_of(xfs::parse_stats("", "empty"));
    assert!(e.starts_with("empty:"), "{e}");
}

// ---------------------------------------------------------------- btrfs

#[test]
fn btrfs_sysfs_tree() {
    let s = btrfs::read_dir(&fx("btrfs-6.18")).unwrap();
    assert_eq!(s.get("data", "bytes_used"), Some(10457088));
    assert_eq!(s.get("data", "total_bytes"), Some(41943040));
    assert_eq!(s.get("data", "single/used_bytes"), Some(10457088));
    assert_eq!(s.get("metadata", "disk_used"), Some(557056));
    assert_eq!(s.get("data", "size_classes.small"), Some(2));
    assert!(s.allocation.contains_key("system"));
    assert!(s.global.contains_key("global_rsv_size"));
    let cs = s.commit_stats.as_ref().unwrap();
    assert_eq!(cs["commits"], 3);
    assert_eq!(cs["total_commit_ms"], 20);

    let mut before = s.clone();
    before.allocation.get_mut("data").unwrap().insert("bytes_used".into(), 1_000_000);
    before.commit_stats.as_mut().unwrap().insert("commits".into(), 1);
    let d = btrfs::delta(&before, &s);
    assert_eq!(d.get("data", "bytes_used"), Some(10457088 - 1_000_000));
    assert_eq!(d.get("metadata", "bytes_used"), Some(0));
    let m = d.metrics();
    let get = |n: &str| m.iter().find(|x| x.name == n).unwrap_or_else(|| panic!("no {n} in {m:?}")).value;
    assert_eq!(get("btrfs.data_bytes_used_delta"), (10457088 - 1_000_000) as f64);
    assert_eq!(get("btrfs.commits"), 2.0);
    assert_eq!(get("btrfs.commit_ms_max_after"), 9.0);
}

#[test]
fn malformed_btrfs_names_file_and_line() {
    let e = err_of(btrfs::read_dir(&fx("btrfs-bad")));
    assert!(e.contains("bytes_used:1:"), "{e}");
    let e = err_of(btrfs::parse_commit_stats(&text("btrfs-bad/commit_stats"), "cs"));
    assert!(e.starts_with("cs:2:"), "{e}");
    let e = err_of(btrfs::find_fs_dir(&fx("btrfs-6.18"), "loop99"));
    assert!(e.contains("loop99"), "{e}");
}

// ---------------------------------------------------------------- snapshot/delta on fake roots

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(from, to).unwrap();
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        if p.is_dir() {
            copy_tree(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn snapshot_delta_metrics_on_fake_roots() {
    let t = tempfile::Builder::new().prefix("fslab-test-roots").tempdir().unwrap();
    let roots = Roots { proc: t.path().join("proc"), sys: t.path().join("sys") };
    let e4 = roots.proc.join("fs/ext4/mmcblk1p2");
    let mp = Path::new("/mnt/x");

    // ext4: before = fresh, after = used (real 6.18 captures).
    copy(&fx("ext4-6.18-mb_structs_summary.fresh.txt"), &e4.join("mb_structs_summary"));
    copy(&fx("ext4-6.18-mb_groups.fresh.txt"), &e4.join("mb_groups"));
    let before = fsinternal::snapshot_with_roots(&roots, "ext4", "/dev/mmcblk1p2", mp).unwrap();
    copy(&fx("ext4-6.18-mb_structs_summary.used.txt"), &e4.join("mb_structs_summary"));
    copy(&fx("ext4-6.18-mb_groups.used.txt"), &e4.join("mb_groups"));
    let after = fsinternal::snapshot_with_roots(&roots, "ext4", "mmcblk1p2", mp).unwrap();
    assert_eq!(after.device, "mmcblk1p2");
    // Round-trips through JSON (the runner stores it).
    let json = serde_json::to_string(&after).unwrap();
    let back: fsinternal::FsSnapshot = serde_json::from_str(&json).unwrap();
    assert_eq!(back, after);

    let d = fsinternal::delta(&before, &after);
    let FsDeltaData::Ext4(ed) = &d.data else { panic!("{d:?}") };
    let g = ed.mb_groups.as_ref().unwrap();
    assert_eq!(g.free_blocks, 220560 - 235417);
    assert_eq!(g.fragments, 8);
    assert_eq!(g.order_counts[0], 3);
    serde_json::to_string(&d).unwrap();
    let m = d.metrics();
    let get = |n: &str| m.iter().find(|x| x.name == n).unwrap_or_else(|| panic!("no {n} in {m:?}")).clone();
    assert_eq!(get("ext4.free_fragments_delta").value, 8.0);
    assert!(!get("ext4.free_fragments_delta").higher_is_better);
    assert_eq!(get("ext4.free_fragments_after").value, 38.0);
    // Orders 0..3: (12+4+13+13) - (9+2+9+9)
    assert_eq!(get("ext4.small_free_extents_delta").value, 13.0);
    assert_eq!(get("ext4.free_blocks_delta").value, (220560 - 235417) as f64);
    assert!((get("ext4.mean_free_extent_blocks_after").value - 220560.0 / 38.0).abs() < 1e-9);
    assert!(get("ext4.mean_max_free_order_after").higher_is_better);
    // The "fresh" capture was read before mb_groups loaded the buddies, so its
    // lists are empty: no mean before, hence no delta metric.
    assert_eq!(ed.mb_structs_summary.as_ref().unwrap().mean_max_free_order_before, None);
    assert!(m.iter().all(|x| x.name != "ext4.mean_max_free_order_delta"), "{m:?}");

    // Layout change between snapshots (e.g. 5.15 paste vs 6.1) still gives the order-list delta.
    let old = ext4::parse_mb_structs_summary(&text("ext4-5.15-mb_structs_summary.case-paste.txt"), "p").unwrap();
    let new = ext4::parse_mb_structs_summary(&text("ext4-6.1-mb_structs_summary.txt"), "n").unwrap();
    let mk = |s| ext4::Ext4Snapshot { mb_structs_summary: Some(s), mb_groups: None, notes: vec![] };
    let sd = ext4::delta(&mk(old), &mk(new)).mb_structs_summary.unwrap();
    assert_eq!(sd.layout_before, "fragment_size_tree");
    assert_eq!(sd.layout_after, "avg_fragment_size_lists");
    assert_eq!(sd.max_free_order_lists[13], 100 - 55);
    assert_eq!(sd.tree_nodes, None);

    // XFS
    let xd = roots.sys.join("fs/xfs/loop3/stats");
    copy(&fx("xfs-6.18-stats.before.txt"), &xd.join("stats"));
    let xb = fsinternal::snapshot_with_roots(&roots, "xfs", "loop3", mp).unwrap();
    copy(&fx("xfs-6.18-stats.after.txt"), &xd.join("stats"));
    let xa = fsinternal::snapshot_with_roots(&roots, "xfs", "loop3", mp).unwrap();
    let FsData::Xfs(x) = &xa.data else { panic!() };
    assert_eq!(x.headline.alloc_extents, Some(205));
    let xm = fsinternal::delta(&xb, &xa).metrics();
    assert!(xm.iter().any(|m| m.name == "xfs.alloc_extents" && m.value > 0.0), "{xm:?}");

    // btrfs: found through devices/<dev>.
    let bdir = roots.sys.join("fs/btrfs/c88eeb38-92a4-42e3-aa55-09cdc58035f3");
    copy_tree(&fx("btrfs-6.18"), &bdir);
    std::fs::create_dir_all(bdir.join("devices/loop5")).unwrap();
    std::fs::create_dir_all(roots.sys.join("fs/btrfs/features")).unwrap();
    let bs = fsinternal::snapshot_with_roots(&roots, "btrfs", "loop5", mp).unwrap();
    let FsData::Btrfs(b) = &bs.data else { panic!() };
    assert_eq!(b.uuid, "c88eeb38-92a4-42e3-aa55-09cdc58035f3");
    assert!(fsinternal::snapshot_with_roots(&roots, "btrfs", "loop6", mp).is_err());

    // Unsupported and mismatched.
    let f2 = fsinternal::snapshot_with_roots(&roots, "f2fs", "loop7", mp).unwrap();
    assert!(matches!(f2.data, FsData::Unsupported { .. }));
    assert!(fsinternal::delta(&f2, &f2).metrics().is_empty());
    assert!(matches!(fsinternal::delta(&bs, &xa).data, FsDeltaData::Unavailable { .. }));

    // Missing device directory → error naming it; malformed file → error naming file and line.
    let e = fsinternal::snapshot_with_roots(&roots, "ext4", "sdz9", mp).unwrap_err().to_string();
    assert!(e.contains("sdz9"), "{e}");
    copy(&fx("ext4-bad-mb_groups.txt"), &e4.join("mb_groups"));
    let e = fsinternal::snapshot_with_roots(&roots, "ext4", "mmcblk1p2", mp).unwrap_err().to_string();
    assert!(e.contains("mb_groups:3:"), "{e}");
}

// ---------------------------------------------------------------- live loop mounts (root only)

/// An image file on a loop device, mounted; everything undone on drop, even on panic.
struct LiveFs {
    dir: tempfile::TempDir,
    loopdev: Option<String>,
    mounted: bool,
}

impl LiveFs {
    fn mnt(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }

    fn dev_name(&self) -> String {
        self.loopdev.as_deref().unwrap().trim_start_matches("/dev/").to_string()
    }
}

impl Drop for LiveFs {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg(self.mnt()).status();
        }
        if let Some(dev) = &self.loopdev {
            let _ = Command::new("losetup").arg("-d").arg(dev).status();
        }
    }
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn can_loop_mount(mkfs: &str) -> bool {
    let root = nix::unistd::Uid::effective().is_root();
    let tools = ["losetup", mkfs].iter().all(|t| {
        Command::new("sh")
            .arg("-c")
            .arg(format!("command -v {t}"))
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    });
    if !(root && tools && Path::new("/dev/loop-control").exists()) {
        fslab::testsupport::skip(&format!("live {mkfs} test needs root, losetup, {mkfs} and /dev/loop-control"));
        return false;
    }
    true
}

fn live(mkfs: &str, mkfs_args: &[&str], size_mib: u64) -> LiveFs {
    let dir = tempfile::Builder::new().prefix("fslab-test-fsi").tempdir().unwrap();
    let img = dir.path().join("fslab-test.img");
    std::fs::File::create(&img).unwrap().set_len(size_mib << 20).unwrap();
    std::fs::create_dir(dir.path().join("mnt")).unwrap();
    let mut fs = LiveFs { dir, loopdev: None, mounted: false };
    let out = Command::new("losetup").args(["--find", "--show"]).arg(&img).output().unwrap();
    assert!(out.status.success(), "losetup: {}", String::from_utf8_lossy(&out.stderr));
    fs.loopdev = Some(String::from_utf8_lossy(&out.stdout).trim().to_string());
    let dev = fs.loopdev.clone().unwrap();
    run(Command::new(mkfs).args(mkfs_args).arg(&dev));
    run(Command::new("mount").arg(&dev).arg(fs.mnt()));
    fs.mounted = true;
    fs
}

fn write_files(dir: &Path, n: usize) {
    for i in 0..n {
        std::fs::write(dir.join(format!("f{i}")), vec![i as u8; 4096 * (1 + i % 37)]).unwrap();
    }
    for i in (0..n).step_by(3) {
        std::fs::remove_file(dir.join(format!("f{i}"))).unwrap();
    }
    run(Command::new("sync").arg("-f").arg(dir));
}

fn live_round(
    fstype: &str,
    fs: &LiveFs,
) -> (fsinternal::FsSnapshot, fsinternal::FsSnapshot, Vec<fslab::metric::Metric>) {
    let before = fsinternal::snapshot(fstype, &fs.dev_name(), &fs.mnt()).unwrap();
    write_files(&fs.mnt(), 300);
    let after = fsinternal::snapshot(fstype, &fs.dev_name(), &fs.mnt()).unwrap();
    let m = fsinternal::delta(&before, &after).metrics();
    assert!(!m.is_empty());
    (before, after, m)
}

#[test]
fn live_ext4() {
    if !can_loop_mount("mkfs.ext4") {
        return;
    }
    let fs = live("mkfs.ext4", &["-q", "-F"], 256);
    let (_, after, m) = live_round("ext4", &fs);
    let FsData::Ext4(e) = &after.data else { panic!() };
    // mb_groups is read first, so every group with free space is on the lists.
    let s = e.mb_structs_summary.as_ref().unwrap_or_else(|| panic!("{:?}", e.notes));
    assert!(s.groups_in_order_lists() > 0, "{s:?}");
    assert!(m.iter().any(|x| x.name == "ext4.mean_max_free_order_delta"), "{m:?}");
    assert!(e.mb_groups.as_ref().unwrap().groups > 0);
    let freed = m.iter().find(|x| x.name == "ext4.free_blocks_delta").unwrap();
    assert!(freed.value < 0.0, "writing files must consume free blocks: {m:?}");
}

#[test]
fn live_xfs() {
    if !can_loop_mount("mkfs.xfs") {
        return;
    }
    // mkfs.xfs refuses filesystems under 300 MB.
    let fs = live("mkfs.xfs", &["-q", "-f"], 320);
    let (_, _, m) = live_round("xfs", &fs);
    let alloc = m.iter().find(|x| x.name == "xfs.alloc_extents").unwrap();
    assert!(alloc.value > 0.0, "{m:?}");
}

#[test]
fn live_btrfs() {
    if !can_loop_mount("mkfs.btrfs") {
        return;
    }
    let fs = live("mkfs.btrfs", &["-q", "-f"], 256);
    let (_, _, m) = live_round("btrfs", &fs);
    let used = m.iter().find(|x| x.name == "btrfs.data_bytes_used_delta").unwrap();
    assert!(used.value > 0.0, "{m:?}");
}
