//! The one pipeline that builds kernels from source, whatever the source:
//! a distribution's source package, a git repository at a revision, a
//! kernel tree of the user's (each a [`Tree`] of its kind's file in
//! [`super::source`]), with the config a case needs:
//! `kernel = { source | git, config = "minimal", set = {…}, patches = […] }`.
//!
//! Two steps, so a bad `set` fails when the file is read, before any run:
//!
//! 1. [`prepare`] (seconds once the tree is there): the tree is made ready
//!    by its kind (unpacked and patched once; checked out at the revision
//!    in fslab's own clone), then the config is made in the tree's config
//!    directory (`cfg-<key>/`): the base (`minimal`: `make tinyconfig` +
//!    [`MINIMAL`] merged by Kbuild's own `scripts/kconfig/merge_config.sh`;
//!    `debian`: the matching Debian image's config; or a file), then the
//!    `set` fragment (a choice member set to `y` clears its siblings), then
//!    `make olddefconfig`. Every `set` option is read back
//!    ([`super::kconfig`]). The final config is kept under
//!    `<cache>/kernel-builds/configs/<sha256>.config`; the same request on
//!    the same tree content is answered from a memo, without the tree.
//! 2. [`build`] (minutes): `make bzImage` with all cores and ccache in one
//!    object directory per tree (`obj-<key>/`, so a variant that changes
//!    one option, or a bisection step that changes a few files, rebuilds
//!    only what depends on it), contained in its own process group (killed
//!    on error, panic and signal), progress (phase, objects, ETA) on
//!    stderr, the log and a [`BuildRecord`] kept. A tree's first build
//!    starts from a copy of the objects of another tree of the same kernel
//!    version when there is one ([`seed_objects`]). The image lands in the
//!    kernel cache entry keyed by the tree's content, the final config and
//!    the compiler (`<cache>/kernels/<key>/`, with its `System.map`), so a
//!    second experiment, or a resumed bisection, boots it unbuilt.
//!
//! One lock per tree (`.lock-tree-<key>`) covers making it ready, its
//! config and its build: a git tree moves between revisions, so nobody may
//! read it while another process checks out or builds.
//!
//! Everything is built in (`minimal` has no modules), so the guest needs no
//! module staging; kernels before 6.0 mount their root through virtme-ng's
//! initramfs (see `vm::session`), which is why `VIRTIO_FS` is built in.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::kconfig::{self, Kconfig};
use super::outlook::BuildRecord;
use super::KernelPackage;
use crate::sys::contain::{kill_group, spawn_contained};
use crate::sys::signals::cancelled;

/// The `minimal` config fragment (each line's reason in its comment).
pub const MINIMAL: &str = include_str!("minimal.config");

/// Where the source trees, object directories, configs and logs live.
pub fn builds_dir(cache: &Path) -> PathBuf {
    cache.join("kernel-builds")
}

/// The first 16 hex digits of a tree key: how its directories are named.
pub fn short_key(tree_key: &str) -> &str {
    &tree_key[..tree_key.len().min(16)]
}

/// A tree's object directory.
pub fn object_dir(cache: &Path, tree_key: &str) -> PathBuf {
    builds_dir(cache).join(format!("obj-{}", short_key(tree_key)))
}

/// The lock that covers a tree, its config directory and its objects.
/// Not named `.tree-<key>.lock`: that is the lock [`super::cache::entry`]
/// takes to unpack a package's tree (`tree-<key>`), which happens while
/// this one is held.
pub fn tree_lock(builds: &Path, tree_key: &str, what: &str) -> Result<super::cache::Held> {
    super::cache::lock_for(&builds.join(format!(".lock-tree-{}", short_key(tree_key))), what)
}

/// A source tree's working directories under [`builds_dir`]: its tree
/// (an unpacked package, a clone), its object directory and its config
/// work directory, which share the first 16 hex digits of the tree's key.
#[derive(Clone, Debug)]
pub struct BuildDirs {
    pub key: String,
    pub paths: Vec<PathBuf>,
    pub bytes: u64,
}

/// The prefixes of a tree's working directories.
const TREE_DIRS: [&str; 4] = ["tree-", "git-", "obj-", "cfg-"];

/// Every source tree's working directories in `cache`, by key.
pub fn build_dirs(cache: &Path) -> Vec<BuildDirs> {
    let mut by_key: BTreeMap<String, BuildDirs> = BTreeMap::new();
    for entry in std::fs::read_dir(builds_dir(cache)).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(key) = TREE_DIRS.iter().find_map(|p| name.strip_prefix(p)) else { continue };
        let dirs = by_key.entry(key.to_string()).or_insert_with(|| BuildDirs {
            key: key.to_string(),
            paths: Vec::new(),
            bytes: 0,
        });
        dirs.bytes += super::cache::disk_usage(&entry.path());
        dirs.paths.push(entry.path());
    }
    by_key.into_values().collect()
}

/// Remove a source tree's working directories, under the lock a build of
/// that tree holds (so a running build is waited for, not cut short).
pub fn remove_build_dirs(cache: &Path, dirs: &BuildDirs) -> Result<()> {
    let builds = builds_dir(cache);
    let _lock = tree_lock(&builds, &dirs.key, "removing its tree")?;
    for path in &dirs.paths {
        std::fs::remove_dir_all(path).with_context(|| format!("removing {}", path.display()))?;
    }
    Ok(())
}

