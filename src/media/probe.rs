//! `fslab device probe`: measure a flash device the way flashbench does
//! (Arnd Bergmann's tool for the Linaro flash card survey), and say which
//! `device = { … }` line emulates it.
//!
//! Every figure comes from timing O_DIRECT requests, one at a time, inside
//! the region the probe was given; each test writes into fresh 64 MiB
//! chunks of it (twice the largest AU the probe looks for), so no test
//! meets an AU an earlier one left open:
//!
//! - **AU size**: flashbench's `-a` times *reads* straddling 2^k
//!   boundaries; the models (and many cards, its README says) show nothing
//!   there, so the probe times *writes* the same way. A write straddling
//!   an AU boundary opens two AUs; with every open slot already taken by a
//!   half-written AU (eight untimed warm-up writes), that is two garbage
//!   collections instead of one. The AU size is the smallest boundary from
//!   which on every larger one the straddling write costs at least 1.5
//!   times (and 5 ms more than) the write just after the boundary, the
//!   faster of two pairs deciding.
//! - **open-AU limit**: flashbench's `--open-au`: N streams at AU-aligned
//!   offsets written round-robin in 256 KiB steps (a first untimed round,
//!   then timed ones), N = 1..8; the limit is the N before throughput falls
//!   below 35% of the best of the smaller N (the presets fall to 10-15%;
//!   parallel load moved the rate below the cliff by up to 40%).
//! - **page size**: forward-skipping writes of 4 KiB..128 KiB inside one
//!   open AU; a scattered write programs whole pages, so time stops
//!   falling (or staying flat) and grows with the size from the page size
//!   on.
//! - **linear only**: writes going backwards inside an open AU cost a
//!   garbage collection on a card that writes an AU only forwards.
//! - **rates**: sequential and random reads and writes at 4 KiB, 64 KiB
//!   and 1 MiB; a least-squares line through the sequential times gives
//!   per-command latency and transfer rate (as flashbench's `regression`);
//!   the GC copy rate is the AU's worth of copying the straddling writes
//!   cost extra. A busy host only adds time, so, as flashbench does, the
//!   fastest of repeated requests stands for the medium.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use rand_core::{Rng, SeedableRng};
use serde::Serialize;

use crate::units::Bytes;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
/// The largest AU the probe looks for (the survey's largest are 8-16 MiB).
pub const MAX_AU: u64 = 32 * MIB;
/// Every test writes into fresh chunks of this size.
const CHUNK: u64 = 2 * MAX_AU;
/// The smallest AU candidate.
const MIN_AU: u64 = 256 * KIB;
/// Half of a straddling write.
const STRADDLE_HALF: u64 = 16 * KIB;
/// Open slots filled before the AU test; also the most streams tried.
const MAX_STREAMS: u32 = 8;
const OPEN_AU_BLOCK: u64 = 256 * KIB;
const PAGE_SIZES: [u64; 6] = [4 * KIB, 8 * KIB, 16 * KIB, 32 * KIB, 64 * KIB, 128 * KIB];
const PAGE_STRIDE: u64 = 256 * KIB;
const RATE_SIZES: [u64; 3] = [4 * KIB, 64 * KIB, MIB];
/// The least extra time a straddling write must cost to count: a GC of
/// the presets' AUs takes 70-560 ms, while a busy host stalled a plain
/// loop device's writes by up to 3 ms here.
const JUMP_MIN_S: f64 = 5e-3;
/// The pause before every request (see `Io::io`).
const IDLE_GAP: std::time::Duration = std::time::Duration::from_millis(3);
/// Chunks the probe may need: warm-up, two pairs per AU candidate, the
/// page and linear tests, 1+2+…+8 streams, sequential rates.
pub const CHUNKS_NEEDED: u64 = MAX_STREAMS as u64 + 4 * 8 + 7 + 36 + 3;

/// How thorough the probe is.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Stop each search at its first answer (no confirmation), fewer
    /// repetitions, shorter rate cells: a few seconds to half a minute
    /// against a preset.
    pub quick: bool,
}

/// Where on the device the probe may write: `offset` and `len` in bytes.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Region {
    pub offset: u64,
    pub len: u64,
}

impl Region {
    /// The bytes the probe needs.
    pub fn needed() -> u64 {
        CHUNKS_NEEDED * CHUNK
    }

