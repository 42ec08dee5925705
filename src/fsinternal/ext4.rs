//! ext4: `mb_structs_summary` and `mb_groups` under `/proc/fs/ext4/<dev>/`.
//!
//! `mb_structs_summary` (since 5.13) starts with `optimize_scan: N` and a
//! `max_free_order_lists:` section of `list_order_N_groups: COUNT` lines (one
//! per buddy order). What follows depends on the kernel:
//!
//! * 5.13–6.0: `fragment_size_tree:` with `tree_min:`, `tree_max:` and
//!   `tree_nodes:` (the rbtree of groups by average fragment size);
//! * 6.1+: `avg_fragment_size_lists:` with `list_order_N_groups:` lines
//!   (the rbtree was replaced by per-order buckets).
//!
//! The kernel indents the entries with a tab; pasted copies often lose it,
//! so indentation is ignored.
//!
//! `mb_groups` has a header `#group: free  frags first [ 2^0 … 2^13 ]` and
//! one row per group; columns are found by header name. A group whose buddy
//! could not be loaded prints `#N    : I/O error` and is counted apart.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::{parse_u64, perr, read_text, sub, sub_vec, Found, Internals, Mounted, ParseError, Roots};
use crate::metric::Metric;
use crate::sys::exec;

/// `fragment_size_tree:` section of the 5.13–6.0 layout.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FragmentSizeTree {
    pub tree_min: u64,
    pub tree_max: u64,
    pub tree_nodes: u64,
}

/// Parsed `mb_structs_summary`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MbStructsSummary {
    pub optimize_scan: Option<bool>,
    /// Groups per largest-free-order list, indexed by order.
    pub max_free_order_lists: Vec<u64>,
    /// 6.1+ layout: groups per average-fragment-size bucket, indexed by order.
    pub avg_fragment_size_lists: Option<Vec<u64>>,
    /// 5.13–6.0 layout.
    pub fragment_size_tree: Option<FragmentSizeTree>,
    /// Any other `name:` section holding `list_order_N_groups` lines.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub other_lists: BTreeMap<String, Vec<u64>>,
}

impl MbStructsSummary {
    /// `"fragment_size_tree"` (5.13–6.0) or `"avg_fragment_size_lists"` (6.1+).
    pub fn layout(&self) -> &'static str {
        if self.avg_fragment_size_lists.is_some() {
            "avg_fragment_size_lists"
        } else {
            "fragment_size_tree"
        }
    }

    /// Number of groups on the largest-free-order lists.
    pub fn groups_in_order_lists(&self) -> u64 {
        self.max_free_order_lists.iter().sum()
    }

    /// Mean largest free order over the groups on the lists (None when empty).
    pub fn mean_max_free_order(&self) -> Option<f64> {
        weighted_mean_order(&self.max_free_order_lists)
    }
}

fn weighted_mean_order(counts: &[u64]) -> Option<f64> {
    let n: u64 = counts.iter().sum();
    if n == 0 {
        return None;
    }
    let s: f64 = counts.iter().enumerate().map(|(o, &c)| o as f64 * c as f64).sum();
    Some(s / n as f64)
}

#[derive(PartialEq)]
enum Section {
    Top,
    MaxFree,
    AvgFrag,
    Tree,
    Other(String),
}

