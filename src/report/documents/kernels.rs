//! `fslab kernel list|fetch|build|prune`.

use std::path::PathBuf;

use comfy_table::Table;
use serde::Serialize;

use super::mib;
use crate::report::Document;

/// `fslab kernel list`: the kernel cache, downloaded packages and (with
/// `--available`) Debian's archive.
#[derive(Debug, Serialize)]
pub struct KernelList {
    /// Where unpacked kernels are kept.
    pub cache: PathBuf,
    pub cached: Vec<CachedKernel>,
    pub downloaded: DownloadedPackages,
    /// Every kernel the archive offers; `None` without `--available`.
    pub available: Option<Vec<AvailableKernel>>,
}

#[derive(Debug, Serialize)]
pub struct CachedKernel {
    pub release: Option<String>,
    pub flavour: String,
    pub package_version: Option<String>,
    pub debian_release: Option<String>,
    pub suite: Option<String>,
    pub bytes: u64,
    /// The cache entry's key.
    pub entry: String,
}

#[derive(Debug, Serialize)]
pub struct DownloadedPackages {
    pub count: usize,
    pub bytes: u64,
    pub dir: PathBuf,
}

/// One line of `kernel list --available` (the archive's `kernel::debian::ArchiveKernel`
/// as shown, with whether its package is downloaded).
#[derive(Debug, Serialize)]
pub struct AvailableKernel {
    /// What a variant writes: `debian:6.1-cloud`.
    pub kernel: String,
    pub release: String,
    pub flavour: String,
    pub package_version: String,
    pub debian_release: String,
    pub suite: String,
    pub bytes: u64,
    /// Its package is downloaded already.
    pub cached: bool,
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
            table.set_header(["release", "flavour", "package version", "Debian release", "suite", "size", "entry"]);
            for e in &self.cached {
                table.add_row([
                    or_dash(&e.release),
                    e.flavour.clone(),
                    or_dash(&e.package_version),
                    or_dash(&e.debian_release),
                    or_dash(&e.suite),
                    mib(e.bytes),
                    e.entry.clone(),
                ]);
            }
            out.push_str(&format!("{table}\n"));
        }
        let d = &self.downloaded;
        out.push_str(&format!("downloaded packages: {} ({}) in {}\n", d.count, mib(d.bytes), d.dir.display()));
        if let Some(available) = &self.available {
            let mut table = Table::new();
            table.set_header([
                "kernel",
                "release",
                "flavour",
                "package version",
                "Debian release",
                "suite",
                "size",
                "cached",
            ]);
            for p in available {
                table.add_row([
                    p.kernel.clone(),
                    p.release.clone(),
                    p.flavour.clone(),
                    p.package_version.clone(),
                    p.debian_release.clone(),
                    p.suite.clone(),
                    mib(p.bytes),
                    if p.cached { "yes".into() } else { String::new() },
                ]);
            }
            out.push_str(&format!("\nDebian's archive ({} kernel packages):\n{table}\n", available.len()));
        }
        out
    }
}

/// `fslab kernel fetch`: each archive kernel asked for, where it was unpacked.
#[derive(Debug, Serialize)]
pub struct FetchedKernels(pub Vec<FetchedKernel>);

#[derive(Debug, Serialize)]
pub struct FetchedKernel {
    /// As given: `debian:6.1-cloud`.
    pub reference: String,
    pub package: String,
    pub version: String,
    pub suite: String,
    pub image: PathBuf,
}

impl Document for FetchedKernels {
    fn what(&self) -> &'static str {
        "the fetched kernels"
    }

    fn text(&self) -> String {
        self.0
            .iter()
            .map(|k| format!("{}: {} {} ({}) -> {}\n", k.reference, k.package, k.version, k.suite, k.image.display()))
            .collect()
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

/// `fslab kernel prune`: what was (or, with `--dry-run`, would be) removed.
#[derive(Debug, Serialize)]
pub struct PrunedKernels {
    pub dry_run: bool,
    pub removed: Vec<Pruned>,
    pub freed_bytes: u64,
    /// Cache entries kept because a stored experiment needs them.
    pub kept: usize,
}

#[derive(Debug, Serialize)]
pub struct Pruned {
    pub kind: PrunedKind,
    /// A cache entry's key, a package's path, a source tree's key.
    pub name: String,
    pub release: Option<String>,
    pub bytes: u64,
}

#[derive(Clone, Copy, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PrunedKind {
    /// An unpacked kernel of the cache.
    Kernel,
    /// A downloaded `.deb`.
    Package,
    /// A source tree and its build directories.
    SourceTree,
}

impl Document for PrunedKernels {
    fn what(&self) -> &'static str {
        "a prune summary"
    }

    fn text(&self) -> String {
        let verb = if self.dry_run { "would remove" } else { "removed" };
        let mut out = String::new();
        for p in &self.removed {
            out.push_str(&match p.kind {
                PrunedKind::Kernel => {
                    format!("{verb} {} ({}, {})\n", p.name, p.release.as_deref().unwrap_or("-"), mib(p.bytes))
                }
                PrunedKind::Package => format!("{verb} {} ({})\n", p.name, mib(p.bytes)),
                PrunedKind::SourceTree => {
                    format!("{verb} source tree {} and its build directories ({})\n", p.name, mib(p.bytes))
                }
            });
        }
        out.push_str(&format!(
            "{verb} {} in all; kept {} entries stored experiments need\n",
            mib(self.freed_bytes),
            self.kept
        ));
        out
    }
}
