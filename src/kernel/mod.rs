//! Kernels under test: what a variant's `kernel = …` names, turned into
//! the files a VM boots ([`KernelArtifacts`]).
//!
//! Where a kernel comes from is one of the kinds in [`source`] (an archive's
//! image, a distribution's source package, a git repository at a revision,
//! a local source tree, a built tree, a `.deb`, an image file): one file
//! each behind one trait. The kinds fslab builds share one pipeline
//! ([`build`]).
//!
//! Whatever needs building (an unpacked package, a kernel root with linked
//! modules and their `depmod` index, a built image) lives in
//! `<cache>/kernels/<key>/`, built once under a lock ([`cache`]). Nothing is
//! ever written into the user's files or the host's `/lib/modules`. Every
//! image's release is read from its setup header ([`bzimage`]), so a garbage
//! file fails here, before any run, with an error naming it.
//!
//! Every command that touches kernels uses one cache, found one way
//! ([`cache_dir`]).

pub mod build;
pub mod bzimage;
pub mod cache;
pub mod deb;
pub mod debian;
pub mod kconfig;
pub mod outlook;
pub mod prune;
pub mod source;
pub mod stage;
pub mod symbols;
pub mod transfer;

use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use debian::KernelPackage;
pub use source::KernelSource;
pub use stage::Modules;

/// Environment variable naming the kernel cache.
pub const KERNEL_CACHE_ENV: &str = "FSLAB_KERNEL_CACHE";

/// The one rule for where kernels are downloaded, unpacked and built, for
/// every command that touches them (`run`, its `--dry-run`, `kernel …`,
/// `bisect-kconfig`, `bisect-commits`): `--kernel-cache DIR` when given,
/// else `$FSLAB_KERNEL_CACHE`, else `<work directory>/cache`, where the work
/// directory is `--workdir`, else the experiment file's `workdir`, else
/// `/var/tmp/fslab`.
pub fn cache_dir(flag: Option<&Path>, workdir: &Path) -> PathBuf {
    flag.map(Path::to_path_buf)
        .or_else(|| std::env::var_os(KERNEL_CACHE_ENV).filter(|v| !v.is_empty()).map(PathBuf::from))
        .unwrap_or_else(|| workdir.join("cache"))
}

/// A kernel ready to boot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelArtifacts {
    /// The image QEMU boots. When [`modules_dir`](Self::modules_dir) is set
    /// it is `<root>/boot/vmlinuz-<release>` with the modules at
    /// `<root>/lib/modules/<release>` (the layout virtme-ng looks for).
    pub image: PathBuf,
    /// `…/lib/modules/<release>`, indexed by depmod; None: no loadable modules.
    pub modules_dir: Option<PathBuf>,
    /// The kernel's config file, when known.
    pub config: Option<PathBuf>,
    /// `uname -r` of the kernel, from the image's setup header.
    pub release: String,
    /// What the user gave (the path as written after resolution).
    pub source: String,
    /// SHA-256 (hex) of the file the user gave: the package or the image.
    pub sha256: String,
    /// Host directories the guest reads this kernel's modules from (the
    /// cache entry and whatever its links point into); the VM exposes them.
    pub guest_dirs: Vec<PathBuf>,
    /// The archive package it came from (`debian:` kernels).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<KernelPackage>,
    /// How it was built (`{ source = … }` kernels).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<build::KernelBuild>,
}

/// The order to resolve several kernels in: builds without patches
/// first, so a patched tree's first build is seeded from its finished
/// unpatched sibling (minutes) instead of compiling cold twice.
pub fn resolve_order<'a>(sources: impl IntoIterator<Item = (usize, &'a KernelSource)>) -> Vec<usize> {
    let mut order: Vec<(bool, usize)> =
        sources.into_iter().map(|(i, s)| (s.build().is_some_and(|b| !b.patches.is_empty()), i)).collect();
    order.sort();
    order.into_iter().map(|(_, i)| i).collect()
}

/// Turn `source` into bootable artifacts, unpacking, staging or building
/// into `<cache>/kernels/` as needed (reused when already there).
pub fn resolve(source: &KernelSource, cache: &Path) -> Result<KernelArtifacts> {
    source.resolve(cache)
}