/// A source tree the pipeline builds from: what each built kind gives it.
pub trait Tree {
    /// As the user named it: `debian:5.10`, a path, `/src/linux @ v5.8`.
    fn reference(&self) -> String;
    /// Names the one tree, config directory and object directory this
    /// source builds in: every revision of a git repository shares them.
    fn tree_key(&self) -> String;
    /// Names what the ready tree holds (a package and its patches, a commit
    /// and its patches). None when it can change under the same name (the
    /// user's own tree): its image is then keyed by its content once built.
    fn content_key(&self) -> Option<String>;
    /// Make the tree hold what it should (unpack and patch it, check out the
    /// revision) and return its path. Called with the tree's lock held.
    fn ready(&self, builds: &Path) -> Result<PathBuf>;
    /// The patches it applies: SHA-256 and path, in order.
    fn patches(&self) -> Vec<(String, String)>;
    /// The archive package it came from, when it came from one.
    fn package(&self) -> Option<KernelPackage> {
        None
    }
    /// The config of the distribution image built from the same source
    /// (`config = "debian"`), for the kinds that have one.
    fn distribution_config(&self, _version: &str, _cache: &Path) -> Result<PathBuf> {
        bail!("config = \"debian\" needs a `debian:` source (this tree has no matching Debian image)")
    }
}

/// The config a build starts from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ConfigBase {
    /// `make tinyconfig` + [`MINIMAL`].
    Minimal,
    /// The matching Debian image's config.
    Debian,
    /// A config file (absolute).
    File(PathBuf),
}

impl ConfigBase {
    pub fn shown(&self) -> String {
        match self {
            ConfigBase::Minimal => "minimal".into(),
            ConfigBase::Debian => "debian".into(),
            ConfigBase::File(p) => p.display().to_string(),
        }
    }
}

/// The config half of what the user asked to build (the tree is the other).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BuildRequest {
    pub config: ConfigBase,
    /// Symbol (without `CONFIG_`) -> value (`y`, `n`, `m`, text, number).
    pub set: BTreeMap<String, String>,
}

/// A build whose config is prepared and checked: what [`build`] needs, and
/// what the experiment records about how its kernel was built.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelBuild {
    /// The tree as the user named it (`debian:5.10`, a path, a repository and revision).
    pub source: String,
    /// The Debian source package (`linux-source-5.10 5.10.262-1`), when from one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<KernelPackage>,
    /// `minimal`, `debian` or the file.
    pub config_base: String,
    pub set: BTreeMap<String, String>,
    /// SHA-256 of each patch, in order, with its path.
    #[serde(default)]
    pub patches: Vec<(String, String)>,
    /// Kernel version of the tree (`5.10.262`).
    pub version: String,
    /// `make kernelrelease`.
    pub release: String,
    /// SHA-256 of the final `.config`.
    pub config_sha256: String,
    /// `gcc --version`, first line.
    pub compiler: String,
    /// The source tree built (an unpacked package, fslab's clone, the user's tree).
    pub tree: PathBuf,
    /// Key of the source tree, naming its object directory.
    pub tree_key: String,
    /// Key of the built image in the kernel cache: tree content, config,
    /// compiler (empty for a user's tree until built).
    pub key: String,
    /// Was the image in the cache when the file was read (plans say when a
    /// variant will need a long build)?
    #[serde(skip)]
    pub cached: bool,
    /// The file its prepared request is remembered in (`prepared/…`), when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memo: Option<String>,
    /// What was asked for, so a bisection can prepare a build one option
    /// away (not stored: the fields above say what was built).
    #[serde(skip)]
    pub request: Option<Box<BuildRequest>>,
}

impl KernelBuild {
    /// The final config file.
    pub fn config_path(&self, cache: &Path) -> PathBuf {
        builds_dir(cache).join("configs").join(format!("{}.config", self.config_sha256))
    }

    /// Is the image already in the cache (no build needed)?
    pub fn is_built(&self, cache: &Path) -> bool {
        !self.key.is_empty() && super::cache::kernels_dir(cache).join(&self.key).is_dir()
    }

    /// Where its objects are built (`System.map`, `vmlinux`, the objects
    /// that map symbols to source files).
    pub fn object_dir(&self, cache: &Path) -> PathBuf {
        object_dir(cache, &self.tree_key)
    }

    /// One line for plans and progress: `debian:5.10 minimal SQUASHFS_DECOMP_SINGLE=y`.
    pub fn shown(&self) -> String {
        let mut s = format!("{} {}", self.source, self.config_base);
        for (k, v) in &self.set {
            s.push_str(&format!(" {k}={v}"));
        }
        s
    }
}

/// The compiler the kernel is built with: `ccache gcc` when ccache is there.
fn compiler_command() -> String {
    if which("ccache") {
        "ccache gcc".into()
    } else {
        "gcc".into()
    }
}

fn which(tool: &str) -> bool {
    std::env::var_os("PATH").map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file())).unwrap_or(false)
}

fn compiler_version() -> Result<String> {
    let out = Command::new("gcc").arg("--version").output().context("running gcc --version (is gcc installed?)")?;
    Ok(String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or("").trim().to_string())
}

fn sha256_str(text: &str) -> String {
    super::sha256_str(text)
}

