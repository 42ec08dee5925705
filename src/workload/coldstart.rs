//! `coldstart`: the squashfs boot case — many processes loading shared
//! libraries from a cold filesystem.
//!
//! **The tree** (generated once per `files`/`scale`/`compressibility`/seed
//! under the cache directory, then hard-linked into each testbed) resembles
//! a `/usr/lib`: `files` files (default 300) named `libfslabNNNN.so.M`, two
//! thirds at the top, the rest in ten `pkgN/` subdirectories. Sizes are
//! log-normal (median 120 KiB, σ = 1.5, so a long tail) clamped to
//! 10 KiB–20 MiB, then multiplied by `scale`; 300 files come to about
//! 110 MB. Contents are synthetic, not the host's libraries (so results do
//! not depend on what the host has installed), built to look like machine
//! code to a compressor ([`super::content`]'s code style): each 4 KiB block mixes
//! *code-like* bytes (a skewed byte distribution, which entropy coders
//! exploit, with short repeats of earlier bytes, which LZ matchers exploit),
//! zero padding and, for low targets, incompressible random bytes. The mix
//! is set so that gzip saves about `compressibility` of the bytes (default
//! 0.6: gzip packs the tree to ~40%, as it does real `.so` files), while
//! lz4 saves less and zstd/xz more, as on real libraries.
//!
//! **The measured part**, for each level K of `readers` (default
//! `[1, 2, 4]`): drop caches (`sync`, then `3` into
//! `/proc/sys/vm/drop_caches`; skipped with `cache = "warm"`), then fork K
//! reader processes. The files, in a seeded shuffled order, are dealt
//! round-robin to the readers. Each reader handles its files one after the
//! other like a dynamic loader: `open`, `mmap(PROT_READ, MAP_PRIVATE)` of the
//! whole file, touch the first page (the ELF header), then about 10% of the
//! pages at seeded scattered offsets (symbol and relocation lookups), then
//! every page in order (the sequential run), `munmap`, `close`.
//!
//! The readers are real processes (forked from fslab without exec, doing
//! only system calls and memory reads), so each has its own address space
//! and page faults like a loader, and each joins the testbed's cgroup: a
//! read throttle applies to them on cgroup v1 and v2 alike.
//!
//! **Metrics** per level: `coldstart-K/total_s` (all readers done),
//! `coldstart-K/p50_s` and `coldstart-K/p99_s` (nearest-rank percentiles of
//! the readers' completion times); lower is better. On read-only image
//! testbeds the runner adds `image_build_s`, `image_size_mb` and
//! `image_ratio` (see [`crate::testbed::image`]).

use std::ffi::CString;
use std::fs;
use std::ops::Range;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use toml::Spanned;

use rand_core::Rng;

use super::content::{self, ContentReader, Style};
use super::{check, BuildEnv, Kind, RunContext, Workload};
use crate::keys::Source;
use crate::metric::Metric;
use crate::sys::forked;

/// Most reader processes a level may run.
const MAX_READERS: i64 = 256;

/// `coldstart` keys as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColdstartKeys {
    files: Option<Spanned<i64>>,
    scale: Option<Spanned<f64>>,
    compressibility: Option<Spanned<f64>>,
    readers: Option<Spanned<Vec<i64>>>,
}

/// Library-loading cold start: `readers` processes mmap a /usr/lib-like tree.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ColdstartParams {
    pub files: u64,
    pub scale: f64,
    pub compressibility: f64,
    pub readers: Vec<u32>,
}

impl Kind for ColdstartParams {
    const NAME: &'static str = "coldstart";
    const ABOUT: &'static str = "mmap a /usr/lib-like tree after a cache drop, `readers = [1, 2, 4]`";
    const METRICS: &'static str = "`coldstart-K/total_s`, `p50_s`, `p99_s`";
    const READ_ONLY: bool = true;
    type Keys = ColdstartKeys;

