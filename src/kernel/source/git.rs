//! A kernel built from a git repository at a revision:
//! `kernel = { git = "PATH", rev = "REV", config = …, set = {…}, patches = […] }`.
//!
//! Every revision of one repository is built in one tree and one object
//! directory (`<cache>/kernel-builds/git-<key>/`, `obj-<key>/`): fslab's own
//! clone of the repository (`git clone --shared`: it borrows the
//! repository's objects and writes nothing into it), checked out at the
//! revision when a build or a config needs it. Checking out only rewrites
//! the files that differ, so Kbuild recompiles what the commits changed;
//! each image is cached by commit, final config, compiler and patches, so a
//! repeated or resumed bisection builds nothing twice. The tree's first
//! build starts from the objects of another tree of the same version when
//! one exists ([`crate::kernel::build::seed_objects`]).
//!
//! The clone borrows objects through git's alternates: should the
//! repository prune a commit the clone still has checked out, the next
//! checkout fails and the clone is made again.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::{Form, ParseContext, SourceKind};
use crate::kernel::build::{self, BuildRequest, KernelBuild, Tree};
use crate::kernel::KernelArtifacts;
use crate::sys::git::{self, git};

/// The repository, the revision as written and as resolved, and the build.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GitSource {
    /// The repository (absolute, as found: its top directory).
    pub repo: PathBuf,
    /// The revision as written (`v5.8`, `HEAD~3`, a commit).
    pub rev: String,
    /// The commit it names.
    pub commit: String,
    /// Its subject line.
    pub subject: String,
    /// The patch files applied on top, in order (absolute).
    pub patches: Vec<PathBuf>,
    pub build: KernelBuild,
}

/// The tree a [`GitSource`] builds: fslab's clone at the commit.
pub struct GitTree<'a> {
    pub repo: &'a Path,
    pub commit: &'a str,
    pub patches: &'a [PathBuf],
}

/// What the clone holds now, so checking out what it holds already
/// rewrites nothing (and recompiles nothing).
const CHECKED_OUT: &str = "fslab-checked-out";

impl GitTree<'_> {
    fn patch_shas(&self) -> Vec<String> {
        self.patches().into_iter().map(|(sha, _)| sha).collect()
    }

    fn state(&self) -> String {
        format!("{}\n{}\n", self.commit, self.patch_shas().join("\n"))
    }

    /// Check out the commit (and apply the patches) in `clone`.
    fn check_out(&self, clone: &Path) -> Result<()> {
        let state_file = clone.join(".git").join(CHECKED_OUT);
        if fs::read_to_string(&state_file).ok().as_deref() == Some(self.state().as_str()) {
            return Ok(());
        }
        let _ = fs::remove_file(&state_file);
        // Times changed under git's index (a seeded tree's files were given
        // the times of the tree its objects came from): let git look at the
        // contents first, or `--force` rewrites every such file with the
        // time of now and Kbuild recompiles all of them.
        let _ = git::run(clone, &["update-index", "-q", "--refresh"]);
        git(clone, &["checkout", "--force", "--quiet", "--detach", self.commit])?;
        // What a patch added last time is not the commit's.
        git(clone, &["clean", "-fdq"])?;
        for patch in self.patches {
            super::apply_patch(patch, clone, &format!("{} at {}", self.repo.display(), &self.commit[..12]))?;
        }
        fs::write(&state_file, self.state())?;
        Ok(())
    }
}

impl Tree for GitTree<'_> {
    fn reference(&self) -> String {
        format!("{} @ {}", self.repo.display(), &self.commit[..self.commit.len().min(12)])
    }

    fn tree_key(&self) -> String {
        crate::kernel::sha256_str(&format!("git-tree\0{}", self.repo.display()))
    }

    fn content_key(&self) -> Option<String> {
        Some(format!("git\0{}\0{}", self.commit, self.patch_shas().join("\0")))
    }

    fn ready(&self, builds: &Path) -> Result<PathBuf> {
        self.ready_in(builds, true)
    }

    fn patches(&self) -> Vec<(String, String)> {
        self.patches
            .iter()
            .map(|p| (crate::kernel::sha256_file(p).unwrap_or_default(), p.display().to_string()))
            .collect()
    }
}