/// What building a kernel needs on the host, each with the Debian package
/// that provides it: programs Kbuild runs, and headers `objtool` (libelf)
/// and the certificate tools (OpenSSL) compile against. Checked before the
/// first `make`, so a fresh machine gets one error naming all of them
/// instead of a make failure deep in a log.
const BUILD_NEEDS: &[(&str, &str)] = &[
    ("make", "make"),
    ("gcc", "gcc"),
    ("flex", "flex"),
    ("bison", "bison"),
    ("bc", "bc"),
    ("/usr/include/gelf.h", "libelf-dev"),
    ("/usr/include/openssl/ssl.h", "libssl-dev"),
];

/// The host lacks what a kernel build needs (exit 3: the environment, not
/// the experiment file).
#[derive(Debug)]
pub struct BuildToolsMissing(pub Vec<String>);

impl std::fmt::Display for BuildToolsMissing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "building a kernel needs {} (run `sudo scripts/install-vm-tools`, which installs them)",
            self.0.join(", ")
        )
    }
}

impl std::error::Error for BuildToolsMissing {}

/// What of [`BUILD_NEEDS`] (and `patch` when there are patches) is missing,
/// as "what (Debian package)".
pub fn missing_build_tools(with_patches: bool) -> Vec<String> {
    let patch = [("patch", "patch")];
    let needs = BUILD_NEEDS.iter().chain(if with_patches { &patch[..] } else { &[] });
    needs
        .filter(|(what, _)| if what.starts_with('/') { !Path::new(what).exists() } else { !which(what) })
        .map(|(what, package)| format!("{what} ({package})"))
        .collect()
}

/// A `set` this version cannot honour (the experiment file is wrong: exit 2).
#[derive(Debug)]
pub struct SetRejected(pub String);

impl std::fmt::Display for SetRejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SetRejected {}

/// Make the tree ready and the final config, and check every `set`
/// option. Errors name the option and why (the caller adds file and key).
pub fn prepare(tree: &dyn Tree, req: &BuildRequest, cache: &Path) -> Result<KernelBuild> {
    let patches = tree.patches();
    let builds = builds_dir(cache);
    crate::sys::trusted::ensure_dir(&builds).context("the kernel cache")?;
    let tree_key = tree.tree_key();
    // No compiler here (a machine that only boots kernels built elsewhere):
    // a memoized build whose image is cached still serves.
    let compiler = compiler_version().ok();
    // The same request on the same tree content gives the same config:
    // answered from the last time, without the tree (seconds of
    // olddefconfig saved per variant, a checkout per step of a bisection).
    let memo = prepared_memo(tree, req, &builds)?;
    if let Some(found) = memo.as_deref().and_then(|m| fs::read_to_string(m).ok()) {
        if let Ok(mut b) = serde_json::from_str::<KernelBuild>(&found) {
            let usable = b.config_path(cache).is_file() && b.tree_key == tree_key && b.patches == patches;
            let same_compiler = compiler.as_deref() == Some(b.compiler.as_str());
            b.cached = b.is_built(cache);
            // Built with another compiler (imported, or before an upgrade):
            // boot that image rather than build again.
            if usable && (same_compiler || b.cached) {
                b.request = Some(Box::new(req.clone()));
                return Ok(b);
            }
        }
    }
    let missing = missing_build_tools(!patches.is_empty());
    if !missing.is_empty() {
        return Err(BuildToolsMissing(missing).into());
    }
    let compiler = compiler_version()?;
    let _lock = tree_lock(&builds, &tree_key, &format!("preparing the config of {}", tree.reference()))?;
    let path = tree.ready(&builds)?;
    let version = tree_version(&path)?;
    let kconfig = Kconfig::read(&path)?;
    let problems = kconfig::check_symbols(&kconfig, &version, &req.set);
    if !problems.is_empty() {
        return Err(SetRejected(problems.join("\n")).into());
    }

    // The config, in the tree's config directory (the object directory
    // keeps its own `.config` of the last build): Kconfig's tools are
    // compiled there once.
    let obj = builds.join(format!("cfg-{}", short_key(&tree_key)));
    fs::create_dir_all(&obj)?;
    for stale in [".config", ".config.old", "fslab-minimal.config", "fslab-set.config"] {
        let _ = fs::remove_file(obj.join(stale));
    }
    let obj = obj.as_path();
    let cc = compiler_command();
    let make = |args: &[&str]| -> Result<()> { run_make(&path, obj, &cc, args, Duration::from_secs(600)) };
    match &req.config {
        ConfigBase::Minimal => {
            make(&["tinyconfig"])?;
            let frag = obj.join("fslab-minimal.config");
            fs::write(&frag, strip_comments(MINIMAL))?;
            merge(&path, obj, &frag)?;
        }
        ConfigBase::Debian => {
            let base = tree.distribution_config(&version, cache)?;
            fs::copy(&base, obj.join(".config"))
                .with_context(|| format!("copying Debian's config {}", base.display()))?;
        }
        ConfigBase::File(file) => {
            fs::copy(file, obj.join(".config")).with_context(|| format!("copying config {}", file.display()))?;
        }
    }
    if !req.set.is_empty() {
        let frag = obj.join("fslab-set.config");
        fs::write(&frag, kconfig::set_fragment(&kconfig, &req.set))?;
        merge(&path, obj, &frag)?;
    }
    make(&["olddefconfig"])?;
    let final_text = fs::read_to_string(obj.join(".config")).context("reading the final .config")?;
    let problems = kconfig::check_readback(&kconfig, &version, &req.set, &kconfig::parse_config(&final_text));
    if !problems.is_empty() {
        return Err(SetRejected(problems.join("\n")).into());
    }
    let release = make_output(&path, obj, &cc, &["-s", "kernelrelease"])?;
    let config_sha256 = sha256_str(&final_text);
    let configs = builds.join("configs");
    fs::create_dir_all(&configs)?;
    let kept = configs.join(format!("{config_sha256}.config"));
    if !kept.is_file() {
        let tmp = configs.join(format!(".{config_sha256}.{}", std::process::id()));
        fs::write(&tmp, &final_text)?;
        fs::rename(&tmp, &kept)?;
    }
    // A user's tree changes under us: its image is keyed once built (see `build`).
    let key = tree
        .content_key()
        .map(|content| sha256_str(&format!("build\0{content}\0{config_sha256}\0{compiler}")))
        .unwrap_or_default();
    let mut prepared = KernelBuild {
        source: tree.reference(),
        package: tree.package(),
        config_base: req.config.shown(),
        set: req.set.clone(),
        patches,
        version,
        release,
        config_sha256,
        compiler,
        tree: path,
        tree_key,
        key,
        cached: false,
        memo: None,
        request: Some(Box::new(req.clone())),
    };
    prepared.cached = prepared.is_built(cache);
    if let Some(m) = memo {
        prepared.memo = m.file_name().map(|n| n.to_string_lossy().into_owned());
        let tmp = m.with_extension(format!("{}.tmp", std::process::id()));
        fs::write(&tmp, serde_json::to_string_pretty(&prepared)?)?;
        fs::rename(&tmp, &m)?;
    }
    Ok(prepared)
}

