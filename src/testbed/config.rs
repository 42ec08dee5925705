//! What a testbed is: the filesystem kind and every setting fslab applies
//! to it. A variant of an experiment is a name, a testbed config and (for
//! kernels under test) where it runs.

use serde::{Deserialize, Serialize};

use super::filesystem::FsKind;
use crate::units::Bytes;

/// Size of a block testbed's image when a variant gives none.
pub const DEFAULT_SIZE: Bytes = Bytes(1 << 30);

/// A testbed with every value checked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TestbedConfig {
    pub fs: FsKind,
    pub size: Bytes,
    pub mkfs: Vec<String>,
    pub mount: String,
    pub throttle: Throttle,
    pub read_ahead_kb: Option<u32>,
    pub scheduler: Option<String>,
    /// Filesystem sysfs tunables, values as written to sysfs.
    pub sysfs: Vec<(String, String)>,
    /// How a read-only image is packed; None for writable filesystems.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageOptions>,
    /// The medium the image is served as (a FUSE media model under the
    /// loop device); None: the image file directly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<crate::media::DeviceSpec>,
}

impl TestbedConfig {
    /// A testbed of `fs` with fslab's defaults (what `[defaults]` and a
    /// variant leave unset).
    pub fn new(fs: FsKind) -> TestbedConfig {
        TestbedConfig {
            fs,
            size: DEFAULT_SIZE,
            mkfs: Vec::new(),
            mount: String::new(),
            throttle: Throttle::default(),
            read_ahead_kb: None,
            scheduler: None,
            sysfs: Vec::new(),
            image: None,
            device: None,
        }
    }
}

/// Block-cgroup throttle limits; bandwidths per second, IOPS per second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Throttle {
    #[serde(default)]
    pub read_bps: Option<Bytes>,
    #[serde(default)]
    pub write_bps: Option<Bytes>,
    #[serde(default)]
    pub read_iops: Option<u64>,
    #[serde(default)]
    pub write_iops: Option<u64>,
}

impl Throttle {
    pub fn is_empty(&self) -> bool {
        self.read_bps.is_none() && self.write_bps.is_none() && self.read_iops.is_none() && self.write_iops.is_none()
    }
}

/// Packing options of a read-only image (squashfs, erofs), defaults applied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageOptions {
    /// `gzip`, `lzo`, `lz4`, `xz`, `zstd` (squashfs); `lz4`, `lz4hc`,
    /// `lzma`, `deflate`, `libdeflate`, `zstd` (erofs); `none` for both.
    pub compressor: String,
    /// Compression level (squashfs gzip/zstd, erofs lz4hc/lzma/deflate/zstd).
    pub level: Option<u32>,
    /// squashfs data block size in bytes (`-b`).
    pub block_size: Option<u64>,
    /// squashfs fragment blocks; false adds `-no-fragments`.
    pub fragments: bool,
    /// erofs physical cluster size in bytes (`-C`).
    pub pcluster_size: Option<u64>,
}
