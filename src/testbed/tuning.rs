//! Block queue settings and filesystem sysfs tunables.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// The queue directory of a block device (`/sys/class/block/NAME/queue`,
/// or its parent disk's for a partition).
fn queue_dir(kernel_name: &str) -> Result<PathBuf> {
    let base = PathBuf::from(format!("/sys/class/block/{kernel_name}"));
    for dir in [base.join("queue"), base.join("../queue")] {
        if dir.is_dir() {
            return Ok(dir);
        }
    }
    bail!("{kernel_name} has no queue directory in sysfs")
}

/// Set `read_ahead_kb` and verify the kernel kept it.
pub fn set_read_ahead_kb(kernel_name: &str, kb: u32) -> Result<()> {
    let file = queue_dir(kernel_name)?.join("read_ahead_kb");
    write_verified(&file, &kb.to_string(), &format!("read_ahead_kb on {kernel_name}"))
}

/// Set a queue attribute (`max_sectors_kb`, `rotational`) and verify the
/// kernel kept it.
pub fn set_queue(kernel_name: &str, key: &str, value: &str) -> Result<()> {
    let file = queue_dir(kernel_name)?.join(key);
    write_verified(&file, value, &format!("{key} on {kernel_name}"))
}

/// Select an I/O scheduler; the kernel lists the active one in brackets.
pub fn set_scheduler(kernel_name: &str, scheduler: &str) -> Result<()> {
    let file = queue_dir(kernel_name)?.join("scheduler");
    let available = fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    let names: Vec<String> = available.split_whitespace().map(|s| s.trim_matches(['[', ']']).to_string()).collect();
    if !names.iter().any(|n| n == scheduler) {
        bail!("scheduler `{scheduler}` is not available for {kernel_name} (available: {})", names.join(", "));
    }
    fs::write(&file, scheduler).with_context(|| format!("writing {}", file.display()))?;
    let now = fs::read_to_string(&file).unwrap_or_default();
    if !now.contains(&format!("[{scheduler}]")) {
        bail!("scheduler on {kernel_name} is `{}` after selecting `{scheduler}`", now.trim());
    }
    Ok(())
}

/// Queue settings worth recording next to results.
pub fn queue_settings(kernel_name: &str) -> Vec<(String, String)> {
    let Ok(dir) = queue_dir(kernel_name) else { return Vec::new() };
    ["scheduler", "read_ahead_kb", "nr_requests", "rotational", "max_sectors_kb", "write_cache"]
        .iter()
        .filter_map(|key| Some((key.to_string(), fs::read_to_string(dir.join(key)).ok()?.trim().to_string())))
        .collect()
}

/// Write each tunable and read it back.
pub fn set_tunables(dir: &Path, tunables: &[(String, String)]) -> Result<()> {
    for (key, value) in tunables {
        let file = dir.join(key);
        if !file.is_file() {
            let mut names: Vec<String> = fs::read_dir(dir)
                .map(|d| {
                    d.flatten()
                        .filter(|e| e.path().is_file())
                        .filter_map(|e| e.file_name().into_string().ok())
                        .collect()
                })
                .unwrap_or_default();
            names.sort();
            bail!("sysfs tunable `{key}` does not exist in {} (available: {})", dir.display(), names.join(", "));
        }
        write_verified(&file, value, &format!("sysfs tunable `{key}`"))?;
    }
    Ok(())
}

fn write_verified(file: &Path, value: &str, what: &str) -> Result<()> {
    fs::write(file, value).with_context(|| format!("setting {what} to `{value}` ({})", file.display()))?;
    let now = fs::read_to_string(file).with_context(|| format!("reading back {}", file.display()))?;
    let first = now.split_whitespace().next().unwrap_or("");
    if first != value.trim() {
        bail!("{what}: wrote `{value}` but the kernel reports `{}`", now.trim());
    }
    Ok(())
}
