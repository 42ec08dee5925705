//! Read-only images: pack a staging tree with the kind's packer
//! ([`ImageFormat`]: `mksquashfs`, `mkfs.erofs`).
//!
//! **Packed once, on the host** ([`prepare`]): the image of a (content,
//! kind, packing options, packer version) tuple is packed once into the
//! image cache (`<input cache>/images/<key>.img`, the key a hash of all
//! four) and handed to every run, variant and kernel that asks for the same
//! tuple: loop-attached read-only on the host, written onto the testbed
//! disk of a VM (the guest mounts those very bytes). The content's part of
//! the key is a digest of the populated tree (paths, kinds, permission
//! bits, sizes, bytes; not times: an image packed from the same files
//! earlier is the same image to a reader). Concurrent fslab processes take
//! a lock per key (`<key>.lock`, `flock`); the packer writes a temporary
//! name that is renamed into place only after it finished and was flushed,
//! so a crash never leaves a half image that a later run would use.
//! `<key>.json` beside it notes how it was packed.
//!
//! Its build time and size are reported as metrics because people choose
//! image formats on them: `image_build_s` (wall time of the packer, the
//! one pack that made the cached image), `image_size_mb` (MiB) and
//! `image_ratio` (image bytes / content bytes), all lower-is-better.
//!
//! The arguments each packer gets are documented with its kind
//! (`testbed/fs/squashfs.rs`, `testbed/fs/erofs.rs`).

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::config::{ImageOptions, TestbedConfig};
use super::filesystem::ImageFormat;
use super::Populate;
use crate::metric::Metric;
use crate::sys::exec::run_tool;

/// Bumped when what a key covers changes.
const KEY_VERSION: &str = "fslab-image-v1";

/// What building an image produced.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BuiltImage {
    pub build_s: f64,
    pub image_bytes: u64,
    pub content_bytes: u64,
}

impl BuiltImage {
    /// `image_build_s`, `image_size_mb`, `image_ratio` (lower is better).
    pub fn metrics(&self) -> Vec<Metric> {
        vec![
            Metric::lower("image_build_s", "s", self.build_s),
            Metric::lower("image_size_mb", "MiB", self.image_bytes as f64 / (1u64 << 20) as f64),
            Metric::lower("image_ratio", "ratio", self.image_bytes as f64 / self.content_bytes.max(1) as f64),
        ]
    }
}

/// A packed image in the image cache: every testbed of the same content,
/// kind, options and packer version gets exactly these bytes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PreparedImage {
    /// `<cache>/<key>.img`, never written again once renamed there.
    pub path: PathBuf,
    pub key: String,
    /// sha256 of the image file (hex).
    pub sha256: String,
    /// The packer's version line.
    pub packer: String,
    /// The one pack that made it (`image_build_s` is its time).
    pub built: BuiltImage,
    /// This process packed it just now (false: it came from the cache).
    #[serde(default)]
    pub packed_now: bool,
    /// A VM's host has written the image onto the guest's testbed disk, so
    /// the guest mounts the disk as it is instead of copying the image.
    #[serde(default)]
    pub on_device: bool,
    /// The host wrote it there for this run: the guest reads it back and
    /// compares its sha256 before mounting (once per VM and image).
    #[serde(default)]
    pub verify: bool,
}

impl PreparedImage {
    /// The run record's note on where the image came from.
    pub fn note(&self) -> String {
        let how = if self.packed_now { "packed into the image cache" } else { "reused from the image cache" };
        format!(
            "read-only image {} {how} ({}, {} bytes, sha256 {}, packed once in {:.2} s)",
            self.key,
            self.packer,
            self.built.image_bytes,
            &self.sha256[..16.min(self.sha256.len())],
            self.built.build_s
        )
    }
}

/// What the cache keeps beside each image (`<key>.json`).
#[derive(Serialize, Deserialize)]
struct CacheNote {
    key: String,
    fs: String,
    options: String,
    extra: Vec<String>,
    packer: String,
    sha256: String,
    built: BuiltImage,
    /// Unix time of the pack.
    packed_at: f64,
}