    /// `OFFSET:LEN` (sizes such as `1GiB`), checked against the device's
    /// `size`: aligned to 1 MiB and large enough.
    pub fn parse(text: &str, size: u64) -> Result<Region, String> {
        let (offset, len) = text.split_once(':').ok_or("must be OFFSET:LEN, e.g. 1GiB:6GiB")?;
        let region = Region { offset: Bytes::parse(offset)?.0, len: Bytes::parse(len)?.0 };
        region.check(size)?;
        Ok(region)
    }

    pub fn check(&self, size: u64) -> Result<(), String> {
        if !self.offset.is_multiple_of(MIB) || !self.len.is_multiple_of(MIB) {
            return Err("offset and length must be multiples of 1MiB".into());
        }
        if self.offset.checked_add(self.len).is_none_or(|end| end > size) {
            return Err(format!("ends beyond the device ({} bytes)", size));
        }
        if self.len < Region::needed() {
            return Err(format!(
                "is too small: the probe needs {} (64MiB chunks, fresh for every test)",
                Bytes(Region::needed())
            ));
        }
        Ok(())
    }
}

/// One AU candidate: the write straddling a `boundary` against the write
/// just after one.
#[derive(Clone, Debug, Serialize)]
pub struct AuStep {
    pub boundary: u64,
    pub straddling_s: f64,
    pub after_s: f64,
    pub jump: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct OpenAuStep {
    pub streams: u32,
    pub mbps: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct PageStep {
    pub size: u64,
    /// The fastest forward-skipping write of `size` (a busy host only adds
    /// time).
    pub seconds: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Rate {
    /// `seq-read`, `seq-write`, `rand-read`, `rand-write`.
    pub pattern: &'static str,
    pub size: u64,
    pub requests: u64,
    /// Median seconds per request.
    pub seconds: f64,
    /// The fastest request: what the medium itself takes (a busy host only
    /// adds time), for the fitted line.
    pub fastest_s: f64,
    pub mbps: f64,
    pub iops: f64,
}

/// A straight line through per-request times: seconds = latency + bytes / rate.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct LinearFit {
    pub latency_s: f64,
    pub mbps: f64,
}

/// Everything the probe measured.
#[derive(Clone, Debug, Serialize)]
pub struct Probe {
    pub device: String,
    pub region: Region,
    /// None: no boundary where writes cost more (not AU-managed flash, or
    /// more open AUs than the probe fills).
    pub au: Option<u64>,
    pub au_steps: Vec<AuStep>,
    /// None: no cliff up to [`MAX_STREAMS`] streams.
    pub open_aus: Option<u32>,
    pub open_au_steps: Vec<OpenAuStep>,
    pub page: Option<u64>,
    pub page_steps: Vec<PageStep>,
    /// Writing backwards in an open AU costs a garbage collection.
    pub linear_only: Option<bool>,
    pub rates: Vec<Rate>,
    pub read: Option<LinearFit>,
    pub write: Option<LinearFit>,
    /// The GC copy rate, from what straddling writes cost extra.
    pub copy_mbps: Option<f64>,
    pub elapsed_s: f64,
    /// [`Probe::device_line`].
    pub device_line: String,
}

/// The device under probe: an O_DIRECT descriptor, writes confined to the
/// region, and an aligned buffer.
struct Io {
    file: File,
    region: Region,
    buf: Vec<u8>,
    /// Offset into `buf` where its 4 KiB-aligned part starts.
    start: usize,
    next_chunk: u64,
}

impl Io {
    fn open(path: &Path, region: Region) -> Result<Io> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .with_context(|| format!("opening {} for direct I/O", path.display()))?;
        // Not zeros: some media compress or deduplicate.
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(17);
        let mut buf = vec![0u8; MIB as usize + 4096];
        rng.fill_bytes(&mut buf);
        let start = buf.as_ptr().align_offset(4096);
        Ok(Io { file, region, buf, start, next_chunk: 0 })
    }

    /// A fresh chunk's offset within the region.
    fn chunk(&mut self) -> Result<u64> {
        let at = self.next_chunk * CHUNK;
        if at + CHUNK > self.region.len {
            bail!("the probe ran out of its region ({} bytes)", self.region.len);
        }
        self.next_chunk += 1;
        Ok(at)
    }

    /// Seconds to write `len` bytes at `offset` (within the region).
    fn write(&mut self, offset: u64, len: u64) -> Result<f64> {
        self.io(true, offset, len)
    }

    fn read(&mut self, offset: u64, len: u64) -> Result<f64> {
        self.io(false, offset, len)
    }

    fn io(&mut self, write: bool, offset: u64, len: u64) -> Result<f64> {
        crate::sys::signals::check_cancelled()?;
        // Let the medium go idle first: fslab's media server counts a
        // request arriving within 2 ms of idle as queued behind the last
        // one and answers it up to 2 ms early (FUSE's round trip is not the
        // medium's time), which would shorten back-to-back requests by a
        // varying amount. After a pause each request takes its full time,
        // so the fastest of several is the medium's; on a real device the
        // pause changes nothing.
        std::thread::sleep(IDLE_GAP);
        // The one place the probe touches the device: never outside the region.
        assert!(offset + len <= self.region.len && len <= MIB, "probe request outside its region");
        let buf = &mut self.buf[self.start..self.start + len as usize];
        let at = self.region.offset + offset;
        let started = Instant::now();
        if write { self.file.write_all_at(buf, at) } else { self.file.read_exact_at(buf, at) }
            .with_context(|| format!("{} {len} bytes at {at}", if write { "writing" } else { "reading" }))?;
        Ok(started.elapsed().as_secs_f64())
    }
}

/// Probe the block device `path` (already checked by the caller) within
/// `region`.
pub fn probe(path: &Path, region: Region, options: Options) -> Result<Probe> {
    let started = Instant::now();
    let mut io = Io::open(path, region)?;
    let (au, au_steps, copy_gap) = find_au(&mut io, options)?;
    let block_au = au.unwrap_or(4 * MIB);
    let (open_aus, open_au_steps) = find_open_aus(&mut io, block_au, options)?;
    // Without AUs a falling rate is something else (a disk seeking between
    // the streams), not an open-AU limit.
    let open_aus = open_aus.filter(|_| au.is_some());
    let rates = measure_rates(&mut io, options)?;
    let write = fit(&rates, "seq-write");
    let read = fit(&rates, "seq-read");
    let copy_mbps = match (au, copy_gap) {
        (Some(au), Some(extra)) if extra > 0.0 => Some((au - 2 * STRADDLE_HALF) as f64 / extra / 1e6),
        _ => None,
    };
    let (page, page_steps, linear_only) = match au {
        Some(au) => {
            let one = write.map_or(0.0, |w| w.latency_s + (16 * KIB) as f64 / (w.mbps * 1e6));
            let linear = backwards_costs_gc(&mut io, au, one, options)?;
            let steps = page_steps(&mut io, au, options)?;
            // Past the page, doubling a scattered write programs the extra
            // bytes; on linear-only media it also copies that much less gap.
            let copy = if linear { copy_mbps } else { None };
            let page = write.and_then(|w| page_from(&steps, w.mbps, copy));
            (page, steps, Some(linear))
        }
        None => (None, Vec::new(), None),
    };
    let mut found = Probe {
        device: path.display().to_string(),
        region,
        au,
        au_steps,
        open_aus,
        open_au_steps,
        page,
        page_steps,
        linear_only,
        rates,
        read,
        write,
        copy_mbps,
        elapsed_s: started.elapsed().as_secs_f64(),
        device_line: String::new(),
    };
    found.device_line = found.device_line();
    Ok(found)
}

/// The AU test; also the mean extra seconds a straddling write cost on the
/// boundaries at or above the AU (one garbage collection).
fn find_au(io: &mut Io, options: Options) -> Result<(Option<u64>, Vec<AuStep>, Option<f64>)> {
    // Fill every open slot (up to eight) with a barely written AU, so each
    // AU a later write opens evicts one and pays its GC.
    for _ in 0..MAX_STREAMS {
        let at = io.chunk()?;
        io.write(at, 2 * STRADDLE_HALF)?;
    }
    let mut steps: Vec<AuStep> = Vec::new();
    let mut boundary = MIN_AU;
    while boundary <= MAX_AU {
        let (mut straddling_s, mut after_s) = straddle_pair(io, boundary)?;
        // A busy host only adds time: the faster of two pairs (fresh
        // chunks) decides, as flashbench takes minima. The quick probe
        // measures the second pair only to confirm a jump.
        if !options.quick || jumps(straddling_s, after_s) {
            let (s2, a2) = straddle_pair(io, boundary)?;
            (straddling_s, after_s) = (straddling_s.min(s2), after_s.min(a2));
        }
        let jump = jumps(straddling_s, after_s);
        steps.push(AuStep { boundary, straddling_s, after_s, jump });
        // Quick: stop once two boundaries in a row jumped (one could be noise).
        if options.quick && jump && steps.len() >= 2 && steps[steps.len() - 2].jump {
            break;
        }
        boundary *= 2;
    }
    // The smallest boundary from which every larger one jumped too.
    let mut au = None;
    for step in steps.iter().rev() {
        if !step.jump {
            break;
        }
        au = Some(step.boundary);
    }
    let extra: Vec<f64> =
        steps.iter().filter(|s| au.is_some_and(|au| s.boundary >= au)).map(|s| s.straddling_s - s.after_s).collect();
    let copy_gap = (!extra.is_empty()).then(|| extra.iter().sum::<f64>() / extra.len() as f64);
    Ok((au, steps, copy_gap))
}

/// Whether the straddling write cost clearly more.
fn jumps(straddling_s: f64, after_s: f64) -> bool {
    straddling_s > 1.5 * after_s && straddling_s - after_s > JUMP_MIN_S
}

/// Seconds of a write straddling `boundary` and of one just after it, each
/// in a fresh chunk.
fn straddle_pair(io: &mut Io, boundary: u64) -> Result<(f64, f64)> {
    // Chunks start 64 MiB-aligned, so `chunk + boundary` is an odd
    // multiple of the boundary: an AU boundary only if the AU divides it.
    let a = io.chunk()?;
    let b = io.chunk()?;
    let straddling_s = io.write(a + boundary - STRADDLE_HALF, 2 * STRADDLE_HALF)?;
    let after_s = io.write(b + boundary, 2 * STRADDLE_HALF)?;
    Ok((straddling_s, after_s))
}

/// flashbench's open-AU test for N = 1..8 streams.
fn find_open_aus(io: &mut Io, au: u64, options: Options) -> Result<(Option<u32>, Vec<OpenAuStep>)> {
    let block = OPEN_AU_BLOCK.min(au / 4).max(16 * KIB);
    let rounds: u64 = if options.quick { 2 } else { 4 };
    let mut steps: Vec<OpenAuStep> = Vec::new();
    let mut limit = None;
    for streams in 1..=MAX_STREAMS {
        let mut starts = Vec::new();
        for _ in 0..streams {
            starts.push(io.chunk()?);
        }
        let mut seconds = 0.0;
        let mut bytes = 0;
        for round in 0..=rounds {
            for start in &starts {
                let t = io.write(start + round * block, block)?;
                // The first round opens the AUs (evicting the last test's).
                if round > 0 {
                    seconds += t;
                    bytes += block;
                }
            }
        }
        let mbps = bytes as f64 / seconds / 1e6;
        let best = steps.iter().map(|s| s.mbps).fold(0.0, f64::max);
        steps.push(OpenAuStep { streams, mbps });
        if limit.is_none() && mbps < 0.35 * best {
            limit = Some(streams - 1);
            if options.quick {
                break;
            }
        }
    }
    Ok((limit, steps))
}

/// The fastest of forward-skipping writes of each page-size candidate,
/// each size in a fresh AU opened by an untimed write.
fn page_steps(io: &mut Io, au: u64, options: Options) -> Result<Vec<PageStep>> {
    let samples = ((au / PAGE_STRIDE).saturating_sub(1)).clamp(2, if options.quick { 6 } else { 12 });
    let mut steps = Vec::new();
    for size in PAGE_SIZES {
        let chunk = io.chunk()?;
        io.write(chunk, size)?;
        let mut times = Vec::new();
        for k in 1..=samples {
            times.push(io.write(chunk + k * PAGE_STRIDE, size)?);
        }
        steps.push(PageStep { size, seconds: times.iter().copied().fold(f64::INFINITY, f64::min) });
    }
    Ok(steps)
}

/// The page size: the smallest size from which doubling a scattered write
/// costs clearly more, for this and every larger size (one noisy step
/// below the page does not decide). Past the page the extra bytes are
/// programmed at `write_mbps`; on linear-only media (`copy_mbps` given) the
/// gap copied before the write shrinks by as much, so the rise is the
/// difference, and below the page the time falls. "Clearly": half the
/// expected rise, and at least 50 µs (path noise).
fn page_from(steps: &[PageStep], write_mbps: f64, copy_mbps: Option<f64>) -> Option<u64> {
    let per_byte = 1.0 / (write_mbps * 1e6) - copy_mbps.map_or(0.0, |c| 1.0 / (c * 1e6));
    let rises = |w: &[PageStep]| w[1].seconds - w[0].seconds > (0.5 * w[0].size as f64 * per_byte).max(50e-6);
    let pairs: Vec<&[PageStep]> = steps.windows(2).collect();
    (0..pairs.len()).find(|&i| pairs[i..].iter().all(|w| rises(w))).map(|i| pairs[i][0].size)
}

/// Whether writes going backwards in an open AU cost a GC: more than three
/// times a sequential 16 KiB write (`sequential_s`) and 5 ms, every time.
/// One cheap backward write says no (a busy host only adds time, so a slow
/// one alone proves nothing): up to six are tried, three when quick.
fn backwards_costs_gc(io: &mut Io, au: u64, sequential_s: f64, options: Options) -> Result<bool> {
    let tries: u64 = if options.quick { 3 } else { 6 };
    let chunk = io.chunk()?;
    let unit = (64 * KIB).min(au / 16);
    io.write(chunk, 16 * KIB)?;
    // Skip forward first (untimed), then step backwards.
    io.write(chunk + (tries + 1) * unit, 16 * KIB)?;
    for k in (1..=tries).rev() {
        if io.write(chunk + k * unit, 16 * KIB)? <= 3.0 * sequential_s + JUMP_MIN_S {
            return Ok(false);
        }
    }
    Ok(true)
}

fn measure_rates(io: &mut Io, options: Options) -> Result<Vec<Rate>> {
    let (min_requests, min_s, max_s, max_requests) = if options.quick { (3, 0.2, 2.0, 50) } else { (8, 1.0, 5.0, 200) };
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(1);
    let mut rates = Vec::new();
    for pattern in ["seq-read", "seq-write", "rand-read", "rand-write"] {
        for size in RATE_SIZES {
            let chunk = if pattern == "seq-write" { io.chunk()? } else { 0 };
            if pattern == "seq-write" {
                // Untimed: opening the chunk's AU evicts (and collects) another.
                io.write(chunk, size)?;
            }
            let mut times = Vec::new();
            let mut total = 0.0;
            while times.len() < max_requests {
                let n = times.len() as u64;
                let offset = match pattern {
                    "seq-read" | "seq-write" => chunk + ((n + 1) * size) % CHUNK,
                    _ => rng.next_u64() % (io.region.len / size) * size,
                };
                let t = if pattern.ends_with("write") { io.write(offset, size)? } else { io.read(offset, size)? };
                times.push(t);
                total += t;
                let enough = times.len() >= min_requests && total >= min_s;
                if enough || (total >= max_s && times.len() >= 2) {
                    break;
                }
            }
            let requests = times.len() as u64;
            let mbps = (requests * size) as f64 / total / 1e6;
            let iops = requests as f64 / total;
            let fastest_s = times.iter().copied().fold(f64::INFINITY, f64::min);
            rates.push(Rate { pattern, size, requests, seconds: median(&mut times), fastest_s, mbps, iops });
        }
    }
    Ok(rates)
}

/// Least squares through (size, fastest seconds) of one pattern.
fn fit(rates: &[Rate], pattern: &str) -> Option<LinearFit> {
    let points: Vec<(f64, f64)> =
        rates.iter().filter(|r| r.pattern == pattern).map(|r| (r.size as f64, r.fastest_s)).collect();
    let n = points.len() as f64;
    let (sx, sy) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let sxx: f64 = points.iter().map(|(x, _)| (x - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    if points.len() < 2 || sxx <= 0.0 || sxy <= 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    Some(LinearFit { latency_s: (my - slope * mx).max(0.0), mbps: 1.0 / slope / 1e6 })
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        return 0.0;
    }
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

fn mbps(x: f64) -> String {
    let rounded = if x >= 100.0 {
        x.round()
    } else if x >= 10.0 {
        (x * 10.0).round() / 10.0
    } else {
        (x * 100.0).round() / 100.0
    };
    format!("{rounded}")
}

fn duration(seconds: f64) -> String {
    format!("\"{}us\"", (seconds * 1e6).round() as u64)
}

impl Probe {
    /// The `device = { … }` line that emulates what was measured: a flash
    /// model when an AU and an open-AU limit were found, else an SSD-like
    /// medium with the measured latencies and rates (no AU behaviour seen).
    pub fn device_line(&self) -> String {
        let (Some(read), Some(write)) = (self.read, self.write) else {
            return "# the probe could not fit read and write rates; no device line".into();
        };
        match (self.au, self.open_aus) {
            (Some(au), Some(open_aus)) => {
                let page = self.page.unwrap_or(16 * KIB).min(au);
                let mut line = format!(
                    "device = {{ model = \"flash\", au = \"{}\", page = \"{}\", open_aus = {}, linear_only = {}, \
                     write_mbps = {}, read_mbps = {}, read_latency = {}, program_latency = {}",
                    Bytes(au),
                    Bytes(page),
                    open_aus.max(1),
                    self.linear_only.unwrap_or(false),
                    mbps(write.mbps),
                    mbps(read.mbps),
                    duration(read.latency_s),
                    duration(write.latency_s),
                );
                if let Some(copy) = self.copy_mbps {
                    line.push_str(&format!(", copy_mbps = {}", mbps(copy)));
                }
                line.push_str(" }");
                if self.page.is_none() {
                    line.push_str("  # page not measured: 16KiB assumed");
                }
                line
            }
            _ => format!(
                "device = {{ model = \"ssd\", read_latency = {}, write_latency = {}, read_mbps = {}, write_mbps = {} }}  \
                 # no AU size or open-AU limit found",
                duration(read.latency_s),
                duration(write.latency_s),
                mbps(read.mbps),
                mbps(write.mbps)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(size: u64, seconds: f64) -> PageStep {
        PageStep { size, seconds }
    }

    #[test]
    fn the_page_is_where_doubling_the_write_starts_to_cost() {
        // Linear-only shape: falling below the page, rising above it.
        let steps = [step(4096, 0.030), step(8192, 0.0297), step(16384, 0.0292), step(32768, 0.0302)];
        assert_eq!(page_from(&steps, 8.26, Some(15.9)), Some(16384));
        // Random-capable shape: flat below, rising above.
        let steps = [step(4096, 0.0014), step(8192, 0.0014), step(16384, 0.0014), step(32768, 0.0018)];
        assert_eq!(page_from(&steps, 40.0, None), Some(16384));
        let flat = [step(4096, 0.001), step(8192, 0.001)];
        assert_eq!(page_from(&flat, 40.0, None), None);
        // A noisy step below the page (4K→8K up 90 µs, then down) does not decide.
        let noisy =
            [step(4096, 0.0014), step(8192, 0.00149), step(16384, 0.00141), step(32768, 0.00181), step(65536, 0.00262)];
        assert_eq!(page_from(&noisy, 31.5, None), Some(16384));
    }

    #[test]
    fn a_line_through_sequential_times_gives_latency_and_rate() {
        let rate = |size: u64| Rate {
            pattern: "seq-write",
            size,
            requests: 4,
            seconds: 0.002 + size as f64 / 10e6,
            fastest_s: 0.002 + size as f64 / 10e6,
            mbps: 0.0,
            iops: 0.0,
        };
        let line = fit(&[rate(4096), rate(65536), rate(1 << 20)], "seq-write").unwrap();
        assert!((line.mbps - 10.0).abs() < 1e-6 && (line.latency_s - 0.002).abs() < 1e-9, "{line:?}");
        assert!(fit(&[rate(4096)], "seq-write").is_none());
    }

    #[test]
    fn a_region_must_be_aligned_inside_the_device_and_large_enough() {
        let size = 16 << 30;
        let r = Region::parse("1GiB:8GiB", size).unwrap();
        assert_eq!((r.offset, r.len), (1 << 30, 8 << 30));
        assert!(Region::parse("1GiB", size).unwrap_err().contains("OFFSET:LEN"));
        assert!(Region::parse("1GiB:16GiB", size).unwrap_err().contains("beyond"));
        assert!(Region::parse("1000:8GiB", size).unwrap_err().contains("multiples"));
        assert!(Region::parse("0:1GiB", size).unwrap_err().contains("too small"));
    }
}