/// Parse `mb_structs_summary`; `file` names the source in errors.
pub fn parse_mb_structs_summary(text: &str, file: &str) -> Result<MbStructsSummary, ParseError> {
    let mut optimize_scan = None;
    let mut max_free: Option<Vec<u64>> = None;
    let mut avg_frag: Option<Vec<u64>> = None;
    let mut tree: [Option<u64>; 3] = [None, None, None];
    let mut tree_seen = false;
    let mut other: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut section = Section::Top;

    for (i, raw) in text.lines().enumerate() {
        let ln = i + 1;
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            return Err(perr(file, ln, format!("expected `name: value` or `section:`, found {line:?}")));
        };
        let key = key.trim();
        let value = value.trim();
        if value.is_empty() {
            // Section header.
            section = match key {
                "max_free_order_lists" => {
                    if max_free.is_some() {
                        return Err(perr(file, ln, "duplicate section max_free_order_lists"));
                    }
                    max_free = Some(Vec::new());
                    Section::MaxFree
                }
                "avg_fragment_size_lists" => {
                    if avg_frag.is_some() {
                        return Err(perr(file, ln, "duplicate section avg_fragment_size_lists"));
                    }
                    avg_frag = Some(Vec::new());
                    Section::AvgFrag
                }
                "fragment_size_tree" => {
                    if tree_seen {
                        return Err(perr(file, ln, "duplicate section fragment_size_tree"));
                    }
                    tree_seen = true;
                    Section::Tree
                }
                name if !name.is_empty() && !name.contains(char::is_whitespace) => {
                    if other.insert(name.to_string(), Vec::new()).is_some() {
                        return Err(perr(file, ln, format!("duplicate section {name}")));
                    }
                    Section::Other(name.to_string())
                }
                _ => return Err(perr(file, ln, format!("bad section header {line:?}"))),
            };
            continue;
        }
        if key == "optimize_scan" {
            let v = parse_u64(value, file, ln, "optimize_scan")?;
            optimize_scan = Some(v != 0);
            continue;
        }
        if let Some(order) = key.strip_prefix("list_order_").and_then(|r| r.strip_suffix("_groups")) {
            let order: usize = order.parse().map_err(|_| perr(file, ln, format!("bad order in {key:?}")))?;
            let count = parse_u64(value, file, ln, key)?;
            let list = match &section {
                Section::MaxFree => max_free.as_mut(),
                Section::AvgFrag => avg_frag.as_mut(),
                Section::Other(name) => other.get_mut(name),
                Section::Top | Section::Tree => None,
            };
            let Some(list) = list else {
                return Err(perr(file, ln, format!("{key} outside a list section")));
            };
            if order != list.len() {
                return Err(perr(file, ln, format!("expected list_order_{}_groups, found {key}", list.len())));
            }
            list.push(count);
            continue;
        }
        let slot = match key {
            "tree_min" => 0,
            "tree_max" => 1,
            "tree_nodes" => 2,
            _ => return Err(perr(file, ln, format!("unknown entry {key:?}"))),
        };
        if section != Section::Tree {
            return Err(perr(file, ln, format!("{key} outside fragment_size_tree")));
        }
        if tree[slot].is_some() {
            return Err(perr(file, ln, format!("duplicate {key}")));
        }
        tree[slot] = Some(parse_u64(value, file, ln, key)?);
    }

    let Some(max_free_order_lists) = max_free else {
        return Err(perr(file, 0, "no max_free_order_lists section (empty or truncated file?)"));
    };
    let fragment_size_tree = if tree_seen {
        match tree {
            [Some(tree_min), Some(tree_max), Some(tree_nodes)] => {
                Some(FragmentSizeTree { tree_min, tree_max, tree_nodes })
            }
            _ => return Err(perr(file, 0, "fragment_size_tree lacks tree_min, tree_max or tree_nodes")),
        }
    } else {
        None
    };
    if fragment_size_tree.is_none() && avg_frag.is_none() {
        return Err(perr(file, 0, "neither fragment_size_tree (5.13-6.0) nor avg_fragment_size_lists (6.1+) section"));
    }
    Ok(MbStructsSummary {
        optimize_scan,
        max_free_order_lists,
        avg_fragment_size_lists: avg_frag,
        fragment_size_tree,
        other_lists: other,
    })
}

/// Totals over all groups of `mb_groups`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MbGroupsSummary {
    /// Groups with a parsed row.
    pub groups: u64,
    /// Groups printed as `I/O error`.
    pub io_error_groups: u64,
    pub free_blocks: u64,
    /// Free-space fragments (free extents).
    pub fragments: u64,
    /// Free extents of size 2^k blocks summed over groups, indexed by k.
    pub order_counts: Vec<u64>,
    /// Free blocks of each group in file order (`None` for an `I/O error`
    /// row), so two snapshots tell which groups an allocation touched: the
    /// spread the mb_optimize_scan case is about. Empty in snapshots stored
    /// before this field existed.
    #[serde(default)]
    pub group_free_blocks: Vec<Option<u64>>,
}

