//! Finding the programs the VM path runs: on `PATH` first, then in fslab's
//! private tools prefix (`$FSLAB_TOOLS`, default `/var/lib/fslab/tools`),
//! where `scripts/install-vm-tools` puts virtme-ng (`venv/bin/`) and the
//! Rust virtiofsd (`bin/`), which Debian 12 does not package.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::sys::exec;

/// Where fslab's own copies of the VM tools live unless `FSLAB_TOOLS` says otherwise.
pub const DEFAULT_TOOLS_PREFIX: &str = "/var/lib/fslab/tools";

/// The private tools prefix in effect.
pub fn tools_prefix() -> PathBuf {
    std::env::var_os("FSLAB_TOOLS").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(DEFAULT_TOOLS_PREFIX))
}

/// A program the VM path needs, and how to get it.
struct Wanted {
    /// Names to look for, in order.
    names: &'static [&'static str],
    /// What provides it and how to install it.
    install: &'static str,
    /// Extra check of a candidate (e.g. the Rust virtiofsd, not QEMU's old C one).
    accept: fn(&Path) -> bool,
}

fn any(_: &Path) -> bool {
    true
}

/// The Rust virtiofsd takes `--shared-dir`; QEMU's old C daemon (Debian's
/// `/usr/lib/qemu/virtiofsd`) takes `-o source=` and virtme-ng cannot drive it.
fn rust_virtiofsd(path: &Path) -> bool {
    path.to_str()
        .and_then(|p| exec::run(p, &["--help"], exec::DEFAULT_TIMEOUT).ok())
        .is_some_and(|o| o.stdout.contains("--shared-dir"))
}

/// virtme-ng builds an initramfs with busybox when modules must be loaded
/// early; it has to be static to run in there.
fn static_busybox(path: &Path) -> bool {
    path.to_str()
        .and_then(|p| exec::run("file", &["-L", p], exec::DEFAULT_TIMEOUT).ok())
        .is_some_and(|o| o.stdout.contains("statically linked") || o.stdout.contains("static-pie linked"))
}

const INSTALL_SCRIPT: &str = "run `sudo scripts/install-vm-tools`";

/// The VM path's programs. `file`, `strings`, `depmod` and `modprobe` are
/// run by virtme-ng itself (kernel version, module dependencies).
const WANTED: &[(&str, Wanted)] = &[
    ("virtme-run", Wanted { names: &["virtme-run"], install: "virtme-ng 1.42 from PyPI: {script}", accept: any }),
    (
        "qemu-system-x86_64",
        Wanted { names: &["qemu-system-x86_64"], install: "apt-get install qemu-system-x86", accept: any },
    ),
    (
        "virtiofsd",
        Wanted {
            names: &["virtiofsd"],
            install: "the Rust virtiofsd from crates.io (not QEMU's old C one): {script}",
            accept: rust_virtiofsd,
        },
    ),
    ("depmod", Wanted { names: &["depmod"], install: "apt-get install kmod", accept: any }),
    ("modprobe", Wanted { names: &["modprobe"], install: "apt-get install kmod", accept: any }),
    ("file", Wanted { names: &["file"], install: "apt-get install file", accept: any }),
    ("strings", Wanted { names: &["strings"], install: "apt-get install binutils", accept: any }),
    (
        "busybox (static)",
        Wanted {
            names: &["busybox-static", "busybox.static", "busybox"],
            install: "apt-get install busybox-static",
            accept: static_busybox,
        },
    ),
];

/// Where each VM tool was found.
#[derive(Clone, Debug)]
pub struct VmTools {
    pub virtme_run: PathBuf,
    pub qemu: PathBuf,
    pub virtiofsd: PathBuf,
    pub depmod: PathBuf,
    pub modprobe: PathBuf,
    pub file: PathBuf,
    pub strings: PathBuf,
    pub busybox: PathBuf,
}

impl VmTools {
    /// `PATH` for virtme-ng: the directories of the tools found, then the
    /// caller's own, so virtme-ng's lookups (`which virtiofsd`, busybox,
    /// depmod) find exactly these.
    pub fn search_path(&self) -> std::ffi::OsString {
        let mut dirs: Vec<PathBuf> = Vec::new();
        for tool in [
            &self.virtiofsd,
            &self.busybox,
            &self.qemu,
            &self.depmod,
            &self.modprobe,
            &self.file,
            &self.strings,
            &self.virtme_run,
        ] {
            if let Some(dir) = tool.parent() {
                if !dirs.iter().any(|d| d == dir) {
                    dirs.push(dir.to_path_buf());
                }
            }
        }
        if let Some(path) = std::env::var_os("PATH") {
            dirs.extend(std::env::split_paths(&path));
        }
        std::env::join_paths(dirs).unwrap_or_default()
    }
}

/// The tools that could not be found: one line per tool with what to install.
#[derive(Debug)]
pub struct MissingTools(pub Vec<String>);

impl fmt::Display for MissingTools {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "booting a kernel under test needs tools that are missing:")?;
        for line in &self.0 {
            writeln!(f, "  {line}")?;
        }
        write!(f, "(fslab looks on PATH, then in {}; set FSLAB_TOOLS to use another prefix)", tools_prefix().display())
    }
}

impl std::error::Error for MissingTools {}

/// Directories searched after `PATH`: the private prefix, and the sbin
/// directories a non-login root shell may lack.
fn fallback_dirs() -> Vec<PathBuf> {
    let prefix = tools_prefix();
    vec![prefix.join("bin"), prefix.join("venv/bin"), "/usr/sbin".into(), "/sbin".into()]
}

fn find(wanted: &Wanted) -> Option<PathBuf> {
    let path_dirs: Vec<PathBuf> =
        std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    for name in wanted.names {
        for dir in path_dirs.iter().chain(fallback_dirs().iter()) {
            let candidate = dir.join(name);
            if candidate.is_file() && (wanted.accept)(&candidate) {
                return Some(candidate);
            }
        }
    }
    None
}

/// Find every VM tool, or say which are missing and how to install them.
pub fn discover() -> Result<VmTools, MissingTools> {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for (label, wanted) in WANTED {
        match find(wanted) {
            Some(path) => found.push(path),
            None => missing.push(format!("{label}: {}", wanted.install.replace("{script}", INSTALL_SCRIPT))),
        }
    }
    if !missing.is_empty() {
        return Err(MissingTools(missing));
    }
    let mut it = found.into_iter();
    let mut next = || it.next().expect("one path per wanted tool");
    Ok(VmTools {
        virtme_run: next(),
        qemu: next(),
        virtiofsd: next(),
        depmod: next(),
        modprobe: next(),
        file: next(),
        strings: next(),
        busybox: next(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_tools_are_listed_one_per_line_with_the_install_step() {
        let text = MissingTools(vec![
            "virtme-run: virtme-ng 1.42 from PyPI: run `sudo scripts/install-vm-tools`".into(),
            "depmod: apt-get install kmod".into(),
        ])
        .to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[1].contains("virtme-run") && lines[1].contains("install-vm-tools"));
        assert!(lines[2].contains("apt-get install kmod"));
        assert!(lines[3].contains("FSLAB_TOOLS"));
    }

    #[test]
    fn every_wanted_tool_says_how_to_install_it() {
        for (label, wanted) in WANTED {
            assert!(wanted.install.contains("apt-get") || wanted.install.contains("{script}"), "{label}");
        }
    }
}
