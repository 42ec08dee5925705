//! Running host tools (`mkfs.*`, `mount`, `losetup`, `dumpe2fs`, `xfs_info`,
//! …): always an argument list, never a shell; always a deadline, so a hung
//! tool cannot hang fslab; always `LC_ALL=C`, because fslab parses what
//! tools print. Workload processes, which need a cgroup, a process group
//! and cancellation, go through [`crate::workload::RunContext`] instead.

use std::io::{ErrorKind, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// What a finished inspection command printed.
#[derive(Debug, Clone)]
pub struct Output {
    pub success: bool,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Why an inspection command produced no output.
#[derive(Debug)]
pub enum RunError {
    /// The program is not on `PATH` (or not executable).
    NotFound,
    /// Spawning or reading failed for another reason.
    Io(std::io::Error),
    /// The command did not finish before the deadline and was killed.
    TimedOut,
    /// fslab was asked to stop (SIGINT/SIGTERM) and killed the command.
    Interrupted,
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::NotFound => write!(f, "not installed"),
            RunError::Io(e) => write!(f, "{e}"),
            RunError::TimedOut => write!(f, "timed out"),
            RunError::Interrupted => write!(f, "interrupted"),
        }
    }
}

/// Deadline of inspection tools: they answer in milliseconds; 20 s is
/// generous for `dumpe2fs` on a slow SD card.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);

/// Deadline of tools that build testbeds (mkfs, mount, losetup, mksquashfs
/// on a large tree): generous, but a hung tool still cannot hang a run.
pub const TOOL_TIMEOUT: Duration = Duration::from_secs(600);

/// Run a host tool that must succeed and return its stdout. Errors carry the
/// command line and the first lines of stderr (tools like mkfs.xfs follow
/// the real message with a long usage text).
pub fn run_tool(program: &str, args: &[&str]) -> anyhow::Result<String> {
    let output = run(program, args, TOOL_TIMEOUT).map_err(|e| match e {
        RunError::NotFound => anyhow::anyhow!("running {program}: not installed (or not on PATH)"),
        other => anyhow::anyhow!("running `{program} {}`: {other}", args.join(" ")),
    })?;
    if !output.success {
        let lines: Vec<&str> = output.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        let mut message: Vec<&str> = lines.iter().copied().take(4).collect();
        if lines.len() > 4 {
            message.push("…");
        }
        let status = output.code.map_or("killed by a signal".to_string(), |c| format!("exit status: {c}"));
        anyhow::bail!("`{} {}` failed ({status}): {}", program, args.join(" "), message.join("\n"));
    }
    Ok(output.stdout)
}

/// Is `program` an executable on `PATH` (or the sbin directories, see
/// [`resolve`]), or an existing path when it names one?
pub fn have_program(program: &str) -> bool {
    if program.contains('/') {
        return std::path::Path::new(program).exists();
    }
    resolve(program).is_absolute()
}

/// Run `program args…` with stdin closed, capturing both output streams.
pub fn run(program: &str, args: &[&str], timeout: Duration) -> Result<Output, RunError> {
    run_in(program, args, None, timeout)
}

/// Like [`run`], in working directory `dir` when given.
pub fn run_in(program: &str, args: &[&str], dir: Option<&Path>, timeout: Duration) -> Result<Output, RunError> {
    run_with(program, args, &RunIn { dir, timeout, ..RunIn::default() })
}

/// Where and how long a tool runs, for [`run_with`].
#[derive(Debug, Clone)]
pub struct RunIn<'a> {
    /// Working directory (default: fslab's).
    pub dir: Option<&'a Path>,
    /// Extra environment variables.
    pub env: &'a [(&'a str, &'a std::ffi::OsStr)],
    pub timeout: Duration,
    /// Kill the command when fslab is asked to stop (SIGINT/SIGTERM), for
    /// long commands such as a user's build.
    pub cancellable: bool,
}

impl Default for RunIn<'_> {
    fn default() -> Self {
        RunIn { dir: None, env: &[], timeout: DEFAULT_TIMEOUT, cancellable: false }
    }
}

