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
    Ext4Facts { block_groups, block_size: field("Block size"), block_count, mb_optimize_scan_reported: None }
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
}
