//! Kernels by version from Debian's archive: `kernel = "debian:6.1-cloud"`.
//!
//! A private apt setup under the kernel cache (`<cache>/debian-archive/`:
//! its own sources list, state and cache directories, and an empty dpkg
//! status) lists bullseye, bookworm (with backports) and trixie with their
//! `-updates` and `-security` suites. apt checks the indexes' signatures
//! against Debian's archive keyring and each package against its index, so
//! fslab does no networking or signature checking of its own; the host's
//! `/etc/apt` and `/var/lib/apt` are never written (only its `apt.conf.d`
//! is read, for proxies). The lists are refreshed when older than a day.
//!
//! A reference is a version prefix and an optional flavour
//! (`debian:5.10`, `debian:6.1-rt`, `debian:6.12.117+deb13-cloud`): the
//! newest `linux-image-*` whose ABI name (`6.1.0-50`) or package version
//! (`6.1.176-1`) starts with the prefix, in that flavour (none: the generic
//! one). The chosen package is downloaded by apt into
//! `<cache>/debian-archive/debs/` and then unpacked like any other `.deb`
//! (by content, see [`super::cache`]).

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::sys::exec::{run_in, RunError};

/// How a file names an archive kernel.
pub const SCHEME: &str = "debian:";

/// Mirrors and suites fslab lists (one line each in the private sources list).
const SUITES: &[(&str, &str)] = &[
    ("http://deb.debian.org/debian", "bullseye"),
    ("http://deb.debian.org/debian", "bullseye-updates"),
    ("http://deb.debian.org/debian-security", "bullseye-security"),
    ("http://deb.debian.org/debian", "bookworm"),
    ("http://deb.debian.org/debian", "bookworm-updates"),
    ("http://deb.debian.org/debian-security", "bookworm-security"),
    ("http://deb.debian.org/debian", "bookworm-backports"),
    ("http://deb.debian.org/debian", "trixie"),
    ("http://deb.debian.org/debian", "trixie-updates"),
    ("http://deb.debian.org/debian-security", "trixie-security"),
];

/// The keyring apt checks the archive's signatures against (package
/// `debian-archive-keyring`).
const KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

/// fslab boots x86 kernels (see [`super::bzimage`]).
const ARCH: &str = "amd64";

/// Lists younger than this are used as they are.
pub const INDEX_MAX_AGE: Duration = Duration::from_secs(24 * 3600);

/// A kernel reference as written after `debian:`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wanted {
    /// Version prefix (`6.1`, `6.12.117+deb13`, `6.1.0-50`).
    pub version: String,
    /// `cloud`, `rt`, …; None: the generic flavour.
    pub flavour: Option<String>,
}

impl Wanted {
    /// Parse `debian:<version>[-<flavour>]`; None when `text` does not use
    /// the scheme at all.
    pub fn parse(text: &str) -> Option<Result<Wanted>> {
        let spec = text.strip_prefix(SCHEME)?;
        Some(parse_spec(spec))
    }
}

fn parse_spec(spec: &str) -> Result<Wanted> {
    let (version, flavour) = match spec.rsplit_once('-') {
        Some((v, f)) if !f.is_empty() && f.chars().all(|c| c.is_ascii_alphabetic()) => (v, Some(f.to_string())),
        _ => (spec, None),
    };
    if !version.starts_with(|c: char| c.is_ascii_digit()) || version.contains(char::is_whitespace) {
        bail!(
            "`{SCHEME}{spec}` is not a Debian kernel reference: write {SCHEME}<version>[-<flavour>], \
             e.g. {SCHEME}5.10, {SCHEME}6.1-rt, {SCHEME}6.12.117+deb13-cloud"
        );
    }
    Ok(Wanted { version: version.to_string(), flavour })
}

impl fmt::Display for Wanted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.flavour {
            Some(fl) => write!(f, "{SCHEME}{}-{fl}", self.version),
            None => write!(f, "{SCHEME}{}", self.version),
        }
    }
}

/// What the experiment records about an archive kernel: exactly the
/// package apt installed from, so a rerun can name the same one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelPackage {
    pub name: String,
    pub version: String,
    pub suite: String,
}

