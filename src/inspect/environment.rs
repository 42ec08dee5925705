//! The machine a run happened on: kernel, CPU, memory, tool versions.
//! (The geometry of a filesystem is its kind's: `fsinternal::geometry`.)
//!
//! [`capture`] never fails: a fact that cannot be read stays empty, because
//! a missing CPU model must not stop an experiment.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::sys::exec;

/// Snapshot of the machine, stored with every experiment (fields an older
/// store lacks read back as defaults).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(default)]
pub struct Environment {
    /// `uname -r`, e.g. `6.1.0-18-amd64`.
    pub kernel_release: String,
    /// `uname -v`, e.g. `#1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1`.
    pub kernel_version: String,
    /// `/proc/cmdline`, trimmed.
    pub kernel_cmdline: String,
    /// CPU model name from `/proc/cpuinfo`.
    pub cpu_model: String,
    /// Online CPUs (0 only if nothing could be read).
    pub cpu_count: usize,
    /// `MemTotal` from `/proc/meminfo`, in KiB.
    pub mem_total_kb: u64,
    pub hostname: String,
    /// Tool name → first line of its version output, or `"not installed"`.
    pub tools: BTreeMap<String, String>,
    /// Where the running kernel's config can be read, if anywhere.
    pub kernel_config_source: Option<String>,
    /// RFC 3339 UTC time of capture.
    pub captured_at: String,
    /// The running kernel's squashfs decompressor and file-cache choices
    /// (`CONFIG_SQUASHFS`, `CONFIG_SQUASHFS_DECOMP_*`,
    /// `CONFIG_SQUASHFS_COMPILE_DECOMP_*`, `CONFIG_SQUASHFS_FILE_*`,
    /// `CONFIG_SQUASHFS_CHOICE_DECOMP_BY_MOUNT`) → `y`/`m`/`n`; empty when
    /// the kernel config cannot be read.
    #[serde(default)]
    pub squashfs_config: BTreeMap<String, String>,
}

/// Value recorded in [`Environment::tools`] for a missing program.
pub const NOT_INSTALLED: &str = "not installed";

/// Tools whose versions change results, with the argument that prints the
/// version.
const TOOLS: &[(&str, &str)] = &[
    ("mkfs.ext4", "-V"),
    ("mkfs.xfs", "-V"),
    ("mkfs.btrfs", "--version"),
    ("mksquashfs", "-version"),
    ("mkfs.erofs", "--version"),
    ("tar", "--version"),
    ("fio", "--version"),
];

/// Version probes answer at once; a tool that hangs is recorded as such.
const VERSION_TIMEOUT: Duration = Duration::from_secs(10);

/// Capture the environment of this machine. Never fails; fields that
/// cannot be read stay empty (or 0).
pub fn capture() -> Environment {
    let kernel_release = read_trimmed("/proc/sys/kernel/osrelease");
    let kernel_config_source = kernel_config_path(&kernel_release).map(|p| p.display().to_string());
    Environment {
        kernel_version: read_trimmed("/proc/sys/kernel/version"),
        kernel_cmdline: read_trimmed("/proc/cmdline"),
        cpu_model: std::fs::read_to_string("/proc/cpuinfo").map(|t| cpu_model_from_cpuinfo(&t)).unwrap_or_default(),
        cpu_count: online_cpus(),
        mem_total_kb: std::fs::read_to_string("/proc/meminfo").ok().and_then(|t| meminfo_total_kb(&t)).unwrap_or(0),
        hostname: read_trimmed("/proc/sys/kernel/hostname"),
        tools: TOOLS.iter().map(|(tool, arg)| (tool.to_string(), tool_version(tool, arg))).collect(),
        kernel_config_source,
        captured_at: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
        squashfs_config: super::kconfig::KernelConfig::load_running().map(|c| squashfs_config(&c)).unwrap_or_default(),
        kernel_release,
    }
}

/// The squashfs options of `config` that decide decompression and file
/// caching (the knobs of the SQUASHFS_DECOMP_SINGLE readahead regression).
pub fn squashfs_config(config: &super::kconfig::KernelConfig) -> BTreeMap<String, String> {
    const PREFIXES: &[&str] = &["SQUASHFS_DECOMP_", "SQUASHFS_COMPILE_DECOMP_", "SQUASHFS_FILE_"];
    config
        .options
        .iter()
        .filter(|(name, _)| {
            name.as_str() == "SQUASHFS"
                || name.as_str() == "SQUASHFS_CHOICE_DECOMP_BY_MOUNT"
                || PREFIXES.iter().any(|p| name.starts_with(p))
        })
        .map(|(name, value)| (format!("CONFIG_{name}"), value.as_plain().to_string()))
        .collect()
}

/// Where the config of the kernel with release `release` can be read:
/// `/proc/config.gz` (only for the running kernel, needs `IKCONFIG_PROC`),
/// else `/boot/config-<release>`.
pub fn kernel_config_path(release: &str) -> Option<PathBuf> {
    let proc = PathBuf::from("/proc/config.gz");
    if proc.exists() {
        return Some(proc);
    }
    if release.is_empty() {
        return None;
    }
    let boot = PathBuf::from(format!("/boot/config-{release}"));
    boot.exists().then_some(boot)
}

