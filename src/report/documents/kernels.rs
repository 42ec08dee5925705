//! `fslab kernel list|fetch|build|prune`.

use std::path::PathBuf;

use comfy_table::Table;
use serde::Serialize;

use super::mib;
use crate::kernel::prune::{PrunedKind, Pruning};
use crate::kernel::source::OfferedKernel;
use crate::kernel::transfer::Moved;
use crate::report::Document;

/// `fslab kernel list`: the kernel cache, downloaded packages, source
/// trees and (with `--available`) what the kernel sources offer.
#[derive(Debug, Serialize)]
pub struct KernelList {
    /// Where unpacked and built kernels are kept.
    pub cache: PathBuf,
    pub cached: Vec<CachedKernel>,
    pub downloaded: DownloadedPackages,
    /// Source trees with their object and config directories.
    pub trees: Vec<SourceTreeDirs>,
    /// Every kernel the sources offer; `None` without `--available`.
    pub available: Option<Vec<OfferedKernel>>,
}

#[derive(Debug, Serialize)]
pub struct CachedKernel {
    pub release: Option<String>,
    /// `package`, `built` or `staged`.
    pub kind: String,
    /// The package's name, or how the kernel was built.
    pub what: String,
    /// The package's version, or the built tree's.
    pub version: Option<String>,
    /// Where it came from: the archive suite, for archive packages.
    pub from: Option<String>,
    pub bytes: u64,
    /// When a run last used it (RFC 3339).
    pub last_used: Option<String>,
    /// The cache entry's key.
    pub entry: String,
}

#[derive(Debug, Serialize)]
pub struct DownloadedPackages {
    pub count: usize,
    pub bytes: u64,
    pub dir: PathBuf,
}

/// A source tree's working directories.
#[derive(Debug, Serialize)]
pub struct SourceTreeDirs {
    pub key: String,
    pub bytes: u64,
    pub paths: Vec<PathBuf>,
}

/// `6.1.0-50-cloud-amd64` → `cloud`; no flavour word: `generic`.
pub fn flavour_of(release: &str) -> &str {
    let base = release.strip_suffix("-amd64").unwrap_or(release);
    match base.rsplit_once('-') {
        Some((_, f)) if f.chars().all(|c| c.is_ascii_alphabetic()) => f,
        _ => "generic",
    }
}

fn or_dash(s: &Option<String>) -> String {
    s.clone().unwrap_or_else(|| "-".into())
}

impl Document for KernelList {
    fn what(&self) -> &'static str {
        "a kernel list"
    }

    fn text(&self) -> String {
        let mut out = format!("cached kernels in {}:\n", self.cache.display());
        if self.cached.is_empty() {
            out.push_str("  none\n");
        } else {
            let mut table = Table::new();
            table.set_header(["release", "flavour", "kind", "what", "version", "from", "size", "last used", "entry"]);
            for e in &self.cached {
                table.add_row([
                    or_dash(&e.release),
                    flavour_of(e.release.as_deref().unwrap_or("-")).to_string(),
                    e.kind.clone(),
                    e.what.clone(),
                    or_dash(&e.version),
                    or_dash(&e.from),
                    mib(e.bytes),
                    or_dash(&e.last_used),
                    e.entry.clone(),
                ]);
            }
            out.push_str(&format!("{table}\n"));
        }
        let d = &self.downloaded;
        out.push_str(&format!("downloaded packages: {} ({}) in {}\n", d.count, mib(d.bytes), d.dir.display()));
        if !self.trees.is_empty() {
            let bytes: u64 = self.trees.iter().map(|t| t.bytes).sum();
            out.push_str(&format!("source trees: {} ({}):\n", self.trees.len(), mib(bytes)));
            for t in &self.trees {
                let dirs: Vec<String> = t.paths.iter().map(|p| p.display().to_string()).collect();
                out.push_str(&format!("  {} ({}): {}\n", t.key, mib(t.bytes), dirs.join(", ")));
            }
        }
        if let Some(available) = &self.available {
            let mut table = Table::new();
            table.set_header(["kernel", "kind", "release", "flavour", "version", "from", "size", "cached"]);
            for p in available {
                table.add_row([
                    p.kernel.clone(),
                    p.kind.clone(),
                    p.release.clone(),
                    p.flavour.clone(),
                    p.version.clone(),
                    p.from.clone(),
                    p.bytes.map(mib).unwrap_or_else(|| "-".into()),
                    if p.cached { "yes".into() } else { String::new() },
                ]);
            }
            out.push_str(&format!("\navailable ({} kernels):\n{table}\n", available.len()));
        }
        out
    }
}