/// The image cache under an input cache directory.
pub fn cache_dir(input_cache: &Path) -> PathBuf {
    input_cache.join("images")
}

/// The image for `config` with the content `populate` writes, from the
/// image cache `cache`, packed there first if it is not yet (see the
/// module documentation). `populate` runs every time (its tree is the
/// content's identity); packing only when the cache lacks the image.
pub fn prepare(config: &TestbedConfig, cache: &Path, populate: Populate<'_>) -> Result<PreparedImage> {
    let format = config.fs.fs().image().context("not a read-only image filesystem")?;
    let options = config.image.clone().context("the testbed has no image options")?;
    format.check_host(&options)?;
    fs::create_dir_all(cache).with_context(|| format!("creating the image cache {}", cache.display()))?;
    remove_abandoned_staging(cache);
    let staging = Staging::create(cache)?;
    populate(&staging.0).context("writing the image content")?;
    let content = tree_digest(&staging.0)?;
    let (program, args) = format.pack_command(&options, &config.mkfs, Path::new("/staging"), Path::new("/image"))?;
    let packer = packer_version(program, format.version_arg());
    let mut h = Sha256::new();
    for part in
        [KEY_VERSION, config.fs.fstype(), program, &packer, &content].into_iter().chain(args.iter().map(String::as_str))
    {
        h.update(part.as_bytes());
        h.update([0]);
    }
    let key = format!("{}-{}", config.fs.fstype(), &hex(&h.finalize())[..32]);

    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(cache.join(format!("{key}.lock")))
        .with_context(|| format!("creating the lock of image {key}"))?;
    // SAFETY: flock on a descriptor we own; released when `lock` closes.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(std::io::Error::last_os_error()).context(format!("locking image {key}"));
    }
    let path = cache.join(format!("{key}.img"));
    let note_path = cache.join(format!("{key}.json"));
    // Under the lock nobody else writes this key: temporaries are a crashed pack's.
    for entry in fs::read_dir(cache)?.flatten() {
        if entry.file_name().to_string_lossy().starts_with(&format!("{key}.img.tmp-")) {
            let _ = fs::remove_file(entry.path());
        }
    }
    if let Some(note) =
        read_note(&note_path).filter(|n| fs::metadata(&path).is_ok_and(|m| m.len() == n.built.image_bytes))
    {
        return Ok(PreparedImage {
            path,
            key,
            sha256: note.sha256,
            packer: note.packer,
            built: note.built,
            ..unpacked()
        });
    }
    let tmp = cache.join(format!("{key}.img.tmp-{}", std::process::id()));
    let packed = build(format, &options, &config.mkfs, &staging.0, &tmp).and_then(|built| {
        let sha256 = file_sha256(&tmp)?;
        File::open(&tmp)?.sync_all()?;
        let note = CacheNote {
            key: key.clone(),
            fs: config.fs.fstype().to_string(),
            options: format.describe(&options),
            extra: config.mkfs.clone(),
            packer: packer.clone(),
            sha256: sha256.clone(),
            built: built.clone(),
            packed_at: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64()),
        };
        let note_tmp = cache.join(format!("{key}.json.tmp-{}", std::process::id()));
        fs::write(&note_tmp, serde_json::to_vec_pretty(&note)?)?;
        fs::rename(&note_tmp, &note_path)?;
        fs::rename(&tmp, &path).with_context(|| format!("moving the packed image to {}", path.display()))?;
        File::open(cache)?.sync_all()?;
        Ok((built, sha256))
    });
    let (built, sha256) = match packed {
        Ok(done) => done,
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
    };
    Ok(PreparedImage { path, key, sha256, packer, built, packed_now: true, ..unpacked() })
}

fn unpacked() -> PreparedImage {
    PreparedImage {
        path: PathBuf::new(),
        key: String::new(),
        sha256: String::new(),
        packer: String::new(),
        built: BuiltImage { build_s: 0.0, image_bytes: 0, content_bytes: 0 },
        packed_now: false,
        on_device: false,
        verify: false,
    }
}

fn read_note(path: &Path) -> Option<CacheNote> {
    serde_json::from_slice(&fs::read(path).ok()?).ok()
}