    fn resolve(keys: ColdstartKeys, src: &Source, _at: Range<usize>) -> Result<Self> {
        Ok(ColdstartParams {
            files: check::count(src, keys.files.as_ref(), "files", 300, 1..=100_000)? as u64,
            scale: check::scale(src, keys.scale.as_ref())?,
            compressibility: check::unit_fraction(src, keys.compressibility.as_ref(), "compressibility", 0.6)?,
            readers: check::levels(src, keys.readers.as_ref(), "readers", &[1, 2, 4], "[1, 2, 4]", MAX_READERS)?,
        })
    }

    fn quick(&mut self) {
        self.readers.truncate(2);
        self.files = self.files.min(60);
    }

    fn build(&self, env: &BuildEnv) -> Box<dyn Workload> {
        Box::new(Coldstart::new(self.files, self.scale, self.compressibility, self.readers.clone(), env.cold, env.seed))
    }
}

/// Directory holding the tree, inside the testbed (and the image).
pub const TREE: &str = "coldstart";

/// Bumped whenever the tree for given parameters changes.
const FORMAT_VERSION: &[u8] = b"fslab-coldstart-v3";

const MIN_SIZE: f64 = 10.0 * 1024.0;
const MAX_SIZE: f64 = 20.0 * 1024.0 * 1024.0;
const MEDIAN_SIZE: f64 = 120.0 * 1024.0;
const SIGMA: f64 = 1.5;

/// The `coldstart` workload.
pub struct Coldstart {
    files: u64,
    scale: f64,
    compressibility: f64,
    readers: Vec<u32>,
    /// Drop caches before every readers level.
    cold: bool,
    seed: u64,
    /// The generated tree in the cache, once `prepare_inputs` ran.
    tree: Option<PathBuf>,
}

/// One file of the tree: path relative to the tree root and size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeFile {
    pub path: String,
    pub size: u64,
}

impl Coldstart {
    /// A coldstart workload; `cold` drops caches before each readers level.
    pub fn new(files: u64, scale: f64, compressibility: f64, readers: Vec<u32>, cold: bool, seed: u64) -> Coldstart {
        Coldstart { files, scale, compressibility, readers, cold, seed, tree: None }
    }

    /// The files of the tree, deterministic in the parameters and seed.
    pub fn manifest(&self) -> Vec<TreeFile> {
        let mut rng = content::rng("fslab-coldstart-manifest", self.seed, b"");
        (0..self.files)
            .map(|i| {
                // Box-Muller: one normal deviate per file.
                let (u1, u2) = (content::unit(&mut rng), content::unit(&mut rng));
                let normal = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                let bytes = (MEDIAN_SIZE * (SIGMA * normal).exp()).clamp(MIN_SIZE, MAX_SIZE) * self.scale;
                let name = format!("libfslab{i:04}.so.{}", i % 7 + 1);
                let path = if i % 3 == 2 { format!("pkg{}/{name}", (i / 3) % 10) } else { name };
                TreeFile { path, size: (bytes.round() as u64).max(1) }
            })
            .collect()
    }

    /// Name of the cached tree for these parameters.
    fn tree_name(&self) -> String {
        let mut h = Sha256::new();
        h.update(FORMAT_VERSION);
        h.update(self.files.to_le_bytes());
        h.update(self.scale.to_bits().to_le_bytes());
        h.update(self.compressibility.to_bits().to_le_bytes());
        h.update(self.seed.to_le_bytes());
        let hex: String = h.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect();
        format!("coldstart-{hex}")
    }

