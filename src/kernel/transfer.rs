//! Build once, boot anywhere: `fslab kernel export` writes the cache
//! entries an experiment's kernels resolve to (with their keys, configs,
//! build records and, for built kernels, the prepared build each file's
//! variant asks for) into one tar file; `fslab kernel import` adds them to
//! another machine's cache, each entry whole or not at all (the cache's
//! own lock and rename, [`super::cache::entry`]), so concurrent importers
//! and builders never see half an entry. A built kernel's variant then
//! reads as cached there, with no source tree and no compiler.
//!
//! Only self-contained entries travel: an unpacked package or a built
//! kernel. A kernel staged from the user's files (an image with a modules
//! directory, a build tree) links into those files, which the other
//! machine does not have; it is refused, naming what to copy instead.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::{build, cache, KernelSource};

/// The archive's table of contents, its first member.
const MANIFEST: &str = "fslab-kernels.json";
/// What the manifest's `format` says (bumped when the layout changes).
const FORMAT: u32 = 1;

/// One kernel of an archive.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MovedKernel {
    /// The variant it was exported for (import: the variant it was exported for there).
    pub variant: String,
    /// The cache entry's key.
    pub key: String,
    pub release: String,
    /// What it is (its kind's origin line).
    pub origin: String,
    pub bytes: u64,
    /// Import: it was in the cache already (nothing written).
    #[serde(default)]
    pub present: bool,
}

/// The manifest: the kernels, and the prepared builds that let a built
/// kernel's variant read as cached.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Manifest {
    format: u32,
    kernels: Vec<MovedKernel>,
    /// Prepared builds (`kernel-builds/prepared/…json`) and final configs
    /// (`kernel-builds/configs/…`), as paths inside the archive.
    prepared: Vec<String>,
}

/// What an export or import did.
#[derive(Clone, Debug, Serialize)]
pub struct Moved {
    /// `export` or `import`.
    pub direction: String,
    pub archive: PathBuf,
    pub kernels: Vec<MovedKernel>,
}