impl MbGroupsSummary {
    /// Mean free extent length in blocks.
    pub fn mean_free_extent_blocks(&self) -> Option<f64> {
        (self.fragments > 0).then(|| self.free_blocks as f64 / self.fragments as f64)
    }

    /// Largest k with a free extent of order k in some group.
    pub fn largest_free_order(&self) -> Option<usize> {
        self.order_counts.iter().rposition(|&c| c > 0)
    }

    /// Free extents of order < `k`.
    pub fn extents_below_order(&self, k: usize) -> u64 {
        self.order_counts.iter().take(k).sum()
    }

    /// Groups whose free-block count differs between `self` (before) and
    /// `after`: how many block groups a run allocated in or freed from.
    /// `None` when either side lacks per-group counts or the group count
    /// changed (a resize), where a count would mislead.
    pub fn groups_touched(&self, after: &MbGroupsSummary) -> Option<u64> {
        let (b, a) = (&self.group_free_blocks, &after.group_free_blocks);
        if b.is_empty() || b.len() != a.len() {
            return None;
        }
        Some(b.iter().zip(a).filter(|(x, y)| matches!((x, y), (Some(x), Some(y)) if x != y)).count() as u64)
    }
}

/// Parse `mb_groups`; `file` names the source in errors.
pub fn parse_mb_groups(text: &str, file: &str) -> Result<MbGroupsSummary, ParseError> {
    // Header tokens after "#group:", e.g. free frags first [ 2^0 .. 2^13 ]
    let mut header: Option<Vec<String>> = None;
    let mut free_col = 0;
    let mut frags_col = 0;
    let mut order_cols: Vec<(usize, usize)> = Vec::new(); // (column, order)
    let mut s = MbGroupsSummary {
        groups: 0,
        io_error_groups: 0,
        free_blocks: 0,
        fragments: 0,
        order_counts: Vec::new(),
        group_free_blocks: Vec::new(),
    };

    for (i, raw) in text.lines().enumerate() {
        let ln = i + 1;
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("#group:") {
            if header.is_some() {
                return Err(perr(file, ln, "second header line"));
            }
            let cols: Vec<String> = rest.split_whitespace().map(str::to_string).collect();
            let find = |name: &str| cols.iter().position(|c| c == name);
            free_col = find("free").ok_or_else(|| perr(file, ln, "header has no `free` column"))?;
            frags_col = find("frags").ok_or_else(|| perr(file, ln, "header has no `frags` column"))?;
            for (c, name) in cols.iter().enumerate() {
                if let Some(k) = name.strip_prefix("2^") {
                    let k: usize = k.parse().map_err(|_| perr(file, ln, format!("bad order column {name:?}")))?;
                    if k > 63 {
                        return Err(perr(file, ln, format!("order column {name:?} out of range")));
                    }
                    order_cols.push((c, k));
                }
            }
            let max_order = order_cols.iter().map(|&(_, k)| k + 1).max().unwrap_or(0);
            s.order_counts = vec![0; max_order];
            header = Some(cols);
            continue;
        }
        let Some(cols) = &header else {
            return Err(perr(file, ln, "data before the `#group:` header"));
        };
        let Some(rest) = line.strip_prefix('#') else {
            return Err(perr(file, ln, format!("expected a `#N : ...` group row, found {line:?}")));
        };
        let Some((group, fields)) = rest.split_once(':') else {
            return Err(perr(file, ln, "group row without `:`"));
        };
        parse_u64(group, file, ln, "group number")?;
        if fields.trim().eq_ignore_ascii_case("I/O error") {
            s.io_error_groups += 1;
            s.group_free_blocks.push(None);
            continue;
        }
        let toks: Vec<&str> = fields.split_whitespace().collect();
        if toks.len() != cols.len() {
            return Err(perr(file, ln, format!("{} fields, header has {}", toks.len(), cols.len())));
        }
        let free = parse_u64(toks[free_col], file, ln, "free")?;
        s.group_free_blocks.push(Some(free));
        s.free_blocks = s.free_blocks.saturating_add(free);
        s.fragments = s.fragments.saturating_add(parse_u64(toks[frags_col], file, ln, "frags")?);
        for &(c, k) in &order_cols {
            let v = parse_u64(toks[c], file, ln, &cols[c])?;
            s.order_counts[k] = s.order_counts[k].saturating_add(v);
        }
        s.groups += 1;
    }
    if header.is_none() {
        return Err(perr(file, 0, "no `#group:` header (empty file?)"));
    }
    Ok(s)
}

