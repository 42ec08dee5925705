//! Kernels under test: what a variant's `kernel = "…"` names, turned into
//! the files a VM boots ([`KernelArtifacts`]).
//!
//! Three sources ([`KernelSource`]):
//!
//! * a kernel image (`bzImage`/`vmlinuz`), with an optional modules
//!   directory and config file;
//! * a kernel build tree (`arch/x86/boot/bzImage`, `.config`, the modules
//!   its `modules.order` lists);
//! * a Debian `linux-image-*.deb`, unpacked into the cache;
//! * a kernel of Debian's archive by version (`debian:6.1-cloud`), found and
//!   downloaded by apt with a private setup ([`debian`]), then unpacked like
//!   a `.deb`.
//!
//! Whatever needs building (an unpacked package, a kernel root with linked
//! modules and their `depmod` index) lives in `<cache>/kernels/<key>/`,
//! built once under a lock ([`cache`]). Nothing is ever written into the
//! user's files or the host's `/lib/modules`. Every image's release is read
//! from its setup header ([`bzimage`]), so a garbage file fails here, before
//! any run, with an error naming it.

pub mod build;
pub mod bzimage;
pub mod cache;
pub mod deb;
pub mod debian;
pub mod kconfig;
pub mod outlook;
pub mod stage;
pub mod symbols;

use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use debian::KernelPackage;
pub use stage::Modules;

/// Environment variable naming the kernel cache shared by experiments.
pub const KERNEL_CACHE_ENV: &str = "FSLAB_KERNEL_CACHE";

/// Where kernels are unpacked and archive kernels downloaded:
/// `$FSLAB_KERNEL_CACHE`, else the experiment's input cache
/// (`<workdir>/cache`).
pub fn cache_dir(workdir: &Path) -> PathBuf {
    std::env::var_os(KERNEL_CACHE_ENV).map(PathBuf::from).unwrap_or_else(|| workdir.join("cache"))
}

/// What the user named as a kernel. Paths are absolute (the caller resolves
/// relative ones against the experiment file).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum KernelSource {
    /// A kernel image, optionally with its modules (`lib/modules/<release>`,
    /// or a root holding it) and its config file.
    Image { image: PathBuf, modules: Option<PathBuf>, config: Option<PathBuf> },
    /// A built kernel tree.
    BuildTree(PathBuf),
    /// A Debian `linux-image-*.deb`.
    Deb(PathBuf),
    /// A package of Debian's archive, chosen when the file was read.
    Debian(debian::ArchiveKernel),
    /// A kernel built from source, its config prepared and checked when
    /// the file was read ([`build`]).
    Build(build::KernelBuild),
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

impl KernelSource {
    /// Classify `path`: a directory is a build tree, a file starting with the
    /// `ar` magic a Debian package, anything else a kernel image. `modules`
    /// and `config` only go with an image.
    pub fn detect(path: &Path, modules: Option<&Path>, config: Option<&Path>) -> Result<KernelSource> {
        for p in [Some(path), modules, config].into_iter().flatten() {
            if !p.is_absolute() {
                bail!("kernel path {} must be absolute (resolve it against the experiment file)", p.display());
            }
        }
        let meta = fs::metadata(path).with_context(|| format!("kernel {}", path.display()))?;
        let extras = modules.is_some() || config.is_some();
        if meta.is_dir() {
            if extras {
                bail!("kernel {} is a build tree: its modules and config are found in it", path.display());
            }
            return Ok(KernelSource::BuildTree(path.to_path_buf()));
        }
        let mut magic = [0u8; 8];
        let n = File::open(path)
            .and_then(|mut f| f.read(&mut magic))
            .with_context(|| format!("reading kernel {}", path.display()))?;
        if &magic[..n] == b"!<arch>\n" {
            if extras {
                bail!("kernel {} is a Debian package: its modules and config come from it", path.display());
            }
            return Ok(KernelSource::Deb(path.to_path_buf()));
        }
        Ok(KernelSource::Image {
            image: path.to_path_buf(),
            modules: modules.map(Path::to_path_buf),
            config: config.map(Path::to_path_buf),
        })
    }

