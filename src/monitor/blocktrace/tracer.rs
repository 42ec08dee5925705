//! The tracer: a private trace instance on one device, drained by a reader
//! thread every [`POLL`](super::POLL) into an [`Accumulator`].

use std::fs::{self, File};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};

use super::*;
use crate::sys::blockdev::DevNum;

/// A running block tracer on one device. [`BlockTracer::stop`] returns the
/// summary; dropping it (also while unwinding) stops the reader and removes
/// the trace instance.
pub struct BlockTracer {
    instance: PathBuf,
    dev: u64,
    started: Instant,
    stop_tx: Option<Sender<()>>,
    handle: Option<JoinHandle<Result<Collected>>>,
    _tracefs: TracefsRef,
}

pub(super) struct Collected {
    acc: Accumulator,
    page_lost: u64,
}

impl BlockTracer {
    /// Starts tracing `device` (a block device node such as `/dev/loop3`).
    pub fn start(device: &Path) -> Result<BlockTracer> {
        let devnum = DevNum::of(device)?;
        let tracefs = TracefsRef::acquire()?;
        let events = tracefs.root.join("events/block");
        for ev in ["block_rq_issue", "block_rq_complete"] {
            if !events.join(ev).join("format").is_file() {
                bail!("tracepoint block:{ev} is not available in {}", tracefs.root.display());
            }
        }
        let name = crate::sys::marker::tagged_name("bt");
        let instance = tracefs.root.join("instances").join(&name);
        fs::create_dir(&instance).with_context(|| format!("creating trace instance {}", instance.display()))?;
        // From here on, the instance is removed on every error path by Drop.
        let mut tracer = BlockTracer {
            instance,
            dev: kernel_dev(devnum),
            started: Instant::now(),
            stop_tx: None,
            handle: None,
            _tracefs: tracefs,
        };
        tracer.configure_and_spawn().with_context(|| format!("starting block trace on {}", device.display()))?;
        Ok(tracer)
    }

    /// The private tracefs instance directory.
    pub fn instance_dir(&self) -> &Path {
        &self.instance
    }

    fn configure_and_spawn(&mut self) -> Result<()> {
        let inst = self.instance.clone();
        write_file(&inst.join("tracing_on"), "0")?;
        // `mono` timestamps are comparable across CPUs and with CLOCK_MONOTONIC.
        write_file(&inst.join("trace_clock"), "mono")?;
        let _ = write_file(&inst.join("buffer_size_kb"), &BUFFER_SIZE_KB.to_string());
        let issue =
            parse_format(&read_file(&inst.join("events/block/block_rq_issue/format"))?, "block_rq_issue/format")?;
        let complete =
            parse_format(&read_file(&inst.join("events/block/block_rq_complete/format"))?, "block_rq_complete/format")?;
        let decoder = BlockDecoder::new(&issue, &complete)?;
        let header_path = inst.join("events/header_page");
        let layout = PageLayout::parse(&read_in_one_call(&header_path)?, "events/header_page")?;
        let page_size = match read_file(&inst.join("buffer_subbuf_size_kb")) {
            Ok(kb) => kb.trim().parse::<usize>().map(|kb| kb * 1024).unwrap_or(4096),
            // Older kernels: one page of data plus header.
            Err(_) => layout.data_offset + 4080,
        };
        for ev in ["block_rq_issue", "block_rq_complete"] {
            let dir = inst.join("events/block").join(ev);
            // The filter runs in the kernel, so other devices cost no buffer space.
            write_file(&dir.join("filter"), &format!("dev == {}", self.dev))?;
            write_file(&dir.join("enable"), "1")?;
        }
        let mut files = Vec::new();
        for e in fs::read_dir(inst.join("per_cpu")).with_context(|| format!("listing {}/per_cpu", inst.display()))? {
            let path = e?.path().join("trace_pipe_raw");
            let f = fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&path)
                .with_context(|| format!("opening {}", path.display()))?;
            files.push(f);
        }
        let (tx, rx) = mpsc::channel::<()>();
        let dev = self.dev;
        let handle = std::thread::Builder::new()
            .name("fslab-blocktrace".into())
            .spawn(move || reader(files, layout, decoder, page_size, dev, rx))
            .context("spawning block-trace reader thread")?;
        self.stop_tx = Some(tx);
        self.handle = Some(handle);
        write_file(&inst.join("tracing_on"), "1")?;
        self.started = Instant::now();
        Ok(())
    }

    /// Stops tracing and returns the summary. Never fails: a reader failure
    /// gives a summary with `enabled: false` and the error as reason.
    pub fn stop(mut self) -> BlockTraceSummary {
        let duration_s = self.started.elapsed().as_secs_f64();
        let _ = fs::write(self.instance.join("tracing_on"), "0");
        let collected = self.join();
        let lost_stats = overruns(&self.instance);
        let removed = remove_instance(&self.instance);
        let mut summary = match collected {
            Some(Ok(mut c)) => {
                let mut s = c.acc.summary();
                s.lost_events = c.page_lost.max(lost_stats);
                s
            }
            Some(Err(e)) => BlockTraceSummary::off(format!("block trace failed during the run: {e:#}")),
            None => BlockTraceSummary::off("block trace reader was not running"),
        };
        summary.duration_s = duration_s;
        if let Err(e) = removed {
            // The data is fine; `fslab cleanup` removes the leftover.
            summary.reason.get_or_insert_with(|| format!("{e:#}"));
        }
        summary
    }

    fn join(&mut self) -> Option<Result<Collected>> {
        if let Some(tx) = self.stop_tx.take() {
            let _ = tx.send(());
        }
        let handle = self.handle.take()?;
        Some(handle.join().unwrap_or_else(|_| Err(anyhow!("block-trace reader thread panicked"))))
    }
}

