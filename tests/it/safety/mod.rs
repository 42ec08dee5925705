//! Trustworthy under faults, bad input and scripts (issue 11): fslab never
//! formats or deletes what it did not create, says why it refused, exits
//! with the documented status, and leaves nothing behind. Each test drives
//! the `fslab` binary as a script would; see docs/faults.md for the table.

mod bounds;
mod cleanup;
mod device;
mod dirs;
mod dry_run;
mod exit_codes;
mod resume;
mod space;
mod trusted_dirs;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::common;
pub use crate::common::testbed_dirs;

/// Tests that kill fslab and then clean up, or run `fslab cleanup` over
/// every known work directory, run one at a time so one's cleanup never
/// removes the leftovers another is about to look for.
static CLEANUP: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn cleanup_lock() -> std::sync::MutexGuard<'static, ()> {
    CLEANUP.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// How a finished `fslab` invocation ended.
#[derive(Debug)]
pub struct Ran {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    /// Assert the exit code, showing everything fslab said when it differs.
    pub fn expect(&self, code: i32) -> &Ran {
        assert_eq!(self.code, Some(code), "exit status\nstdout:\n{}\nstderr:\n{}", self.stdout, self.stderr);
        self
    }

    pub fn says(&self, text: &str) -> &Ran {
        assert!(
            self.stderr.contains(text) || self.stdout.contains(text),
            "expected {text:?}\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }
}

/// The fslab binary with `args`.
pub fn fslab_cmd<I, S>(args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = Command::new(common::fslab_bin());
    cmd.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd
}

/// Run fslab to the end (killed after 5 minutes, so a hang fails the test
/// instead of the suite).
pub fn fslab<I, S>(args: I) -> Ran
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    finish(fslab_cmd(args).spawn().expect("fslab starts"))
}

/// Wait for a started fslab (see [`fslab`]).
pub fn finish(mut child: Child) -> Ran {
    let deadline = Instant::now() + Duration::from_secs(300);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    Ran {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `fslab run SPEC --db DIR/results.db EXTRA…`.
pub fn run_args(dir: &Path, spec: &Path, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        "run".to_string(),
        spec.display().to_string(),
        "--db".to_string(),
        dir.join("results.db").display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// An experiment file in `dir` with one ext4 variant (`variant` lines
/// added) and one command workload, its work directory `dir/work`.
pub fn ext4_spec(dir: &Path, variant: &str, command: &str) -> PathBuf {
    common::write_spec(
        dir,
        "exp.toml",
        &format!(
            "name = \"safety\"\nrepetitions = 1\nworkdir = \"{}\"\n[[variant]]\nname = \"a\"\nfs = \"ext4\"\n\
             size = \"64MiB\"\n{variant}\n[[workload]]\nkind = \"command\"\ncommand = \"{command}\"\n",
            dir.join("work").display()
        ),
    )
}

/// Wait until something in the mount table carries `needle`.
pub fn wait_for_mount(child: &mut Child, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        if std::fs::read_to_string("/proc/self/mountinfo").unwrap().contains(needle) {
            sleep(Duration::from_millis(300));
            return;
        }
        assert!(child.try_wait().unwrap().is_none(), "fslab exited before its testbed appeared");
        sleep(Duration::from_millis(50));
    }
    panic!("no mount with {needle} appeared");
}

fn tool(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A loop device over a fresh image, with whatever the test mounts from
/// it; all unmounted and detached when dropped (also on a failed assert).
pub struct LoopDev {
    pub dev: PathBuf,
    mounts: Vec<PathBuf>,
    stacked: Vec<PathBuf>,
}

impl LoopDev {
    /// `size_mb` MiB; with `partition`, an MBR with one partition from 1 MiB
    /// to the end, known to the kernel as `<dev>p1`.
    pub fn new(dir: &Path, name: &str, size_mb: u64, partition: bool) -> LoopDev {
        let image = dir.join(name);
        let file = std::fs::File::create(&image).unwrap();
        file.set_len(size_mb << 20).unwrap();
        if partition {
            use std::io::{Seek, SeekFrom, Write};
            let mut mbr = [0u8; 512];
            let entry = &mut mbr[446..462];
            entry[4] = 0x83; // Linux
            entry[8..12].copy_from_slice(&2048u32.to_le_bytes());
            entry[12..16].copy_from_slice(&(((size_mb << 20) / 512 - 2048) as u32).to_le_bytes());
            mbr[510] = 0x55;
            mbr[511] = 0xaa;
            let mut f = &file;
            f.seek(SeekFrom::Start(0)).unwrap();
            f.write_all(&mbr).unwrap();
        }
        drop(file);
        let mut args = vec!["--find", "--show"];
        if partition {
            args.push("--partscan");
        }
        let image_str = image.to_str().unwrap().to_string();
        args.push(&image_str);
        let dev = PathBuf::from(tool("losetup", &args));
        if partition {
            // The test kernel has no partition-table parsers: add it by BLKPG.
            let sectors = ((size_mb << 20) / 512 - 2048).to_string();
            tool("addpart", &[dev.to_str().unwrap(), "1", "2048", &sectors]);
        }
        LoopDev { dev, mounts: Vec::new(), stacked: Vec::new() }
    }

    /// A device node for the first partition, once the kernel has made it.
    /// Made by hand in `dir` (the test host runs no udev to make `/dev/loopNp1`).
    pub fn partition(&self, dir: &Path) -> PathBuf {
        let name = format!("{}p1", self.dev.file_name().unwrap().to_string_lossy());
        let sys = PathBuf::from(format!("/sys/class/block/{name}/dev"));
        let deadline = Instant::now() + Duration::from_secs(10);
        while !sys.exists() {
            assert!(Instant::now() < deadline, "{} never appeared", sys.display());
            sleep(Duration::from_millis(50));
        }
        let numbers = std::fs::read_to_string(&sys).unwrap();
        let (major, minor) = numbers.trim().split_once(':').unwrap();
        let node = dir.join(&name);
        tool("mknod", &[node.to_str().unwrap(), "b", major, minor]);
        node
    }

    /// mkfs.ext4 `what` and mount it at `at` (unmounted on drop).
    pub fn mount_ext4(&mut self, what: &Path, at: &Path) {
        std::fs::create_dir_all(at).unwrap();
        tool("mkfs.ext4", &["-q", "-F", what.to_str().unwrap()]);
        tool("mount", &[what.to_str().unwrap(), at.to_str().unwrap()]);
        self.mounts.push(at.to_path_buf());
    }

    /// A second loop device backed by this one (detached on drop).
    pub fn stack_loop(&mut self) -> PathBuf {
        let upper = PathBuf::from(tool("losetup", &["--find", "--show", self.dev.to_str().unwrap()]));
        self.stacked.push(upper.clone());
        upper
    }
}

impl Drop for LoopDev {
    fn drop(&mut self) {
        for at in self.mounts.iter().rev() {
            let _ = Command::new("umount").arg(at).status();
        }
        for dev in self.stacked.iter().rev().chain(std::iter::once(&self.dev)) {
            let _ = Command::new("losetup").arg("-d").arg(dev).status();
        }
        // Wait until the kernel has let go, so no later test sees it.
        let deadline = Instant::now() + Duration::from_secs(10);
        while fslab::testbed::loopdev::backing_file(&self.dev).is_some() && Instant::now() < deadline {
            sleep(Duration::from_millis(50));
        }
    }
}
