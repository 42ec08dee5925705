//! VM processes a killed fslab left behind, found by the marker in their
//! command lines: QEMU's `-name fslab-tb-…`, virtiofsd's socket path in the
//! session directory, virtme-run's `--name`. Normally the session's cgroup
//! already holds them (and `fslab cleanup` kills its members); this also
//! finds them where no cgroup could be made.

use std::collections::HashSet;
use std::fs;
use std::path::PathBuf;

use crate::sys::marker::MARKER;

/// A leftover VM process.
#[derive(Clone, Debug, PartialEq)]
pub struct LeftoverProcess {
    pub pid: i32,
    /// Its command line, arguments joined by spaces (carries the marker).
    pub cmdline: String,
}

/// Programs a VM session starts.
fn is_vm_program(argv: &[String]) -> bool {
    let base = |s: &str| s.rsplit('/').next().unwrap_or(s).to_string();
    let first = argv.first().map(|a| base(a)).unwrap_or_default();
    // virtme-run is a Python script: the interpreter comes first.
    first.starts_with("qemu-system") || first == "virtiofsd" || argv.iter().take(2).any(|a| base(a) == "virtme-run")
}

/// Every process on this host that a VM session started (any owner).
pub fn vm_processes() -> Vec<LeftoverProcess> {
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(raw) = fs::read(entry.path().join("cmdline")) else { continue };
        let argv: Vec<String> =
            raw.split(|b| *b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        let cmdline = argv.join(" ");
        if cmdline.contains(MARKER) && is_vm_program(&argv) {
            found.push(LeftoverProcess { pid, cmdline });
        }
    }
    found
}

/// Whether `process` belongs to one of the work directories `dirs` (its
/// command line names a path inside one, as virtiofsd's socket and
/// virtme-run's exchange directory do) or to one of the sessions `names`
/// (QEMU's `-name`, virtme-run's `--name`): `fslab cleanup --workdir X`
/// reaches only X's VMs.
pub fn belongs_to(process: &LeftoverProcess, dirs: &[PathBuf], names: &HashSet<String>) -> bool {
    let inside = dirs.iter().any(|d| process.cmdline.contains(&format!("{}/", d.display())));
    inside || names.iter().any(|n| mentions(&process.cmdline, n))
}

/// `name` occurs in `text` not followed by a digit (`…-1` is not `…-12`).
fn mentions(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(i, _)| !text[i + name.len()..].starts_with(|c: char| c.is_ascii_digit()))
}

/// SIGKILL a leftover VM process.
pub fn kill(process: &LeftoverProcess) -> anyhow::Result<()> {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(process.pid), nix::sys::signal::Signal::SIGKILL)
        .or_else(|e| if e == nix::errno::Errno::ESRCH { Ok(()) } else { Err(e) })
        .map_err(|e| anyhow::anyhow!("killing pid {}: {e}", process.pid))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn vm_programs_are_recognised() {
        assert!(is_vm_program(&argv("/usr/bin/qemu-system-x86_64 -name fslab-tb-1-vm0-a")));
        assert!(is_vm_program(&argv("/var/lib/fslab/tools/bin/virtiofsd --socket-path /x")));
        assert!(is_vm_program(&argv(
            "/var/lib/fslab/tools/venv/bin/python3 /var/lib/fslab/tools/venv/bin/virtme-run --kimg k"
        )));
        assert!(!is_vm_program(&argv("grep fslab-tb-1 qemu-system")));
        assert!(!is_vm_program(&argv("/usr/bin/fslab run x.toml")));
    }

    #[test]
    fn a_vm_belongs_to_the_work_directory_or_session_it_names() {
        let p = |cmdline: &str| LeftoverProcess { pid: 1, cmdline: cmdline.into() };
        let dirs = vec![PathBuf::from("/var/tmp/x")];
        let names: HashSet<String> = ["fslab-tb-7-s9-1".to_string()].into();
        assert!(belongs_to(&p("virtiofsd --socket-path /var/tmp/x/fslab-tb-7-s9-1/sock"), &dirs, &HashSet::new()));
        assert!(belongs_to(&p("qemu-system-x86_64 -name fslab-tb-7-s9-1"), &[], &names));
        assert!(belongs_to(&p("qemu-system-x86_64 -name fslab-tb-7-s9-1-vm0"), &[], &names));
        assert!(!belongs_to(&p("qemu-system-x86_64 -name fslab-tb-7-s9-12"), &dirs, &names));
        assert!(!belongs_to(&p("virtiofsd --socket-path /var/tmp/xy/fslab-tb-8-s9-1/sock"), &dirs, &names));
    }
}