/// Where a prepared request is remembered: keyed by the tree's content,
/// the base config's content and the `set` (the compiler it was made with
/// is in it). None for what can change under the same request: a user's
/// tree, or `config = "debian"` (the matching image may get a newer revision).
fn prepared_memo(tree: &dyn Tree, req: &BuildRequest, builds: &Path) -> Result<Option<PathBuf>> {
    let Some(content) = tree.content_key() else { return Ok(None) };
    let base = match &req.config {
        ConfigBase::Debian => return Ok(None),
        ConfigBase::Minimal => format!("minimal\0{MINIMAL}"),
        ConfigBase::File(p) => format!("file\0{}", super::sha256_file(p)?),
    };
    let set: Vec<String> = req.set.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let key = sha256_str(&format!("prepared\0{content}\0{base}\0{}", set.join("\0")));
    let dir = builds.join("prepared");
    fs::create_dir_all(&dir)?;
    Ok(Some(dir.join(format!("{key}.json"))))
}

/// Build `b` from `tree` (or find it built): its image in the kernel cache.
pub fn build(tree: &dyn Tree, b: &KernelBuild, cache: &Path) -> Result<super::KernelArtifacts> {
    let kernels = super::cache::kernels_dir(cache);
    let builds = builds_dir(cache);
    let obj = object_dir(cache, &b.tree_key);
    let what = format!("building kernel {} ({})", b.release, b.shown());
    let key = if b.key.is_empty() {
        // A user's tree: make decides what is stale; the image is keyed by content.
        let _lock = tree_lock(&builds, &b.tree_key, &what)?;
        let path = tree.ready(&builds)?;
        let (image, _) = make_bzimage(b, &path, cache, &obj)?;
        sha256_str(&format!("tree-build\0{}\0{}", super::sha256_file(&image)?, b.config_sha256))
    } else {
        b.key.clone()
    };
    let root = super::cache::entry(&kernels, &key, |tmp| {
        let _lock = tree_lock(&builds, &b.tree_key, &what)?;
        let path = tree.ready(&builds)?;
        seed_objects(&path, b, &builds, &obj)?;
        let (image, record) = make_bzimage(b, &path, cache, &obj)?;
        let boot = tmp.join("boot");
        fs::create_dir(&boot)?;
        let release = super::bzimage::read_release(&image)?;
        fs::copy(&image, boot.join(format!("vmlinuz-{release}")))?;
        fs::copy(obj.join(".config"), boot.join(format!("config-{release}")))?;
        // Where the profile finds the kernel's symbols, as in a Debian package.
        let map = obj.join("System.map");
        if map.is_file() {
            fs::copy(&map, boot.join(format!("System.map-{release}")))?;
        }
        fs::copy(obj.join(BUILD_LOG), tmp.join(BUILD_LOG))?;
        if let Some(record) = record {
            record.write(tmp)?;
        }
        fs::write(tmp.join(BUILD_INFO), serde_json::to_string_pretty(b)?)?;
        Ok(())
    })?;
    let image = fs::read_dir(root.join("boot"))?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-")))
        .context("built kernel entry without an image")?;
    let release = super::bzimage::read_release(&image)?;
    let config = root.join(format!("boot/config-{release}"));
    Ok(super::KernelArtifacts {
        sha256: super::sha256_file(&image)?,
        image,
        modules_dir: None,
        config: config.is_file().then_some(config),
        release,
        source: b.shown(),
        guest_dirs: Vec::new(),
        package: None,
        build: Some(b.clone()),
    })
}