/// A staging directory in the cache, removed when dropped.
struct Staging(PathBuf);

impl Staging {
    fn create(cache: &Path) -> Result<Staging> {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let dir = cache.join(format!("staging-{}-{nanos}", std::process::id()));
        fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Staging(dir))
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Staging trees of fslab processes that are gone (killed mid-populate).
fn remove_abandoned_staging(cache: &Path) {
    for entry in fs::read_dir(cache).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let pid = name.strip_prefix("staging-").and_then(|r| r.split('-').next()).and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|p| !Path::new(&format!("/proc/{p}")).exists()) {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// The packer's version line, asked once per process.
fn packer_version(program: &str, arg: &str) -> String {
    static SEEN: LazyLock<Mutex<HashMap<String, String>>> = LazyLock::new(Default::default);
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    seen.entry(program.to_string()).or_insert_with(|| crate::inspect::environment::tool_version(program, arg)).clone()
}

/// Digest of the tree under `dir`: each entry's relative path, kind,
/// permission bits and, for files, size and bytes (symlinks: the target).
/// Files are read once per process: a tree whose files have the same
/// device, inode, size and modification time as one digested before (the
/// hard-linked trees workloads populate from their input cache; a link
/// changes the inode's ctime, so ctime cannot count) reuses that digest.
pub fn tree_digest(dir: &Path) -> Result<String> {
    static KNOWN: LazyLock<Mutex<HashMap<String, String>>> = LazyLock::new(Default::default);
    let mut entries = Vec::new();
    list_tree(dir, dir, &mut entries)?;
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let mut fingerprint = Sha256::new();
    for (rel, m) in &entries {
        fingerprint.update(rel.as_os_str().as_encoded_bytes());
        fingerprint.update([0]);
        // A fresh staging tree's directories are new inodes: their path and mode are enough.
        let fields = if m.is_dir() {
            [m.mode() as u64, 0, 0, 0, 0, 0]
        } else {
            [m.mode() as u64, m.dev(), m.ino(), m.size(), m.mtime() as u64, m.mtime_nsec() as u64]
        };
        for f in fields {
            fingerprint.update(f.to_le_bytes());
        }
    }
    let fingerprint = hex(&fingerprint.finalize());
    if let Some(known) = KNOWN.lock().unwrap_or_else(|e| e.into_inner()).get(&fingerprint) {
        return Ok(known.clone());
    }
    let mut h = Sha256::new();
    for (rel, m) in &entries {
        h.update(rel.as_os_str().as_encoded_bytes());
        h.update([0]);
        h.update((m.permissions().mode() & 0o7777).to_le_bytes());
        let path = dir.join(rel);
        if m.file_type().is_symlink() {
            h.update(b"l");
            h.update(fs::read_link(&path)?.as_os_str().as_encoded_bytes());
        } else if m.is_dir() {
            h.update(b"d");
        } else if m.is_file() {
            h.update(b"f");
            h.update(m.size().to_le_bytes());
            hash_file(&path, &mut h)?;
        } else {
            bail!("{}: the image content may hold files, directories and symlinks only", path.display());
        }
        h.update([0]);
    }
    let digest = hex(&h.finalize());
    KNOWN.lock().unwrap_or_else(|e| e.into_inner()).insert(fingerprint, digest.clone());
    Ok(digest)
}

fn list_tree(root: &Path, dir: &Path, out: &mut Vec<(PathBuf, fs::Metadata)>) -> Result<()> {
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry.with_context(|| format!("reading {}", dir.display()))?;
        let path = entry.path();
        let meta = fs::symlink_metadata(&path).with_context(|| format!("reading {}", path.display()))?;
        if meta.is_dir() {
            list_tree(root, &path, out)?;
        }
        out.push((path.strip_prefix(root).unwrap_or(&path).to_path_buf(), meta));
    }
    Ok(())
}

fn hash_file(path: &Path, h: &mut Sha256) -> Result<()> {
    let mut file = File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            return Ok(());
        }
        h.update(&buf[..n]);
    }
}

