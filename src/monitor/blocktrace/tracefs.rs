//! Finding (or mounting) tracefs, and the marker-named private instances
//! tracers use (and `fslab cleanup` removes).

use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{anyhow, Context, Result};

use super::*;
use crate::sys::marker::MARKER;

/// Process-wide: tracers using tracefs, and whether this process mounted it.
pub(super) static TRACEFS: Mutex<(usize, Option<PathBuf>)> = Mutex::new((0, None));

/// A reference to a usable tracefs root; mounts it if needed and unmounts on
/// the last release if this process mounted it.
pub(super) struct TracefsRef {
    pub(super) root: PathBuf,
}

pub(super) fn find_tracefs() -> Option<PathBuf> {
    TRACEFS_CANDIDATES.iter().map(PathBuf::from).find(|p| p.join("instances").is_dir())
}

impl TracefsRef {
    pub(super) fn acquire() -> Result<TracefsRef> {
        let mut g = TRACEFS.lock().map_err(|_| anyhow!("tracefs state lock poisoned"))?;
        let root = match find_tracefs() {
            Some(root) => root,
            None => {
                let target = Path::new(TRACEFS_CANDIDATES[0]);
                nix::mount::mount(Some("tracefs"), target, Some("tracefs"), nix::mount::MsFlags::empty(), None::<&str>)
                    .with_context(|| {
                        format!("tracefs is not mounted and mounting it on {} failed", target.display())
                    })?;
                g.1 = Some(target.to_path_buf());
                target.to_path_buf()
            }
        };
        g.0 += 1;
        Ok(TracefsRef { root })
    }
}

impl Drop for TracefsRef {
    fn drop(&mut self) {
        let Ok(mut g) = TRACEFS.lock() else { return };
        g.0 = g.0.saturating_sub(1);
        if g.0 > 0 {
            return;
        }
        if let Some(target) = g.1.take() {
            // Another fslab process may be tracing through our mount.
            let others = fs::read_dir(target.join("instances"))
                .into_iter()
                .flatten()
                .flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with(MARKER));
            if others {
                return;
            }
            // Detach: a reader elsewhere keeps working until it closes.
            let _ = nix::mount::umount2(&target, nix::mount::MntFlags::MNT_DETACH);
        }
    }
}

/// The instance directories fslab tracers currently have (or left behind),
/// under every mounted tracefs.
pub fn marker_instances() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for root in TRACEFS_CANDIDATES {
        for e in fs::read_dir(Path::new(root).join("instances")).into_iter().flatten().flatten() {
            if e.file_name().to_string_lossy().starts_with(MARKER) {
                out.push(e.path());
            }
        }
    }
    out
}

/// Removes a trace instance directory (its events stop with it).
pub fn remove_instance(dir: &Path) -> Result<()> {
    // Disabling first makes rmdir less likely to hit EBUSY from a pending read.
    let _ = fs::write(dir.join("tracing_on"), "0");
    let _ = fs::write(dir.join("events/enable"), "0");
    fs::remove_dir(dir).with_context(|| format!("removing trace instance {}", dir.display()))
}

pub(super) fn write_file(path: &Path, value: &str) -> Result<()> {
    fs::write(path, value).with_context(|| format!("writing {value:?} to {}", path.display()))
}

pub(super) fn read_file(path: &Path) -> Result<String> {
    fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// Reads a file with a single `read`: `header_page` returns EOF for any
/// read at a non-zero offset, so a chunked read would truncate it.
pub(super) fn read_in_one_call(path: &Path) -> Result<String> {
    let mut f = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut buf = vec![0u8; 64 * 1024];
    let n = f.read(&mut buf).with_context(|| format!("reading {}", path.display()))?;
    buf.truncate(n);
    String::from_utf8(buf).with_context(|| format!("{} is not UTF-8", path.display()))
}

/// CLOCK_MONOTONIC in ns: the instance's `mono` trace clock.
pub(super) fn mono_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    if rc != 0 {
        // Without a clock, hold everything back until the final drain.
        return 0;
    }
    (t.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(t.tv_nsec as u64)
}