/// ext4 part of a snapshot. Either file may be absent on older kernels.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ext4Snapshot {
    pub mb_structs_summary: Option<MbStructsSummary>,
    pub mb_groups: Option<MbGroupsSummary>,
    /// Why something is missing.
    #[serde(default)]
    pub notes: Vec<String>,
}

/// Read `mb_structs_summary` and `mb_groups` from a `/proc/fs/ext4/<dev>` directory.
pub fn read_dir(dir: &Path) -> Result<Ext4Snapshot> {
    if !dir.is_dir() {
        anyhow::bail!("{} does not exist: is the device mounted as ext4?", dir.display());
    }
    let mut notes = Vec::new();
    // mb_groups first: reading it loads every group's buddy, which puts
    // not-yet-initialised groups on the mb_structs_summary lists. Read the
    // other way round, a fresh mount shows (nearly) empty lists.
    let groups_path = dir.join("mb_groups");
    let mb_groups = if groups_path.exists() {
        let text = read_text(&groups_path)?;
        Some(parse_mb_groups(&text, &groups_path.display().to_string())?)
    } else {
        notes.push(format!("{} absent", groups_path.display()));
        None
    };
    let summary_path = dir.join("mb_structs_summary");
    let mb_structs_summary = if summary_path.exists() {
        let text = read_text(&summary_path)?;
        Some(parse_mb_structs_summary(&text, &summary_path.display().to_string())?)
    } else {
        notes.push(format!("{} absent (kernel older than 5.13)", summary_path.display()));
        None
    };
    Ok(Ext4Snapshot { mb_structs_summary, mb_groups, notes })
}

/// Change of the `mb_structs_summary` lists (after − before, per order).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MbStructsDelta {
    pub layout_before: &'static str,
    pub layout_after: &'static str,
    pub max_free_order_lists: Vec<i64>,
    pub avg_fragment_size_lists: Option<Vec<i64>>,
    pub tree_min: Option<i64>,
    pub tree_max: Option<i64>,
    pub tree_nodes: Option<i64>,
    pub mean_max_free_order_before: Option<f64>,
    pub mean_max_free_order_after: Option<f64>,
}

/// Change of the `mb_groups` totals (after − before).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MbGroupsDelta {
    /// See [`MbGroupsSummary::groups_touched`].
    pub groups_touched: Option<u64>,
    pub free_blocks: i64,
    pub fragments: i64,
    pub order_counts: Vec<i64>,
    pub after: MbGroupsSummary,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Ext4Delta {
    pub mb_structs_summary: Option<MbStructsDelta>,
    pub mb_groups: Option<MbGroupsDelta>,
}

