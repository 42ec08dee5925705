//! `fslab kernel list|fetch|build|export|import|prune`: the kernel cache,
//! through the registry of kernel sources (`fslab::kernel::source`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::{offer, FormatArgs, KernelCacheArg};
use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use fslab::experiment::DEFAULT_WORKDIR;
use fslab::kernel::{self, cache, KernelSource};
use fslab::output;
use fslab::report::documents::kernels::{
    BuiltKernel, BuiltKernels, CachedKernel, DownloadedPackages, FetchedKernel, FetchedKernels, KernelList,
    SourceTreeDirs,
};
use fslab::report::{render, Document, Format};
use fslab::store::{Store, StoreLocation};

#[derive(Args, Debug)]
pub struct KernelArgs {
    #[command(subcommand)]
    command: KernelCommand,
    #[command(flatten)]
    cache: KernelCacheArg,
    /// The work directory whose `cache` holds the kernels (when neither --kernel-cache nor
    /// $FSLAB_KERNEL_CACHE says where).
    #[arg(long, global = true, value_name = "DIR", default_value = DEFAULT_WORKDIR)]
    workdir: PathBuf,
    /// The kernel cache (the spelling before --kernel-cache; still accepted).
    #[arg(long = "cache", global = true, value_name = "DIR", hide = true)]
    old_cache: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum KernelCommand {
    /// Kernels in the cache (kind, release, what each is, size, last use) and the source trees built
    /// there; with --available, also every kernel the sources offer (Debian's archive).
    #[command(mut_arg("format", |a| offer(a, &[Format::Text, Format::Json])))]
    List {
        /// Also list what the kernel sources offer (refreshes the archive's lists when older than a day).
        #[arg(long)]
        available: bool,
        #[command(flatten)]
        format: FormatArgs,
    },
    /// Download and unpack kernels now (`debian:6.1-cloud`, a `.deb`, an image …), e.g. before going
    /// offline.
    #[command(mut_arg("format", |a| offer(a, &[Format::Text, Format::Json])))]
    Fetch {
        #[arg(required = true, value_name = "KERNEL")]
        kernels: Vec<String>,
        #[command(flatten)]
        format: FormatArgs,
    },
    /// Build now the kernels an experiment file's variants build from source
    /// (`kernel = { source | git = … }`), e.g. to warm a cache before the runs; cached ones are reused.
    #[command(mut_arg("format", |a| offer(a, &[Format::Text, Format::Json])))]
    Build {
        /// The experiment file.
        file: PathBuf,
        #[command(flatten)]
        format: FormatArgs,
    },
    /// Write the kernels an experiment file's variants boot (built or unpacked first when missing),
    /// with their keys, configs and build records, to one archive another machine imports: build once,
    /// boot anywhere.
    #[command(mut_arg("format", |a| offer(a, &[Format::Text, Format::Json])))]
    Export {
        /// The experiment file.
        file: PathBuf,
        /// The archive to write (a tar file).
        #[arg(long, short = 'o', value_name = "FILE")]
        output: PathBuf,
        #[command(flatten)]
        format: FormatArgs,
    },
    /// Add the kernels of an archive `kernel export` wrote to this cache (entries already here are kept).
    #[command(mut_arg("format", |a| offer(a, &[Format::Text, Format::Json])))]
    Import {
        /// The archive.
        archive: PathBuf,
        #[command(flatten)]
        format: FormatArgs,
    },
    /// Say which cached kernels, packages and source trees no store needs (the stores that used this
    /// cache, and --db), and remove them with --yes.
    #[command(mut_arg("format", |a| offer(a, &[Format::Text, Format::Json])))]
    Prune {
        /// More stores whose experiments' kernels are kept (the stores that ran experiments with this
        /// cache are always read).
        #[arg(long = "db", value_name = "FILE|URL")]
        dbs: Vec<StoreLocation>,
        /// Also remove what stores need but no run has used for this long (e.g. 30d).
        #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
        unused_for: Option<std::time::Duration>,
        /// Remove; without it prune only says what it would remove.
        #[arg(long)]
        yes: bool,
        /// Say what would be removed, remove nothing (the default; kept for scripts).
        #[arg(long, conflicts_with = "yes")]
        dry_run: bool,
        #[command(flatten)]
        format: FormatArgs,
    },
}

pub fn kernel_cmd(args: KernelArgs) -> Result<ExitCode> {
    let flag = args.cache.kernel_cache.clone().or(args.old_cache.clone());
    let cache_dir = kernel::cache_dir(flag.as_deref(), &args.workdir);
    let cache_arg = KernelCacheArg { kernel_cache: Some(cache_dir.clone()) };
    let (doc, format): (Box<dyn Document>, _) = match args.command {
        KernelCommand::List { available, format } => (Box::new(list(&cache_dir, available)?), format),
        KernelCommand::Fetch { kernels, format } => (Box::new(fetch(&cache_dir, &kernels)?), format),
        KernelCommand::Build { file, format } => (Box::new(build(&file, &cache_arg)?), format),
        KernelCommand::Export { file, output, format } => {
            (Box::new(export(&file, &output, &cache_arg, &cache_dir)?), format)
        }
        KernelCommand::Import { archive, format } => (Box::new(import(&archive, &cache_dir)?), format),
        KernelCommand::Prune { dbs, unused_for, yes, dry_run: _, format } => {
            (Box::new(prune(&cache_dir, &dbs, unused_for, yes)?), format)
        }
    };
    output::print(&render(format.chosen(), doc.as_ref())?)?;
    Ok(ExitCode::SUCCESS)
}

/// The experiment file, read with the cache the command was given.
fn load(file: &Path, cache: &KernelCacheArg) -> Result<fslab::experiment::Experiment> {
    fslab::experiment::load_with(file, &cache.overrides(None)).map_err(fslab::exit::usage)
}

/// Build every variant's built kernel in the kernel cache.
fn build(file: &Path, cache: &KernelCacheArg) -> Result<BuiltKernels> {
    fslab::sys::signals::install()?;
    let exp = load(file, cache)?;
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
        let Some(b) = spec.source.build() else { continue };
        let started = std::time::Instant::now();
        let artifacts = kernel::resolve(&spec.source, &exp.kernel_cache)
            .with_context(|| format!("the kernel of variant `{}`", v.name))?;
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
            "{}: no variant builds its kernel from source (kernel = {{ source | git = … }})",
            file.display()
        ));
    }
    Ok(BuiltKernels(built))
}

