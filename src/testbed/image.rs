//! Read-only images: pack a staging tree with the kind's packer
//! ([`ImageFormat`]: `mksquashfs`, `mkfs.erofs`).
//!
//! The image is built once per run, as part of provisioning (a fresh
//! testbed per run, like mkfs for writable filesystems), and its build time
//! and size are reported as metrics because people choose image formats on
//! them: `image_build_s` (wall time of the packer), `image_size_mb` (MiB)
//! and `image_ratio` (image bytes / content bytes), all lower-is-better.
//!
//! The arguments each packer gets are documented with its kind
//! (`testbed/fs/squashfs.rs`, `testbed/fs/erofs.rs`).

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};

use super::config::ImageOptions;
use super::filesystem::ImageFormat;
use crate::metric::Metric;
use crate::sys::exec::run_tool;

/// What building an image produced.
#[derive(Clone, Debug, PartialEq)]
pub struct BuiltImage {
    pub build_s: f64,
    pub image_bytes: u64,
    pub content_bytes: u64,
}

impl BuiltImage {
    /// `image_build_s`, `image_size_mb`, `image_ratio` (lower is better).
    pub fn metrics(&self) -> Vec<Metric> {
        vec![
            Metric::lower("image_build_s", "s", self.build_s),
            Metric::lower("image_size_mb", "MiB", self.image_bytes as f64 / (1u64 << 20) as f64),
            Metric::lower("image_ratio", "ratio", self.image_bytes as f64 / self.content_bytes.max(1) as f64),
        ]
    }
}

/// Pack `staging` into `image` with `format`; the image must not exist yet.
pub fn build(
    format: &dyn ImageFormat,
    options: &ImageOptions,
    extra: &[String],
    staging: &Path,
    image: &Path,
) -> Result<BuiltImage> {
    format.check_host(options)?;
    let content_bytes = tree_bytes(staging)?;
    let (program, args) = format.pack_command(options, extra, staging, image)?;
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let start = Instant::now();
    run_tool(program, &argv).with_context(|| format!("building the image with {program}"))?;
    let build_s = start.elapsed().as_secs_f64();
    let image_bytes =
        std::fs::metadata(image).with_context(|| format!("{program} wrote no {}", image.display()))?.len();
    Ok(BuiltImage { build_s, image_bytes, content_bytes })
}

/// Bytes in the regular files under `dir`.
pub fn tree_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry.with_context(|| format!("reading {}", dir.display()))?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            total += tree_bytes(&entry.path())?;
        } else if kind.is_file() {
            total += entry.metadata()?.len();
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testbed::filesystem::FsKind;

    fn opts(compressor: &str) -> ImageOptions {
        ImageOptions {
            compressor: compressor.into(),
            level: None,
            block_size: None,
            fragments: true,
            pcluster_size: None,
        }
    }

    fn command(fs: FsKind, o: &ImageOptions, extra: &[String]) -> String {
        let format = fs.fs().image().unwrap();
        format.pack_command(o, extra, Path::new("/s"), Path::new("/i.img")).unwrap().1.join(" ")
    }

    #[test]
    fn squashfs_arguments() {
        let mut o = opts("zstd");
        o.level = Some(19);
        o.fragments = false;
        o.block_size = Some(1 << 20);
        assert_eq!(
            command(FsKind::Squashfs, &o, &["-Xdict-size".into()]),
            "/s /i.img -noappend -no-progress -quiet -all-root -comp zstd -b 1048576 -no-fragments -Xcompression-level 19 -Xdict-size"
        );
        assert!(command(FsKind::Squashfs, &opts("none"), &[]).contains("-noI -noD -noF -noX -b 131072"));
        assert!(FsKind::Ext4.fs().image().is_none());
    }

    #[test]
    fn erofs_arguments() {
        let mut o = opts("lz4hc");
        o.level = Some(9);
        o.pcluster_size = Some(65536);
        assert_eq!(command(FsKind::Erofs, &o, &[]), "--quiet --all-root -T0 -zlz4hc,9 -C65536 /i.img /s");
        assert_eq!(command(FsKind::Erofs, &opts("none"), &[]), "--quiet --all-root -T0 /i.img /s");
    }

    #[test]
    fn erofs_help_lists_compressors() {
        use crate::testbed::filesystem::erofs_help_compressors as parse;
        let help = "usage...\n --quiet   quiet\n\nAvailable compressors are: lz4hc, lz4\n";
        assert_eq!(parse(help), Some(vec!["lz4hc".to_string(), "lz4".to_string()]));
        let newer = "Available compressors are:\n  lz4\n  lz4hc [0..12, default=9]\n  lzma [0..109, default=6]\n  zstd [1..22]\n";
        assert_eq!(parse(newer).unwrap(), ["lz4", "lz4hc", "lzma", "zstd"]);
        assert_eq!(parse("nothing here"), None);
    }
}
