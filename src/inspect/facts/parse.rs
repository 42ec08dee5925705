//! Parsers for the text of other tools and kernel files the facts are read
//! from. Each takes text and returns what it found; missing or odd fields
//! stay `None` (these are inspection aids, not inputs a user wrote) except
//! for user-written mount option lists, whose errors name the item.

use std::collections::BTreeMap;

use super::model::{BtrfsFacts, Ext4Facts, PreemptModel, XfsFacts};
use crate::inspect::kconfig::KValue;

/// Work out the preemption model, most authoritative source first:
/// debugfs `sched/preempt`, then `preempt=` on the command line (only with
/// `PREEMPT_DYNAMIC`), then the config, then the `uname -v` banner.
pub(crate) fn preempt_model(
    kconfig: Option<&BTreeMap<String, KValue>>,
    cmdline: Option<&str>,
    debugfs: Option<&str>,
    uname_v: Option<&str>,
) -> (Option<PreemptModel>, Option<String>) {
    if let Some(m) = debugfs.and_then(parse_debugfs_preempt) {
        return (Some(m), Some("/sys/kernel/debug/sched/preempt".to_string()));
    }
    let on = |name: &str| kconfig.is_some_and(|k| k.get(name) == Some(&KValue::Yes));
    if kconfig.is_some() {
        if on("PREEMPT_RT") || on("PREEMPT_RT_FULL") {
            return (Some(PreemptModel::Rt), Some("kernel config: PREEMPT_RT=y".to_string()));
        }
        if on("PREEMPT_DYNAMIC") {
            if let Some(m) =
                cmdline.map(parse_cmdline).and_then(|p| p.get("preempt").cloned()).and_then(|v| PreemptModel::parse(&v))
            {
                return (Some(m), Some(format!("command line preempt={}", m.as_str())));
            }
        }
        for (name, model) in [
            ("PREEMPT_LAZY", PreemptModel::Lazy),
            ("PREEMPT", PreemptModel::Full),
            ("PREEMPT_VOLUNTARY", PreemptModel::Voluntary),
            ("PREEMPT_NONE", PreemptModel::None),
        ] {
            if on(name) {
                return (Some(model), Some(format!("kernel config: {name}=y")));
            }
        }
    }
    if let Some(v) = uname_v {
        if v.contains("PREEMPT_RT") {
            return (Some(PreemptModel::Rt), Some("uname -v".to_string()));
        }
        if v.split_whitespace().any(|w| w == "PREEMPT") {
            return (Some(PreemptModel::Full), Some("uname -v".to_string()));
        }
    }
    (None, None)
}

/// `none voluntary (full) lazy` → `Full`.
pub(crate) fn parse_debugfs_preempt(text: &str) -> Option<PreemptModel> {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix('(').and_then(|w| w.strip_suffix(')')))
        .and_then(PreemptModel::parse)
}

/// Kernel command-line parameters before `--` (what follows goes to init).
/// Double quotes group a value with spaces.
pub(crate) fn parse_cmdline(cmdline: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_quotes = false;
    for c in cmdline.chars() {
        match c {
            '"' => in_quotes = !in_quotes,
            c if c.is_whitespace() && !in_quotes => {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    for w in words {
        if w == "--" {
            break;
        }
        match w.split_once('=') {
            Some((k, v)) => out.insert(k.to_string(), v.to_string()),
            None => out.insert(w, String::new()),
        };
    }
    out
}

/// Parse a user-supplied mount option list (`rw,noatime,commit=60`).
/// Errors name the item position.
pub fn parse_mount_options(s: &str) -> std::result::Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    let s = s.trim();
    if s.is_empty() {
        return Ok(out);
    }
    for (i, item) in s.split(',').enumerate() {
        let item = item.trim();
        let pos = i + 1;
        if item.is_empty() {
            return Err(format!("option {pos} is empty (doubled or trailing comma?) in `{s}`"));
        }
        let (name, value) = item.split_once('=').unwrap_or((item, ""));
        if name.is_empty() {
            return Err(format!("option {pos} (`{item}`) has no name"));
        }
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')) {
            return Err(format!("option {pos} (`{item}`): `{name}` is not an option name"));
        }
        if item.contains('=') && value.is_empty() {
            return Err(format!("option {pos} (`{item}`) has an empty value"));
        }
        out.insert(name.to_string(), value.to_string());
    }
    Ok(out)
}

/// Lenient option-list merge for kernel-produced lists (mountinfo,
/// `/proc/fs/ext4/*/options`, which is one option per line).
pub(crate) fn merge_options(into: &mut BTreeMap<String, String>, list: &str) {
    for item in list.split([',', '\n']).map(str::trim).filter(|i| !i.is_empty()) {
        let (k, v) = item.split_once('=').unwrap_or((item, ""));
        into.insert(k.to_string(), v.to_string());
    }
}

/// ext4 geometry from `dumpe2fs -h` text.
pub fn parse_dumpe2fs(text: &str) -> Ext4Facts {
    let field = |name: &str| -> Option<u64> {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name).then(|| v.trim().parse().ok()).flatten()
        })
    };
    let block_count = field("Block count");
    let per_group = field("Blocks per group").filter(|&g| g > 0);
    let first = field("First block").unwrap_or(0);
    let block_groups = match (block_count, per_group) {
        (Some(c), Some(g)) if c > first => Some((c - first).div_ceil(g)),
        _ => None,
    };
    Ext4Facts { block_groups, block_size: field("Block size"), block_count, ..Default::default() }
}