/// `fslab kernel fetch`: each kernel asked for, what it resolved to, where it was unpacked.
#[derive(Debug, Serialize)]
pub struct FetchedKernels(pub Vec<FetchedKernel>);

#[derive(Debug, Serialize)]
pub struct FetchedKernel {
    /// As given: `debian:6.1-cloud`.
    pub reference: String,
    /// The kind of source it is.
    pub kind: String,
    /// What it resolved to (the package and its version, …).
    pub origin: String,
    pub release: String,
    pub image: PathBuf,
}

impl Document for FetchedKernels {
    fn what(&self) -> &'static str {
        "the fetched kernels"
    }

    fn text(&self) -> String {
        self.0.iter().map(|k| format!("{} -> {}\n", k.origin, k.image.display())).collect()
    }
}

/// `fslab kernel build`: the kernel of each variant that builds from source.
#[derive(Debug, Serialize)]
pub struct BuiltKernels(pub Vec<BuiltKernel>);

#[derive(Debug, Serialize)]
pub struct BuiltKernel {
    pub variant: String,
    pub release: String,
    pub image: PathBuf,
    /// Found in the cache rather than built now.
    pub cached: bool,
    pub seconds: f64,
}

impl Document for BuiltKernels {
    fn what(&self) -> &'static str {
        "the built kernels"
    }

    fn text(&self) -> String {
        self.0
            .iter()
            .map(|k| {
                format!(
                    "{}: {} {} ({}; {:.0} s)\n",
                    k.variant,
                    k.release,
                    k.image.display(),
                    if k.cached { "cached" } else { "built" },
                    k.seconds
                )
            })
            .collect()
    }
}

impl Document for Pruning {
    fn what(&self) -> &'static str {
        "a prune summary"
    }

    fn text(&self) -> String {
        let verb = if self.dry_run { "would remove" } else { "removed" };
        let mut out = String::new();
        for (store, n) in &self.needs.read {
            out.push_str(&format!("read {store}: {n} experiments\n"));
        }
        for (store, why) in &self.needs.unreadable {
            out.push_str(&format!(
                "could not read {store} ({why}): every kernel it might need is kept{}\n",
                if self.removed.is_empty() { "" } else { " (but what --unused-for names)" }
            ));
        }
        for p in &self.removed {
            let why = if p.why.is_empty() { String::new() } else { format!("; {}", p.why) };
            out.push_str(&match p.kind {
                PrunedKind::Kernel => {
                    format!("{verb} {} ({}, {}{why})\n", p.name, p.release.as_deref().unwrap_or("-"), mib(p.bytes))
                }
                PrunedKind::Package => format!("{verb} {} ({}{why})\n", p.name, mib(p.bytes)),
                PrunedKind::SourceTree => {
                    format!("{verb} source tree {} and its build directories ({}{why})\n", p.name, mib(p.bytes))
                }
            });
        }
        out.push_str(&format!(
            "{verb} {} in all; kept {} entries stored experiments need{}\n",
            mib(self.freed_bytes),
            self.kept,
            if self.dry_run && !self.removed.is_empty() { " (remove with --yes)" } else { "" }
        ));
        out
    }
}

impl Document for Moved {
    fn what(&self) -> &'static str {
        "the kernels exported or imported"
    }

    fn text(&self) -> String {
        let mut out = String::new();
        for k in &self.kernels {
            let verb = match (self.direction.as_str(), k.present) {
                ("export", _) => "exported",
                (_, true) => "already here",
                _ => "imported",
            };
            out.push_str(&format!(
                "{verb}: {} {} ({}, {}) [{}]\n",
                k.variant,
                k.release,
                k.origin,
                mib(k.bytes),
                k.key
            ));
        }
        out.push_str(&format!("{} kernels, {}\n", self.kernels.len(), self.archive.display()));
        out
    }
}