/// One `linux-image-*` package of the archive's indexes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Package {
    pub name: String,
    /// Debian package version (`6.1.176-1`).
    pub version: String,
    pub suite: String,
    /// ABI name from the package name (`6.1.0-50`, `6.12.117+deb13`).
    pub abi: String,
    pub flavour: Option<String>,
    /// Download size, bytes.
    pub size: u64,
    /// SHA-256 of the `.deb`, from the signed index.
    pub sha256: String,
}

impl Package {
    /// The release the suite belongs to (`bookworm` for `bookworm-security`).
    pub fn release(&self) -> &str {
        self.suite.split('-').next().unwrap_or(&self.suite)
    }

    /// The kernel's `uname -r`, from the package name.
    pub fn kernel_release(&self) -> &str {
        self.name.trim_start_matches("linux-image-")
    }

    pub fn flavour_name(&self) -> &str {
        self.flavour.as_deref().unwrap_or("generic")
    }

    pub fn recorded(&self) -> KernelPackage {
        KernelPackage { name: self.name.clone(), version: self.version.clone(), suite: self.suite.clone() }
    }
}

/// Failures a caller classifies (exit 2 or 3) and words for its file.
#[derive(Debug)]
pub enum ResolveError {
    /// The lists could not be fetched and none are cached: no network.
    Offline(anyhow::Error),
    /// Nothing in the archive matches; the message lists what does exist.
    NoMatch(String),
    Other(anyhow::Error),
}

impl fmt::Display for ResolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResolveError::Offline(e) => write!(f, "cannot list Debian's kernels (is the network down?): {e:#}"),
            ResolveError::NoMatch(m) => write!(f, "{m}"),
            ResolveError::Other(e) => write!(f, "{e:#}"),
        }
    }
}

impl std::error::Error for ResolveError {}

/// The private apt setup in `<cache>/debian-archive/`.
#[derive(Clone, Debug)]
pub struct Archive {
    root: PathBuf,
}

impl Archive {
    /// The archive kept in the kernel cache `cache`.
    pub fn at(cache: &Path) -> Archive {
        Archive { root: cache.join("debian-archive") }
    }

