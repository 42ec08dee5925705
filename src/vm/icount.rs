//! Guest instructions executed during a run's measured part: a metric that
//! does not depend on the host's load, for guests under TCG.
//!
//! The counting is done by a separate QEMU plugin
//! (`plugins/qemu-icount`, GPL like QEMU's plugin API), loaded into every
//! TCG session when it is installed. The guest marks the measured part's
//! start and end with two marker instructions ([`measured`]): multi-byte
//! NOPs with a magic displacement, which the plugin recognises by their
//! bytes. At the end marker the plugin writes the whole guest's count (all
//! vCPUs, kernel and user) to a file in the session directory, which the
//! host takes after the run ([`take`]).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::metric::Metric;

/// The metric's name; lower is better.
pub const METRIC: &str = "vm/instructions";
/// The plugin's file name, as cargo builds it.
pub const PLUGIN_FILE: &str = "libfslab_qemu_icount.so";
/// The file in the session directory the plugin writes each window's count to.
pub const COUNT_FILE: &str = "instructions";
/// The file in the session directory the plugin writes each window's
/// counts by block address to, when it attributes them (`blocks=<path>`).
pub const BLOCKS_FILE: &str = "blocks";
/// The blocks file's first line (the plugin's `BLOCKS_HEADER`).
const BLOCKS_HEADER: &str = "fslab-qemu-icount blocks 1";

/// Run `measure` between the start and end markers. On the host (and in a
/// guest without the plugin) the markers are plain NOPs.
pub fn measured<T>(measure: impl FnOnce() -> T) -> T {
    marker::start();
    let result = measure();
    marker::end();
    result
}

#[cfg(target_arch = "x86_64")]
mod marker {
    // `nopw DISP(%rax,%rax,1)`: 66 0f 1f 84 00 + the 4-byte displacement,
    // the plugin's MAGIC_START and MAGIC_END.
    pub fn start() {
        // SAFETY: a NOP; touches no memory, registers or flags.
        unsafe { core::arch::asm!("nop word ptr [rax + rax*1 + 0x46534c53]", options(nomem, nostack, preserves_flags)) }
    }
    pub fn end() {
        // SAFETY: as above.
        unsafe { core::arch::asm!("nop word ptr [rax + rax*1 + 0x46534c45]", options(nomem, nostack, preserves_flags)) }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod marker {
    pub fn start() {}
    pub fn end() {}
}

/// The installed plugin: beside the fslab executable (a cargo build), then
/// in `$FSLAB_TOOLS/lib` (`scripts/install-vm-tools`).
pub fn plugin() -> Option<PathBuf> {
    let beside = std::env::current_exe().ok().and_then(|exe| exe.parent().map(|d| d.join(PLUGIN_FILE)));
    beside.into_iter().chain([super::tools::tools_prefix().join("lib").join(PLUGIN_FILE)]).find(|p| p.is_file())
}

/// The count of the last measured window, removed so the next run starts
/// clean; None when the plugin wrote none (no plugin, or the run never
/// reached its end marker).
pub fn take(session_dir: &Path) -> Option<Metric> {
    let path = session_dir.join(COUNT_FILE);
    let text = std::fs::read_to_string(&path).ok()?;
    let _ = std::fs::remove_file(&path);
    let count: u64 = text.trim().parse().ok()?;
    Some(Metric::lower(METRIC, "insn", count as f64))
}

/// One window's instructions by where they ran, as the plugin counted them
/// in the same snapshot as the window's count.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BlockCounts {
    /// Every instruction of the window: `user` plus the kernel blocks'.
    pub total: u64,
    /// User-space instructions, all processes together.
    pub user: u64,
    /// Kernel instructions by the guest address of the block that ran them,
    /// ascending; only blocks that ran in the window.
    pub kernel: Vec<(u64, u64)>,
}

impl BlockCounts {
    /// The plugin's blocks file: its header, `total N`, `user N`, then one
    /// `ADDRESS(hex) N` line per block. `origin` names the file in errors;
    /// counts that do not add up to the total are an error too.
    pub fn parse(text: &str, origin: &str) -> Result<BlockCounts> {
        let mut lines = text.lines().enumerate();
        if lines.next().map(|(_, l)| l) != Some(BLOCKS_HEADER) {
            bail!("{origin}:1: not a blocks file of this plugin (expected {BLOCKS_HEADER:?})");
        }
        let mut field = |name: &str| -> Result<u64> {
            let (i, line) = lines.next().with_context(|| format!("{origin}: ends before `{name}`"))?;
            line.strip_prefix(name)
                .and_then(|n| n.strip_prefix(' '))
                .and_then(|n| n.parse().ok())
                .with_context(|| format!("{origin}:{}: expected `{name} <count>`, found {line:?}", i + 1))
        };
        let (total, user) = (field("total")?, field("user")?);
        let mut kernel = Vec::new();
        for (i, line) in lines {
            let parsed =
                line.split_once(' ').and_then(|(a, n)| Some((u64::from_str_radix(a, 16).ok()?, n.parse().ok()?)));
            let Some(block) = parsed else {
                bail!("{origin}:{}: expected `<hex address> <count>`, found {line:?}", i + 1)
            };
            kernel.push(block);
        }
        let sum = user + kernel.iter().map(|(_, n)| n).sum::<u64>();
        if sum != total {
            bail!("{origin}: the blocks add up to {sum} instructions, not the window's {total}");
        }
        Ok(BlockCounts { total, user, kernel })
    }
}

/// The last window's counts by block ([`BLOCKS_FILE`]), removed so the next
/// run starts clean; None when the plugin wrote none.
pub fn take_blocks(session_dir: &Path) -> Option<Result<BlockCounts>> {
    let path = session_dir.join(BLOCKS_FILE);
    let text = std::fs::read_to_string(&path).ok()?;
    let _ = std::fs::remove_file(&path);
    Some(BlockCounts::parse(&text, &path.display().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_is_read_once() {
        let dir = tempfile::tempdir().unwrap();
        assert!(take(dir.path()).is_none());
        std::fs::write(dir.path().join(COUNT_FILE), "12345\n").unwrap();
        let metric = take(dir.path()).unwrap();
        assert_eq!((metric.name.as_str(), metric.value, metric.higher_is_better), (METRIC, 12345.0, false));
        assert!(take(dir.path()).is_none(), "taken once");
        // The markers are NOPs outside the plugin.
        assert_eq!(measured(|| 7), 7);
    }

    #[test]
    fn block_counts_must_add_up_to_the_window() {
        let dir = tempfile::tempdir().unwrap();
        assert!(take_blocks(dir.path()).is_none());
        let text = format!("{BLOCKS_HEADER}\ntotal 100\nuser 40\nffffffff81000000 50\nffffffff81000040 10\n");
        std::fs::write(dir.path().join(BLOCKS_FILE), &text).unwrap();
        let blocks = take_blocks(dir.path()).unwrap().unwrap();
        assert_eq!(blocks.kernel, vec![(0xffffffff81000000, 50), (0xffffffff81000040, 10)]);
        assert_eq!((blocks.total, blocks.user), (100, 40));
        assert!(take_blocks(dir.path()).is_none(), "taken once");
        let short = text.replace("total 100", "total 101");
        assert!(BlockCounts::parse(&short, "b").unwrap_err().to_string().contains("not the window's 101"));
        let bad = text.replace("ffffffff81000040 10", "zz 10");
        assert!(BlockCounts::parse(&bad, "b").unwrap_err().to_string().starts_with("b:5: "));
        assert!(BlockCounts::parse("12\n", "b").unwrap_err().to_string().starts_with("b:1: "));
    }
}
