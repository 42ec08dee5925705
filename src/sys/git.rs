//! git, run as a host tool (`sys::exec`): the one home for the commands
//! fslab asks of a repository (kernel sources at a revision, commit
//! bisection). Every call has a deadline (checking out a kernel tree on a
//! slow disk takes minutes; a hung one must still end) and is cancelled by
//! a stop signal.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Result};

use super::exec::{self, RunIn};

/// Deadline of one git command.
pub const TIMEOUT: Duration = Duration::from_secs(1800);

/// `git args…` in `dir`, whatever its exit status.
pub fn run(dir: &Path, args: &[&str]) -> Result<exec::Output> {
    exec::run_with("git", args, &RunIn { dir: Some(dir), timeout: TIMEOUT, cancellable: true, ..Default::default() })
        .map_err(|e| anyhow::anyhow!("running `git {}` in {}: {e}", args.join(" "), dir.display()))
}

/// `git args…` in `dir`: its output, or an error with git's own words.
pub fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let out = run(dir, args)?;
    if !out.success {
        bail!("`git {}` in {} failed: {}", args.join(" "), dir.display(), out.stderr.trim());
    }
    Ok(out.stdout)
}

/// The commit `rev` names in `repo`, or None.
pub fn commit_of(repo: &Path, rev: &str) -> Option<String> {
    let spec = format!("{rev}^{{commit}}");
    git(repo, &["rev-parse", "--verify", "--quiet", &spec]).ok().map(|s| s.trim().to_string())
}

/// The subject line of `commit`.
pub fn subject(repo: &Path, commit: &str) -> Result<String> {
    Ok(git(repo, &["log", "-1", "--format=%s", commit])?.trim().to_string())
}

/// Is `dir` inside a git repository (a work tree or a bare one)?
pub fn is_repository(dir: &Path) -> bool {
    run(dir, &["rev-parse", "--git-dir"]).is_ok_and(|o| o.success)
}