/// Resolve (build, unpack) each source in `cache` and write its entry to `archive`.
pub fn export(sources: &[(String, KernelSource)], cache_dir: &Path, archive: &Path) -> Result<Moved> {
    let kernels_dir = cache::kernels_dir(cache_dir);
    let mut kernels: Vec<MovedKernel> = Vec::new();
    let mut prepared = Vec::new();
    for (variant, source) in sources {
        let artifacts = source.resolve(cache_dir).with_context(|| format!("the kernel of variant `{variant}`"))?;
        let Some(key) = entry_key(&artifacts.image, &kernels_dir) else {
            bail!(
                "the kernel of variant `{variant}` ({}) is used where it is, not from the cache: copy it to the \
                 other machine and name it there",
                source.origin()
            );
        };
        if artifacts.guest_dirs.iter().any(|d| !d.starts_with(&kernels_dir)) {
            bail!(
                "the kernel of variant `{variant}` ({}) links modules from outside the cache: copy them to the \
                 other machine and name them there",
                source.origin()
            );
        }
        if let Some(b) = source.build() {
            for memo in build::prepared_files(b, cache_dir) {
                let rel = memo.strip_prefix(cache_dir).unwrap_or(&memo).to_string_lossy().into_owned();
                if !prepared.contains(&rel) {
                    prepared.push(rel);
                }
            }
        }
        if kernels.iter().any(|k| k.key == key) {
            continue;
        }
        kernels.push(MovedKernel {
            variant: variant.clone(),
            bytes: cache::disk_usage(&kernels_dir.join(&key)),
            key,
            release: artifacts.release.clone(),
            origin: source.origin(),
            present: false,
        });
    }
    let manifest = Manifest { format: FORMAT, kernels: kernels.clone(), prepared: prepared.clone() };
    let tmp = archive.with_extension(format!("partial-{}", std::process::id()));
    let written = (|| -> Result<()> {
        let mut tar = tar::Builder::new(File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?);
        tar.follow_symlinks(false);
        let json = serde_json::to_vec_pretty(&manifest)?;
        let mut header = tar::Header::new_gnu();
        header.set_size(json.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, MANIFEST, json.as_slice())?;
        for k in &kernels {
            tar.append_dir_all(format!("kernels/{}", k.key), kernels_dir.join(&k.key))?;
        }
        for rel in &prepared {
            tar.append_path_with_name(cache_dir.join(rel), rel)?;
        }
        tar.into_inner()?.flush()?;
        Ok(())
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    fs::rename(&tmp, archive).with_context(|| format!("writing {}", archive.display()))?;
    Ok(Moved { direction: "export".into(), archive: archive.to_path_buf(), kernels })
}

/// The cache entry (key) `image` lies in, if it lies in `kernels`.
fn entry_key(image: &Path, kernels: &Path) -> Option<String> {
    let rel = image.strip_prefix(kernels).ok()?;
    match rel.components().next()? {
        Component::Normal(key) => Some(key.to_string_lossy().into_owned()),
        _ => None,
    }
}

/// Add the kernels of `archive` to `cache`.
pub fn import(archive: &Path, cache_dir: &Path) -> Result<Moved> {
    let manifest: Manifest = {
        let mut tar = tar::Archive::new(File::open(archive).with_context(|| format!("opening {}", archive.display()))?);
        let mut first = tar.entries()?.next().context("an empty archive")??;
        if first.path()?.as_ref() != Path::new(MANIFEST) {
            bail!("{} is not a kernel archive of `fslab kernel export` (no {MANIFEST} first)", archive.display());
        }
        let mut text = String::new();
        first.read_to_string(&mut text)?;
        serde_json::from_str(&text).with_context(|| format!("{}: {MANIFEST}", archive.display()))?
    };
    if manifest.format != FORMAT {
        bail!("{}: format {} (this fslab reads {FORMAT})", archive.display(), manifest.format);
    }
    crate::sys::trusted::ensure_dir(cache_dir).context("the kernel cache")?;
    let kernels_dir = cache::kernels_dir(cache_dir);
    let mut moved = Vec::new();
    for k in &manifest.kernels {
        if !is_plain_name(&k.key) {
            bail!("{}: `{}` is not a cache key", archive.display(), k.key);
        }
        let present = kernels_dir.join(&k.key).is_dir();
        if !present {
            cache::entry(&kernels_dir, &k.key, |tmp| unpack_under(archive, &format!("kernels/{}/", k.key), tmp))?;
        }
        moved.push(MovedKernel { present, ..k.clone() });
    }
    // The prepared builds and configs, so the file reads as cached here.
    for rel in &manifest.prepared {
        let safe = Path::new(rel).components().all(|c| matches!(c, Component::Normal(_)));
        if !safe || !rel.starts_with("kernel-builds/") {
            bail!("{}: `{rel}` is not a prepared build's path", archive.display());
        }
        let dest = cache_dir.join(rel);
        if dest.is_file() {
            continue;
        }
        let dir = dest.parent().context("a prepared build without a directory")?;
        fs::create_dir_all(dir)?;
        let tmp = dir.join(format!(".import-{}", std::process::id()));
        copy_member(archive, rel, &tmp)?;
        fs::rename(&tmp, &dest)?;
    }
    Ok(Moved { direction: "import".into(), archive: archive.to_path_buf(), kernels: moved })
}

fn is_plain_name(key: &str) -> bool {
    !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Unpack the members under `prefix` into `dest`, each path checked to
/// stay inside it (only plain names: no `..`, no absolute paths).
fn unpack_under(archive: &Path, prefix: &str, dest: &Path) -> Result<()> {
    let mut tar = tar::Archive::new(File::open(archive)?);
    for entry in tar.entries()? {
        let mut entry = entry?;
        let path = entry.path()?.to_string_lossy().into_owned();
        let Some(rel) = path.strip_prefix(prefix) else { continue };
        let rel = Path::new(rel);
        if rel.as_os_str().is_empty() {
            continue;
        }
        if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
            bail!("{}: member {path} would land outside its entry", archive.display());
        }
        let target = dest.join(rel);
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent)?;
        }
        entry.set_preserve_mtime(true);
        entry.unpack(&target).with_context(|| format!("{}: unpacking {path}", archive.display()))?;
    }
    Ok(())
}

/// Write the member `name` of `archive` to `dest`.
fn copy_member(archive: &Path, name: &str, dest: &Path) -> Result<()> {
    let mut tar = tar::Archive::new(File::open(archive)?);
    for entry in tar.entries()? {
        let mut entry = entry?;
        if entry.path()?.to_string_lossy() == name {
            let mut out = File::create(dest)?;
            std::io::copy(&mut entry, &mut out)?;
            return Ok(());
        }
    }
    bail!("{}: no member {name}", archive.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_keys_come_from_paths_in_the_cache_only() {
        let k = Path::new("/c/kernels");
        assert_eq!(entry_key(Path::new("/c/kernels/abc/boot/vmlinuz-1"), k).as_deref(), Some("abc"));
        assert_eq!(entry_key(Path::new("/boot/vmlinuz"), k), None);
        assert!(is_plain_name("0af3") && !is_plain_name("../x") && !is_plain_name(""));
    }
}