impl KernelArtifacts {
    /// An image used where it is (no modules to stage).
    pub fn bare(image: PathBuf, config: Option<PathBuf>, release: String, source: String, sha256: String) -> Self {
        KernelArtifacts {
            image,
            modules_dir: None,
            config,
            release,
            source,
            sha256,
            guest_dirs: Vec::new(),
            package: None,
            build: None,
        }
    }

    /// The kernel's symbol map (`System.map-<release>` beside the image), when it has one.
    pub fn system_map(&self) -> Option<PathBuf> {
        let map = self.image.parent()?.join(format!("System.map-{}", self.release));
        map.is_file().then_some(map)
    }
}

/// A kernel root staged in the cache entry `key` (see [`stage`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn staged(
    cache: &Path,
    key: &str,
    image: &Path,
    config: Option<&Path>,
    release: String,
    source: String,
    sha256: String,
    modules: &Modules,
    linked_from: PathBuf,
) -> Result<KernelArtifacts> {
    let root =
        cache::entry(&cache::kernels_dir(cache), key, |tmp| stage::stage(tmp, image, config, &release, modules))?;
    let staged_config = root.join(format!("boot/config-{release}"));
    Ok(KernelArtifacts {
        image: root.join(format!("boot/vmlinuz-{release}")),
        modules_dir: Some(root.join("lib/modules").join(&release)),
        config: staged_config.is_file().then_some(staged_config),
        guest_dirs: vec![root, linked_from],
        release,
        source,
        sha256,
        package: None,
        build: None,
    })
}

/// A Debian package unpacked into the cache entry keyed by its content
/// (`entry.json` there says which package it was, for `fslab kernel list`).
pub(crate) fn unpacked_deb(
    cache: &Path,
    deb: &Path,
    shown: String,
    package: Option<KernelPackage>,
) -> Result<KernelArtifacts> {
    let kernels = cache::kernels_dir(cache);
    let name = deb::package_name(deb)?;
    let sha256 = sha256_file(deb)?;
    let mut unpacked = None;
    let root = cache::entry(&kernels, &sha256, |tmp| {
        unpacked = Some(deb::unpack(deb, tmp)?);
        let about = EntryInfo {
            package: name.clone(),
            version: deb::package_version(deb)?,
            suite: package.as_ref().map(|p| p.suite.clone()),
        };
        fs::write(tmp.join(ENTRY_INFO), serde_json::to_string_pretty(&about)?)?;
        Ok(())
    })?;
    // Reused entries are read back the same way they were built.
    let (release, image, config, has_modules) = match unpacked {
        Some(u) => (u.release, u.image, u.config, u.has_modules),
        None => describe_entry(&root).with_context(|| format!("cached unpack of {}", deb.display()))?,
    };
    let modules_dir = has_modules.then(|| root.join("lib/modules").join(&release));
    Ok(KernelArtifacts {
        image: root.join(image),
        config: config.map(|c| root.join(c)),
        guest_dirs: modules_dir.as_ref().map(|_| vec![root.clone()]).unwrap_or_default(),
        modules_dir,
        release,
        source: shown,
        sha256,
        package,
        build: None,
    })
}

/// File in an unpacked package's cache entry naming the package.
pub const ENTRY_INFO: &str = "fslab-entry.json";

/// What `fslab-entry.json` holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EntryInfo {
    pub package: String,
    pub version: String,
    /// The archive suite, for `debian:` kernels.
    pub suite: Option<String>,
}

/// Release, image, config and whether modules exist, of a finished entry.
fn describe_entry(root: &Path) -> Result<(String, String, Option<String>, bool)> {
    let image = fs::read_dir(root.join("boot"))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("vmlinuz-") || n.starts_with("vmlinux-"))
        .context("no kernel image in boot/")?;
    let release = bzimage::read_release(&root.join("boot").join(&image))?;
    let config = format!("boot/config-{release}");
    let has_modules = root.join("lib/modules").join(&release).is_dir();
    Ok((release, format!("boot/{image}"), root.join(&config).is_file().then_some(config), has_modules))
}