impl Drop for BlockTracer {
    fn drop(&mut self) {
        let _ = self.join();
        if self.instance.exists() {
            let _ = remove_instance(&self.instance);
        }
    }
}

/// Events the kernel overwrote or dropped, summed over CPUs (`per_cpu/*/stats`).
pub(super) fn overruns(instance: &Path) -> u64 {
    let mut total = 0;
    for e in fs::read_dir(instance.join("per_cpu")).into_iter().flatten().flatten() {
        let Ok(text) = fs::read_to_string(e.path().join("stats")) else { continue };
        for line in text.lines() {
            if let Some((key, value)) = line.split_once(':') {
                if matches!(key.trim(), "overrun" | "dropped events") {
                    total += value.trim().parse::<u64>().unwrap_or(0);
                }
            }
        }
    }
    total
}

/// The reader thread: drains every CPU's `trace_pipe_raw`, reorders events
/// by time within a window and feeds them to the accumulator.
pub(super) fn reader(
    mut files: Vec<File>,
    layout: PageLayout,
    decoder: BlockDecoder,
    page_size: usize,
    dev: u64,
    stop: mpsc::Receiver<()>,
) -> Result<Collected> {
    let mut acc = Accumulator::new(Some(dev));
    let mut pending: Vec<BlockEvent> = Vec::new();
    let mut page_lost = 0u64;
    let mut buf = vec![0u8; page_size];
    loop {
        let stopping = match stop.recv_timeout(POLL) {
            Ok(()) | Err(RecvTimeoutError::Disconnected) => true,
            Err(RecvTimeoutError::Timeout) => false,
        };
        let round_start = mono_ns();
        for f in &mut files {
            loop {
                match f.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        page_lost += layout.parse_page(&buf[..n], |ts, data| {
                            if let Some(e) = decoder.decode(ts, data) {
                                pending.push(e);
                            }
                        });
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e).context("reading trace_pipe_raw"),
                }
            }
        }
        pending.sort_by_key(|e| e.ts_ns);
        let ready = if stopping {
            pending.len()
        } else {
            let watermark = round_start.saturating_sub(REORDER_WINDOW_NS);
            pending.partition_point(|e| e.ts_ns < watermark)
        };
        for e in pending.drain(..ready) {
            acc.add(&e);
        }
        if stopping {
            return Ok(Collected { acc, page_lost });
        }
    }
}