/// sha256 (hex) of a file's bytes.
pub fn file_sha256(path: &Path) -> Result<String> {
    let mut h = Sha256::new();
    hash_file(path, &mut h)?;
    Ok(hex(&h.finalize()))
}

/// sha256 (hex) of the first `bytes` bytes of `path` (a device holding an image).
pub fn prefix_sha256(path: &Path, bytes: u64) -> Result<String> {
    let mut h = Sha256::new();
    let file = File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut limited = file.take(bytes);
    let mut buf = vec![0u8; 1 << 20];
    let mut seen = 0;
    loop {
        let n = limited.read(&mut buf).with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        seen += n as u64;
        h.update(&buf[..n]);
    }
    if seen != bytes {
        bail!("{} holds {seen} bytes, the image {bytes}", path.display());
    }
    Ok(hex(&h.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Pack `staging` into `image` with `format`; the image must not exist yet.
pub fn build(
    format: &dyn ImageFormat,
    options: &ImageOptions,
    extra: &[String],
    staging: &Path,
    image: &Path,
) -> Result<BuiltImage> {
    format.check_host(options)?;
    let content_bytes = tree_bytes(staging)?;
    let (program, args) = format.pack_command(options, extra, staging, image)?;
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let start = Instant::now();
    run_tool(program, &argv).with_context(|| format!("building the image with {program}"))?;
    let build_s = start.elapsed().as_secs_f64();
    let image_bytes =
        std::fs::metadata(image).with_context(|| format!("{program} wrote no {}", image.display()))?.len();
    Ok(BuiltImage { build_s, image_bytes, content_bytes })
}

/// Bytes in the regular files under `dir`.
pub fn tree_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry.with_context(|| format!("reading {}", dir.display()))?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            total += tree_bytes(&entry.path())?;
        } else if kind.is_file() {
            total += entry.metadata()?.len();
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testbed::filesystem::FsKind;

    fn opts(compressor: &str) -> ImageOptions {
        ImageOptions {
            compressor: compressor.into(),
            level: None,
            block_size: None,
            fragments: true,
            pcluster_size: None,
        }
    }

    fn command(fs: FsKind, o: &ImageOptions, extra: &[String]) -> String {
        let format = fs.fs().image().unwrap();
        format.pack_command(o, extra, Path::new("/s"), Path::new("/i.img")).unwrap().1.join(" ")
    }

    #[test]
    fn squashfs_arguments() {
        let mut o = opts("zstd");
        o.level = Some(19);
        o.fragments = false;
        o.block_size = Some(1 << 20);
        assert_eq!(
            command(FsKind::Squashfs, &o, &["-Xdict-size".into()]),
            "/s /i.img -noappend -no-progress -quiet -all-root -comp zstd -b 1048576 -no-fragments -Xcompression-level 19 -Xdict-size"
        );
        assert!(command(FsKind::Squashfs, &opts("none"), &[]).contains("-noI -noD -noF -noX -b 131072"));
        assert!(FsKind::Ext4.fs().image().is_none());
    }

    #[test]
    fn erofs_arguments() {
        let mut o = opts("lz4hc");
        o.level = Some(9);
        o.pcluster_size = Some(65536);
        assert_eq!(command(FsKind::Erofs, &o, &[]), "--quiet --all-root -T0 -zlz4hc,9 -C65536 /i.img /s");
        assert_eq!(command(FsKind::Erofs, &opts("none"), &[]), "--quiet --all-root -T0 /i.img /s");
    }

    #[test]
    fn erofs_help_lists_compressors() {
        use crate::testbed::filesystem::erofs_help_compressors as parse;
        let help = "usage...\n --quiet   quiet\n\nAvailable compressors are: lz4hc, lz4\n";
        assert_eq!(parse(help), Some(vec!["lz4hc".to_string(), "lz4".to_string()]));
        let newer = "Available compressors are:\n  lz4\n  lz4hc [0..12, default=9]\n  lzma [0..109, default=6]\n  zstd [1..22]\n";
        assert_eq!(parse(newer).unwrap(), ["lz4", "lz4hc", "lzma", "zstd"]);
        assert_eq!(parse("nothing here"), None);
    }
}