    /// Generate the tree under `cache_dir` unless it is already there.
    fn ensure_tree(&mut self, cache_dir: &Path) -> Result<PathBuf> {
        let path = cache_dir.join(self.tree_name());
        if !path.is_dir() {
            fs::create_dir_all(cache_dir).with_context(|| format!("creating {}", cache_dir.display()))?;
            // Built under a unique temporary name and renamed, so a crash or a
            // concurrent builder never leaves a half tree under the final name;
            // the marker name lets `fslab cleanup` remove a killed fslab's.
            let tmp = cache_dir.join(format!(".{}.{}.tmp", self.tree_name(), crate::sys::marker::unique_name()));
            let built = self.write_tree(&tmp);
            let renamed = built.and_then(|()| match fs::rename(&tmp, &path) {
                Ok(()) => Ok(()),
                // Someone else finished the same tree first: theirs is identical.
                Err(_) if path.is_dir() => Ok(()),
                Err(e) => Err(e).with_context(|| format!("renaming {} to {}", tmp.display(), path.display())),
            });
            if tmp.exists() {
                let _ = fs::remove_dir_all(&tmp);
            }
            renamed?;
        }
        self.tree = Some(path.clone());
        Ok(path)
    }

    fn write_tree(&self, root: &Path) -> Result<()> {
        fs::create_dir(root).with_context(|| format!("creating {}", root.display()))?;
        for file in self.manifest() {
            crate::sys::signals::check_cancelled()?;
            let path = root.join(&file.path);
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
            }
            let mut bytes =
                ContentReader::new(Style::Code, self.compressibility, self.seed, file.path.as_bytes(), file.size);
            let mut out = fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
            std::io::copy(&mut bytes, &mut out)
                .and_then(|_| out.sync_all())
                .with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(())
    }

    /// Check that `root` holds every file of the manifest with its size.
    fn verify(&self, root: &Path) -> Result<()> {
        for file in self.manifest() {
            let path = root.join(&file.path);
            let meta = fs::metadata(&path).with_context(|| format!("coldstart tree: {}", path.display()))?;
            if meta.len() != file.size {
                bail!("coldstart tree: {} has {} bytes, expected {}", path.display(), meta.len(), file.size);
            }
        }
        Ok(())
    }

    /// The manifest in the seeded reading order, dealt round-robin to `readers`.
    fn shares(&self, root: &Path, readers: usize) -> Result<Vec<Vec<ReadJob>>> {
        let mut files = self.manifest();
        let mut rng = content::rng("fslab-coldstart-order", self.seed, b"");
        for i in (1..files.len()).rev() {
            files.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
        }
        let mut shares: Vec<Vec<ReadJob>> = (0..readers).map(|_| Vec::new()).collect();
        for (i, file) in files.into_iter().enumerate() {
            let path = root.join(&file.path);
            let cpath = CString::new(path.as_os_str().as_bytes())
                .with_context(|| format!("{}: NUL in path", path.display()))?;
            let job = ReadJob { path: cpath, size: file.size as usize, seed: rng.next_u64() | 1 };
            shares[i % readers].push(job);
        }
        Ok(shares)
    }
}

/// One file a reader loads; everything precomputed so the forked child
/// never allocates.
struct ReadJob {
    path: CString,
    size: usize,
    seed: u64,
}

/// Copy (hard-link where possible) the tree at `from` to a new `to`.
fn link_tree(from: &Path, to: &Path) -> Result<()> {
    fs::create_dir(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry.with_context(|| format!("reading {}", from.display()))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type()?.is_dir() {
            link_tree(&src, &dst)?;
        } else if fs::hard_link(&src, &dst).is_err() {
            // Another filesystem than the cache (EXDEV): copy instead.
            fs::copy(&src, &dst).with_context(|| format!("copying {} to {}", src.display(), dst.display()))?;
        }
    }
    Ok(())
}

/// Nearest-rank percentile of sorted values (0 for none).
fn percentile(sorted: &[f64], p: f64) -> f64 {
    crate::stats::percentile::nearest_rank(sorted, p).unwrap_or(0.0)
}

/// Exit codes of a reader process.
const EXIT_OPEN: i32 = 2;
const EXIT_MMAP: i32 = 3;

/// One reader's share of the tree.
struct Share<'a> {
    jobs: &'a [ReadJob],
    page: usize,
}