    /// The archive whose directory is `root` (as a kernel's record names it).
    pub fn at_root(root: &Path) -> Archive {
        Archive { root: root.to_path_buf() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where downloaded packages are kept.
    pub fn debs_dir(&self) -> PathBuf {
        self.root.join("debs")
    }

    fn lists_dir(&self) -> PathBuf {
        self.root.join("state/lists")
    }

    fn stamp(&self) -> PathBuf {
        self.root.join("updated")
    }

    /// Create the private layout (idempotent).
    fn lay_out(&self) -> Result<()> {
        // The archive's root must be one root may trust; inside it apt owns
        // its `partial` directories (it hands them to its unprivileged
        // `_apt` user for downloads), so only the root is checked.
        crate::sys::trusted::ensure_dir(&self.root).context("the kernel cache")?;
        for dir in ["etc/sources.list.d", "etc/preferences.d", "state/lists/partial", "cache/archives/partial", "debs"]
        {
            let d = self.root.join(dir);
            fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
        }
        let sources: String = SUITES
            .iter()
            .map(|(mirror, suite)| format!("deb [arch={ARCH} signed-by={KEYRING}] {mirror} {suite} main\n"))
            .collect();
        let list = self.root.join("etc/sources.list");
        if fs::read_to_string(&list).ok().as_deref() != Some(sources.as_str()) {
            fs::write(&list, sources).with_context(|| format!("writing {}", list.display()))?;
        }
        let status = self.root.join("state/status");
        if !status.exists() {
            fs::write(&status, "").with_context(|| format!("writing {}", status.display()))?;
        }
        Ok(())
    }

    /// The `-o` options that make apt use only this directory.
    fn apt_options(&self) -> Vec<String> {
        let r = self.root.display();
        let mut opts: Vec<String> = [
            format!("Dir::Etc::SourceList={r}/etc/sources.list"),
            format!("Dir::Etc::SourceParts={r}/etc/sources.list.d"),
            format!("Dir::Etc::Preferences={r}/etc/preferences"),
            format!("Dir::Etc::PreferencesParts={r}/etc/preferences.d"),
            format!("Dir::State={r}/state"),
            format!("Dir::State::status={r}/state/status"),
            format!("Dir::Cache={r}/cache"),
            // Plain lists, so the index is read without a decompressor.
            "Acquire::GzipIndexes=false".into(),
            "Acquire::Languages=none".into(),
            "Acquire::Retries=1".into(),
            "Acquire::http::Timeout=30".into(),
        ]
        .into_iter()
        .collect();
        // The host may ask for more indexes (AppStream, Contents): not here.
        for target in ["DEP-11", "DEP-11-icons", "DEP-11-icons-small", "DEP-11-icons-hidpi", "Contents-deb"] {
            opts.push(format!("Acquire::IndexTargets::deb::{target}::DefaultEnabled=false"));
        }
        opts.into_iter().flat_map(|o| ["-o".to_string(), o]).collect()
    }

    fn apt_get(&self, args: &[&str], dir: Option<&Path>, timeout: Duration) -> Result<String> {
        let mut all = self.apt_options();
        all.extend(["-q".to_string()]);
        all.extend(args.iter().map(|a| a.to_string()));
        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
        let out = run_in("apt-get", &refs, dir, timeout).map_err(|e| match e {
            RunError::NotFound => anyhow::anyhow!("apt-get is not installed"),
            other => anyhow::anyhow!("apt-get {}: {other}", args.join(" ")),
        })?;
        if !out.success {
            let tail: Vec<&str> = out.stderr.lines().filter(|l| !l.trim().is_empty()).take(3).collect();
            bail!("apt-get {} failed: {}", args.join(" "), tail.join("\n"));
        }
        Ok(out.stdout)
    }

    /// When the lists were last refreshed.
    pub fn updated_at(&self) -> Option<SystemTime> {
        fs::metadata(self.stamp()).and_then(|m| m.modified()).ok()
    }

    /// Refresh the lists unless younger than `max_age`. Offline with lists
    /// already there: a warning, and the old lists are used. Offline with
    /// none: [`ResolveError::Offline`].
    pub fn refresh(&self, max_age: Duration) -> std::result::Result<(), ResolveError> {
        let fresh = |a: &Archive| a.updated_at().and_then(|t| t.elapsed().ok()).is_some_and(|age| age < max_age);
        if fresh(self) {
            return Ok(());
        }
        self.lay_out().map_err(ResolveError::Other)?;
        let _lock = super::cache::lock(&self.root.join(".lock")).map_err(ResolveError::Other)?;
        if fresh(self) {
            return Ok(()); // another fslab refreshed while we waited
        }
        match self.apt_get(&["--error-on=any", "update"], None, Duration::from_secs(600)) {
            Ok(_) => {
                fs::write(self.stamp(), "").map_err(|e| ResolveError::Other(e.into()))?;
                Ok(())
            }
            Err(e) if self.updated_at().is_some() => {
                eprintln!("warning: could not refresh Debian's kernel lists, using those from before: {e:#}");
                Ok(())
            }
            Err(e) => Err(ResolveError::Offline(e)),
        }
    }

    /// Every kernel image package of the cached lists, newest first. Read
    /// once per process and refresh (an experiment names several kernels).
    pub fn index(&self) -> Result<Arc<Vec<Package>>> {
        /// Indexes read, by archive root and the lists' refresh time.
        type Read = Vec<(PathBuf, Option<SystemTime>, Arc<Vec<Package>>)>;
        static READ: Mutex<Read> = Mutex::new(Vec::new());
        let stamp = self.updated_at();
        let mut read = READ.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, _, index)) = read.iter().find(|(root, at, _)| *root == self.root && *at == stamp) {
            return Ok(Arc::clone(index));
        }
        let index = Arc::new(self.read_index()?);
        read.retain(|(root, _, _)| *root != self.root);
        read.push((self.root.clone(), stamp, Arc::clone(&index)));
        Ok(index)
    }

    fn read_index(&self) -> Result<Vec<Package>> {
        self.read_lists(kernel_packages)
    }

