//! fslab's exit status: the one mapping from how a command ended to the
//! number scripts and CI see.
//!
//! | code | meaning |
//! | --- | --- |
//! | 0 | success (for `run`: every run ok) |
//! | 1 | some or all runs failed (the summary says how many and why), or another failure |
//! | 2 | usage or spec error: bad flags, a bad experiment file, `--resume` with nothing to resume, a refused `--device` or system directory |
//! | 3 | environment or privilege problem: not root, a missing tool, no space |
//! | 128+N | stopped by signal N (130 SIGINT, 143 SIGTERM, 129 SIGHUP), after tearing everything down |
//!
//! Errors whose class is known where they are made are wrapped with
//! [`usage`] or [`environment`]; [`classify`] reads that back (and a stop
//! signal, and ENOSPC) for `main`.

use std::fmt;
use std::process::ExitCode;

use crate::sys::signals;

/// How a command ended, as scripts see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    Success,
    /// Runs failed (or something else did that is not usage or environment).
    Failed,
    Usage,
    Environment,
    /// Stopped by this signal.
    Signal(i32),
}

impl Exit {
    pub fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::Failed => 1,
            Exit::Usage => 2,
            Exit::Environment => 3,
            Exit::Signal(sig) => signals::exit_code(sig),
        }
    }

    /// The stop signal received, if any, as an exit.
    pub fn signalled() -> Option<Exit> {
        signals::received().map(Exit::Signal)
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit.code())
    }
}

/// The exit status table for `--help`.
pub const HELP: &str = "\
Exit status:
  0      success (fslab run: every run ok)
  1      some or all runs failed (the summary says how many and why), or another failure
  2      usage or experiment-file error (also a missing --db, experiment or variant, --resume with nothing to resume, a refused --device or system directory)
  3      environment or privilege problem (not root, a missing tool, not enough free space)
  128+N  stopped by signal N after tearing everything down (130 SIGINT, 143 SIGTERM, 129 SIGHUP)";

/// An error that knows its exit status. Displays and chains exactly as the
/// error it wraps.
#[derive(Debug)]
pub struct Classified {
    pub exit: Exit,
    error: anyhow::Error,
}

impl fmt::Display for Classified {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The wrapped error's own message; its causes follow as our source.
        write!(f, "{}", self.error)
    }
}

impl std::error::Error for Classified {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.chain().nth(1)
    }
}

/// The class given where an error was made wins over one added on the way up
/// (an experiment file that needs the network fails with 3, not 2).
fn classified(exit: Exit, error: anyhow::Error) -> anyhow::Error {
    if error.chain().any(|e| e.is::<Classified>()) {
        return error;
    }
    anyhow::Error::new(Classified { exit, error })
}

/// Bad flags, a bad experiment file, a request that cannot be done (exit 2).
pub fn usage(error: impl Into<anyhow::Error>) -> anyhow::Error {
    classified(Exit::Usage, error.into())
}

/// Not root, a missing tool, no space (exit 3).
pub fn environment(error: impl Into<anyhow::Error>) -> anyhow::Error {
    classified(Exit::Environment, error.into())
}

/// The exit status for an error that ended a command: a stop signal wins
/// (the error is then its consequence), then a class given where the error
/// was made, then ENOSPC (environment); anything else is 1.
pub fn classify(error: &anyhow::Error) -> Exit {
    if let Some(exit) = Exit::signalled() {
        return exit;
    }
    if let Some(exit) = class(error) {
        return exit;
    }
    if error.chain().any(|e| e.downcast_ref::<crate::sys::trusted::Untrusted>().is_some()) {
        return Exit::Usage; // a directory the user chose (or left) another user's
    }
    if is_no_space(error) {
        return Exit::Environment;
    }
    Exit::Failed
}

/// The class given where `error` was made, if one was.
pub fn class(error: &anyhow::Error) -> Option<Exit> {
    error.chain().find_map(|e| e.downcast_ref::<Classified>()).map(|c| c.exit)
}

/// Does `err` come from ENOSPC (or a disk quota) anywhere in its chain?
pub fn is_no_space(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::raw_os_error)
            .is_some_and(|code| code == libc::ENOSPC || code == libc::EDQUOT)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_survive_context_and_display_unchanged() {
        let inner = anyhow::anyhow!("root cause").context("while parsing");
        let e = usage(inner).context("running");
        assert_eq!(classify(&e), Exit::Usage);
        assert_eq!(format!("{e:#}"), "running: while parsing: root cause");
        let e = environment(anyhow::anyhow!("not root"));
        assert_eq!(classify(&e), Exit::Environment);
        let nospace = anyhow::Error::from(std::io::Error::from_raw_os_error(libc::ENOSPC)).context("writing");
        assert_eq!(classify(&nospace), Exit::Environment);
        assert_eq!(classify(&anyhow::anyhow!("a run failed")), Exit::Failed);
        assert_eq!(Exit::Signal(libc::SIGTERM).code(), 143);
        assert_eq!(Exit::Signal(libc::SIGHUP).code(), 129);
        assert_eq!(Exit::Signal(libc::SIGINT).code(), 130);
    }
}
