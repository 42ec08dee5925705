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
use std::path::Path;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::{parse_u64, perr, read_text, sub, sub_vec, ParseError};
use crate::metric::Metric;

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
