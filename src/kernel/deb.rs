//! Debian `linux-image-*.deb` packages: checked with `dpkg-deb --field`,
//! unpacked with `dpkg-deb -x` (the format's own tool) into a cache entry,
//! and indexed with `depmod` there, because the package ships no
//! `modules.dep` (its postinst makes one) and the guest's `modprobe` needs it.

use std::fs;
use std::path::Path;

use anyhow::{bail, Context, Result};

use super::bzimage;
use crate::sys::exec::run_tool;

/// What an unpacked package holds, relative to the entry's root.
#[derive(Debug)]
pub struct Unpacked {
    pub release: String,
    /// `boot/vmlinuz-<release>`.
    pub image: String,
    /// `boot/config-<release>`, when the package has one.
    pub config: Option<String>,
    /// Whether `lib/modules/<release>` exists (it does in every linux-image package).
    pub has_modules: bool,
}

/// The package name of `deb`, checked to be a kernel image package.
pub fn package_name(deb: &Path) -> Result<String> {
    let deb_str = deb.to_str().with_context(|| format!("{} is not a UTF-8 path", deb.display()))?;
    let name = run_tool("dpkg-deb", &["--field", deb_str, "Package"])
        .with_context(|| format!("{} is not a readable Debian package", deb.display()))?;
    let name = name.trim().to_string();
    if !name.starts_with("linux-image-") {
        bail!("{} is the package `{name}`, not a kernel image (linux-image-*)", deb.display());
    }
    Ok(name)
}

/// The kernel release `deb` installs, checked before any run: a kernel
/// image package whose contents include one `boot/vmlinuz-*` (or
/// `vmlinux-*`), read from its file list (`dpkg-deb --contents`) without
/// unpacking it.
pub fn checked_release(deb: &Path) -> Result<String> {
    let name = package_name(deb)?;
    let deb_str = deb.to_str().with_context(|| format!("{} is not a UTF-8 path", deb.display()))?;
    let contents = run_tool("dpkg-deb", &["--contents", deb_str])
        .with_context(|| format!("{} is not a readable Debian package", deb.display()))?;
    let images = boot_images(&contents);
    if images.len() != 1 {
        let what = if images.is_empty() {
            "no kernel image in boot/".to_string()
        } else {
            format!("{} kernel images in boot/ ({images:?})", images.len())
        };
        bail!("{} (package `{name}`) holds {what}; expected one boot/vmlinuz-<release>", deb.display());
    }
    let release = name.trim_start_matches("linux-image-");
    Ok(release.strip_suffix("-unsigned").unwrap_or(release).to_string())
}

/// The kernel images in a `dpkg-deb --contents` listing (`tar tv` lines
/// ending in `./boot/vmlinuz-<release>`; symlinks end in `-> target`).
fn boot_images(contents: &str) -> Vec<String> {
    contents
        .lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .filter_map(|path| path.strip_prefix("./boot/"))
        .filter(|n| n.starts_with("vmlinuz-") || n.starts_with("vmlinux-"))
        .map(str::to_string)
        .collect()
}

/// The package version of `deb` (`6.1.176-1`).
pub fn package_version(deb: &Path) -> Result<String> {
    let deb_str = deb.to_str().with_context(|| format!("{} is not a UTF-8 path", deb.display()))?;
    let version = run_tool("dpkg-deb", &["--field", deb_str, "Version"])
        .with_context(|| format!("{} is not a readable Debian package", deb.display()))?;
    Ok(version.trim().to_string())
}

/// Unpack `deb` into the empty directory `root` and index its modules.
pub fn unpack(deb: &Path, root: &Path) -> Result<Unpacked> {
    let deb_str = deb.to_str().with_context(|| format!("{} is not a UTF-8 path", deb.display()))?;
    let root_str = root.to_str().with_context(|| format!("{} is not a UTF-8 path", root.display()))?;
    run_tool("dpkg-deb", &["-x", deb_str, root_str]).with_context(|| format!("unpacking {}", deb.display()))?;
    let boot = root.join("boot");
    let images: Vec<String> = fs::read_dir(&boot)
        .with_context(|| format!("{} has no boot/ directory: not a kernel image package", deb.display()))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("vmlinuz-") || n.starts_with("vmlinux-"))
        .collect();
    let [image] = images.as_slice() else {
        bail!("{} holds {} kernel images in boot/ ({images:?}); expected one", deb.display(), images.len());
    };
    let release = bzimage::read_release(&boot.join(image)).with_context(|| format!("in {}", deb.display()))?;
    // Merged-/usr packages put modules in usr/lib/modules; give the entry a
    // lib/ so every entry has the same layout (virtme-ng finds modules by
    // walking up from the image to a directory holding lib/modules/<release>).
    if !root.join("lib").exists() && root.join("usr/lib/modules").is_dir() {
        std::os::unix::fs::symlink("usr/lib", root.join("lib")).context("linking lib -> usr/lib")?;
    }
    let has_modules = root.join("lib/modules").join(&release).is_dir();
    if !has_modules && root.join("lib/modules").is_dir() {
        let found: Vec<String> = fs::read_dir(root.join("lib/modules"))?
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        bail!("{}: the image is release {release} but its modules are for {found:?}", deb.display());
    }
    if has_modules {
        run_tool("depmod", &["-a", "-b", root_str, &release])
            .with_context(|| format!("indexing the modules of {} with depmod", deb.display()))?;
    }
    let config = format!("boot/config-{release}");
    Ok(Unpacked {
        image: format!("boot/{image}"),
        config: root.join(&config).is_file().then_some(config),
        release,
        has_modules,
    })
}