/// Run `program args…` as [`run`] does, with the settings of `how`.
pub fn run_with(program: &str, args: &[&str], how: &RunIn) -> Result<Output, RunError> {
    let timeout = how.timeout;
    let mut cmd = Command::new(resolve(program));
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Tools localise their messages; we parse them.
        .env("LC_ALL", "C");
    for (key, value) in how.env {
        cmd.env(key, value);
    }
    if let Some(d) = how.dir {
        cmd.current_dir(d);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) if e.kind() == ErrorKind::NotFound => return Err(RunError::NotFound),
        Err(e) if e.kind() == ErrorKind::PermissionDenied => return Err(RunError::NotFound),
        Err(e) => return Err(RunError::Io(e)),
    };
    // Drain pipes on threads so a chatty tool cannot block on a full pipe
    // while we wait for it.
    let out_reader = child.stdout.take().map(|mut s| {
        thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = s.read_to_end(&mut buf);
            buf
        })
    });
    let err_reader = child.stderr.take().map(|mut s| {
        thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = s.read_to_end(&mut buf);
            buf
        })
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) => {
                if start.elapsed() > timeout {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(RunError::TimedOut);
                }
                if how.cancellable && super::signals::cancelled() {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(RunError::Interrupted);
                }
                thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(RunError::Io(e)),
        }
    };
    let collect = |h: Option<thread::JoinHandle<Vec<u8>>>| {
        h.and_then(|h| h.join().ok()).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default()
    };
    Ok(Output {
        success: status.success(),
        code: status.code(),
        stdout: collect(out_reader),
        stderr: collect(err_reader),
    })
}

/// First non-empty line of `text`, trimmed.
pub fn first_line(text: &str) -> Option<&str> {
    text.lines().map(str::trim).find(|l| !l.is_empty())
}

/// Find `program` on `PATH`, then in the sbin directories that non-root
/// `PATH`s often lack (`dumpe2fs`, `xfs_info` and `mkfs.*` live there).
/// Returns the name unchanged when nothing is found, so the spawn reports
/// "not installed".
pub fn resolve(program: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    if program.contains('/') {
        return program.into();
    }
    let path_var = std::env::var_os("PATH").unwrap_or_default();
    let extra = ["/usr/local/sbin", "/usr/sbin", "/sbin"];
    let dirs = std::env::split_paths(&path_var).chain(extra.iter().map(std::path::PathBuf::from));
    for dir in dirs {
        let cand = dir.join(program);
        if let Ok(md) = std::fs::metadata(&cand) {
            if md.is_file() && md.permissions().mode() & 0o111 != 0 {
                return cand;
            }
        }
    }
    program.into()
}

/// Standard output of an inspection tool (`dumpe2fs -h`, `xfs_info`) that
/// must succeed, or an error carrying the command line and its message.
pub fn inspect_tool(program: &str, args: &[&str]) -> anyhow::Result<String> {
    let line = format!("{program} {}", args.join(" "));
    match run(program, args, DEFAULT_TIMEOUT) {
        Ok(out) if out.success => Ok(out.stdout),
        Ok(out) => {
            let msg = failure_message(program, &out.stderr, &out.stdout);
            anyhow::bail!("`{line}` failed (exit {}): {msg}", exit_text(out.code))
        }
        Err(e) => anyhow::bail!("`{line}`: {e}"),
    }
}

/// The useful part of a failed tool's output: its non-empty stderr lines
/// without the version banner e2fsprogs prints first
/// (`dumpe2fs 1.47.0 (5-Feb-2023)`), joined and capped.
fn failure_message(program: &str, stderr: &str, stdout: &str) -> String {
    let banner = |l: &str| {
        l.strip_prefix(program)
            .and_then(|r| r.strip_prefix(' '))
            .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
    };
    let mut lines: Vec<&str> = stderr.lines().map(str::trim).filter(|l| !l.is_empty() && !banner(l)).collect();
    if lines.is_empty() {
        lines = stdout.lines().map(str::trim).filter(|l| !l.is_empty()).take(3).collect();
    }
    let mut msg = lines.join("; ");
    if msg.is_empty() {
        msg = "no output".to_string();
    }
    if msg.chars().count() > 400 {
        msg = format!("{}…", msg.chars().take(400).collect::<String>());
    }
    msg
}

/// A tool's exit code, or `by signal`.
pub fn exit_text(code: Option<i32>) -> String {
    code.map_or_else(|| "by signal".to_string(), |c| c.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_messages_skip_the_banner() {
        let err = "dumpe2fs 1.47.0 (5-Feb-2023)\ndumpe2fs: Operation not permitted while trying to open /dev/vda\nCouldn't find valid filesystem superblock.\n";
        assert_eq!(
            failure_message("dumpe2fs", err, ""),
            "dumpe2fs: Operation not permitted while trying to open /dev/vda; Couldn't find valid filesystem superblock."
        );
        assert_eq!(failure_message("x", "", "out\n"), "out");
        assert_eq!(failure_message("x", "", ""), "no output");
    }
}
