//! Synthetic tar archives for the `untar` workload.
//!
//! [`ensure_archive`] turns a [`Listing`] into a tar file with the listed
//! paths, kinds, sizes, modes and times, and generated content, so a real
//! archive from a bug report (e.g. the Raspberry Pi firmware in the ext4
//! `mb_optimize_scan` case) can be replayed without shipping its bytes.
//!
//! # Format
//!
//! GNU tar headers (GNU long-name/long-link records for paths over 100
//! bytes), uid/gid 0, owner `root/root`, mode and mtime from the listing
//! (negative times clamped to 0), directories with a trailing `/`, hard links
//! and symlinks with size 0, two zero blocks at the end. No record padding
//! beyond that (GNU tar does not need it). Everything is a pure function of
//! (listing entries, [`ArchiveSpec`]): no clock, no host user, no
//! environment, so archives are byte-identical across runs and machines.
//!
//! # Content
//!
//! Each regular file's bytes are [`super::content`]'s data style: per 4 KiB
//! block `round((1 - c) × L)` random bytes then zeros, `c` being
//! [`ArchiveSpec::compressibility`], so a compressor (gzip, zstd, btrfs/f2fs
//! compression) shrinks content to about `1 - c` at any block size ≥ 4 KiB.
//! The generator is keyed by the seed and the file's path, so each file has
//! distinct content (no accidental deduplication) and depends only on them.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::content::{ContentReader, Style};
use super::listing::{EntryKind, Listing};
use crate::sys::marker::unique_name;
use crate::sys::signals::check_cancelled;

/// Bumped whenever the archive bytes for a given (listing, spec) change, so
/// cached archives from older fslab versions are not reused.
const FORMAT_VERSION: &[u8] = b"fslab-archive-v2";

/// How the content of a generated archive looks.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ArchiveSpec {
    /// Fraction of each 4 KiB block that is zeros: 0 = incompressible random
    /// bytes, 1 = all zeros. Default 0.5.
    pub compressibility: f64,
    /// Seed of the pseudo-random content. Default 0.
    pub seed: u64,
}

impl Default for ArchiveSpec {
    fn default() -> Self {
        ArchiveSpec { compressibility: 0.5, seed: 0 }
    }
}

impl ArchiveSpec {
    /// Check that `compressibility` is a number in `[0, 1]`.
    pub fn validate(&self) -> Result<()> {
        let c = self.compressibility;
        if !(0.0..=1.0).contains(&c) {
            bail!("archive compressibility must be in [0, 1], got {c}");
        }
        Ok(())
    }
}