impl GitTree<'_> {
    /// The clone, made when missing, checked out; made again once when
    /// checking out fails (`again`).
    fn ready_in(&self, builds: &Path, again: bool) -> Result<PathBuf> {
        let name = format!("git-{}", build::short_key(&self.tree_key()));
        let clone = crate::kernel::cache::entry(builds, &name, |tmp| {
            crate::output::diagnostic(&format!(
                "fslab: cloning {} (shared, once) to build its revisions in {}",
                self.repo.display(),
                builds.join(&name).display()
            ));
            let out = git::run(
                builds,
                &[
                    "clone",
                    "--shared",
                    "--no-checkout",
                    "--quiet",
                    &self.repo.to_string_lossy(),
                    &tmp.to_string_lossy(),
                ],
            )?;
            if !out.success {
                bail!("cloning {}: {}", self.repo.display(), out.stderr.trim());
            }
            Ok(())
        })?;
        match self.check_out(&clone) {
            Ok(()) => Ok(clone),
            Err(e) if again => {
                // The clone is fslab's own: made again if it went bad.
                crate::output::diagnostic(&format!("fslab: {e:#}; cloning {} again", self.repo.display()));
                let doomed = builds.join(format!(".{name}.broken-{}", std::process::id()));
                fs::rename(&clone, &doomed)?;
                fs::remove_dir_all(&doomed)?;
                self.ready_in(builds, false)
            }
            Err(e) => Err(e),
        }
    }
}

impl GitSource {
    pub fn tree(&self) -> GitTree<'_> {
        GitTree { repo: &self.repo, commit: &self.commit, patches: &self.patches }
    }

    /// The source for `rev` of `repo`: the revision resolved, the build
    /// prepared (the clone checked out when its config is not memoized yet).
    pub fn at(repo: &Path, rev: &str, patches: Vec<PathBuf>, req: &BuildRequest, cache: &Path) -> Result<GitSource> {
        let repo = repository(repo)?;
        let Some(commit) = git::commit_of(&repo, rev) else {
            bail!("`{rev}` is not a commit of {}", repo.display());
        };
        let subject = git::subject(&repo, &commit)?;
        let mut source =
            GitSource { repo, rev: rev.to_string(), commit, subject, patches, build: KernelBuild::default() };
        source.build = build::prepare(&source.tree(), req, cache)?;
        Ok(source)
    }
}

/// The top directory of the repository holding `path` (its git directory
/// for a bare one).
fn repository(path: &Path) -> Result<PathBuf> {
    if !path.is_dir() {
        bail!("{} is not a directory", path.display());
    }
    if !git::is_repository(path) {
        bail!("{} is not a git repository", path.display());
    }
    let top = git(path, &["rev-parse", "--show-toplevel"]).ok().map(|t| PathBuf::from(t.trim()));
    let top = match top.filter(|t| !t.as_os_str().is_empty()) {
        Some(t) => t,
        None => PathBuf::from(git(path, &["rev-parse", "--absolute-git-dir"])?.trim()),
    };
    fs::canonicalize(&top).with_context(|| format!("resolving {}", top.display()))
}

impl SourceKind for GitSource {
    const NAME: &'static str = "git";
    const FORMS: &'static str =
        "kernel = { git = \"REPOSITORY\", rev = \"REV\", config = …, set = {…}, patches = […] } \
                                 (built from a git repository at a revision, in fslab's own clone)";

    fn claims(form: &Form, _cx: &ParseContext) -> bool {
        form.has("git")
    }

    fn parse(form: &Form, cx: &ParseContext) -> Result<Self> {
        let (req, patches) = super::build_keys(form, cx, &["git", "rev"])?;
        let repo = match form.str_key("git") {
            Some(r) if !r.trim().is_empty() => cx.path(r),
            _ => return Err(cx.usage("kernel.git", "must be the path of a git repository")),
        };
        let rev = match form.str_key("rev") {
            Some(r) if !r.trim().is_empty() => r.to_string(),
            _ => return Err(cx.usage("kernel.rev", "a git kernel needs `rev = \"…\"` (a tag, branch or commit)")),
        };
        let top = repository(&repo).map_err(|e| cx.usage("kernel.git", format!("{e:#}")))?;
        if git::commit_of(&top, &rev).is_none() {
            return Err(cx.usage("kernel.rev", format!("`{rev}` is not a commit of {}", top.display())));
        }
        GitSource::at(&top, &rev, patches, &req, cx.cache).map_err(|e| super::build_error(cx, e))
    }

    fn release(&self) -> &str {
        &self.build.release
    }

    fn shown(&self) -> String {
        self.build.shown()
    }

    fn origin(&self) -> String {
        format!(
            "a kernel built from {} at {} ({} \"{}\"){}",
            self.repo.display(),
            self.rev,
            &self.commit[..12],
            self.subject,
            super::patch_names(&self.patches)
        )
    }

    fn resolve(&self, cache: &Path) -> Result<KernelArtifacts> {
        build::build(&self.tree(), &self.build, cache)
    }

    fn build(&self) -> Option<&KernelBuild> {
        Some(&self.build)
    }

    fn with_request(&self, request: &BuildRequest, cache: &Path) -> Result<Self> {
        let build = build::prepare(&self.tree(), request, cache)?;
        Ok(GitSource { build, ..self.clone() })
    }

    fn keeps(&self) -> Vec<String> {
        vec![self.build.key.clone(), build::short_key(&self.build.tree_key).to_string()]
    }
}
