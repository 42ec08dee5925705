//! Where fslab's text goes: standard output for results, standard error for
//! progress and diagnostics. Rust ignores SIGPIPE, so writing to a closed
//! pipe (`fslab … | head`) returns `BrokenPipe`, which `print!` turns into a
//! panic. Everything fslab prints goes through here instead (ripgrep's
//! model): results return the error so `main` can exit quietly, and
//! diagnostics never fail, so a long experiment keeps running and storing
//! its runs when the terminal or the reader at the other end goes away.

use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};

/// Writes `text` to standard output and flushes it. A closed pipe comes
/// back as an `io::Error` of kind `BrokenPipe` (see [`is_broken_pipe`]).
pub fn print(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// True when `err` (anywhere in its chain) is a closed pipe: the reader
/// has gone, which is not a failure of the command.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| e.downcast_ref::<io::Error>().is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe))
}

static STDERR_GONE: AtomicBool = AtomicBool::new(false);

/// Writes one line to standard error and never fails or panics. The first
/// time standard error turns out to be a closed pipe, it is pointed at
/// `/dev/null`, so that every later `eprintln!` anywhere in the process
/// (teardown warnings included) cannot panic either.
pub fn diagnostic(line: &str) {
    if STDERR_GONE.load(Ordering::Relaxed) {
        return;
    }
    let mut err = io::stderr().lock();
    let written = err.write_all(line.as_bytes()).and_then(|_| err.write_all(b"\n")).and_then(|_| err.flush());
    if let Err(e) = written {
        STDERR_GONE.store(true, Ordering::Relaxed);
        if e.kind() == io::ErrorKind::BrokenPipe {
            silence(err.as_raw_fd());
        }
    }
}

/// Points standard output at `/dev/null` after it was found closed, so
/// that nothing later in the process panics writing to it.
pub fn stdout_gone() {
    silence(io::stdout().as_raw_fd());
}

fn silence(fd: i32) {
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        // SAFETY: dup2 onto a descriptor this process owns; `null` stays valid for the call.
        unsafe {
            libc::dup2(null.as_raw_fd(), fd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broken_pipe_is_found_in_the_chain() {
        let e = anyhow::Error::from(io::Error::from(io::ErrorKind::BrokenPipe)).context("printing");
        assert!(is_broken_pipe(&e));
        assert!(!is_broken_pipe(&anyhow::anyhow!("other")));
        let e = anyhow::Error::from(io::Error::from(io::ErrorKind::PermissionDenied));
        assert!(!is_broken_pipe(&e));
    }
}
