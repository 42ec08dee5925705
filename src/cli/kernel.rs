//! `fslab kernel list|fetch|prune`: the kernel cache and Debian's archive.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, Context, Result};
use clap::{Args, Subcommand};
use comfy_table::Table;

use super::DbArg;
use fslab::exit;
use fslab::kernel::debian::{Archive, ResolveError, Wanted, INDEX_MAX_AGE};
use fslab::kernel::{self, cache, KernelSource};

#[derive(Args, Debug)]
pub struct KernelArgs {
    #[command(subcommand)]
    command: KernelCommand,
    /// The kernel cache (where `fslab run` keeps kernels: `<workdir>/cache`).
    #[arg(long, global = true, value_name = "DIR", env = "FSLAB_KERNEL_CACHE", default_value = "/var/tmp/fslab/cache")]
    cache: PathBuf,
}

#[derive(Subcommand, Debug)]
enum KernelCommand {
    /// Kernels in the cache (release, flavour, Debian release, size on disk); with --available, also
    /// every kernel Debian's archive offers for `kernel = "debian:…"`.
    List {
        /// Also list the archive's kernels (refreshes the lists when older than a day).
        #[arg(long)]
        available: bool,
    },
    /// Download and unpack archive kernels now (`debian:6.1-cloud` …), e.g. before going offline.
    Fetch {
        #[arg(required = true, value_name = "debian:VERSION[-FLAVOUR]")]
        kernels: Vec<String>,
    },
    /// Build now the kernels an experiment file's variants build from source
    /// (`kernel = { source = … }`), e.g. to warm a cache before the runs; cached ones are reused.
    Build {
        /// The experiment file.
        file: PathBuf,
    },
    /// Remove cached kernels (and downloaded packages) that no stored experiment needs.
    Prune {
        #[command(flatten)]
        db: DbArg,
        /// Say what would be removed, remove nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

pub fn kernel_cmd(args: KernelArgs) -> Result<ExitCode> {
    match args.command {
        KernelCommand::List { available } => list(&args.cache, available),
        KernelCommand::Fetch { kernels } => fetch(&args.cache, &kernels),
        KernelCommand::Prune { db, dry_run } => prune(&args.cache, &db, dry_run),
        KernelCommand::Build { file } => build(&file),
    }
}

/// Build every variant's `{ source = … }` kernel in the experiment's kernel cache.
fn build(file: &std::path::Path) -> Result<ExitCode> {
    fslab::sys::signals::install()?;
    let exp = fslab::experiment::load(file).map_err(exit::usage)?;
    let cache_dir = kernel::cache_dir(&exp.workdir);
    let mut built = 0;
    let builds = exp.variants.iter().enumerate().filter_map(|(i, v)| match v.kernel.as_ref().map(|k| &k.source) {
        Some(source @ KernelSource::Build(_)) => Some((i, source)),
        _ => None,
    });
    for v in kernel::resolve_order(builds).into_iter().map(|i| &exp.variants[i]) {
        let Some(spec) = &v.kernel else { continue };
        let KernelSource::Build(b) = &spec.source else { continue };
        let started = std::time::Instant::now();
        let artifacts =
            kernel::resolve(&spec.source, &cache_dir).with_context(|| format!("the kernel of variant `{}`", v.name))?;
        println!(
            "{}: {} {} ({}; {:.0} s)",
            v.name,
            artifacts.release,
            artifacts.image.display(),
            if b.cached { "cached" } else { "built" },
            started.elapsed().as_secs_f64()
        );
        built += 1;
    }
    if built == 0 {
        eprintln!("{}: no variant builds its kernel from source (kernel = {{ source = … }})", file.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Sizes in one unit, so a column of them compares at a glance.
fn size(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

/// `6.1.0-50-cloud-amd64` → `cloud`; no flavour word: `generic`.
fn flavour_of(release: &str) -> &str {
    let base = release.strip_suffix("-amd64").unwrap_or(release);
    match base.rsplit_once('-') {
        Some((_, f)) if f.chars().all(|c| c.is_ascii_alphabetic()) => f,
        _ => "generic",
    }
}

fn list(cache_dir: &std::path::Path, available: bool) -> Result<ExitCode> {
    let entries = cache::entries(cache_dir)?;
    let mut table = Table::new();
    table.set_header(["release", "flavour", "package version", "Debian release", "suite", "size", "entry"]);
    for e in &entries {
        let release = e.release.clone().unwrap_or_else(|| "-".into());
        let (version, suite) = match &e.package {
            Some(p) => (p.version.clone(), p.suite.clone().unwrap_or_else(|| "-".into())),
            None => ("-".into(), "-".into()),
        };
        let debian_release = suite.split('-').next().unwrap_or("-").to_string();
        table.add_row([
            release.clone(),
            flavour_of(&release).to_string(),
            version,
            debian_release,
            suite,
            size(e.bytes),
            e.key.clone(),
        ]);
    }
    let archive = Archive::at(cache_dir);
    let debs = archive.downloaded();
    let deb_bytes: u64 = debs.iter().map(|d| cache::disk_usage(d)).sum();
    println!("cached kernels in {}:", cache::kernels_dir(cache_dir).display());
    if entries.is_empty() {
        println!("  none");
    } else {
        println!("{table}");
    }
    println!("downloaded packages: {} ({}) in {}", debs.len(), size(deb_bytes), archive.debs_dir().display());
    if !available {
        return Ok(ExitCode::SUCCESS);
    }
    archive.refresh(INDEX_MAX_AGE).map_err(classify)?;
    let index = archive.index()?;
    let mut table = Table::new();
    table.set_header(["kernel", "release", "flavour", "package version", "Debian release", "suite", "size", "cached"]);
    for p in index.iter() {
        let cached = debs.iter().any(|d| {
            d.file_name().is_some_and(|n| n.to_string_lossy().starts_with(&format!("{}_{}_", p.name, p.version)))
        });
        let reference = match &p.flavour {
            Some(f) => format!("debian:{}-{f}", p.abi),
            None => format!("debian:{}", p.abi),
        };
        table.add_row([
            reference,
            p.kernel_release().to_string(),
            p.flavour_name().to_string(),
            p.version.clone(),
            p.release().to_string(),
            p.suite.clone(),
            size(p.size),
            if cached { "yes".into() } else { String::new() },
        ]);
    }
    println!("\nDebian's archive ({} kernel packages):", index.len());
    println!("{table}");
    Ok(ExitCode::SUCCESS)
}

fn classify(e: ResolveError) -> anyhow::Error {
    match e {
        ResolveError::Offline(_) => exit::environment(anyhow!("{e}")),
        ResolveError::NoMatch(_) => exit::usage(anyhow!("{e}")),
        ResolveError::Other(_) => anyhow!("{e}"),
    }
}

fn fetch(cache_dir: &std::path::Path, kernels: &[String]) -> Result<ExitCode> {
    let archive = Archive::at(cache_dir);
    for reference in kernels {
        let wanted = Wanted::parse(reference)
            .ok_or_else(|| exit::usage(anyhow!("{reference}: not a `debian:VERSION[-FLAVOUR]` reference")))?
            .map_err(exit::usage)?;
        let found = archive.resolve(&wanted).map_err(classify)?;
        let artifacts = kernel::resolve(&KernelSource::Debian(found.clone()), cache_dir)?;
        println!(
            "{reference}: {} {} ({}) -> {}",
            found.package.name,
            found.package.version,
            found.package.suite,
            artifacts.image.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn prune(cache_dir: &std::path::Path, db: &DbArg, dry_run: bool) -> Result<ExitCode> {
    let store = db.open_existing()?;
    // What stored experiments name: their environment (each kernel's
    // config path lies in its cache entry) and plan.
    let mut stored = String::new();
    for e in store.list_experiments()? {
        let row = store.experiment(e.id)?;
        stored.push_str(&serde_json::to_string(&row.environment)?);
        stored.push_str(&serde_json::to_string(&row.plan)?);
    }
    let entries = cache::entries(cache_dir)?;
    let needed: Vec<&str> = entries.iter().filter(|e| stored.contains(&e.key)).map(|e| e.key.as_str()).collect();
    let mut freed = 0;
    let verb = if dry_run { "would remove" } else { "removed" };
    for e in entries.iter().filter(|e| !needed.contains(&e.key.as_str())) {
        if !dry_run {
            cache::remove(cache_dir, &e.key)?;
        }
        freed += e.bytes;
        println!("{verb} {} ({}, {})", e.key, e.release.as_deref().unwrap_or("-"), size(e.bytes));
    }
    // A downloaded package goes with its unpacked entry (keyed by its SHA-256).
    for deb in Archive::at(cache_dir).downloaded() {
        let sha = kernel::sha256_file(&deb)?;
        if needed.contains(&sha.as_str()) {
            continue;
        }
        let bytes = cache::disk_usage(&deb);
        if !dry_run {
            std::fs::remove_file(&deb).with_context(|| format!("removing {}", deb.display()))?;
        }
        freed += bytes;
        println!("{verb} {} ({})", deb.display(), size(bytes));
    }
    // Source trees and object directories (1-2 GB each) go when no stored
    // build names their tree.
    for dirs in kernel::build::build_dirs(cache_dir).iter().filter(|d| !stored.contains(&d.key)) {
        if !dry_run {
            kernel::build::remove_build_dirs(cache_dir, dirs)?;
        }
        freed += dirs.bytes;
        println!("{verb} source tree {} and its build directories ({})", dirs.key, size(dirs.bytes));
    }
    println!("{verb} {} in all; kept {} entries stored experiments need", size(freed), needed.len());
    Ok(ExitCode::SUCCESS)
}
