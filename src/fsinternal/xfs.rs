//! XFS: the per-mount `/sys/fs/xfs/<dev>/stats/stats` (same format as the
//! global `/proc/fs/xfs/stat`): one line per counter group, `name v1 v2 …`.
//!
//! Lines are kept generically (name → values) so new kernels' groups
//! (`rmapbt_mem`, `rtrefcntbt`, …) pass through; a few headline fields are
//! pulled out by position within their named line (see `xfs_stats.h`):
//!
//! * `extent_alloc`: allocx, allocb, freex, freeb
//! * `trans`: sync, async, empty
//! * `ig`: attempts, found, frecycle, missed, dup, reclaims, attrchg
//! * `log`: writes, blocks, noiclogs, force, force_sleep
//! * `push_ail`: try_logspace, sleep_logspace, pushes, …
//! * `xpc`: xstrat_bytes, write_bytes, read_bytes

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::{parse_u64, perr, read_text, sub_vec, Found, Internals, Mounted, ParseError, Roots};
use crate::metric::Metric;
use crate::sys::exec;

/// Parsed XFS stats: counter line name → values.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct XfsStats {
    pub counters: BTreeMap<String, Vec<u64>>,
}

/// Headline counters (None when the line or field is absent).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct XfsHeadline {
    pub alloc_extents: Option<u64>,
    pub alloc_blocks: Option<u64>,
    pub free_extents: Option<u64>,
    pub free_blocks: Option<u64>,
    pub trans_sync: Option<u64>,
    pub trans_async: Option<u64>,
    pub trans_empty: Option<u64>,
    pub ig_attempts: Option<u64>,
    pub ig_found: Option<u64>,
    pub ig_missed: Option<u64>,
    pub log_writes: Option<u64>,
    pub log_blocks: Option<u64>,
    pub log_noiclogs: Option<u64>,
    pub log_forces: Option<u64>,
    pub log_force_sleeps: Option<u64>,
    pub push_ail_pushes: Option<u64>,
    pub xstrat_bytes: Option<u64>,
    pub write_bytes: Option<u64>,
    pub read_bytes: Option<u64>,
}

impl XfsStats {
    /// Field `idx` of line `name`.
    pub fn get(&self, name: &str, idx: usize) -> Option<u64> {
        self.counters.get(name).and_then(|v| v.get(idx)).copied()
    }

    pub fn headline(&self) -> XfsHeadline {
        XfsHeadline {
            alloc_extents: self.get("extent_alloc", 0),
            alloc_blocks: self.get("extent_alloc", 1),
            free_extents: self.get("extent_alloc", 2),
            free_blocks: self.get("extent_alloc", 3),
            trans_sync: self.get("trans", 0),
            trans_async: self.get("trans", 1),
            trans_empty: self.get("trans", 2),
            ig_attempts: self.get("ig", 0),
            ig_found: self.get("ig", 1),
            ig_missed: self.get("ig", 3),
            log_writes: self.get("log", 0),
            log_blocks: self.get("log", 1),
            log_noiclogs: self.get("log", 2),
            log_forces: self.get("log", 3),
            log_force_sleeps: self.get("log", 4),
            push_ail_pushes: self.get("push_ail", 2),
            xstrat_bytes: self.get("xpc", 0),
            write_bytes: self.get("xpc", 1),
            read_bytes: self.get("xpc", 2),
        }
    }
}

/// Parse an XFS stats file; `file` names the source in errors.
pub fn parse_stats(text: &str, file: &str) -> Result<XfsStats, ParseError> {
    let mut counters = BTreeMap::new();
    for (i, raw) in text.lines().enumerate() {
        let ln = i + 1;
        let mut toks = raw.split_whitespace();
        let Some(name) = toks.next() else { continue };
        if !name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(perr(file, ln, format!("expected a counter name, found {name:?}")));
        }
        let values = toks.map(|t| parse_u64(t, file, ln, name)).collect::<Result<Vec<u64>, ParseError>>()?;
        if values.is_empty() {
            return Err(perr(file, ln, format!("{name} has no values")));
        }
        if counters.insert(name.to_string(), values).is_some() {
            return Err(perr(file, ln, format!("duplicate line {name}")));
        }
    }
    if counters.is_empty() {
        return Err(perr(file, 0, "no counters (empty file)"));
    }
    Ok(XfsStats { counters })
}

/// XFS part of a snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct XfsSnapshot {
    pub stats: XfsStats,
    pub headline: XfsHeadline,
}

/// Read `stats/stats` under a `/sys/fs/xfs/<dev>` directory.
pub fn read_mount(dir: &Path) -> Result<XfsSnapshot> {
    if !dir.is_dir() {
        anyhow::bail!("{} does not exist: is the device mounted as xfs?", dir.display());
    }
    read_stats_file(&dir.join("stats/stats"))
}

/// Read one stats file (per-mount or the global `/proc/fs/xfs/stat`).
pub fn read_stats_file(path: &Path) -> Result<XfsSnapshot> {
    let text = read_text(path)?;
    let stats = parse_stats(&text, &path.display().to_string())?;
    let headline = stats.headline();
    Ok(XfsSnapshot { stats, headline })
}

/// Per-counter change (after − before). Negative values mean the counters
/// were reset (`stats_clear`) in between.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct XfsDelta {
    pub counters: BTreeMap<String, Vec<i64>>,
    /// Lines present in only one of the snapshots.
    pub unmatched: Vec<String>,
}