/// Where an ext4 filesystem's group descriptors are, from its superblock
/// (the 1024 bytes at offset 1024 of the device).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ext4DescriptorTable {
    /// Byte offset of the first descriptor on the device.
    pub offset: u64,
    /// Bytes per descriptor (32, or `s_desc_size` with `64bit`).
    pub desc_size: usize,
    pub groups: u64,
}

impl Ext4DescriptorTable {
    pub fn len_bytes(&self) -> usize {
        self.desc_size * self.groups as usize
    }
}

// Superblock offsets and flags (fs/ext4/ext4.h).
const EXT4_SUPER_MAGIC: u16 = 0xEF53;
const INCOMPAT_META_BG: u32 = 0x10;
const INCOMPAT_64BIT: u32 = 0x80;
const RO_COMPAT_GDT_CSUM: u32 = 0x10;
const RO_COMPAT_METADATA_CSUM: u32 = 0x400;
const BG_INODE_ZEROED: u16 = 0x4;

fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The group-descriptor table an ext4 superblock describes, or why its
/// `ITABLE_ZEROED` flags cannot be read: not ext4, no group-descriptor
/// checksums (the flag is then not maintained), or `meta_bg` (descriptors
/// spread over the disk; not worth reading for a hint).
///
/// Read directly rather than with `dumpe2fs`, which would read every
/// block bitmap of the filesystem under test just to print free ranges.
pub fn parse_ext4_superblock(sb: &[u8]) -> Result<Ext4DescriptorTable, String> {
    if sb.len() < 1024 {
        return Err("short superblock".into());
    }
    if le16(sb, 0x38) != EXT4_SUPER_MAGIC {
        return Err("no ext2/3/4 superblock magic".into());
    }
    let (incompat, ro_compat) = (le32(sb, 0x60), le32(sb, 0x64));
    if ro_compat & (RO_COMPAT_GDT_CSUM | RO_COMPAT_METADATA_CSUM) == 0 {
        return Err("no group-descriptor checksums (uninit_bg/metadata_csum): inode tables are zeroed at mkfs".into());
    }
    if incompat & INCOMPAT_META_BG != 0 {
        return Err("meta_bg layout: descriptors not read".into());
    }
    let log = le32(sb, 0x18);
    if log > 6 {
        return Err(format!("implausible block size 1024 << {log}"));
    }
    let block_size = 1024u64 << log;
    let is_64 = incompat & INCOMPAT_64BIT != 0;
    let blocks = u64::from(le32(sb, 0x04)) | if is_64 { u64::from(le32(sb, 0x150)) << 32 } else { 0 };
    let first = u64::from(le32(sb, 0x14));
    let per_group = u64::from(le32(sb, 0x20));
    let desc_size = if is_64 { usize::from(le16(sb, 0xFE)) } else { 32 };
    if per_group == 0 || blocks <= first || !(32..=1024).contains(&desc_size) {
        return Err("implausible geometry in the superblock".into());
    }
    Ok(Ext4DescriptorTable {
        offset: (first + 1) * block_size,
        desc_size,
        groups: (blocks - first).div_ceil(per_group),
    })
}

/// Groups whose descriptor lacks `ITABLE_ZEROED` (`bg_flags` at byte 0x12).
pub fn count_itable_unzeroed(table: &Ext4DescriptorTable, descriptors: &[u8]) -> u64 {
    descriptors
        .chunks_exact(table.desc_size)
        .take(table.groups as usize)
        .filter(|d| le16(d, 0x12) & BG_INODE_ZEROED == 0)
        .count() as u64
}