/// The files that let another machine read `b`'s variant as prepared
/// without its tree: the memo of its request and its final config.
pub fn prepared_files(b: &KernelBuild, cache: &Path) -> Vec<PathBuf> {
    let memo = b.memo.as_ref().map(|m| builds_dir(cache).join("prepared").join(m));
    memo.into_iter().chain([b.config_path(cache)]).filter(|p| p.is_file()).collect()
}

/// What the last [`build`] of an image did, from its cache entry: the
/// record when it compiled anything (None: it was built before, or reused).
pub fn entry_record(cache: &Path, key: &str) -> Option<BuildRecord> {
    BuildRecord::read(&super::cache::kernels_dir(cache).join(key))
}

/// A tree's first build starts from a copy of the finished objects of
/// another tree of the same kernel version (the newest), so Kbuild compiles
/// only what differs: minutes instead of a cold build. A git repository's
/// tree seeded from the Debian source it was made from, or a patched
/// Debian tree from the unpatched one, recompiles only the files that
/// differ.
///
/// Why a copy and not ccache: with `O=` Kbuild gives gcc absolute paths of
/// the source tree, and each tree has its own directory, so no compile of
/// one tree hits ccache entries of another (not even with
/// `CCACHE_BASEDIR`: the relative paths still name the tree's directory).
/// The copy's Kbuild records (`.cmd` files, the generated `Makefile`,
/// `source`) are rewritten from the old tree's path to the new one's. Then
/// every file of the new tree whose content equals the other tree's gets
/// that file's modification time (older than the copied objects), and
/// every other file the time of now (newer than any of them), so exactly
/// the files that differ are stale, whatever times unpacking or checking
/// out gave them.
pub fn seed_objects(tree: &Path, b: &KernelBuild, builds: &Path, obj: &Path) -> Result<()> {
    if obj.exists() {
        return Ok(());
    }
    let Some((from, from_tree)) = seed_candidate(builds, &b.version, obj) else { return Ok(()) };
    let from_key = from.file_name().unwrap_or_default().to_string_lossy().trim_start_matches("obj-").to_string();
    let _lock = tree_lock(builds, &from_key, "copying its objects to start another tree's first build")?;
    if !from.join("arch/x86/boot/bzImage").is_file() {
        return Ok(());
    }
    let started = Instant::now();
    let tmp = builds.join(format!(".seed-{}-{}", short_key(&b.tree_key), std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    let out = Command::new("cp").args(["-a", "--reflink=auto"]).arg(&from).arg(&tmp).output().context("running cp")?;
    if !out.status.success() {
        let _ = fs::remove_dir_all(&tmp);
        bail!("copying {} to {}: {}", from.display(), tmp.display(), String::from_utf8_lossy(&out.stderr));
    }
    // The tree's path, and the object directory's (objtool's records name
    // it; a relinked objtool would make every object stale).
    let pairs = [
        (from_tree.display().to_string(), tree.display().to_string()),
        (from.display().to_string(), obj.display().to_string()),
    ];
    let rewritten = rewrite_kbuild_records(&tmp, &pairs).and_then(|n| {
        let link = tmp.join("source");
        if link.is_symlink() {
            fs::remove_file(&link)?;
            std::os::unix::fs::symlink(tree, &link)?;
        }
        let same = align_mtimes(tree, &from_tree)?;
        fs::rename(&tmp, obj)?;
        Ok((n, same))
    });
    match rewritten {
        Ok((n, (same, differ))) => {
            crate::output::diagnostic(&format!(
                "fslab: started {} from the objects of {} ({n} Kbuild records rewritten; {same} files as there, \
                 {differ} that differ will be compiled; {:.0} s)",
                obj.display(),
                from_tree.display(),
                started.elapsed().as_secs_f64()
            ));
            Ok(())
        }
        Err(e) => {
            let _ = fs::remove_dir_all(&tmp);
            Err(e.context(format!("seeding {} from {}", obj.display(), from.display())))
        }
    }
}

/// The finished object directory (and its tree) a new tree of `version`
/// would start from: another tree's, of the same version, the newest.
pub fn seed_candidate(builds: &Path, version: &str, obj: &Path) -> Option<(PathBuf, PathBuf)> {
    let mut found: Vec<(std::time::SystemTime, PathBuf, PathBuf)> = Vec::new();
    for entry in fs::read_dir(builds).into_iter().flatten().flatten() {
        let dir = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with("obj-") || dir == obj {
            continue;
        }
        let Ok(built) = fs::metadata(dir.join("arch/x86/boot/bzImage")).and_then(|m| m.modified()) else { continue };
        // Kbuild's own record of the tree an object directory builds.
        let Ok(tree) = fs::read_link(dir.join("source")) else { continue };
        if tree.is_dir() && tree_version(&tree).is_ok_and(|v| v == version) {
            found.push((built, dir, tree));
        }
    }
    found.into_iter().max_by_key(|(t, _, _)| *t).map(|(_, d, t)| (d, t))
}

/// Give each file of `tree` the modification time of the same file of
/// `from` when their contents are equal, and the time of now otherwise;
/// (equal, different) counts. Symlinks and the VCS's own files are left.
fn align_mtimes(tree: &Path, from: &Path) -> Result<(usize, usize)> {
    let now = std::time::SystemTime::now();
    let (mut same, mut differ) = (0, 0);
    let mut todo = vec![PathBuf::new()];
    while let Some(rel) = todo.pop() {
        for entry in fs::read_dir(tree.join(&rel)).with_context(|| format!("reading {}", tree.join(&rel).display()))? {
            let entry = entry?;
            let name = entry.file_name();
            if name == ".git" {
                continue;
            }
            let kind = entry.file_type()?;
            let rel = rel.join(&name);
            if kind.is_dir() {
                todo.push(rel);
                continue;
            }
            if !kind.is_file() {
                continue;
            }
            let mine = tree.join(&rel);
            let theirs = from.join(&rel);
            let time = match fs::metadata(&theirs) {
                Ok(m) if m.is_file() && m.len() == entry.metadata()?.len() && same_content(&mine, &theirs)? => {
                    same += 1;
                    m.modified()?
                }
                _ => {
                    differ += 1;
                    now
                }
            };
            fs::File::options().write(true).open(&mine)?.set_modified(time)?;
        }
    }
    Ok((same, differ))
}

fn same_content(a: &Path, b: &Path) -> Result<bool> {
    let (mut fa, mut fb) = (fs::File::open(a)?, fs::File::open(b)?);
    let (mut ba, mut bb) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    loop {
        let n = fa.read(&mut ba)?;
        if n == 0 {
            return Ok(fb.read(&mut bb[..1])? == 0);
        }
        fb.read_exact(&mut bb[..n]).map_err(|_| anyhow::anyhow!("{} changed while read", b.display()))?;
        if ba[..n] != bb[..n] {
            return Ok(false);
        }
    }
}

/// Objects the last build of a tree compiled (for the ETA of the next one).
const OBJECT_COUNT_FILE: &str = "fslab-objects";

/// `VERSION.PATCHLEVEL.SUBLEVEL` of a tree's top Makefile.
pub fn tree_version(tree: &Path) -> Result<String> {
    let text =
        fs::read_to_string(tree.join("Makefile")).with_context(|| format!("reading {}/Makefile", tree.display()))?;
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name).map(|r| r.trim_start().trim_start_matches('=').trim().to_string()))
            .unwrap_or_default()
    };
    let (v, p, s) = (field("VERSION"), field("PATCHLEVEL"), field("SUBLEVEL"));
    if v.is_empty() || p.is_empty() {
        bail!("{}/Makefile has no VERSION and PATCHLEVEL", tree.display());
    }
    Ok(if s.is_empty() { format!("{v}.{p}") } else { format!("{v}.{p}.{s}") })
}