    /// The packages `parse` finds in every cached list, newest first.
    fn read_lists(&self, parse: fn(&str, &str) -> Vec<Package>) -> Result<Vec<Package>> {
        let mut found = Vec::new();
        let dir = self.lists_dir();
        let entries = fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?;
        for entry in entries.flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            let Some(suite) = suite_of_list(&file) else { continue };
            let text = fs::read_to_string(entry.path()).with_context(|| format!("reading {}", file))?;
            found.extend(parse(&text, suite));
        }
        found.sort_by(|a, b| newer(b, a));
        Ok(found)
    }

    /// Refresh (when stale) and pick the package `wanted` names.
    pub fn resolve(&self, wanted: &Wanted) -> std::result::Result<Package, ResolveError> {
        self.refresh(INDEX_MAX_AGE)?;
        let index = self.index().map_err(ResolveError::Other)?;
        pick(&index, wanted).map_err(ResolveError::NoMatch)
    }

    /// Refresh (when stale) and pick the `linux-source-X` package
    /// `debian:<version>` names, for a kernel built from source.
    pub fn resolve_source(&self, version: &str) -> std::result::Result<Package, ResolveError> {
        self.refresh(INDEX_MAX_AGE)?;
        let sources = self.read_lists(source_packages).map_err(ResolveError::Other)?;
        pick_source(&sources, version).map_err(ResolveError::NoMatch)
    }

    /// Every `linux-source-X` package of the cached lists, newest first.
    pub fn sources(&self) -> Result<Vec<Package>> {
        self.read_lists(source_packages)
    }

    /// The packages downloaded so far.
    pub fn downloaded(&self) -> Vec<PathBuf> {
        let mut debs: Vec<PathBuf> = fs::read_dir(self.debs_dir())
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "deb"))
            .collect();
        debs.sort();
        debs
    }

    /// The downloaded `.deb` of `package` (fetched by apt when not there yet,
    /// its SHA-256 checked against the index).
    pub fn download(&self, package: &Package) -> Result<PathBuf> {
        let debs = self.debs_dir();
        let file = debs.join(format!("{}_{}_{ARCH}.deb", package.name, package.version.replace(':', "%3a")));
        if file.is_file() && super::sha256_file(&file)? == package.sha256 {
            return Ok(file);
        }
        self.lay_out()?;
        let _lock = super::cache::lock(&self.root.join(".download.lock"))?;
        if file.is_file() && super::sha256_file(&file)? == package.sha256 {
            return Ok(file);
        }
        let partial = debs.join(format!(".partial-{}", std::process::id()));
        let _ = fs::remove_dir_all(&partial);
        fs::create_dir_all(&partial)?;
        let got = (|| {
            let pin = format!("{}={}", package.name, package.version);
            self.apt_get(&["download", &pin], Some(&partial), Duration::from_secs(1800))
                .with_context(|| format!("downloading {pin} from {}", package.suite))?;
            let deb = fs::read_dir(&partial)?
                .flatten()
                .map(|e| e.path())
                .find(|p| p.extension().is_some_and(|x| x == "deb"))
                .context("apt-get download left no .deb")?;
            let sha = super::sha256_file(&deb)?;
            if sha != package.sha256 {
                bail!("{} has SHA-256 {sha}, the signed index says {}", deb.display(), package.sha256);
            }
            fs::rename(&deb, &file)?;
            Ok(file.clone())
        })();
        let _ = fs::remove_dir_all(&partial);
        got
    }
}

/// The suite of a list file named `…_dists_<suite>_main_binary-amd64_Packages`.
fn suite_of_list(file: &str) -> Option<&'static str> {
    let rest = file.split("_dists_").nth(1)?;
    let (suite, tail) = rest.split_once('_')?;
    if tail != format!("main_binary-{ARCH}_Packages") {
        return None;
    }
    SUITES.iter().map(|(_, s)| *s).find(|s| *s == suite)
}

/// ABI name and flavour of a kernel image package name; None for anything
/// else (meta packages, `-unsigned` twins, debug symbols, templates).
fn split_name(name: &str) -> Option<(String, Option<String>)> {
    let rest = name.strip_prefix("linux-image-")?.strip_suffix(&format!("-{ARCH}"))?;
    let (abi, flavour) = match rest.rsplit_once('-') {
        Some((a, f)) if f.chars().all(|c| c.is_ascii_alphabetic()) => (a, Some(f.to_string())),
        _ => (rest, None),
    };
    // A real image's ABI has three numbers (6.1.0-50, 6.12.117+deb13); the
    // meta packages (linux-image-6.1-amd64) have two.
    let upstream = abi.split(['-', '+']).next()?;
    let numbers = upstream.split('.').filter(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit())).count();
    (numbers >= 3).then(|| (abi.to_string(), flavour))
}