pub fn delta(before: &Ext4Snapshot, after: &Ext4Snapshot) -> Ext4Delta {
    let mb_structs_summary = match (&before.mb_structs_summary, &after.mb_structs_summary) {
        (Some(b), Some(a)) => {
            let tree = |f: fn(&FragmentSizeTree) -> u64| match (&b.fragment_size_tree, &a.fragment_size_tree) {
                (Some(tb), Some(ta)) => Some(sub(f(ta), f(tb))),
                _ => None,
            };
            Some(MbStructsDelta {
                layout_before: b.layout(),
                layout_after: a.layout(),
                max_free_order_lists: sub_vec(&a.max_free_order_lists, &b.max_free_order_lists),
                avg_fragment_size_lists: match (&b.avg_fragment_size_lists, &a.avg_fragment_size_lists) {
                    (Some(lb), Some(la)) => Some(sub_vec(la, lb)),
                    _ => None,
                },
                tree_min: tree(|t| t.tree_min),
                tree_max: tree(|t| t.tree_max),
                tree_nodes: tree(|t| t.tree_nodes),
                mean_max_free_order_before: b.mean_max_free_order(),
                mean_max_free_order_after: a.mean_max_free_order(),
            })
        }
        _ => None,
    };
    let mb_groups = match (&before.mb_groups, &after.mb_groups) {
        (Some(b), Some(a)) => Some(MbGroupsDelta {
            groups_touched: b.groups_touched(a),
            free_blocks: sub(a.free_blocks, b.free_blocks),
            fragments: sub(a.fragments, b.fragments),
            order_counts: sub_vec(&a.order_counts, &b.order_counts),
            after: a.clone(),
        }),
        _ => None,
    };
    Ext4Delta { mb_structs_summary, mb_groups }
}

/// Orders below this count as "small" free extents (2^4 blocks = 64 KiB at 4 KiB blocks).
pub const SMALL_ORDER_LIMIT: usize = 4;

impl Ext4Delta {
    /// Metrics:
    /// * `ext4.groups_touched` — block groups whose free blocks changed (lower:
    ///   allocations kept together);
    /// * `ext4.free_fragments_delta` — change of free-space fragments (lower is better);
    /// * `ext4.free_fragments_after` — free-space fragments after the run (lower);
    /// * `ext4.small_free_extents_delta` — change of free extents of order < 4 (lower);
    /// * `ext4.mean_free_extent_blocks_after` — free blocks / fragments after (higher);
    /// * `ext4.free_blocks_delta` — change of free blocks (higher: less space used);
    /// * `ext4.mean_max_free_order_after` — mean largest free order of the groups
    ///   on `max_free_order_lists` after the run (higher);
    /// * `ext4.mean_max_free_order_delta` — its change (higher).
    pub fn metrics(&self) -> Vec<Metric> {
        let mut m = Vec::new();
        if let Some(g) = &self.mb_groups {
            if let Some(touched) = g.groups_touched {
                m.push(Metric::lower("ext4.groups_touched", "groups", touched as f64));
            }
            m.push(Metric::lower("ext4.free_fragments_delta", "count", g.fragments as f64));
            m.push(Metric::lower("ext4.free_fragments_after", "count", g.after.fragments as f64));
            let small: i64 = g.order_counts.iter().take(SMALL_ORDER_LIMIT).sum();
            m.push(Metric::lower("ext4.small_free_extents_delta", "count", small as f64));
            if let Some(mean) = g.after.mean_free_extent_blocks() {
                m.push(Metric::higher("ext4.mean_free_extent_blocks_after", "blocks", mean));
            }
            m.push(Metric::higher("ext4.free_blocks_delta", "blocks", g.free_blocks as f64));
        }
        if let Some(s) = &self.mb_structs_summary {
            if let Some(a) = s.mean_max_free_order_after {
                m.push(Metric::higher("ext4.mean_max_free_order_after", "order", a));
                if let Some(b) = s.mean_max_free_order_before {
                    m.push(Metric::higher("ext4.mean_max_free_order_delta", "order", a - b));
                }
            }
        }
        m
    }
}

/// ext4, and ext2/ext3 (which the ext4 driver mounts): `/proc/fs/ext4/<dev>`
/// around runs, `dumpe2fs -h` geometry, the doctor's block groups,
/// `mb_optimize_scan` and lazy-init state.
pub struct Ext4Internals;