/// Config lines without their trailing `# why` comments (Kconfig reads a
/// value up to the end of the line).
pub fn strip_comments(fragment: &str) -> String {
    fragment
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            if l.is_empty() || (l.starts_with('#') && !l.ends_with("is not set")) {
                return None;
            }
            Some(match l.find(" #").or_else(|| l.find("\t#")) {
                Some(at) if !l.starts_with('#') => l[..at].trim_end().to_string(),
                _ => l.to_string(),
            })
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// Merge `fragment` into `obj/.config` with Kbuild's own script (`-m`: no
/// make; `olddefconfig` runs once at the end).
fn merge(tree: &Path, obj: &Path, fragment: &Path) -> Result<()> {
    let config = obj.join(".config");
    let out = Command::new("sh")
        .arg(tree.join("scripts/kconfig/merge_config.sh"))
        .args(["-m", "-O"])
        .arg(obj)
        .arg(&config)
        .arg(fragment)
        .current_dir(tree)
        .env("KCONFIG_CONFIG", &config)
        .env("LC_ALL", "C")
        .output()
        .context("running scripts/kconfig/merge_config.sh")?;
    if !out.status.success() {
        bail!(
            "merge_config.sh {} failed: {}",
            fragment.display(),
            String::from_utf8_lossy(&out.stderr).lines().rev().take(10).collect::<Vec<_>>().join("\n")
        );
    }
    Ok(())
}

fn make_command(tree: &Path, obj: &Path, cc: &str) -> Command {
    let mut cmd = Command::new("make");
    cmd.arg("-C").arg(tree).arg(format!("O={}", obj.display())).arg(format!("CC={cc}"));
    cmd.env("LC_ALL", "C");
    cmd
}

/// A quick make target (config targets), its output kept for the error.
fn run_make(tree: &Path, obj: &Path, cc: &str, args: &[&str], timeout: Duration) -> Result<()> {
    let mut cmd = make_command(tree, obj, cc);
    cmd.args(args);
    let out = run_contained(cmd, timeout).with_context(|| format!("make {}", args.join(" ")))?;
    if !out.0 {
        bail!("make {} in {} failed:\n{}", args.join(" "), tree.display(), tail(&out.1, 20));
    }
    Ok(())
}

fn make_output(tree: &Path, obj: &Path, cc: &str, args: &[&str]) -> Result<String> {
    let mut cmd = make_command(tree, obj, cc);
    cmd.args(args);
    let (ok, text) = run_contained(cmd, Duration::from_secs(120))?;
    if !ok {
        bail!("make {} failed:\n{}", args.join(" "), tail(&text, 20));
    }
    Ok(text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string())
}

/// Kills a spawned process group when dropped (error, panic, early return).
struct GroupGuard(Option<i32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.0.take() {
            kill_group(pgid);
        }
    }
}