/// Build (once) a tar archive for `listing` under `cache_dir`, named by a
/// hash of the listing content + spec ([`archive_file_name`]), written to a
/// temp file and renamed atomically; return its path. If the file exists it
/// is reused (not regenerated).
///
/// The archive is streamed to disk (memory use does not grow with its
/// size). `cache_dir` is created if missing. On error the temp file is
/// removed and no archive is left under the final name.
pub fn ensure_archive(listing: &Listing, spec: &ArchiveSpec, cache_dir: &Path) -> Result<PathBuf> {
    spec.validate()?;
    let name = archive_file_name(listing, spec);
    let path = cache_dir.join(&name);
    if path.is_file() {
        return Ok(path);
    }
    crate::sys::trusted::ensure_dir(cache_dir).context("the archive cache")?;

    // Unique per process and call, so concurrent builders (threads or
    // processes) never share a temp file; the last rename wins, and all of
    // them wrote the same bytes. The marker name lets `fslab cleanup` remove
    // the temp file of a killed fslab.
    let tmp = cache_dir.join(format!(".{name}.{}.tmp", unique_name()));
    let result = (|| -> Result<()> {
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .with_context(|| format!("creating {}", tmp.display()))?;
        let out = write_archive(listing, spec, BufWriter::with_capacity(1 << 20, file))?;
        let file =
            out.into_inner().map_err(|e| e.into_error()).with_context(|| format!("writing {}", tmp.display()))?;
        // Durable before it becomes visible under its final name, so a crash
        // never leaves a truncated archive that would then be reused.
        file.sync_all().with_context(|| format!("syncing {}", tmp.display()))?;
        fs::rename(&tmp, &path).with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
        Ok(())
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(e.context(format!("generating archive for {} in {}", listing.origin, cache_dir.display())));
    }
    // Best effort: persist the rename itself.
    if let Ok(dir) = File::open(cache_dir) {
        let _ = dir.sync_all();
    }
    Ok(path)
}

/// The cache file name [`ensure_archive`] uses:
/// `fslab-archive-<32 hex digits>.tar`, from a SHA-256 over the format
/// version, the spec and every entry (kind, path, link target, size, mode,
/// mtime). The listing's origin is not part of it, so equal content from
/// different sources shares one archive.
pub fn archive_file_name(listing: &Listing, spec: &ArchiveSpec) -> String {
    let mut h = Sha256::new();
    h.update(FORMAT_VERSION);
    // `+ 0.0` turns -0.0 into 0.0: equal specs must hash equally.
    h.update((spec.compressibility + 0.0).to_bits().to_le_bytes());
    h.update(spec.seed.to_le_bytes());
    h.update((listing.entries.len() as u64).to_le_bytes());
    // Length-prefixed fields, so no two listings encode the same.
    let field = |h: &mut Sha256, b: &[u8]| {
        h.update((b.len() as u64).to_le_bytes());
        h.update(b);
    };
    for e in &listing.entries {
        let (tag, target): (u8, &str) = match &e.kind {
            EntryKind::File => (b'f', ""),
            EntryKind::Dir => (b'd', ""),
            EntryKind::Symlink { target } => (b'l', target),
            EntryKind::Hardlink { target } => (b'h', target),
        };
        h.update([tag]);
        field(&mut h, e.path.as_bytes());
        field(&mut h, target.as_bytes());
        h.update(e.size.to_le_bytes());
        h.update(e.mode.to_le_bytes());
        h.update(e.mtime.to_le_bytes());
    }
    format!("fslab-archive-{}.tar", hex(&h.finalize()[..16]))
}

/// Stream the archive for `listing` into `out` and return `out` (not
/// flushed). This is what [`ensure_archive`] writes; exposed for callers that
/// want the bytes elsewhere (a pipe, a hash).
pub fn write_archive<W: Write>(listing: &Listing, spec: &ArchiveSpec, out: W) -> Result<W> {
    spec.validate()?;
    let mut builder = tar::Builder::new(out);
    for e in &listing.entries {
        // A large archive takes a while: stay responsive to Ctrl-C.
        check_cancelled()?;
        let mut h = tar::Header::new_gnu();
        h.set_mode(e.mode & 0o7777);
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(e.mtime.max(0) as u64);
        h.set_size(0);
        let res = h.set_username("root").and_then(|()| h.set_groupname("root")).and_then(|()| match &e.kind {
            EntryKind::File => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_size(e.size);
                builder.append_data(&mut h, &e.path, content(spec, &e.path, e.size))
            }
            EntryKind::Dir => {
                h.set_entry_type(tar::EntryType::Directory);
                builder.append_data(&mut h, format!("{}/", e.path), io::empty())
            }
            EntryKind::Symlink { target } => {
                h.set_entry_type(tar::EntryType::Symlink);
                builder.append_link(&mut h, &e.path, target)
            }
            EntryKind::Hardlink { target } => {
                h.set_entry_type(tar::EntryType::Link);
                builder.append_link(&mut h, &e.path, target)
            }
        });
        res.with_context(|| format!("{}: adding {:?} to the archive", listing.origin, e.path))?;
    }
    builder.into_inner().with_context(|| format!("{}: finishing the archive", listing.origin))
}