    /// A quick check that the source is what it claims to be, before any
    /// run (a garbage file fails here, naming it): the release from the
    /// image's setup header, or from a package's name.
    pub fn check(&self) -> Result<String> {
        match self {
            KernelSource::Image { image, .. } => bzimage::read_release(image),
            KernelSource::BuildTree(tree) => {
                let image = tree.join("arch/x86/boot/bzImage");
                if !image.is_file() {
                    bail!("kernel build tree {} has no arch/x86/boot/bzImage (build it: make bzImage)", tree.display());
                }
                bzimage::read_release(&image)
            }
            KernelSource::Deb(deb) => deb::checked_release(deb),
            KernelSource::Debian(k) => Ok(k.package.kernel_release().to_string()),
            KernelSource::Build(b) => Ok(b.release.clone()),
        }
    }

    /// What the user gave: the path, or the archive reference.
    pub fn shown(&self) -> String {
        match self {
            KernelSource::Image { image, .. } => image.display().to_string(),
            KernelSource::BuildTree(p) | KernelSource::Deb(p) => p.display().to_string(),
            KernelSource::Debian(k) => k.reference.clone(),
            KernelSource::Build(b) => b.shown(),
        }
    }
}

/// The order to [`resolve`] several kernels in: source builds without
/// patches first, so a patched tree's first build is seeded from its
/// finished unpatched sibling (minutes) instead of compiling cold twice.
pub fn resolve_order<'a>(sources: impl IntoIterator<Item = (usize, &'a KernelSource)>) -> Vec<usize> {
    let mut order: Vec<(bool, usize)> =
        sources.into_iter().map(|(i, s)| (matches!(s, KernelSource::Build(b) if !b.patches.is_empty()), i)).collect();
    order.sort();
    order.into_iter().map(|(_, i)| i).collect()
}

/// Turn `source` into bootable artifacts, unpacking or staging into
/// `<cache>/kernels/` as needed (reused when already there).
pub fn resolve(source: &KernelSource, cache: &Path) -> Result<KernelArtifacts> {
    let kernels = cache::kernels_dir(cache);
    let shown = source.shown();
    match source {
        KernelSource::Deb(deb) => unpacked_deb(&kernels, deb, shown, None),
        KernelSource::Debian(k) => {
            let deb = debian::Archive::at_root(&k.archive).download(&k.package).with_context(|| {
                format!("{}: {} {} ({})", k.reference, k.package.name, k.package.version, k.package.suite)
            })?;
            unpacked_deb(&kernels, &deb, shown, Some(k.package.recorded()))
        }
        KernelSource::Build(b) => build::build(b, cache),
        KernelSource::Image { image, modules, config } => {
            let release = bzimage::read_release(image)?;
            let sha256 = sha256_file(image)?;
            if let Some(config) = config {
                check_config(config)?;
            }
            let Some(modules) = modules else {
                return Ok(KernelArtifacts {
                    image: image.clone(),
                    modules_dir: None,
                    config: config.clone(),
                    release,
                    source: shown,
                    sha256,
                    guest_dirs: Vec::new(),
                    package: None,
                    build: None,
                });
            };
            let moddir = installed_modules(modules, &release)?;
            let config_sha = config.as_deref().map(sha256_file).transpose()?.unwrap_or_default();
            let key =
                sha256_str(&format!("image\0{sha256}\0{}\0{}\0{config_sha}", moddir.display(), mtime_ns(&moddir)));
            let from = Modules::Installed(moddir.clone());
            staged(&kernels, &key, image, config.as_deref(), release, shown, sha256, &from, moddir)
        }
        KernelSource::BuildTree(tree) => {
            let image = tree.join("arch/x86/boot/bzImage");
            if !image.is_file() {
                bail!("kernel build tree {} has no arch/x86/boot/bzImage (build it: make bzImage)", tree.display());
            }
            let release = bzimage::read_release(&image)?;
            let sha256 = sha256_file(&image)?;
            let dot_config = tree.join(".config");
            let config = dot_config.is_file().then_some(dot_config);
            let modular = config
                .as_ref()
                .map(|c| fs::read_to_string(c).unwrap_or_default().lines().any(|l| l.trim() == "CONFIG_MODULES=y"))
                .unwrap_or(true);
            let order = tree.join("modules.order");
            if !modular || !order.is_file() {
                return Ok(KernelArtifacts {
                    image,
                    modules_dir: None,
                    config,
                    release,
                    source: shown,
                    sha256,
                    guest_dirs: Vec::new(),
                    package: None,
                    build: None,
                });
            }
            let tree = fs::canonicalize(tree)?;
            let key = sha256_str(&format!(
                "tree\0{}\0{sha256}\0{}\0{}",
                tree.display(),
                sha256_file(&order)?,
                mtime_ns(&order)
            ));
            let from = Modules::BuildTree(tree.clone());
            staged(&kernels, &key, &image, config.as_deref(), release, shown, sha256, &from, tree)
        }
    }
}

