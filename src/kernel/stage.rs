//! Kernel roots for images that come with a separate modules directory or
//! from a build tree: `boot/vmlinuz-<release>` (a copy of the image),
//! `boot/config-<release>`, and `lib/modules/<release>/` — the layout
//! virtme-ng expects (it walks up from the image to the directory holding
//! `lib/modules/<release>`), built in fslab's cache so nothing is ever
//! written into the user's tree or the host's `/lib/modules`.
//!
//! Modules are linked, not copied (a build tree's modules are hundreds of
//! MiB), the way virtme-ng's own `virtme-prep-kdir-mods` does it; `depmod`
//! then writes its index into the cache entry.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::sys::exec::run_tool;

/// Where a kernel's loadable modules come from.
#[derive(Clone, Debug)]
pub enum Modules {
    /// An installed `lib/modules/<release>` directory (`make modules_install`
    /// or a distribution's), with or without its `modules.dep`.
    Installed(PathBuf),
    /// A built kernel tree: the modules listed in its `modules.order`.
    BuildTree(PathBuf),
}

/// Files `depmod` writes; never linked from the source, always regenerated.
const DEPMOD_OUTPUT: &[&str] = &[
    "modules.dep",
    "modules.dep.bin",
    "modules.alias",
    "modules.alias.bin",
    "modules.softdep",
    "modules.symbols",
    "modules.symbols.bin",
    "modules.builtin.bin",
    "modules.builtin.alias.bin",
    "modules.devname",
    "modules.weakdep",
];

/// Fill the empty directory `root` with the kernel root of `image`.
pub fn stage(root: &Path, image: &Path, config: Option<&Path>, release: &str, modules: &Modules) -> Result<()> {
    let boot = root.join("boot");
    fs::create_dir_all(&boot)?;
    fs::copy(image, boot.join(format!("vmlinuz-{release}")))
        .with_context(|| format!("copying {} into the kernel cache", image.display()))?;
    if let Some(config) = config {
        fs::copy(config, boot.join(format!("config-{release}")))
            .with_context(|| format!("copying {} into the kernel cache", config.display()))?;
    }
    let moddir = root.join("lib/modules").join(release);
    fs::create_dir_all(&moddir)?;
    match modules {
        Modules::Installed(dir) => link_tree(dir, &moddir)?,
        Modules::BuildTree(tree) => link_build_tree(tree, &moddir)?,
    }
    let root_str = root.to_str().context("kernel cache path is not UTF-8")?;
    run_tool("depmod", &["-a", "-b", root_str, release]).context("indexing the kernel's modules with depmod")?;
    Ok(())
}

/// Mirror `src` into `dst` as directories of symlinks to its files.
fn link_tree(src: &Path, dst: &Path) -> Result<()> {
    for entry in fs::read_dir(src).with_context(|| format!("reading modules directory {}", src.display()))? {
        let entry = entry?;
        let name = entry.file_name();
        let from = entry.path();
        let to = dst.join(&name);
        let kind = entry.file_type()?;
        if kind.is_dir() {
            // `build` and `source` point back into a kernel tree; depmod does not need them.
            if name == "build" || name == "source" {
                continue;
            }
            fs::create_dir_all(&to)?;
            link_tree(&from, &to)?;
        } else if !DEPMOD_OUTPUT.iter().any(|o| name == *o) {
            let target = fs::canonicalize(&from).with_context(|| format!("resolving {}", from.display()))?;
            symlink(&target, &to).with_context(|| format!("linking {}", to.display()))?;
        }
    }
    Ok(())
}

/// Link the modules a build tree's `modules.order` lists into `moddir/kernel/`.
fn link_build_tree(tree: &Path, moddir: &Path) -> Result<()> {
    let order_path = tree.join("modules.order");
    let order = fs::read_to_string(&order_path).with_context(|| format!("reading {}", order_path.display()))?;
    for (n, line) in order.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        // From 6.2 on modules.order lists the .o files; the modules are the .ko next to them.
        let rel = line.strip_suffix(".o").map(|s| format!("{s}.ko")).unwrap_or_else(|| line.to_string());
        let rel = rel.strip_prefix("kernel/").unwrap_or(&rel).to_string();
        if rel.contains("..") || rel.starts_with('/') {
            bail!("{}:{}: module path `{line}` leaves the tree", order_path.display(), n + 1);
        }
        let source = tree.join(&rel);
        if !source.is_file() {
            bail!(
                "{}:{}: lists {rel}, which is not built (run `make modules` in {})",
                order_path.display(),
                n + 1,
                tree.display()
            );
        }
        let to = moddir.join("kernel").join(&rel);
        fs::create_dir_all(to.parent().expect("a module path has a parent"))?;
        symlink(fs::canonicalize(&source)?, &to).with_context(|| format!("linking {}", to.display()))?;
    }
    for name in ["modules.order", "modules.builtin", "modules.builtin.modinfo"] {
        let from = tree.join(name);
        if from.is_file() {
            symlink(fs::canonicalize(&from)?, moddir.join(name))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn installed_modules_are_linked_without_depmod_output() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        fs::create_dir_all(src.join("kernel/fs/xfs")).unwrap();
        fs::write(src.join("kernel/fs/xfs/xfs.ko"), "elf").unwrap();
        fs::write(src.join("modules.dep"), "stale").unwrap();
        fs::write(src.join("modules.builtin"), "kernel/fs/ext4/ext4.ko\n").unwrap();
        let dst = dir.path().join("dst");
        fs::create_dir(&dst).unwrap();
        link_tree(&src, &dst).unwrap();
        assert!(fs::symlink_metadata(dst.join("kernel/fs/xfs/xfs.ko")).unwrap().file_type().is_symlink());
        assert_eq!(fs::read_to_string(dst.join("kernel/fs/xfs/xfs.ko")).unwrap(), "elf");
        assert!(dst.join("modules.builtin").exists());
        assert!(!dst.join("modules.dep").exists(), "depmod output must be regenerated, not linked");
    }

    #[test]
    fn a_build_tree_links_what_modules_order_lists() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("linux");
        fs::create_dir_all(tree.join("fs/xfs")).unwrap();
        fs::write(tree.join("fs/xfs/xfs.ko"), "elf").unwrap();
        fs::write(tree.join("modules.order"), "fs/xfs/xfs.o\n").unwrap();
        let moddir = dir.path().join("m");
        fs::create_dir(&moddir).unwrap();
        link_build_tree(&tree, &moddir).unwrap();
        assert_eq!(fs::read_to_string(moddir.join("kernel/fs/xfs/xfs.ko")).unwrap(), "elf");
        assert!(moddir.join("modules.order").exists());

        fs::write(tree.join("modules.order"), "fs/xfs/xfs.o\nfs/btrfs/btrfs.o\n").unwrap();
        let again = dir.path().join("m2");
        fs::create_dir(&again).unwrap();
        let err = format!("{:#}", link_build_tree(&tree, &again).unwrap_err());
        assert!(
            err.contains("modules.order:2") && err.contains("fs/btrfs/btrfs.ko") && err.contains("not built"),
            "{err}"
        );
    }
}