/// First version line of `tool arg`, `"not installed"`, or a short
/// explanation of why no version could be read.
pub fn tool_version(tool: &str, arg: &str) -> String {
    match exec::run(tool, &[arg], VERSION_TIMEOUT) {
        Err(exec::RunError::NotFound) => NOT_INSTALLED.to_string(),
        Err(e) => format!("unknown ({tool} {arg}: {e})"),
        Ok(out) => {
            let line =
                exec::first_line(&out.stdout).or_else(|| exec::first_line(&out.stderr)).unwrap_or("").to_string();
            if out.success && !line.is_empty() {
                return line;
            }
            // erofs-utils before 1.6 has no --version; it prints its version
            // only when it builds an image, so build a tiny one.
            if tool == "mkfs.erofs" {
                if let Some(v) = erofs_version_by_build() {
                    return v;
                }
            }
            format!("unknown ({tool} {arg} exited {}: {line})", exec::exit_text(out.code))
        }
    }
}

/// Build an empty erofs image in a private temporary directory and return
/// the banner line (`mkfs.erofs 1.5`).
fn erofs_version_by_build() -> Option<String> {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    let dir = std::env::temp_dir().join(format!("fslab-erofs-probe-{}-{nanos}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(&src).ok()?;
    let img = dir.join("probe.img");
    let result = exec::run("mkfs.erofs", &[&img.to_string_lossy(), &src.to_string_lossy()], VERSION_TIMEOUT);
    let _ = std::fs::remove_dir_all(&dir);
    let out = result.ok()?;
    let line = out.stdout.lines().chain(out.stderr.lines()).map(str::trim).find(|l| l.starts_with("mkfs.erofs "))?;
    Some(line.to_string())
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path).map(|s| s.trim().to_string()).unwrap_or_default()
}

/// CPU model from `/proc/cpuinfo` text. x86 has `model name`; arm64 often
/// only `Hardware`/`Model` (board) or `CPU part`; other arches `cpu model`
/// or `cpu`.
pub(crate) fn cpu_model_from_cpuinfo(text: &str) -> String {
    let keys = ["model name", "cpu model", "Model", "Hardware", "cpu", "CPU part"];
    for key in keys {
        for line in text.lines() {
            if let Some((k, v)) = line.split_once(':') {
                if k.trim() == key && !v.trim().is_empty() {
                    return v.trim().to_string();
                }
            }
        }
    }
    String::new()
}

/// `MemTotal` in KiB from `/proc/meminfo` text.
pub(crate) fn meminfo_total_kb(text: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix("MemTotal:")?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// Number of online CPUs: `/sys/devices/system/cpu/online` (the machine,
/// not this process's affinity), else what the standard library sees.
pub(crate) fn online_cpus() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|t| count_cpu_list(t.trim()))
        .filter(|&n| n > 0)
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(0)
}

/// Count CPUs in a kernel CPU list such as `0-3,8,10-11`.
pub(crate) fn count_cpu_list(list: &str) -> Option<usize> {
    let mut n = 0usize;
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let a: usize = a.parse().ok()?;
                let b: usize = b.parse().ok()?;
                if b < a {
                    return None;
                }
                n += b - a + 1;
            }
            None => {
                part.parse::<usize>().ok()?;
                n += 1;
            }
        }
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_on_this_machine() {
        let env = capture();
        assert!(!env.kernel_release.is_empty());
        assert!(env.cpu_count > 0);
        assert!(env.mem_total_kb > 0);
        assert_eq!(env.tools.len(), TOOLS.len());
        for (tool, v) in &env.tools {
            assert!(!v.is_empty(), "{tool} has an empty version");
        }
        assert!(env.captured_at.ends_with('Z'));
        // Round-trips through JSON for the store.
        let json = serde_json::to_string(&env).unwrap();
        let back: Environment = serde_json::from_str(&json).unwrap();
        assert_eq!(back, env);
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(count_cpu_list("0-1"), Some(2));
        assert_eq!(count_cpu_list("0-3,8,10-11"), Some(7));
        assert_eq!(count_cpu_list("0"), Some(1));
        assert_eq!(count_cpu_list("3-1"), None);
        assert_eq!(count_cpu_list("x"), None);
    }

    #[test]
    fn cpuinfo_models() {
        let x86 = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\n";
        assert_eq!(cpu_model_from_cpuinfo(x86), "AMD EPYC 7B13");
        let arm = "processor\t: 0\nBogoMIPS\t: 16.00\nCPU part\t: 0xd03\n\nHardware\t: NXP i.MX8MM\n";
        assert_eq!(cpu_model_from_cpuinfo(arm), "NXP i.MX8MM");
        assert_eq!(cpu_model_from_cpuinfo(""), "");
    }

    #[test]
    fn meminfo() {
        assert_eq!(meminfo_total_kb("MemTotal:       16303852 kB\nMemFree: 1 kB\n"), Some(16303852));
        assert_eq!(meminfo_total_kb("MemFree: 1 kB\n"), None);
    }

    #[test]
    fn missing_tool_is_not_installed() {
        assert_eq!(tool_version("fslab-no-such-tool-xyz", "--version"), NOT_INSTALLED);
    }
}