/// Run `cmd` contained, its stdout and stderr merged; (success, output).
fn run_contained(mut cmd: Command, timeout: Duration) -> Result<(bool, String)> {
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = spawn_contained(cmd, None)?;
    let mut guard = GroupGuard(Some(child.id() as i32));
    let readers: Vec<_> = [
        child.stdout.take().map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        child.stderr.take().map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
    ]
    .into_iter()
    .flatten()
    .map(|mut s| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = s.read_to_string(&mut text);
            text
        })
    })
    .collect();
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if cancelled() {
            bail!("interrupted");
        }
        if Instant::now() > deadline {
            bail!("timed out after {}s", timeout.as_secs());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    guard.0 = None;
    let text: String = readers.into_iter().filter_map(|r| r.join().ok()).collect::<Vec<_>>().join("");
    Ok((status.success(), text))
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Replace each `(old, new)` path in every Kbuild record under `dir`
/// (`*.cmd`, `*.d`, the generated `Makefile`), keeping each file's timestamp; how
/// many changed.
fn rewrite_kbuild_records(dir: &Path, pairs: &[(String, String)]) -> Result<usize> {
    let mut changed = 0;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let (path, kind) = (entry.path(), entry.file_type()?);
        let name = entry.file_name().to_string_lossy().into_owned();
        if kind.is_dir() {
            changed += rewrite_kbuild_records(&path, pairs)?;
        } else if kind.is_file() && (name.ends_with(".cmd") || name.ends_with(".d") || name == "Makefile") {
            let mut bytes = fs::read(&path)?;
            let modified = entry.metadata()?.modified()?;
            let mut any = false;
            for (old, new) in pairs {
                let (old, new) = (old.as_bytes(), new.as_bytes());
                if !bytes.windows(old.len()).any(|w| w == old) {
                    continue;
                }
                let mut out = Vec::with_capacity(bytes.len());
                let mut rest = bytes.as_slice();
                while let Some(at) = rest.windows(old.len()).position(|w| w == old) {
                    out.extend_from_slice(&rest[..at]);
                    out.extend_from_slice(new);
                    rest = &rest[at + old.len()..];
                }
                out.extend_from_slice(rest);
                bytes = out;
                any = true;
            }
            if any {
                fs::write(&path, &bytes)?;
                fs::File::options().write(true).open(&path)?.set_modified(modified)?;
                changed += 1;
            }
        }
    }
    Ok(changed)
}

/// The build's log, in the object directory and then in the cache entry.
pub const BUILD_LOG: &str = "build.log";
/// The [`KernelBuild`] of a cache entry, for `fslab kernel list`.
pub const BUILD_INFO: &str = "fslab-build.json";

/// `make olddefconfig bzImage` in `obj` with the final config; the image
/// path, and the build's record when it compiled anything (also kept in
/// `obj`: the outlook of the next build there).
fn make_bzimage(b: &KernelBuild, tree: &Path, cache: &Path, obj: &Path) -> Result<(PathBuf, Option<BuildRecord>)> {
    let cold = !obj.join("arch/x86/boot/bzImage").is_file();
    fs::create_dir_all(obj)?;
    let config = b.config_path(cache);
    fs::copy(&config, obj.join(".config")).with_context(|| format!("copying {}", config.display()))?;
    let cc = compiler_command();
    run_make(tree, obj, &cc, &["olddefconfig"], Duration::from_secs(600))?;
    let jobs = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let expected: Option<u64> =
        fs::read_to_string(obj.join(OBJECT_COUNT_FILE)).ok().and_then(|t| t.trim().parse().ok());
    let log_path = obj.join(BUILD_LOG);
    let mut log = fs::File::create(&log_path)?;
    let mut cmd = make_command(tree, obj, &cc);
    cmd.arg(format!("-j{jobs}")).arg("bzImage").stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    if let Some(dir) = ccache_dir(cache) {
        cmd.env("CCACHE_DIR", dir);
    }
    eprintln!(
        "fslab: building kernel {} ({}) with {jobs} jobs{}; log {}",
        b.release,
        b.shown(),
        if which("ccache") { " and ccache" } else { " (no ccache: install it for faster rebuilds)" },
        log_path.display()
    );
    let mut child = spawn_contained(cmd, None).context("starting make")?;
    let mut guard = GroupGuard(Some(child.id() as i32));
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let mut readers = Vec::new();
    for stream in [
        child.stdout.take().map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        child.stderr.take().map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
    ]
    .into_iter()
    .flatten()
    {
        let tx = tx.clone();
        readers.push(std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        }));
    }
    drop(tx);
    let started = Instant::now();
    let mut progress = Progress { objects: 0, phase: "preparing", expected, started, last_shown: started };
    let status = loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(line) => {
                writeln!(log, "{line}")?;
                progress.line(&line);
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break child.wait()?,
        }
        if cancelled() {
            bail!("interrupted while building kernel {} (log {})", b.release, log_path.display());
        }
        progress.show(&b.release, false);
    };
    guard.0 = None;
    for r in readers {
        let _ = r.join();
    }
    log.flush()?;
    if !status.success() {
        let text = fs::read_to_string(&log_path).unwrap_or_default();
        bail!(
            "building kernel {} ({}) failed ({status}); the log's last lines ({}):\n{}",
            b.release,
            b.shown(),
            log_path.display(),
            tail(&text, 25)
        );
    }
    progress.phase = "done";
    progress.show(&b.release, true);
    if progress.objects > 0 && expected.is_none_or(|e| progress.objects > e / 2) {
        let _ = fs::write(obj.join(OBJECT_COUNT_FILE), progress.objects.to_string());
    }
    // A make that compiled nothing (a user's tree built twice) says nothing
    // about the next build: the last real one's record stays.
    let record = (progress.objects > 0).then(|| BuildRecord {
        version: b.version.clone(),
        config_base: b.config_base.clone(),
        cold,
        wall_s: started.elapsed().as_secs_f64(),
        objects: progress.objects,
        jobs,
        finished_unix: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
    });
    if let Some(r) = &record {
        r.write(obj)?;
    }
    Ok((obj.join("arch/x86/boot/bzImage"), record))
}

