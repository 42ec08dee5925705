//! Media models: what a request costs on an SD card, eMMC, USB stick, disk
//! or SSD, and the FUSE server that makes a testbed's image behave like one.
//!
//! A variant names its medium (`device = { model = "sdcard" }`, or a model
//! with every parameter); [`DeviceSpec`] is the checked form. The testbed
//! serves its image through [`serve`] (one `fslab media-serve` process per
//! testbed), which charges every request with the model and replies only
//! when the medium would have finished, one request at a time. Everything
//! upstream (loop device, mkfs, the filesystem, blk-throttle, the block
//! trace) sees an ordinary, slow disk. What the device went through is kept
//! in an [`evidence::Ledger`] and stored with each run as `media/…` metrics.
//!
//! One file per model ([`flash`], [`hdd`], [`ssd`], [`passthrough`]), the
//! named presets in [`presets`]; [`MODELS`] is the list of model names.

pub mod connection;
pub mod evidence;
pub mod flash;
pub mod hdd;
pub mod host;
pub mod passthrough;
pub mod presets;
pub mod probe;
pub mod relay;
pub mod serve;
pub mod spec;
pub mod ssd;

pub use spec::DeviceSpec;

/// Every model a `device = { model = … }` may name, besides the presets.
pub const MODELS: &[&str] = &["flash", "hdd", "ssd", "passthrough"];

/// What the host asked the medium to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Read,
    Write,
    /// A cache flush (fsync reaching the device); cheap on every model here.
    Flush,
}

/// Where the time of one request went, in seconds. Every model fills only
/// the parts it has; the ledger sums them per run.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cost {
    /// Fixed per-command latency (read access time, command overhead).
    pub latency: f64,
    /// Moving the data over the bus / to or from the medium.
    pub transfer: f64,
    /// Programming flash pages.
    pub program: f64,
    /// Garbage collection: copying the unwritten rest of an evicted AU.
    pub gc: f64,
    /// Moving the head.
    pub seek: f64,
    /// Waiting for the sector to come round.
    pub rotation: f64,
}

impl Cost {
    pub fn total(&self) -> f64 {
        self.latency + self.transfer + self.program + self.gc + self.seek + self.rotation
    }

    pub fn add(&mut self, other: &Cost) {
        self.latency += other.latency;
        self.transfer += other.transfer;
        self.program += other.program;
        self.gc += other.gc;
        self.seek += other.seek;
        self.rotation += other.rotation;
    }
}

/// What a model did internally, for the evidence (zero where a model has
/// no such thing).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// AUs opened for writing (each open of a closed AU counts).
    pub aus_opened: u64,
    /// Open AUs closed because one more had to be opened.
    pub au_evictions: u64,
    /// Bytes the medium copied internally to close AUs.
    pub gc_bytes: u64,
    /// Bytes programmed for the host's writes (page-rounded), without GC.
    pub programmed_bytes: u64,
}

/// A medium: charges each request and keeps what it needs to know about
/// earlier ones (open AUs, head position).
pub trait Model: Send {
    /// The cost of `op` on `len` bytes at byte `offset`, updating the
    /// model's state as the medium would.
    fn charge(&mut self, op: Op, offset: u64, len: u64) -> Cost;
    /// What the model did so far.
    fn counters(&self) -> Counters {
        Counters::default()
    }
}

/// Seconds to move `bytes` at `mbps` megabytes (10^6) per second.
pub(crate) fn transfer_s(bytes: u64, mbps: f64) -> f64 {
    if mbps <= 0.0 {
        return 0.0;
    }
    bytes as f64 / (mbps * 1e6)
}
