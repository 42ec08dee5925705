//! squashfs: a read-only image packed with mksquashfs from the workload's
//! tree (`compressor`, `level`, `block_size`, `fragments`), loop-mounted
//! `ro`. The squashfs boot case (single decompressor, read-ahead) lives here.
//!
//! Arguments fslab always passes, so images are reproducible and the record
//! shows every choice: `-noappend -no-progress -quiet -all-root -comp C -b B`
//! (defaults gzip, 128 KiB), `-no-fragments` when `fragments = false`,
//! `-Xcompression-level L` for a level, `-noI -noD -noF -noX` for
//! `compressor = "none"`; the variant's `mkfs` list is appended.

use std::ops::RangeInclusive;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Deserialize;
use toml::Spanned;

use super::{Filesystem, ImageFormat, Medium};
use crate::keys::{self, Source, Table};
use crate::testbed::config::ImageOptions;
use crate::units::Bytes;

pub struct Squashfs;

const COMPRESSORS: &[&str] = &["gzip", "lzo", "lz4", "xz", "zstd", "none"];
const DEFAULT_BLOCK: u64 = 128 << 10;

/// The variant keys of a squashfs testbed.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Keys {
    compressor: Option<Spanned<String>>,
    level: Option<Spanned<i64>>,
    block_size: Option<Spanned<Bytes>>,
    fragments: Option<Spanned<bool>>,
}

impl Filesystem for Squashfs {
    fn name(&self) -> &'static str {
        "squashfs"
    }

    fn medium(&self) -> Medium {
        Medium::Image
    }

    fn about(&self) -> &'static str {
        "read-only image from the workload's tree; `compressor`, `level`, `block_size`, `fragments`"
    }

    /// The superblock summary: compressor, block size, fragments, counts.
    fn geometry(&self, _device: &Path, image: Option<&Path>) -> Option<String> {
        let image = image?.to_str()?;
        crate::sys::exec::run_tool("unsquashfs", &["-s", image]).ok().filter(|g| !g.is_empty())
    }

    fn image(&self) -> Option<&dyn ImageFormat> {
        Some(self)
    }
}

impl ImageFormat for Squashfs {
    fn keys(&self) -> &'static [&'static str] {
        keys::names::<Keys>()
    }

    fn version_arg(&self) -> &'static str {
        "-version"
    }

    fn resolve(&self, table: Table, src: &Source) -> Result<ImageOptions> {
        let k: Keys = table.parse(src)?;
        let (compressor, level) =
            super::resolve_compression("squashfs", &k.compressor, "gzip", COMPRESSORS, &k.level, levels, src)?;
        let block_size = match &k.block_size {
            None => None,
            Some(b) if b.get_ref().0.is_power_of_two() && (4096..=1 << 20).contains(&b.get_ref().0) => {
                Some(b.get_ref().0)
            }
            Some(b) => return Err(src.err(b.span(), "block_size", "must be a power of two from 4KiB to 1MiB")),
        };
        let fragments = k.fragments.as_ref().is_none_or(|f| *f.get_ref());
        Ok(ImageOptions { compressor, level, block_size, fragments, pcluster_size: None })
    }

    fn pack_command(
        &self,
        options: &ImageOptions,
        extra: &[String],
        staging: &Path,
        image: &Path,
    ) -> Result<(&'static str, Vec<String>)> {
        let staging = staging.to_str().context("staging path is not UTF-8")?.to_string();
        let image = image.to_str().context("image path is not UTF-8")?.to_string();
        let mut args = vec![staging, image];
        args.extend(["-noappend", "-no-progress", "-quiet", "-all-root"].map(String::from));
        if options.compressor == "none" {
            args.extend(["-noI", "-noD", "-noF", "-noX"].map(String::from));
        } else {
            args.extend(["-comp".to_string(), options.compressor.clone()]);
        }
        args.extend(["-b".to_string(), options.block_size.unwrap_or(DEFAULT_BLOCK).to_string()]);
        if !options.fragments {
            args.push("-no-fragments".to_string());
        }
        if let Some(level) = options.level {
            args.extend(["-Xcompression-level".to_string(), level.to_string()]);
        }
        args.extend(extra.iter().cloned());
        Ok(("mksquashfs", args))
    }

    /// `rw` cannot work, and `threads=` takes the decompressor modes the
    /// kernel knows.
    fn check_mount(&self, mount: &str) -> std::result::Result<(), String> {
        for option in mount.split(',').filter(|o| !o.is_empty()) {
            if option == "rw" {
                return Err("`rw`: a squashfs image is read-only".to_string());
            }
            if let Some(threads) = option.strip_prefix("threads=") {
                let ok =
                    ["single", "multi", "percpu"].contains(&threads) || threads.parse::<u32>().is_ok_and(|n| n >= 1);
                if !ok {
                    return Err(format!("`threads={threads}`: squashfs takes single, multi, percpu or a number"));
                }
            }
        }
        Ok(())
    }

    /// The kernel only takes `threads=` when built with
    /// SQUASHFS_CHOICE_DECOMP_BY_MOUNT (6.2+).
    fn mount_failure_hint(&self, mount: &str) -> Option<String> {
        if !mount.split(',').any(|o| o.starts_with("threads=")) {
            return None;
        }
        let config = crate::inspect::kconfig::KernelConfig::load_running().ok()?;
        (!config.is_enabled("SQUASHFS_CHOICE_DECOMP_BY_MOUNT")).then(|| {
            "squashfs `threads=` needs a kernel with CONFIG_SQUASHFS_CHOICE_DECOMP_BY_MOUNT=y (Linux 6.2+); \
             the running kernel's decompressor is fixed at build time"
                .to_string()
        })
    }

    fn describe(&self, options: &ImageOptions) -> String {
        let mut text = format!("compressor={}", options.compressor);
        if let Some(level) = options.level {
            text.push_str(&format!(" level={level}"));
        }
        let block = Bytes(options.block_size.unwrap_or(DEFAULT_BLOCK));
        text.push_str(&format!(" block_size={block} fragments={}", options.fragments));
        text
    }
}

/// The levels squashfs's packer takes for a compressor (`None`: it takes no level).
fn levels(compressor: &str) -> Option<RangeInclusive<i64>> {
    match compressor {
        "gzip" => Some(1..=9),
        "zstd" => Some(1..=22),
        _ => None,
    }
}