/// The generated content of the file at archive path `path` (see the
/// module docs for the scheme).
pub fn content(spec: &ArchiveSpec, path: &str, size: u64) -> ContentReader {
    ContentReader::new(Style::Data, spec.compressibility, spec.seed, path.as_bytes(), size)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::listing::Entry;
    use std::collections::BTreeMap;
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::process::Command;
    use std::time::Instant;

    fn sha256_file(p: &Path) -> String {
        let mut h = Sha256::new();
        let mut f = File::open(p).unwrap();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = f.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
        }
        hex(&h.finalize())
    }

    #[test]
    fn same_listing_and_spec_give_identical_archives() {
        let l = Listing::synthetic();
        let spec = ArchiveSpec::default();
        let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let a = ensure_archive(&l, &spec, d1.path()).unwrap();
        let b = ensure_archive(&l, &spec, &d2.path().join("nested/cache")).unwrap();
        assert_eq!(a.file_name(), b.file_name());
        assert_eq!(sha256_file(&a), sha256_file(&b));
        // Only the archive is left behind, no temp file.
        assert_eq!(fs::read_dir(d1.path()).unwrap().count(), 1);

        // Another seed or compressibility is another archive.
        let other = ArchiveSpec { seed: 1, ..spec };
        let c = ensure_archive(&l, &other, d1.path()).unwrap();
        assert_ne!(a, c);
        assert_ne!(sha256_file(&a), sha256_file(&c));
        let other = ArchiveSpec { compressibility: 0.25, ..spec };
        assert_ne!(archive_file_name(&l, &other), archive_file_name(&l, &spec));
        // The origin does not matter, the content does.
        let renamed = Listing { origin: "elsewhere".into(), ..l.clone() };
        assert_eq!(archive_file_name(&renamed, &spec), archive_file_name(&l, &spec));
        let mut changed = l.clone();
        changed.entries[1].mode ^= 0o100;
        assert_ne!(archive_file_name(&changed, &spec), archive_file_name(&l, &spec));
    }

    #[test]
    fn existing_archive_is_reused() {
        let l = Listing::synthetic().scaled(0.1).unwrap();
        let spec = ArchiveSpec::default();
        let d = tempfile::tempdir().unwrap();
        let a = ensure_archive(&l, &spec, d.path()).unwrap();
        fs::write(&a, b"sentinel").unwrap();
        let b = ensure_archive(&l, &spec, d.path()).unwrap();
        assert_eq!(a, b);
        assert_eq!(fs::read(&b).unwrap(), b"sentinel");
    }

    #[test]
    fn bad_specs_and_entries_are_errors() {
        let l = Listing::synthetic();
        let d = tempfile::tempdir().unwrap();
        for c in [-0.1, 1.5, f64::NAN] {
            let spec = ArchiveSpec { compressibility: c, seed: 0 };
            let e = ensure_archive(&l, &spec, d.path()).unwrap_err();
            assert!(e.to_string().contains("compressibility"), "{e}");
        }
        // A hand-built listing escaping the extraction directory.
        let evil = Listing {
            origin: "evil".into(),
            entries: vec![Entry { path: "../escape".into(), kind: EntryKind::File, size: 1, mode: 0o644, mtime: 0 }],
        };
        let e = ensure_archive(&evil, &ArchiveSpec::default(), d.path()).unwrap_err();
        assert!(format!("{e:#}").contains("../escape"), "{e:#}");
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 0, "temp file removed");
    }

    fn read_all(mut r: impl Read) -> Vec<u8> {
        let mut v = Vec::new();
        r.read_to_end(&mut v).unwrap();
        v
    }

    #[test]
    fn content_is_exact_size_and_independent_of_read_sizes() {
        let spec = ArchiveSpec::default();
        for size in [0u64, 1, 4095, 4096, 4097, 10_000] {
            let whole = read_all(content(&spec, "a/b", size));
            assert_eq!(whole.len() as u64, size);
            let mut r = content(&spec, "a/b", size);
            let mut bytewise = Vec::new();
            let mut buf = [0u8; 7];
            loop {
                let n = r.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                bytewise.extend_from_slice(&buf[..n]);
            }
            assert_eq!(whole, bytewise);
        }
        let a = read_all(content(&spec, "a/b", 8192));
        let b = read_all(content(&spec, "a/c", 8192));
        assert_ne!(a, b, "paths get distinct content");
        // Layout of a block at c = 0.5: 2048 random bytes, 2048 zeros.
        assert!(a[2048..4096].iter().all(|&x| x == 0));
        assert!(a[..2048].iter().filter(|&&x| x == 0).count() < 40);
        let zeros = ArchiveSpec { compressibility: 1.0, seed: 0 };
        assert!(read_all(content(&zeros, "z", 9000)).iter().all(|&x| x == 0));
    }

    /// gzip output size / input size over 4 MiB of generated content.
    fn gzip_ratio(c: f64) -> f64 {
        use flate2::{write::GzEncoder, Compression};
        let spec = ArchiveSpec { compressibility: c, seed: 7 };
        let mut enc = GzEncoder::new(Vec::new(), Compression::default());
        let mut total = 0u64;
        // Many files of mixed sizes, like an archive.
        for (i, size) in [1_000u64, 4_096, 70_000, 1 << 20, 3 << 20].iter().enumerate() {
            total += io::copy(&mut content(&spec, &format!("f{i}"), *size), &mut enc).unwrap();
        }
        enc.finish().unwrap().len() as f64 / total as f64
    }

    #[test]
    fn gzip_ratio_follows_compressibility() {
        // Expected ratio: 1 - c. Random bytes carry 8 bits/byte, so deflate
        // cannot shrink them and adds a little framing/Huffman overhead; a
        // zero run costs about 2-3 bytes per 258-byte match (< 1.5%). So the
        // ratio sits just above 1 - c: allow -0.005 (rounding of the random
        // share in short tail blocks) to +0.02 (overhead).
        for c in [0.0, 0.5, 0.9] {
            let r = gzip_ratio(c);
            let want = 1.0 - c;
            assert!(r >= want - 0.005 && r <= want + 0.02, "c = {c}: gzip ratio {r:.4}, want {want} (-0.005/+0.02)");
        }
        assert!(gzip_ratio(1.0) < 0.01);
    }

    /// Walk an extracted tree: relative path -> (kind, size, mode, mtime, ino).
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, (EntryKind, fs::Metadata)>) {
        for e in fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_str().unwrap().to_string();
            let md = fs::symlink_metadata(&p).unwrap();
            let kind = if md.file_type().is_symlink() {
                EntryKind::Symlink { target: fs::read_link(&p).unwrap().to_str().unwrap().to_string() }
            } else if md.is_dir() {
                walk(root, &p, out);
                EntryKind::Dir
            } else {
                EntryKind::File
            };
            out.insert(rel, (kind, md));
        }
    }

    #[test]
    fn gnu_tar_extracts_exactly_the_listing() {
        let l = Listing::synthetic();
        let spec = ArchiveSpec::default();
        let cache = tempfile::tempdir().unwrap();
        let archive = ensure_archive(&l, &spec, cache.path()).unwrap();
        let out = tempfile::tempdir().unwrap();
        // -p: exact modes even when the test does not run as root.
        let res = Command::new("tar").arg("-xpf").arg(&archive).arg("-C").arg(out.path()).output().unwrap();
        assert!(res.status.success(), "tar failed: {res:?}");
        assert!(res.stderr.is_empty(), "tar warned: {}", String::from_utf8_lossy(&res.stderr));

        let mut found = BTreeMap::new();
        walk(out.path(), out.path(), &mut found);
        assert_eq!(found.len(), l.entries.len(), "nothing extra, nothing missing");
        for e in &l.entries {
            let (kind, md) = found.get(&e.path).unwrap_or_else(|| panic!("{} not extracted", e.path));
            match &e.kind {
                EntryKind::Hardlink { target } => {
                    assert_eq!(*kind, EntryKind::File);
                    assert_eq!(md.ino(), found[target].1.ino(), "{} not linked", e.path);
                    assert_eq!(md.nlink(), 2);
                }
                k => assert_eq!(kind, k, "{}", e.path),
            }
            if e.kind == EntryKind::File {
                assert_eq!(md.len(), e.size, "{}", e.path);
                assert_eq!(md.mtime(), e.mtime, "{}", e.path);
            }
            if !matches!(e.kind, EntryKind::Symlink { .. }) {
                assert_eq!(md.permissions().mode() & 0o7777, e.mode, "{}", e.path);
            }
        }
        // Content is what `content` generates.
        for p in ["fslab-small/boot/kernel.img", "fslab-small/README.md"] {
            let size = l.entries.iter().find(|e| e.path == p).unwrap().size;
            assert_eq!(fs::read(out.path().join(p)).unwrap(), read_all(content(&spec, p, size)));
        }

        // And GNU tar's own listing of the archive parses back to the listing.
        let tv = Command::new("tar").args(["--full-time", "-tvf"]).arg(&archive).env("TZ", "UTC").output().unwrap();
        assert!(tv.status.success(), "{tv:?}");
        let text = String::from_utf8(tv.stdout).unwrap();
        assert_eq!(Listing::parse(&text, "tar-tv").unwrap().entries, l.entries);
    }

    /// Timing of the full Raspberry Pi archive; slow in debug builds, so
    /// run on demand: `cargo test --lib workload -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn rpi_firmware_generation_time() {
        let l = Listing::rpi_firmware();
        let d = tempfile::tempdir().unwrap();
        for c in [0.5, 0.0, 1.0] {
            let spec = ArchiveSpec { compressibility: c, seed: 0 };
            let t = Instant::now();
            let p = ensure_archive(&l, &spec, d.path()).unwrap();
            let secs = t.elapsed().as_secs_f64();
            let size = fs::metadata(&p).unwrap().len();
            println!(
                "rpi_firmware c={c}: {} files, {} bytes of content, archive {size} bytes, {secs:.2} s",
                l.file_count(),
                l.total_bytes()
            );
            let t = Instant::now();
            ensure_archive(&l, &spec, d.path()).unwrap();
            println!("  reuse: {:.4} s", t.elapsed().as_secs_f64());
            if c == 0.5 {
                // GNU tar reads every header (long names included) back to
                // the real listing.
                let tv = Command::new("tar").args(["--full-time", "-tvf"]).arg(&p).env("TZ", "UTC").output().unwrap();
                assert!(tv.status.success() && tv.stderr.is_empty(), "{tv:?}");
                let text = String::from_utf8(tv.stdout).unwrap();
                assert_eq!(Listing::parse(&text, "tar-tv").unwrap().entries, l.entries);
            }
        }
    }
}
