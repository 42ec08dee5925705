//! Loading kernel modules a testbed needs (`loop`, `xfs`, `btrfs`,
//! `squashfs`, `erofs`, `virtio_blk`), on the host and in a guest, instead
//! of assuming they are built in: a stock distribution kernel builds most
//! of them as modules.

use std::fs;
use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::sys::exec::run_tool;

/// Make sure `module` is available in the running kernel: nothing to do
/// when `/sys/module/<module>` exists or `/proc/filesystems` lists it;
/// otherwise `modprobe <module>`. The error names the module and the kernel.
pub fn ensure_loaded(module: &str) -> Result<()> {
    if module.is_empty() || !module.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        bail!("`{module}` is not a kernel module name");
    }
    if is_available(module) {
        return Ok(());
    }
    let release = super::kernel_release();
    run_tool("modprobe", &[module]).with_context(|| {
        format!(
            "loading kernel module `{module}` failed: kernel {release} does not have it built in, and \
             /lib/modules/{release} does not provide it"
        )
    })?;
    if !is_available(module) {
        bail!("`modprobe {module}` succeeded but kernel {release} still does not show the module (blacklisted?)");
    }
    Ok(())
}

/// [`ensure_loaded`] for several modules, with one `modprobe -a` for all
/// that are missing (a guest's agent loads its modules at boot, where every
/// process start costs under emulation).
pub fn ensure_all_loaded(modules: &[String]) -> Result<()> {
    let mut missing: Vec<&str> = Vec::new();
    for module in modules {
        if module.is_empty() || !module.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            bail!("`{module}` is not a kernel module name");
        }
        if !is_available(module) && !missing.contains(&module.as_str()) {
            missing.push(module);
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let args: Vec<&str> = std::iter::once("-a").chain(missing.iter().copied()).collect();
    if run_tool("modprobe", &args).is_err() {
        // Say which one: one at a time.
        for module in &missing {
            ensure_loaded(module)?;
        }
    }
    for module in missing {
        ensure_loaded(module)?;
    }
    Ok(())
}

/// Loaded (or built in with parameters) or a registered filesystem.
pub fn is_available(module: &str) -> bool {
    // The kernel spells module names with underscores; modprobe accepts both.
    let sysfs_name = module.replace('-', "_");
    if Path::new("/sys/module").join(&sysfs_name).exists() {
        return true;
    }
    fs::read_to_string("/proc/filesystems").is_ok_and(|text| filesystems_list(&text, module))
}

/// Does `/proc/filesystems` (its text) list `fs`?
fn filesystems_list(text: &str, fs: &str) -> bool {
    text.lines().any(|line| line.split_whitespace().last() == Some(fs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filesystems_are_matched_by_name() {
        let text = "nodev\tsysfs\nnodev\ttmpfs\n\text4\n\txfs\n";
        assert!(filesystems_list(text, "xfs"));
        assert!(filesystems_list(text, "tmpfs"));
        assert!(!filesystems_list(text, "btrfs"));
        assert!(!filesystems_list(text, "nodev"));
    }

    #[test]
    fn bad_names_never_reach_modprobe() {
        for name in ["", "xfs; reboot", "../x", "a b"] {
            let err = ensure_loaded(name).unwrap_err().to_string();
            assert!(err.contains("not a kernel module name"), "{err}");
        }
    }

    #[test]
    fn a_missing_module_is_an_error_naming_it() {
        if !crate::testsupport::root_or_skip("modprobe") {
            return;
        }
        let err = format!("{:#}", ensure_loaded("fslab_no_such_module").unwrap_err());
        assert!(err.contains("`fslab_no_such_module`") && err.contains("modprobe"), "{err}");
        // Something every kernel with loop devices has, loaded or built in.
        ensure_loaded("loop").unwrap();
        ensure_all_loaded(&["loop".to_string()]).unwrap();
        let err = format!("{:#}", ensure_all_loaded(&["loop".into(), "fslab_no_such_module".into()]).unwrap_err());
        assert!(err.contains("`fslab_no_such_module`"), "{err}");
        assert!(is_available("loop"));
    }
}