impl Internals for Ext4Internals {
    const NAME: &'static str = "ext4";
    const ALSO: &'static [&'static str] = &["ext3", "ext2"];
    type Snapshot = Ext4Snapshot;
    type Delta = Ext4Delta;
    type Facts = Ext4Facts;

    fn read(roots: &Roots, device: &str) -> Result<Ext4Snapshot> {
        read_dir(&roots.proc.join("fs/ext4").join(device))
    }

    fn delta(before: &Ext4Snapshot, after: &Ext4Snapshot) -> Ext4Delta {
        delta(before, after)
    }

    fn metrics(delta: &Ext4Delta) -> Vec<Metric> {
        delta.metrics()
    }

    fn geometry(device: &Path) -> Result<String> {
        exec::inspect_tool("dumpe2fs", &["-h", &device.to_string_lossy()])
    }

    fn facts(mount: &Mounted, found: &mut Found) -> Option<Ext4Facts> {
        let mut ext4 = Ext4Facts::default();
        if let Some(name) = mount.device_name {
            let proc_dir = PathBuf::from(format!("/proc/fs/ext4/{name}"));
            match std::fs::read_to_string(proc_dir.join("options")) {
                Ok(t) => found.options.push(t),
                Err(e) => found.notes.push(format!("{}/options: {e}", proc_dir.display())),
            }
            if let Ok(t) = std::fs::read_to_string(proc_dir.join("mb_structs_summary")) {
                ext4.mb_optimize_scan_reported =
                    t.lines().find_map(|l| l.trim().strip_prefix("optimize_scan:").map(|v| v.trim() == "1"));
            }
        }
        match Self::geometry(mount.source) {
            Ok(t) => {
                let g = parse_dumpe2fs(&t);
                ext4.block_groups = g.block_groups;
                ext4.block_size = g.block_size;
                ext4.block_count = g.block_count;
                if let (Some(c), Some(b)) = (g.block_count, g.block_size) {
                    found.size_bytes = c.checked_mul(b);
                }
            }
            Err(e) => found.notes.push(format!("ext4 geometry: {e:#}")),
        }
        match itable_unzeroed(mount.source) {
            Ok(n) => ext4.itable_unzeroed_groups = Some(n),
            Err(e) => found.notes.push(format!("ext4 inode-table state: {e}")),
        }
        Some(ext4)
    }
}

/// ext4 geometry and state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Ext4Facts {
    /// Number of block groups.
    pub block_groups: Option<u64>,
    pub block_size: Option<u64>,
    pub block_count: Option<u64>,
    /// `optimize_scan` as the kernel reports it in
    /// `/proc/fs/ext4/<dev>/mb_structs_summary` (live only).
    pub mb_optimize_scan_reported: Option<bool>,
    /// Block groups whose inode table is not yet zeroed (`ITABLE_ZEROED`
    /// clear in the group descriptor): what lazy init still has to write.
    /// Read from the device's descriptors (live only; filesystems with
    /// group-descriptor checksums, without `meta_bg`).
    #[serde(default)]
    pub itable_unzeroed_groups: Option<u64>,
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

/// Groups of the ext4 filesystem on `device` whose inode tables are not
/// yet zeroed, from the group descriptors. The device is read through the
/// page cache it shares with the mounted filesystem, so the flags are the
/// kernel's current ones, not just what reached the disk.
fn itable_unzeroed(device: &Path) -> Result<u64, String> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(device).map_err(|e| format!("opening {}: {e}", device.display()))?;
    let mut sb = vec![0u8; 1024];
    f.read_exact_at(&mut sb, 1024).map_err(|e| format!("reading the superblock of {}: {e}", device.display()))?;
    let table = parse_ext4_superblock(&sb)?;
    // 2^32 groups of 1 KiB descriptors would be absurd; 64 MiB covers 1 M groups of 64 bytes.
    if table.len_bytes() > 64 << 20 {
        return Err(format!("{} block groups: descriptors not read", table.groups));
    }
    let mut descriptors = vec![0u8; table.len_bytes()];
    f.read_exact_at(&mut descriptors, table.offset)
        .map_err(|e| format!("reading the group descriptors of {}: {e}", device.display()))?;
    Ok(count_itable_unzeroed(&table, &descriptors))
}

#[cfg(test)]
mod tests {
    use super::*;

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