/// The packages of one `Packages` index whose name starts with `prefix`
/// and that have a version and a SHA-256 (`abi` and `flavour` left for the
/// caller). Only those paragraphs are parsed (the index is ~50 MB).
fn packages_named(text: &str, prefix: &str, suite: &str) -> Vec<Package> {
    let start = format!("Package: {prefix}");
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find(&start).map(|i| i + from) {
        let end = text[at..].find("\n\n").map_or(text.len(), |i| i + at);
        from = end;
        if at > 0 && text.as_bytes()[at - 1] != b'\n' {
            continue;
        }
        let para = &text[at..end];
        let field = |name: &str| {
            para.lines().find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(": "))).map(str::trim)
        };
        let (Some(name), Some(version), Some(sha256)) = (field("Package"), field("Version"), field("SHA256")) else {
            continue;
        };
        let package = Package {
            name: name.to_string(),
            version: version.to_string(),
            suite: suite.to_string(),
            abi: String::new(),
            flavour: None,
            size: field("Size").and_then(|s| s.parse().ok()).unwrap_or(0),
            sha256: sha256.to_string(),
        };
        out.push(package);
    }
    out
}

/// The kernel image packages of one `Packages` index.
fn kernel_packages(text: &str, suite: &str) -> Vec<Package> {
    packages_named(text, "linux-image-", suite)
        .into_iter()
        .filter_map(|package| {
            let (abi, flavour) = split_name(&package.name)?;
            Some(Package { abi, flavour, ..package })
        })
        .collect()
}

