//! `fslab kernel list|fetch|prune`: the kernel cache and Debian's archive.

use std::path::PathBuf;
use std::process::ExitCode;

use super::{offer, DbArg, FormatArgs};
use anyhow::{anyhow, Context, Result};
use clap::{Args, Subcommand};
use fslab::exit;
use fslab::kernel::debian::{Archive, ResolveError, Wanted, INDEX_MAX_AGE};
use fslab::kernel::{self, cache, KernelSource};
use fslab::output;
use fslab::report::documents::kernels::{
    flavour_of, AvailableKernel, BuiltKernel, BuiltKernels, CachedKernel, DownloadedPackages, FetchedKernel,
    FetchedKernels, KernelList, Pruned, PrunedKernels, PrunedKind,
};
use fslab::report::{render, Document, Format};

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
    #[command(mut_arg("format", |a| offer(a, &[Format::Text, Format::Json])))]
    List {
        /// Also list the archive's kernels (refreshes the lists when older than a day).
        #[arg(long)]
        available: bool,
        #[command(flatten)]
        format: FormatArgs,
    },
    /// Download and unpack archive kernels now (`debian:6.1-cloud` …), e.g. before going offline.
    #[command(mut_arg("format", |a| offer(a, &[Format::Text, Format::Json])))]
    Fetch {
        #[arg(required = true, value_name = "debian:VERSION[-FLAVOUR]")]
        kernels: Vec<String>,
        #[command(flatten)]
        format: FormatArgs,
    },
    /// Build now the kernels an experiment file's variants build from source
    /// (`kernel = { source = … }`), e.g. to warm a cache before the runs; cached ones are reused.
    #[command(mut_arg("format", |a| offer(a, &[Format::Text, Format::Json])))]
    Build {
        /// The experiment file.
        file: PathBuf,
        #[command(flatten)]
        format: FormatArgs,
    },
    /// Remove cached kernels (and downloaded packages) that no stored experiment needs.
    #[command(mut_arg("format", |a| offer(a, &[Format::Text, Format::Json])))]
    Prune {
        #[command(flatten)]
        db: DbArg,
        /// Say what would be removed, remove nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        format: FormatArgs,
    },
}

pub fn kernel_cmd(args: KernelArgs) -> Result<ExitCode> {
    let (doc, format): (Box<dyn Document>, _) = match args.command {
        KernelCommand::List { available, format } => (Box::new(list(&args.cache, available)?), format),
        KernelCommand::Fetch { kernels, format } => (Box::new(fetch(&args.cache, &kernels)?), format),
        KernelCommand::Prune { db, dry_run, format } => (Box::new(prune(&args.cache, &db, dry_run)?), format),
        KernelCommand::Build { file, format } => (Box::new(build(&file)?), format),
    };
    output::print(&render(format.chosen(), doc.as_ref())?)?;
    Ok(ExitCode::SUCCESS)
}

/// Build every variant's `{ source = … }` kernel in the experiment's kernel cache.
fn build(file: &std::path::Path) -> Result<BuiltKernels> {
    fslab::sys::signals::install()?;
    let exp = fslab::experiment::load(file).map_err(exit::usage)?;
    let cache_dir = kernel::cache_dir(&exp.workdir);
    let mut built = Vec::new();
    // Said before the first build starts: cached, incremental or cold, and how long the last one took.
    let planned = fslab::experiment::run_plan::kernel_builds(&exp);
    for (i, outlook) in &planned {
        output::diagnostic(&format!(
            "fslab: the kernel of variant `{}`: {}",
            exp.variants[*i].name,
            outlook.describe()
        ));
    }
    for v in planned.iter().map(|(i, _)| &exp.variants[*i]) {
        let Some(spec) = &v.kernel else { continue };
        let KernelSource::Build(b) = &spec.source else { continue };
        let started = std::time::Instant::now();
        let artifacts =
            kernel::resolve(&spec.source, &cache_dir).with_context(|| format!("the kernel of variant `{}`", v.name))?;
        built.push(BuiltKernel {
            variant: v.name.clone(),
            release: artifacts.release.clone(),
            image: artifacts.image.clone(),
            cached: b.cached,
            seconds: started.elapsed().as_secs_f64(),
        });
    }
    if built.is_empty() {
        output::diagnostic(&format!(
            "{}: no variant builds its kernel from source (kernel = {{ source = … }})",
            file.display()
        ));
    }
    Ok(BuiltKernels(built))
}