/// The body of a forked reader (see [`crate::sys::forked::run`]). Only
/// system calls and reads of memory prepared before the fork: no
/// allocation, no locks, no panics.
///
/// # Safety
/// Must only be called in a freshly forked child, which then `_exit`s.
unsafe fn reader_child(share: &Share) -> i32 {
    let (jobs, page) = (share.jobs, share.page);
    let mut sum: u8 = 0;
    for job in jobs {
        let fd = libc::open(job.path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return EXIT_OPEN;
        }
        if job.size == 0 {
            libc::close(fd);
            continue;
        }
        let map = libc::mmap(std::ptr::null_mut(), job.size, libc::PROT_READ, libc::MAP_PRIVATE, fd, 0);
        if map == libc::MAP_FAILED {
            libc::close(fd);
            return EXIT_MMAP;
        }
        let base = map as *const u8;
        let pages = job.size.div_ceil(page);
        // Header, then ~10% scattered pages, then the sequential run.
        sum ^= std::ptr::read_volatile(base);
        let mut x = job.seed;
        for _ in 0..pages / 10 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let p = ((x >> 33) as usize) % pages;
            sum ^= std::ptr::read_volatile(base.add(p * page));
        }
        for p in 0..pages {
            sum ^= std::ptr::read_volatile(base.add(p * page));
        }
        libc::munmap(map, job.size);
        libc::close(fd);
    }
    std::hint::black_box(sum);
    0
}

/// Fork one reader per share, wait for all; return each reader's
/// completion time since the first fork, in share order.
fn run_readers(ctx: &RunContext, shares: &[Vec<ReadJob>]) -> Result<Vec<f64>> {
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok().filter(|&p| p > 0).unwrap_or(4096);
    let procs = match ctx.cgroup_procs() {
        Some(p) => Some(CString::new(p.as_os_str().as_bytes()).context("cgroup path")?),
        None => None,
    };
    let shares: Vec<Share> = shares.iter().map(|jobs| Share { jobs, page }).collect();
    let n = shares.len();
    let stop = forked::deadline_or_signal(ctx.deadline());
    let failed = |k: usize, ended: forked::Ended| {
        let why = match ended {
            forked::Ended::Exited(EXIT_OPEN) => "could not open a file".to_string(),
            forked::Ended::Exited(EXIT_MMAP) => "could not mmap a file".to_string(),
            forked::Ended::Exited(forked::EXIT_CGROUP) => "could not join the testbed's cgroup".to_string(),
            forked::Ended::Exited(code) => format!("exited with code {code}"),
            forked::Ended::Signalled(_) => "was killed by a signal".to_string(),
        };
        anyhow::anyhow!("coldstart reader {} of {n} {why}", k + 1)
    };
    // SAFETY: `reader_child` only makes system calls and reads the shares,
    // which were built before the fork.
    let exits = unsafe { forked::run("coldstart readers", &shares, procs.as_ref(), reader_child, &stop, &failed)? };
    Ok(exits.iter().map(|e| e.elapsed.as_secs_f64()).collect())
}

impl Workload for Coldstart {
    fn kind(&self) -> &'static str {
        "coldstart"
    }

    fn prepare_inputs(&mut self, cache_dir: &Path) -> Result<()> {
        self.ensure_tree(cache_dir).map(drop)
    }

    fn footprint(&self) -> Option<u64> {
        Some(self.manifest().iter().map(|f| f.size).sum())
    }

    fn populate(&mut self, dir: &Path) -> Result<()> {
        let tree = self.tree.clone().context("coldstart: populate called before prepare_inputs")?;
        link_tree(&tree, &dir.join(TREE))
    }

    fn prepare(&mut self, ctx: &RunContext) -> Result<()> {
        let root = ctx.dir.join(TREE);
        if !root.exists() {
            // A writable testbed: copy the tree in (a read-only image has it already).
            let tree = match self.tree.clone() {
                Some(t) => t,
                None => self.ensure_tree(&ctx.cache_dir)?,
            };
            copy_tree(&tree, &root)?;
        }
        self.verify(&root)
    }

    fn run(&mut self, ctx: &RunContext) -> Result<Vec<Metric>> {
        let root = ctx.dir.join(TREE);
        let mut metrics = Vec::new();
        for &k in &self.readers {
            let shares = self.shares(&root, k as usize)?;
            if self.cold {
                crate::sys::caches::drop_caches()?;
            }
            let times = run_readers(ctx, &shares).with_context(|| format!("coldstart with {k} readers"))?;
            let mut sorted = times.clone();
            sorted.sort_by(f64::total_cmp);
            let total = sorted.last().copied().unwrap_or(0.0);
            metrics.push(Metric::lower(&format!("coldstart-{k}/total_s"), "s", total));
            metrics.push(Metric::lower(&format!("coldstart-{k}/p50_s"), "s", percentile(&sorted, 0.50)));
            metrics.push(Metric::lower(&format!("coldstart-{k}/p99_s"), "s", percentile(&sorted, 0.99)));
        }
        Ok(metrics)
    }
}