/// ccache's directory: `$CCACHE_DIR` when set, else `<cache>/ccache` (kept
/// with the kernels, so CI's warmed cache carries it).
fn ccache_dir(cache: &Path) -> Option<PathBuf> {
    if std::env::var_os("CCACHE_DIR").is_some() {
        return None;
    }
    Some(cache.join("ccache"))
}

/// Build progress from make's lines: phase, objects compiled, ETA.
struct Progress {
    objects: u64,
    phase: &'static str,
    /// Objects the last full build of this tree compiled.
    expected: Option<u64>,
    started: Instant,
    last_shown: Instant,
}

impl Progress {
    fn line(&mut self, line: &str) {
        let word = line.split_whitespace().next().unwrap_or("");
        match word {
            "CC" | "AS" => {
                self.objects += 1;
                self.phase = "compiling";
            }
            "LD" if line.trim_end().ends_with("vmlinux") => self.phase = "linking",
            "BUILD" | "OBJCOPY" | "ZSTD" | "GZIP" | "XZKERN" | "LZ4" if line.contains("arch/x86/boot") => {
                self.phase = "making the image"
            }
            _ => {}
        }
    }

    fn show(&mut self, release: &str, done: bool) {
        let now = Instant::now();
        if !done && now.duration_since(self.last_shown) < Duration::from_secs(15) {
            return;
        }
        self.last_shown = now;
        let elapsed = now.duration_since(self.started).as_secs();
        let eta = match self.expected {
            Some(total) if !done && self.objects > 20 && self.objects < total => {
                let left = (total - self.objects) * elapsed / self.objects;
                format!(", ETA ~{}m{:02}s", left / 60, left % 60)
            }
            _ => String::new(),
        };
        let of = self.expected.map(|e| format!("/~{e}")).unwrap_or_default();
        eprintln!(
            "fslab: kernel {release}: {}, {}{of} objects compiled, {}m{:02}s{eta}",
            self.phase,
            self.objects,
            elapsed / 60,
            elapsed % 60
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `prepare` holds the tree's lock while the tree is made ready, and a
    /// package's tree is unpacked under the lock of its cache entry
    /// (`tree-<key>`): the two must be different locks, or the first
    /// prepare of a package not yet unpacked waits for itself forever.
    #[test]
    fn a_tree_is_unpacked_while_its_tree_lock_is_held() {
        let builds = tempfile::tempdir().unwrap();
        let key = "ab".repeat(32);
        let _held = tree_lock(builds.path(), &key, "preparing the config").unwrap();
        let (done, finished) = std::sync::mpsc::channel();
        let dir = builds.path().to_path_buf();
        let entry = format!("tree-{}", short_key(&key));
        std::thread::spawn(move || {
            let _ = done.send(super::super::cache::entry(&dir, &entry, |tmp| Ok(fs::write(tmp.join("Makefile"), "")?)));
        });
        let unpacked = finished.recv_timeout(Duration::from_secs(20)).expect("unpacking waited for the tree lock");
        assert!(unpacked.unwrap().join("Makefile").is_file());
    }

    #[test]
    fn the_minimal_fragment_loses_only_its_comments() {
        let stripped = strip_comments(MINIMAL);
        assert!(stripped.lines().all(|l| l.starts_with("CONFIG_") && !l.contains('#')), "{stripped}");
        assert!(stripped.contains("CONFIG_VIRTIO_FS=y\n") && stripped.contains("CONFIG_BLK_DEV_THROTTLING=y\n"));
        assert_eq!(
            strip_comments("# CONFIG_X is not set\nCONFIG_Y=\"a b\"   # why\n"),
            "# CONFIG_X is not set\nCONFIG_Y=\"a b\"\n"
        );
        // Every line of the fragment says why.
        for line in MINIMAL.lines().filter(|l| l.starts_with("CONFIG_")) {
            assert!(line.contains(" # "), "no reason given: {line}");
        }
    }

    #[test]
    fn progress_counts_objects_and_phases() {
        let now = Instant::now();
        let mut p = Progress { objects: 0, phase: "preparing", expected: Some(100), started: now, last_shown: now };
        for l in ["  CC      fs/squashfs/super.o", "  AS      arch/x86/entry/entry_64.o", "  AR      fs/built-in.a"] {
            p.line(l);
        }
        assert_eq!((p.objects, p.phase), (2, "compiling"));
        p.line("  LD      vmlinux");
        assert_eq!(p.phase, "linking");
        p.line("  BUILD   arch/x86/boot/bzImage");
        assert_eq!(p.phase, "making the image");
    }
}