/// The kernel source packages (`linux-source-5.10`) of one `Packages`
/// index; their series (`5.10`) goes in `abi`.
fn source_packages(text: &str, suite: &str) -> Vec<Package> {
    packages_named(text, "linux-source-", suite)
        .into_iter()
        .filter_map(|package| {
            let series = package.name.trim_start_matches("linux-source-").to_string();
            let numeric = series.split('.').all(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
            numeric.then_some(Package { abi: series, ..package })
        })
        .collect()
}

/// The `linux-source-X` package `debian:<version>` names: the newest whose
/// series (`5.10`) or package version starts with the version prefix.
pub fn pick_source(sources: &[Package], version: &str) -> std::result::Result<Package, String> {
    let matching = |p: &&Package| has_prefix(&p.abi, version) || has_prefix(&p.version, version);
    if let Some(best) = sources.iter().filter(matching).max_by(|a, b| newer(a, b)) {
        return Ok(best.clone());
    }
    let mut series: Vec<&str> = sources.iter().map(|p| p.abi.as_str()).collect();
    series.sort();
    series.dedup();
    Err(format!(
        "no Debian kernel source package matches `{SCHEME}{version}`; the series that exist are: {}",
        if series.is_empty() { "none (the lists are empty)".to_string() } else { series.join(", ") }
    ))
}

/// Order by Debian version, then by suite (the first listed wins a tie).
pub(crate) fn newer(a: &Package, b: &Package) -> std::cmp::Ordering {
    let va = a.version.parse::<debversion::Version>();
    let vb = b.version.parse::<debversion::Version>();
    let by_version = match (va, vb) {
        (Ok(x), Ok(y)) => x.cmp(&y),
        _ => a.version.cmp(&b.version),
    };
    let rank = |p: &Package| SUITES.iter().position(|(_, s)| *s == p.suite).unwrap_or(usize::MAX);
    by_version.then_with(|| rank(b).cmp(&rank(a))).then_with(|| a.name.cmp(&b.name))
}

/// Does `value` start with the version prefix `prefix`, ending on a
/// component boundary (6.1 matches 6.1.0-50, not 6.12.8)?
pub(crate) fn has_prefix(value: &str, prefix: &str) -> bool {
    value.strip_prefix(prefix).is_some_and(|rest| !rest.starts_with(|c: char| c.is_ascii_digit()))
}

/// The newest package of `index` that `wanted` names, or a message saying
/// what exists instead.
pub fn pick(index: &[Package], wanted: &Wanted) -> std::result::Result<Package, String> {
    let by_version: Vec<&Package> = index
        .iter()
        .filter(|p| has_prefix(&p.abi, &wanted.version) || has_prefix(&p.version, &wanted.version))
        .collect();
    if let Some(best) = by_version.iter().filter(|p| p.flavour == wanted.flavour).max_by(|a, b| newer(a, b)) {
        return Ok((*best).clone());
    }
    if !by_version.is_empty() {
        let mut flavours: Vec<&str> = by_version.iter().map(|p| p.flavour_name()).collect();
        flavours.sort();
        flavours.dedup();
        let shown: Vec<String> = flavours
            .iter()
            .map(|f| match *f {
                "generic" => format!("{SCHEME}{} (generic)", wanted.version),
                f => format!("{SCHEME}{}-{f}", wanted.version),
            })
            .collect();
        return Err(format!(
            "Debian has no {} kernel of version {}; its flavours of that version are: {}",
            wanted.flavour.as_deref().unwrap_or("generic"),
            wanted.version,
            shown.join(", ")
        ));
    }
    Err(format!("no Debian kernel matches `{wanted}`; the versions that exist are: {}", existing(index)))
}

/// `5.10 (5.10.0-30 … 5.10.0-46: bullseye, bullseye-security), 6.1 (…)`:
/// each kernel series with its oldest and newest ABI and its suites.
pub fn existing(index: &[Package]) -> String {
    let mut series: BTreeMap<(u32, u32), Vec<&Package>> = BTreeMap::new();
    for p in index {
        let mut nums = p.abi.split(['.', '-', '+']).map(|n| n.parse::<u32>().unwrap_or(0));
        series.entry((nums.next().unwrap_or(0), nums.next().unwrap_or(0))).or_default().push(p);
    }
    if series.is_empty() {
        return "none (the lists are empty)".to_string();
    }
    series
        .iter()
        .map(|((maj, min), ps)| {
            let oldest = ps.iter().min_by(|a, b| newer(a, b)).map_or("", |p| p.abi.as_str());
            let newest = ps.iter().max_by(|a, b| newer(a, b)).map_or("", |p| p.abi.as_str());
            let mut suites: Vec<&str> = ps.iter().map(|p| p.suite.as_str()).collect();
            suites.sort_by_key(|s| SUITES.iter().position(|(_, x)| x == s));
            suites.dedup();
            let range = if oldest == newest { newest.to_string() } else { format!("{oldest} … {newest}") };
            format!("{maj}.{min} ({range}: {})", suites.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkg(name: &str, version: &str, suite: &str) -> Package {
        let (abi, flavour) = split_name(name).unwrap();
        Package {
            name: name.into(),
            version: version.into(),
            suite: suite.into(),
            abi,
            flavour,
            size: 1,
            sha256: "00".into(),
        }
    }

    #[test]
    fn references_parse_into_version_and_flavour() {
        let w = |s: &str| Wanted::parse(s).unwrap().unwrap();
        assert_eq!(w("debian:5.10"), Wanted { version: "5.10".into(), flavour: None });
        assert_eq!(w("debian:6.1-rt"), Wanted { version: "6.1".into(), flavour: Some("rt".into()) });
        assert_eq!(
            w("debian:6.12.117+deb13-cloud"),
            Wanted { version: "6.12.117+deb13".into(), flavour: Some("cloud".into()) }
        );
        assert_eq!(w("debian:6.1.0-50"), Wanted { version: "6.1.0-50".into(), flavour: None });
        assert_eq!(w("debian:6.1-rt").to_string(), "debian:6.1-rt");
        assert!(Wanted::parse("pkg/linux.deb").is_none());
        let err = Wanted::parse("debian:cloud").unwrap().unwrap_err().to_string();
        assert!(err.contains("debian:6.1-rt"), "{err}");
    }

    #[test]
    fn package_names_give_abi_and_flavour_and_skip_the_rest() {
        assert_eq!(split_name("linux-image-6.1.0-50-cloud-amd64"), Some(("6.1.0-50".into(), Some("cloud".into()))));
        assert_eq!(split_name("linux-image-6.12.117+deb13-amd64"), Some(("6.12.117+deb13".into(), None)));
        assert_eq!(
            split_name("linux-image-6.1.0-0.deb11.49-rt-amd64"),
            Some(("6.1.0-0.deb11.49".into(), Some("rt".into())))
        );
        for skipped in [
            "linux-image-6.1.0-50-amd64-unsigned",
            "linux-image-6.1-amd64",
            "linux-image-cloud-amd64",
            "linux-image-6.1.0-50-amd64-dbg",
            "linux-image-6.1-amd64-signed-template",
        ] {
            assert_eq!(split_name(skipped), None, "{skipped}");
        }
    }

    #[test]
    fn the_newest_match_wins_on_component_boundaries() {
        let index = vec![
            pkg("linux-image-6.1.0-47-cloud-amd64", "6.1.170-1", "bookworm"),
            pkg("linux-image-6.1.0-50-cloud-amd64", "6.1.176-1", "bookworm-security"),
            pkg("linux-image-6.1.0-50-amd64", "6.1.176-1", "bookworm"),
            pkg("linux-image-6.12.117+deb13-cloud-amd64", "6.12.117-1", "trixie"),
            pkg("linux-image-5.10.0-46-rt-amd64", "5.10.250-1", "bullseye-security"),
        ];
        let w = |s: &str| Wanted::parse(s).unwrap().unwrap();
        assert_eq!(pick(&index, &w("debian:6.1-cloud")).unwrap().name, "linux-image-6.1.0-50-cloud-amd64");
        assert_eq!(pick(&index, &w("debian:6.1.170-cloud")).unwrap().name, "linux-image-6.1.0-47-cloud-amd64");
        assert_eq!(pick(&index, &w("debian:6.1")).unwrap().name, "linux-image-6.1.0-50-amd64");
        assert_eq!(pick(&index, &w("debian:6.12-cloud")).unwrap().name, "linux-image-6.12.117+deb13-cloud-amd64");
        let err = pick(&index, &w("debian:5.10")).unwrap_err();
        assert!(err.contains("debian:5.10-rt") && err.contains("no generic"), "{err}");
        let err = pick(&index, &w("debian:6.2")).unwrap_err();
        assert!(err.contains("6.1 (6.1.0-47 … 6.1.0-50: bookworm, bookworm-security)"), "{err}");
        assert!(err.contains("5.10 (5.10.0-46: bullseye-security)") && err.contains("6.12"), "{err}");
    }

    #[test]
    fn only_kernel_paragraphs_of_known_suites_are_read() {
        let text = "Package: linux-image-6.1.0-50-cloud-amd64\nSource: linux-signed-amd64\nVersion: 6.1.176-1\n\
                    Size: 123\nSHA256: abc\n\nPackage: foo\nDescription: Package: linux-image-6.1.0-9-amd64\n\n\
                    Package: linux-image-cloud-amd64\nVersion: 6.1.176-1\nSHA256: def\n";
        let found = kernel_packages(text, "bookworm");
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!((found[0].size, found[0].sha256.as_str(), found[0].abi.as_str()), (123, "abc", "6.1.0-50"));
        assert_eq!(
            suite_of_list("deb.debian.org_debian-security_dists_trixie-security_main_binary-amd64_Packages"),
            Some("trixie-security")
        );
        assert_eq!(suite_of_list("deb.debian.org_debian_dists_trixie_InRelease"), None);
        assert_eq!(suite_of_list("deb.debian.org_debian_dists_sid_main_binary-amd64_Packages"), None);
    }

    #[test]
    fn source_packages_carry_their_series() {
        let text = "Package: linux-source-5.10\nVersion: 5.10.262-1\nSize: 9\nSHA256: aa\n\n\
                    Package: linux-source\nVersion: 5.10.262-1\nSHA256: bb\n\n\
                    Package: linux-image-6.1.0-50-amd64\nVersion: 6.1.176-1\nSHA256: cc\n";
        let found = source_packages(text, "bullseye");
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!((found[0].abi.as_str(), found[0].size, found[0].flavour.as_deref()), ("5.10", 9, None));
        assert_eq!(found[0].suite, "bullseye");
    }
}