/// Copy the tree at `from` into a new directory `to` (a real copy: the
/// testbed is another filesystem).
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    fs::create_dir(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry.with_context(|| format!("reading {}", from.display()))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type()?.is_dir() {
            copy_tree(&src, &dst)?;
        } else {
            fs::copy(&src, &dst).with_context(|| format!("copying {} to {}", src.display(), dst.display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_is_deterministic_long_tailed_and_bounded() {
        let w = Coldstart::new(300, 1.0, 0.6, vec![1], true, 7);
        let m = w.manifest();
        assert_eq!(m, w.manifest());
        assert_eq!(m.len(), 300);
        let sizes: Vec<u64> = m.iter().map(|f| f.size).collect();
        assert!(sizes.iter().all(|&s| (10 * 1024..=20 << 20).contains(&s)));
        let total: u64 = sizes.iter().sum();
        let mut sorted = sizes.clone();
        sorted.sort_unstable();
        let median = sorted[150];
        // Long tail: the mean is well above the median, the largest far above.
        assert!((total / 300) as f64 > 1.8 * median as f64, "mean {} median {median}", total / 300);
        assert!(sorted[299] > 20 * median);
        assert!((50 << 20..250 << 20).contains(&total), "{total}");
        assert!(m.iter().any(|f| f.path.starts_with("pkg")));
        assert_ne!(m, Coldstart::new(300, 1.0, 0.6, vec![1], true, 8).manifest());
    }

    #[test]
    fn shares_split_every_file_once() {
        let w = Coldstart::new(40, 0.1, 0.6, vec![1], true, 3);
        let shares = w.shares(Path::new("/x"), 3).unwrap();
        assert_eq!(shares.len(), 3);
        let mut paths: Vec<_> = shares.iter().flatten().map(|j| j.path.to_string_lossy().into_owned()).collect();
        paths.sort();
        paths.dedup();
        assert_eq!(paths.len(), 40);
    }

    #[test]
    fn percentile_is_nearest_rank() {
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 0.5), 2.0);
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 0.99), 4.0);
        assert_eq!(percentile(&[5.0], 0.5), 5.0);
    }

    #[test]
    fn readers_load_a_tree_and_report_times() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = Coldstart::new(12, 0.05, 0.6, vec![1, 3], false, 5);
        w.prepare_inputs(&dir.path().join("cache")).unwrap();
        let work = dir.path().join("work");
        fs::create_dir(&work).unwrap();
        let ctx = RunContext::new(&work, dir.path().join("cache"));
        w.prepare(&ctx).unwrap();
        let metrics = w.run(&ctx).unwrap();
        assert_eq!(metrics.len(), 6);
        assert!(metrics.iter().all(|m| m.value > 0.0 && m.value < 10.0 && !m.higher_is_better), "{metrics:?}");
        // A missing file is a clear error from the reader.
        fs::remove_file(work.join(TREE).join(&w.manifest()[0].path)).unwrap();
        let err = format!("{:#}", w.run(&ctx).unwrap_err());
        assert!(err.contains("could not open"), "{err}");
    }
}