fn list(cache_dir: &Path, available: bool) -> Result<KernelList> {
    let cached = cache::entries(cache_dir)?
        .into_iter()
        .map(|e| CachedKernel {
            last_used: cache::last_used(&cache::kernels_dir(cache_dir), &e.key)
                .map(|t| humantime::format_rfc3339_seconds(t).to_string()),
            kind: e.about.kind.clone(),
            what: e.about.what.clone(),
            version: e.about.version.clone(),
            from: e.about.suite.clone(),
            release: e.release,
            bytes: e.bytes,
            entry: e.key,
        })
        .collect();
    let archive = kernel::debian::Archive::at(cache_dir);
    let debs = archive.downloaded();
    let downloaded = DownloadedPackages {
        count: debs.len(),
        bytes: debs.iter().map(|d| cache::disk_usage(d)).sum(),
        dir: archive.debs_dir().to_path_buf(),
    };
    let trees = kernel::build::build_dirs(cache_dir)
        .into_iter()
        .map(|d| SourceTreeDirs { key: d.key, bytes: d.bytes, paths: d.paths })
        .collect();
    let offered = if available { Some(KernelSource::offered(cache_dir)?) } else { None };
    Ok(KernelList { cache: cache::kernels_dir(cache_dir), cached, downloaded, trees, available: offered })
}

fn fetch(cache_dir: &Path, kernels: &[String]) -> Result<FetchedKernels> {
    let mut fetched = Vec::new();
    for reference in kernels {
        let source = KernelSource::from_argument(&toml::Value::String(reference.clone()), cache_dir)?;
        if source.build().is_some() {
            return Err(fslab::exit::usage(anyhow::anyhow!(
                "{reference}: a kernel fslab builds is built with `fslab kernel build FILE`"
            )));
        }
        let artifacts = kernel::resolve(&source, cache_dir)?;
        fetched.push(FetchedKernel {
            reference: reference.clone(),
            kind: source.kind().to_string(),
            origin: source.origin(),
            release: artifacts.release,
            image: artifacts.image,
        });
    }
    Ok(FetchedKernels(fetched))
}

fn export(file: &Path, output: &Path, cache: &KernelCacheArg, cache_dir: &Path) -> Result<kernel::transfer::Moved> {
    fslab::sys::signals::install()?;
    let exp = load(file, cache)?;
    let mut sources = Vec::new();
    for v in &exp.variants {
        if let Some(spec) = &v.kernel {
            sources.push((v.name.clone(), spec.source.clone()));
        }
    }
    if sources.is_empty() {
        return Err(fslab::exit::usage(anyhow::anyhow!("{}: no variant boots a kernel of its own", file.display())));
    }
    kernel::transfer::export(&sources, cache_dir, output)
}

/// Read every store that used this cache (and `dbs`), then prune.
fn prune(
    cache_dir: &Path,
    dbs: &[StoreLocation],
    unused_for: Option<std::time::Duration>,
    remove: bool,
) -> Result<kernel::prune::Pruning> {
    let mut needs = kernel::prune::Needs::default();
    let recorded = kernel::prune::stores(cache_dir);
    let mut locations: Vec<(StoreLocation, bool)> = recorded.iter().map(|s| (StoreLocation::parse(s), true)).collect();
    for db in dbs {
        if !locations.iter().any(|(l, _)| l.to_string() == db.to_string()) {
            locations.push((db.clone(), false));
        }
    }
    for (location, was_recorded) in locations {
        let shown = location.to_string();
        if location.sqlite_path().is_some_and(|f| !f.exists()) && was_recorded {
            // A store deleted since: it needs nothing any more.
            kernel::prune::forget_store(cache_dir, &shown);
            continue;
        }
        match Store::open_existing(&location) {
            Ok(store) => {
                let n = store.kernel_needs(&mut needs)?;
                needs.read.push((shown, n));
            }
            Err(e) if !was_recorded => return Err(e),
            Err(e) => needs.unreadable.push((shown, format!("{e:#}"))),
        }
    }
    kernel::prune::prune(cache_dir, needs, unused_for, remove)
}

fn import(archive: &Path, cache_dir: &Path) -> Result<kernel::transfer::Moved> {
    kernel::transfer::import(archive, cache_dir)
}