impl XfsDelta {
    pub fn get(&self, name: &str, idx: usize) -> Option<i64> {
        self.counters.get(name).and_then(|v| v.get(idx)).copied()
    }

    /// Metrics (all "lower is better": the same workload doing less internal work):
    /// `xfs.alloc_extents`, `xfs.alloc_blocks`, `xfs.free_extents`,
    /// `xfs.transactions` (sync+async+empty), `xfs.trans_sync`,
    /// `xfs.inode_gets`, `xfs.inode_misses`, `xfs.log_writes`,
    /// `xfs.log_blocks`, `xfs.log_forces`, `xfs.log_force_sleeps`,
    /// `xfs.ail_pushes`, `xfs.write_bytes`, `xfs.read_bytes` — each present
    /// only when its counter exists in both snapshots.
    pub fn metrics(&self) -> Vec<Metric> {
        let mut m = Vec::new();
        let mut add = |name: &str, unit: &str, v: Option<i64>| {
            if let Some(v) = v {
                m.push(Metric::lower(name, unit, v as f64));
            }
        };
        add("xfs.alloc_extents", "count", self.get("extent_alloc", 0));
        add("xfs.alloc_blocks", "blocks", self.get("extent_alloc", 1));
        add("xfs.free_extents", "count", self.get("extent_alloc", 2));
        let trans = self.counters.get("trans").filter(|v| v.len() >= 3).map(|v| v[..3].iter().sum());
        add("xfs.transactions", "count", trans);
        add("xfs.trans_sync", "count", self.get("trans", 0));
        add("xfs.inode_gets", "count", self.get("ig", 0));
        add("xfs.inode_misses", "count", self.get("ig", 3));
        add("xfs.log_writes", "count", self.get("log", 0));
        add("xfs.log_blocks", "blocks", self.get("log", 1));
        add("xfs.log_forces", "count", self.get("log", 3));
        add("xfs.log_force_sleeps", "count", self.get("log", 4));
        add("xfs.ail_pushes", "count", self.get("push_ail", 2));
        add("xfs.write_bytes", "bytes", self.get("xpc", 1));
        add("xfs.read_bytes", "bytes", self.get("xpc", 2));
        m
    }
}

pub fn delta(before: &XfsSnapshot, after: &XfsSnapshot) -> XfsDelta {
    let (b, a) = (&before.stats.counters, &after.stats.counters);
    let mut counters = BTreeMap::new();
    let mut unmatched = Vec::new();
    for (name, av) in a {
        match b.get(name) {
            Some(bv) => {
                counters.insert(name.clone(), sub_vec(av, bv));
            }
            None => unmatched.push(name.clone()),
        }
    }
    unmatched.extend(b.keys().filter(|k| !a.contains_key(*k)).cloned());
    XfsDelta { counters, unmatched }
}

/// XFS: `/sys/fs/xfs/<dev>/stats/stats` around runs, `xfs_info` geometry,
/// the doctor's allocation groups.
pub struct XfsInternals;

impl Internals for XfsInternals {
    const NAME: &'static str = "xfs";
    type Snapshot = XfsSnapshot;
    type Delta = XfsDelta;
    type Facts = XfsFacts;

    fn read(roots: &Roots, device: &str) -> Result<XfsSnapshot> {
        read_mount(&roots.sys.join("fs/xfs").join(device))
    }

    fn delta(before: &XfsSnapshot, after: &XfsSnapshot) -> XfsDelta {
        delta(before, after)
    }

    fn metrics(delta: &XfsDelta) -> Vec<Metric> {
        delta.metrics()
    }

    /// `xfs_info`, falling back to `xfs_db -r -c info`: xfs_info wants a
    /// mounted filesystem on older xfsprogs; xfs_db reads the superblock of
    /// anything.
    fn geometry(device: &Path) -> Result<String> {
        let dev = device.to_string_lossy();
        match exec::inspect_tool("xfs_info", &[&dev]) {
            Ok(t) if t.contains("agcount=") => Ok(t),
            first => match exec::inspect_tool("xfs_db", &["-r", "-c", "info", &dev]) {
                Ok(t) => Ok(t),
                Err(e) => match first {
                    Err(first) => anyhow::bail!("{first}; {e}"),
                    Ok(_) => Err(e),
                },
            },
        }
    }

    fn facts(mount: &Mounted, found: &mut Found) -> Option<XfsFacts> {
        match Self::geometry(mount.source) {
            Ok(t) => Some(parse_xfs_info(&t)),
            Err(e) => {
                found.notes.push(format!("xfs geometry: {e:#}"));
                None
            }
        }
    }
}

/// XFS geometry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct XfsFacts {
    pub agcount: Option<u64>,
    /// Allocation group size in filesystem blocks.
    pub agsize_blocks: Option<u64>,
    pub block_size: Option<u64>,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xfs_geometry() {
        let xfs = "meta-data=/dev/loop0             isize=512    agcount=4, agsize=20480 blks\n         =                       sectsz=512   attr=2, projid32bit=1\ndata     =                       bsize=4096   blocks=81920, imaxpct=25\nnaming   =version 2              bsize=4096   ascii-ci=0, ftype=1\n";
        let x = parse_xfs_info(xfs);
        assert_eq!((x.agcount, x.agsize_blocks, x.block_size), (Some(4), Some(20480), Some(4096)));
    }
}