/// XFS geometry from `xfs_info` / `xfs_db -c info` text.
pub fn parse_xfs_info(text: &str) -> XfsFacts {
    let field = |name: &str, line_prefix: Option<&str>| -> Option<u64> {
        text.lines().filter(|l| line_prefix.is_none_or(|p| l.trim_start().starts_with(p))).find_map(|l| {
            l.split(|c: char| c.is_whitespace() || c == ',')
                .find_map(|w| w.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
        })
    };
    XfsFacts {
        agcount: field("agcount", None),
        agsize_blocks: field("agsize", None),
        block_size: field("bsize", Some("data")),
    }
}

/// btrfs profiles from `btrfs filesystem df` text
/// (`Data, single: total=…`).
pub fn parse_btrfs_df(text: &str) -> BtrfsFacts {
    let mut out = BtrfsFacts::default();
    for line in text.lines() {
        let Some((head, _)) = line.split_once(':') else { continue };
        let Some((kind, profile)) = head.split_once(',') else { continue };
        let profile = Some(profile.trim().to_lowercase());
        match kind.trim() {
            "Data" => out.data_profile = profile,
            "Metadata" => out.metadata_profile = profile,
            "System" => out.system_profile = profile,
            _ => {}
        }
    }
    out
}

/// `none [mq-deadline] kyber` → (`mq-deadline`, all three).
pub fn parse_scheduler(text: &str) -> (Option<String>, Vec<String>) {
    let mut active = None;
    let mut all = Vec::new();
    for w in text.split_whitespace() {
        if let Some(inner) = w.strip_prefix('[').and_then(|w| w.strip_suffix(']')) {
            active = Some(inner.to_string());
            all.push(inner.to_string());
        } else {
            all.push(w.to_string());
        }
    }
    // A queue with a single scheduler prints it without brackets.
    if active.is_none() && all.len() == 1 {
        active = all.first().cloned();
    }
    (active, all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::kconfig::KernelConfig;

    #[test]
    fn dumpe2fs_geometry() {
        let text = "Filesystem volume name:   <none>\nBlock count:              65536\nFirst block:              1\nBlock size:               1024\nBlocks per group:         8192\n";
        let g = parse_dumpe2fs(text);
        assert_eq!(g.block_groups, Some(8));
        assert_eq!(g.block_size, Some(1024));
        let big = "Block count:              7864320\nFirst block:              0\nBlock size:               4096\nBlocks per group:         32768\n";
        assert_eq!(parse_dumpe2fs(big).block_groups, Some(240));
        assert_eq!(parse_dumpe2fs("").block_groups, None);
    }

    #[test]
    fn xfs_and_btrfs_geometry() {
        let xfs = "meta-data=/dev/loop0             isize=512    agcount=4, agsize=20480 blks\n         =                       sectsz=512   attr=2, projid32bit=1\ndata     =                       bsize=4096   blocks=81920, imaxpct=25\nnaming   =version 2              bsize=4096   ascii-ci=0, ftype=1\n";
        let x = parse_xfs_info(xfs);
        assert_eq!((x.agcount, x.agsize_blocks, x.block_size), (Some(4), Some(20480), Some(4096)));
        let df = "Data, single: total=8388608, used=0\nSystem, DUP: total=8388608, used=16384\nMetadata, DUP: total=33554432, used=131072\nGlobalReserve, single: total=5767168, used=0\n";
        let b = parse_btrfs_df(df);
        assert_eq!(b.data_profile.as_deref(), Some("single"));
        assert_eq!(b.metadata_profile.as_deref(), Some("dup"));
        assert_eq!(b.system_profile.as_deref(), Some("dup"));
    }

    #[test]
    fn scheduler_cmdline_and_preempt() {
        assert_eq!(
            parse_scheduler("none [mq-deadline] kyber bfq"),
            (Some("mq-deadline".to_string()), vec!["none".into(), "mq-deadline".into(), "kyber".into(), "bfq".into()])
        );
        assert_eq!(parse_scheduler("none").0.as_deref(), Some("none"));
        assert_eq!(parse_scheduler("[none] mq-deadline").0.as_deref(), Some("none"));
        let p = parse_cmdline("ro quiet slub_debug=FZ preempt=full x=\"a b\" -- init=1 slub_debug=-");
        assert_eq!(p.get("slub_debug").map(String::as_str), Some("FZ"));
        assert_eq!(p.get("quiet").map(String::as_str), Some(""));
        assert_eq!(p.get("x").map(String::as_str), Some("a b"));
        assert!(!p.contains_key("init"));
        assert_eq!(parse_debugfs_preempt("none voluntary (full) lazy\n"), Some(PreemptModel::Full));
        assert_eq!(parse_debugfs_preempt("none voluntary full"), None);

        let cfg = |t: &str| KernelConfig::parse(t, "c").unwrap().options;
        let dynamic = cfg("CONFIG_PREEMPT_VOLUNTARY=y\nCONFIG_PREEMPT_DYNAMIC=y\n");
        assert_eq!(preempt_model(Some(&dynamic), None, None, None).0, Some(PreemptModel::Voluntary));
        assert_eq!(preempt_model(Some(&dynamic), Some("preempt=full"), None, None).0, Some(PreemptModel::Full));
        assert_eq!(
            preempt_model(Some(&dynamic), Some("preempt=full"), Some("none (voluntary) full"), None).0,
            Some(PreemptModel::Voluntary)
        );
        let fixed = cfg("CONFIG_PREEMPT_NONE=y\n");
        assert_eq!(preempt_model(Some(&fixed), Some("preempt=full"), None, None).0, Some(PreemptModel::None));
        let rt = cfg("CONFIG_PREEMPT_RT=y\nCONFIG_PREEMPT=y\n");
        assert_eq!(preempt_model(Some(&rt), None, None, None).0, Some(PreemptModel::Rt));
        assert_eq!(preempt_model(None, None, None, Some("#1 SMP PREEMPT_RT Tue")).0, Some(PreemptModel::Rt));
        assert_eq!(preempt_model(None, None, None, Some("#1 SMP PREEMPT Tue")).0, Some(PreemptModel::Full));
        assert_eq!(preempt_model(None, None, None, Some("#1 SMP PREEMPT_DYNAMIC")).0, None);
    }

    #[test]
    fn mount_option_lists() {
        let m = parse_mount_options("rw,noatime,commit=60,mb_optimize_scan=1").unwrap();
        assert_eq!(m.get("commit").map(String::as_str), Some("60"));
        assert_eq!(m.get("noatime").map(String::as_str), Some(""));
        assert!(parse_mount_options("").unwrap().is_empty());
        for (bad, msg) in [
            ("rw,,noatime", "option 2 is empty"),
            ("rw,=1", "option 2 (`=1`) has no name"),
            ("rw,commit=", "option 2 (`commit=`) has an empty value"),
            ("a b", "option 1 (`a b`): `a b` is not an option name"),
        ] {
            let e = parse_mount_options(bad).unwrap_err();
            assert!(e.contains(msg), "{bad}: {e}");
        }
    }

    /// The descriptor reader against real mkfs.ext4 images (no root needed):
    /// lazy init leaves every group unzeroed, lazy_itable_init=0 none, and
    /// without checksums the flag is not maintained.
    #[test]
    fn ext4_itable_flags_from_real_images() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("fs.img");
        let state = |extra: &[&str]| -> Result<(u64, u64), String> {
            std::fs::File::create(&img).unwrap().set_len(1 << 30).unwrap();
            let mut args = vec!["-q", "-F"];
            args.extend_from_slice(extra);
            let img_s = img.to_string_lossy().to_string();
            args.push(&img_s);
            match crate::sys::exec::run("mkfs.ext4", &args, crate::sys::exec::DEFAULT_TIMEOUT) {
                Ok(o) if o.success => {}
                other => panic!("mkfs.ext4 {args:?}: {other:?}"),
            }
            use std::os::unix::fs::FileExt;
            let f = std::fs::File::open(&img).unwrap();
            let mut sb = vec![0u8; 1024];
            f.read_exact_at(&mut sb, 1024).unwrap();
            let table = parse_ext4_superblock(&sb)?;
            let mut descriptors = vec![0u8; table.len_bytes()];
            f.read_exact_at(&mut descriptors, table.offset).unwrap();
            Ok((table.groups, count_itable_unzeroed(&table, &descriptors)))
        };
        if crate::sys::exec::run("mkfs.ext4", &["-V"], crate::sys::exec::DEFAULT_TIMEOUT).is_err() {
            crate::testsupport::skip("mkfs.ext4 is not installed");
            return;
        }
        assert_eq!(state(&["-E", "nodiscard,lazy_itable_init=1"]), Ok((8, 8)));
        assert_eq!(state(&["-E", "lazy_itable_init=0"]), Ok((8, 0)));
        assert_eq!(state(&["-b", "1024", "-E", "nodiscard,lazy_itable_init=1"]).map(|s| s.0), Ok(128));
        let e = state(&["-O", "^metadata_csum,^uninit_bg"]).unwrap_err();
        assert!(e.contains("no group-descriptor checksums"), "{e}");
        assert!(parse_ext4_superblock(&[0u8; 1024]).unwrap_err().contains("magic"));
        assert!(parse_ext4_superblock(&[0u8; 10]).is_err());
    }
}