/// A kernel root staged in the cache entry `key` (see [`stage`]).
#[allow(clippy::too_many_arguments)]
fn staged(
    kernels: &Path,
    key: &str,
    image: &Path,
    config: Option<&Path>,
    release: String,
    source: String,
    sha256: String,
    modules: &Modules,
    linked_from: PathBuf,
) -> Result<KernelArtifacts> {
    let root = cache::entry(kernels, key, |tmp| stage::stage(tmp, image, config, &release, modules))?;
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
fn unpacked_deb(kernels: &Path, deb: &Path, shown: String, package: Option<KernelPackage>) -> Result<KernelArtifacts> {
    let name = deb::package_name(deb)?;
    let sha256 = sha256_file(deb)?;
    let mut unpacked = None;
    let root = cache::entry(kernels, &sha256, |tmp| {
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
fn installed_modules(given: &Path, release: &str) -> Result<PathBuf> {
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
fn check_config(path: &Path) -> Result<()> {
    let text = fs::read_to_string(path).with_context(|| format!("reading kernel config {}", path.display()))?;
    if !text.lines().any(|l| l.starts_with("CONFIG_")) {
        bail!("kernel config {} has no CONFIG_ lines", path.display());
    }
    Ok(())
}

fn mtime_ns(path: &Path) -> u128 {
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
        let patched = build::KernelBuild { patches: vec![("sha".into(), "fix.patch".into())], ..Default::default() };
        let sources = [
            KernelSource::Build(patched.clone()),
            KernelSource::Deb(PathBuf::from("k.deb")),
            KernelSource::Build(patched),
            KernelSource::Build(Default::default()),
        ];
        assert_eq!(resolve_order(sources.iter().enumerate()), vec![1, 3, 0, 2]);
    }

    #[test]
    fn sources_are_told_apart_by_content() {
        let dir = tempfile::tempdir().unwrap();
        let deb = dir.path().join("k.deb");
        fs::write(&deb, b"!<arch>\ndebian-binary").unwrap();
        let img = dir.path().join("bzImage");
        fs::write(&img, b"whatever").unwrap();
        assert_eq!(KernelSource::detect(&deb, None, None).unwrap(), KernelSource::Deb(deb.clone()));
        assert_eq!(KernelSource::detect(dir.path(), None, None).unwrap(), KernelSource::BuildTree(dir.path().into()));
        assert!(matches!(KernelSource::detect(&img, None, None).unwrap(), KernelSource::Image { .. }));
        let err = KernelSource::detect(Path::new("rel/bzImage"), None, None).unwrap_err().to_string();
        assert!(err.contains("must be absolute"), "{err}");
        let err = KernelSource::detect(&deb, Some(dir.path()), None).unwrap_err().to_string();
        assert!(err.contains("Debian package"), "{err}");
        let err = format!("{:#}", KernelSource::detect(&dir.path().join("nope"), None, None).unwrap_err());
        assert!(err.contains("nope"), "{err}");
    }

    #[test]
    fn a_garbage_image_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("vmlinuz-garbage");
        fs::write(&img, vec![0x5Au8; 8192]).unwrap();
        let source = KernelSource::detect(&img, None, None).unwrap();
        let err = format!("{:#}", resolve(&source, dir.path()).unwrap_err());
        assert!(err.contains("vmlinuz-garbage") && err.contains("HdrS"), "{err}");
        assert!(!dir.path().join("kernels").exists(), "nothing is cached for a bad image");
    }

    #[test]
    fn a_build_tree_without_an_image_says_what_to_build() {
        let dir = tempfile::tempdir().unwrap();
        let err = format!("{:#}", resolve(&KernelSource::BuildTree(dir.path().into()), dir.path()).unwrap_err());
        assert!(err.contains("arch/x86/boot/bzImage") && err.contains("make bzImage"), "{err}");
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
