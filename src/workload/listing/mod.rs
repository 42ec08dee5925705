//! Content lists for the `untar` workload: which paths an archive holds,
//! with their kinds, sizes, modes and times: the model here, GNU `tar tv`
//! text in [`tartv`], scaling in [`scale`].
//!
//! A [`Listing`] is read from the output of GNU `tar tv` (so a real archive
//! from a bug report can be described by a text file without shipping its
//! bytes), built in ([`Listing::rpi_firmware`], [`Listing::synthetic`]), or
//! scaled down/up ([`Listing::scaled`]). The archive generator in
//! [`super::archive`] turns a listing into a tar file with synthetic content.
//!
//! Paths are stored normalised: relative, `/`-separated, no `.`/empty
//! components, no trailing `/`. Paths that would leave the extraction
//! directory (absolute, or with `..`) are rejected, because fslab extracts
//! these archives as root.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

mod scale;
mod tartv;

/// What an entry of a listing is.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum EntryKind {
    /// A regular file with `size` bytes of content.
    File,
    /// A directory.
    Dir,
    /// A symbolic link; `target` is stored verbatim (it may be relative,
    /// absolute or dangling).
    Symlink {
        /// The link's target, as written in the listing.
        target: String,
    },
    /// A hard link to a regular file listed earlier; `target` is that file's
    /// normalised path.
    Hardlink {
        /// Path of the earlier regular file this entry links to.
        target: String,
    },
}

/// One entry of a [`Listing`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Normalised relative path (no trailing `/`, no `.`/`..` components).
    pub path: String,
    /// Kind of entry.
    pub kind: EntryKind,
    /// Content size in bytes; always 0 for anything but [`EntryKind::File`].
    pub size: u64,
    /// Permission bits (`0o7777` at most, including setuid/setgid/sticky);
    /// the file-type bits are carried by `kind`.
    pub mode: u32,
    /// Modification time, Unix seconds, from the listing's date and time read
    /// as UTC.
    pub mtime: i64,
}

/// An ordered list of archive entries, in archive order (parents before
/// children, as `tar` writes them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listing {
    /// Where the listing came from (file name or built-in name); used in
    /// error messages and reports.
    pub origin: String,
    /// The entries in archive order.
    pub entries: Vec<Entry>,
}

/// Largest factor [`Listing::scaled`] accepts; it bounds memory and archive
/// size (100 × the Raspberry Pi listing is ~15 GB).
pub const MAX_SCALE: f64 = 100.0;

/// The real `tar tv` listing of the Raspberry Pi firmware archive from the
/// ext4 `mb_optimize_scan` SD-card regression (see
/// `data/rpi-firmware-4dde751.LICENSE` for its licence).
const RPI_FIRMWARE_LIST: &str = include_str!("../../../data/rpi-firmware-4dde751.list");

/// A small tree with every awkward case, for tests and quick runs.
const SYNTHETIC_LIST: &str = include_str!("../../../data/synthetic.list");

impl Listing {
    /// The real listing of `raspberrypi-rpi-firmware-4dde751` (the archive
    /// `rpi-update` unpacks in the ext4 SD-card case): 7,701 regular files
    /// totalling 151,217,565 bytes (151.2 MB, 144.2 MiB), 1,465 directories
    /// and 4 symlinks.
    pub fn rpi_firmware() -> Listing {
        static PARSED: OnceLock<Listing> = OnceLock::new();
        PARSED
            .get_or_init(|| {
                // The text is compiled in and checked by a unit test, so this
                // cannot fail at run time.
                Listing::parse(RPI_FIRMWARE_LIST, "builtin:rpi-firmware-4dde751")
                    .expect("built-in rpi-firmware listing parses")
            })
            .clone()
    }

    /// A small built-in tree for tests and quick runs (`data/synthetic.list`):
    /// 342 regular files, about 5.0 MB, in 19 nested directories shaped like
    /// a firmware tree (a few large images, many small overlays and
    /// compressed modules), with two symlinks, a hard link, an empty file,
    /// an empty directory, names with spaces and a path longer than 100
    /// bytes (GNU long-name header).
    pub fn synthetic() -> Listing {
        static PARSED: OnceLock<Listing> = OnceLock::new();
        PARSED
            .get_or_init(|| {
                Listing::parse(SYNTHETIC_LIST, "builtin:synthetic").expect("built-in synthetic listing parses")
            })
            .clone()
    }

    /// Number of regular files (hard links not counted).
    pub fn file_count(&self) -> usize {
        self.entries.iter().filter(|e| e.kind == EntryKind::File).count()
    }

    /// Sum of the sizes of the regular files, in bytes.
    pub fn total_bytes(&self) -> u64 {
        self.entries.iter().filter(|e| e.kind == EntryKind::File).map(|e| e.size).sum()
    }

    /// Number of directories listed.
    pub fn dir_count(&self) -> usize {
        self.entries.iter().filter(|e| e.kind == EntryKind::Dir).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn rpi_firmware_parses_fully() {
        let l = Listing::rpi_firmware();
        let lines = RPI_FIRMWARE_LIST.lines().filter(|l| !l.trim().is_empty()).count();
        assert_eq!(lines, 9170);
        assert_eq!(l.entries.len(), lines);
        // The "151 MB / 7,701 files" holds (decimal megabytes).
        assert_eq!(l.file_count(), 7_701);
        assert_eq!(l.total_bytes(), 151_217_565);
        assert_eq!(l.dir_count(), 1_465);
        let links = l.entries.iter().filter(|e| matches!(e.kind, EntryKind::Symlink { .. })).count();
        assert_eq!(links, 4);
    }
    #[test]
    fn small_is_a_few_mb_of_a_few_hundred_files() {
        let l = Listing::synthetic();
        assert_eq!(l, Listing::synthetic(), "deterministic");
        let (files, bytes) = (l.file_count(), l.total_bytes());
        assert!((250..=500).contains(&files), "{files} files");
        assert!((3_000_000..=6_000_000).contains(&bytes), "{bytes} bytes");
        assert!(l.dir_count() >= 10);
        assert!(l.entries.iter().any(|e| e.path.len() > 100));
        assert!(l.entries.iter().any(|e| e.path.contains(' ')));
        let symlinks = l.entries.iter().filter(|e| matches!(e.kind, EntryKind::Symlink { .. })).count();
        assert_eq!(symlinks, 2);
    }
}
