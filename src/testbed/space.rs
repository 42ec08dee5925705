//! Free space where testbeds live, and naming a full disk.
//!
//! A sparse image grows as the filesystem in it is written; when the host
//! filesystem under the work directory fills up, the loop device turns the
//! host's ENOSPC into I/O errors, and the workload sees `sync: Input/output
//! error`. So the runner checks free space before it starts, and a failed
//! run on a full host filesystem says that the disk is full.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::units::Bytes;

/// The filesystem a path is on, as `statvfs` sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Space {
    /// Bytes this process may still write (root may use the reserved blocks).
    pub free: u64,
    pub total: u64,
}

/// Space of the filesystem holding `path` (its nearest existing ancestor
/// when `path` does not exist yet).
pub fn of(path: &Path) -> Result<Space> {
    let existing: PathBuf = path.ancestors().find(|p| p.exists()).map_or_else(|| PathBuf::from("/"), Path::to_path_buf);
    let st = nix::sys::statvfs::statvfs(&existing).with_context(|| format!("statvfs {}", existing.display()))?;
    let block = st.fragment_size() as u64;
    let blocks = if nix::unistd::geteuid().is_root() { st.blocks_free() } else { st.blocks_available() };
    Ok(Space { free: blocks as u64 * block, total: st.blocks() as u64 * block })
}

/// The sentence for a full work directory, when the filesystem holding
/// `path` is (nearly) full: less than 8 MiB free, or less than 1% of it
/// (at most 256 MiB) — what is left when writes started failing.
pub fn full(path: &Path) -> Option<String> {
    let space = of(path).ok()?;
    let threshold = (space.total / 100).clamp(8 << 20, 256 << 20);
    (space.free < threshold).then(|| {
        format!(
            "the work directory's filesystem is full: {} has {} free of {} (a sparse image could not grow; \
             free space or use --workdir on a larger filesystem)",
            path.display(),
            Bytes(space.free),
            Bytes(space.total)
        )
    })
}

pub use crate::exit::is_no_space;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn space_of_a_missing_path_is_its_existing_ancestor() {
        let dir = tempfile::tempdir().unwrap();
        let s = of(&dir.path().join("not/yet/there")).unwrap();
        assert!(s.total > 0 && s.free <= s.total);
        let e = anyhow::Error::from(std::io::Error::from_raw_os_error(libc::ENOSPC)).context("writing x");
        assert!(is_no_space(&e));
        assert!(!is_no_space(&anyhow::anyhow!("other")));
    }
}