/// The `lib/modules/<release>` directory `given` names: that directory
/// itself, or a root (`INSTALL_MOD_PATH`) holding it.
pub(crate) fn installed_modules(given: &Path, release: &str) -> Result<PathBuf> {
    if !given.is_dir() {
        bail!("kernel modules {} is not a directory", given.display());
    }
    for candidate in [given.join("lib/modules").join(release), given.join("usr/lib/modules").join(release)] {
        if candidate.is_dir() {
            return Ok(fs::canonicalize(candidate)?);
        }
    }
    let looks_like_moddir =
        ["kernel", "modules.order", "modules.dep", "modules.builtin"].iter().any(|n| given.join(n).exists());
    if !looks_like_moddir {
        bail!(
            "kernel modules {}: neither a lib/modules/<release> directory nor a root holding lib/modules/{release}",
            given.display()
        );
    }
    let name = given.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if name != release && bzimage::is_release(&name) {
        bail!("kernel modules {} are for release {name}, but the image is {release}", given.display());
    }
    Ok(fs::canonicalize(given)?)
}

/// A config file must at least look like one.
pub(crate) fn check_config(path: &Path) -> Result<()> {
    let text = fs::read_to_string(path).with_context(|| format!("reading kernel config {}", path.display()))?;
    if !text.lines().any(|l| l.starts_with("CONFIG_")) {
        bail!("kernel config {} has no CONFIG_ lines", path.display());
    }
    Ok(())
}

pub(crate) fn mtime_ns(path: &Path) -> u128 {
    fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// SHA-256 of a file's content, hex.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

pub(crate) fn sha256_str(text: &str) -> String {
    hex(&Sha256::digest(text.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpatched_source_builds_resolve_before_patched_ones() {
        let tree = |patches: Vec<(String, String)>| {
            KernelSource::LocalTree(source::local_tree::LocalTree {
                path: PathBuf::from("/src/linux"),
                build: build::KernelBuild { patches, ..Default::default() },
            })
        };
        let patched = vec![("sha".to_string(), "fix.patch".to_string())];
        let sources = [
            tree(patched.clone()),
            KernelSource::Deb(source::deb_file::DebFile { path: "k.deb".into(), release: "6.1".into() }),
            tree(patched),
            tree(Vec::new()),
        ];
        assert_eq!(resolve_order(sources.iter().enumerate()), vec![1, 3, 0, 2]);
    }

    /// Which kind takes a path is decided by what is there: a directory is
    /// a build tree, a file with the `ar` magic a package, another file an
    /// image; each then checks it (naming the file).
    #[test]
    fn paths_are_told_apart_by_content_and_checked_by_their_kind() {
        let dir = tempfile::tempdir().unwrap();
        let deb = dir.path().join("k.deb");
        fs::write(&deb, b"!<arch>\ndebian-binary").unwrap();
        let img = dir.path().join("vmlinuz-garbage");
        fs::write(&img, vec![0x5Au8; 8192]).unwrap();
        let parse = |text: &str| {
            let value = toml::Value::String(text.to_string());
            format!("{:#}", KernelSource::from_argument(&value, dir.path()).unwrap_err())
        };
        let err = parse(deb.to_str().unwrap());
        assert!(err.contains("k.deb") && err.contains("Debian package"), "{err}");
        let err = parse(dir.path().to_str().unwrap());
        assert!(err.contains("arch/x86/boot/bzImage") && err.contains("make bzImage"), "{err}");
        let err = parse(img.to_str().unwrap());
        assert!(err.contains("vmlinuz-garbage") && err.contains("HdrS"), "{err}");
        let err = parse(&dir.path().join("nope").display().to_string());
        assert!(err.contains("nope does not exist"), "{err}");
        assert!(!dir.path().join("kernels").exists(), "nothing is cached for a bad kernel");
    }

    #[test]
    fn modules_directories_are_found_by_release() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("install");
        fs::create_dir_all(root.join("lib/modules/6.1.0-x/kernel")).unwrap();
        let found = installed_modules(&root, "6.1.0-x").unwrap();
        assert!(found.ends_with("lib/modules/6.1.0-x"));
        assert_eq!(installed_modules(&found, "6.1.0-x").unwrap(), found);
        let err = installed_modules(&found, "6.12.0-y").unwrap_err().to_string();
        assert!(err.contains("for release 6.1.0-x") && err.contains("6.12.0-y"), "{err}");
        let err = installed_modules(dir.path(), "6.1.0-x").unwrap_err().to_string();
        assert!(err.contains("neither"), "{err}");
    }
}