fn list(cache_dir: &std::path::Path, available: bool) -> Result<KernelList> {
    let cached = cache::entries(cache_dir)?
        .into_iter()
        .map(|e| {
            let suite = e.package.as_ref().and_then(|p| p.suite.clone());
            CachedKernel {
                flavour: flavour_of(e.release.as_deref().unwrap_or("-")).to_string(),
                release: e.release,
                package_version: e.package.as_ref().map(|p| p.version.clone()),
                debian_release: suite.as_deref().and_then(|s| s.split('-').next()).map(str::to_string),
                suite,
                bytes: e.bytes,
                entry: e.key,
            }
        })
        .collect();
    let archive = Archive::at(cache_dir);
    let debs = archive.downloaded();
    let downloaded = DownloadedPackages {
        count: debs.len(),
        bytes: debs.iter().map(|d| cache::disk_usage(d)).sum(),
        dir: archive.debs_dir().to_path_buf(),
    };
    let mut list = KernelList { cache: cache::kernels_dir(cache_dir), cached, downloaded, available: None };
    if !available {
        return Ok(list);
    }
    archive.refresh(INDEX_MAX_AGE).map_err(classify)?;
    let index = archive.index()?;
    let offered = index
        .iter()
        .map(|p| AvailableKernel {
            kernel: match &p.flavour {
                Some(f) => format!("debian:{}-{f}", p.abi),
                None => format!("debian:{}", p.abi),
            },
            release: p.kernel_release().to_string(),
            flavour: p.flavour_name().to_string(),
            package_version: p.version.clone(),
            debian_release: p.release().to_string(),
            suite: p.suite.clone(),
            bytes: p.size,
            cached: debs.iter().any(|d| {
                d.file_name().is_some_and(|n| n.to_string_lossy().starts_with(&format!("{}_{}_", p.name, p.version)))
            }),
        })
        .collect();
    list.available = Some(offered);
    Ok(list)
}

fn classify(e: ResolveError) -> anyhow::Error {
    match e {
        ResolveError::Offline(_) => exit::environment(anyhow!("{e}")),
        ResolveError::NoMatch(_) => exit::usage(anyhow!("{e}")),
        ResolveError::Other(_) => anyhow!("{e}"),
    }
}

fn fetch(cache_dir: &std::path::Path, kernels: &[String]) -> Result<FetchedKernels> {
    let archive = Archive::at(cache_dir);
    let mut fetched = Vec::new();
    for reference in kernels {
        let wanted = Wanted::parse(reference)
            .ok_or_else(|| exit::usage(anyhow!("{reference}: not a `debian:VERSION[-FLAVOUR]` reference")))?
            .map_err(exit::usage)?;
        let found = archive.resolve(&wanted).map_err(classify)?;
        let artifacts = kernel::resolve(&KernelSource::Debian(found.clone()), cache_dir)?;
        fetched.push(FetchedKernel {
            reference: reference.clone(),
            package: found.package.name.clone(),
            version: found.package.version.clone(),
            suite: found.package.suite.clone(),
            image: artifacts.image,
        });
    }
    Ok(FetchedKernels(fetched))
}

fn prune(cache_dir: &std::path::Path, db: &DbArg, dry_run: bool) -> Result<PrunedKernels> {
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
    let mut removed = Vec::new();
    for e in entries.iter().filter(|e| !needed.contains(&e.key.as_str())) {
        if !dry_run {
            cache::remove(cache_dir, &e.key)?;
        }
        removed.push(Pruned {
            kind: PrunedKind::Kernel,
            name: e.key.clone(),
            release: e.release.clone(),
            bytes: e.bytes,
        });
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
        removed.push(Pruned { kind: PrunedKind::Package, name: deb.display().to_string(), release: None, bytes });
    }
    // Source trees and object directories (1-2 GB each) go when no stored
    // build names their tree.
    for dirs in kernel::build::build_dirs(cache_dir).iter().filter(|d| !stored.contains(&d.key)) {
        if !dry_run {
            kernel::build::remove_build_dirs(cache_dir, dirs)?;
        }
        removed.push(Pruned { kind: PrunedKind::SourceTree, name: dirs.key.clone(), release: None, bytes: dirs.bytes });
    }
    let freed_bytes = removed.iter().map(|p| p.bytes).sum();
    Ok(PrunedKernels { dry_run, removed, freed_bytes, kept: needed.len() })
}
