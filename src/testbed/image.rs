//! Read-only images: pack a staging tree with `mksquashfs` or `mkfs.erofs`.
//!
//! The image is built once per run, as part of provisioning (a fresh
//! testbed per run, like mkfs for writable filesystems), and its build time
//! and size are reported as metrics because people choose image formats on
//! them: `image_build_s` (wall time of the packer), `image_size_mb` (MiB)
//! and `image_ratio` (image bytes / content bytes), all lower-is-better.
//!
//! Arguments fslab always passes, so images are reproducible and the record
//! shows every choice: mksquashfs `-noappend -no-progress -quiet -all-root
//! -comp C -b B` (defaults gzip, 128 KiB), `-no-fragments` when
//! `fragments = false`, `-Xcompression-level L` for a level, and
//! `-noI -noD -noF -noX` for `compressor = "none"`; mkfs.erofs `--quiet
//! --all-root -T0`, `-zALG[,LEVEL]` unless uncompressed, `-C PCLUSTER`.
//! The variant's `mkfs` list is appended before the paths.

use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::experiment::{FsKind, ImageOptions};
use crate::metric::Metric;
use crate::workload::process::run_tool;

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

/// The packer program and its full argument list for `fs`.
pub fn command(
    fs: &FsKind,
    options: &ImageOptions,
    extra: &[String],
    staging: &Path,
    image: &Path,
) -> Result<(&'static str, Vec<String>)> {
    let staging = staging.to_str().context("staging path is not UTF-8")?.to_string();
    let image = image.to_str().context("image path is not UTF-8")?.to_string();
    let mut args: Vec<String> = Vec::new();
    let program = match fs {
        FsKind::Squashfs => {
            args.extend([staging, image]);
            args.extend(["-noappend", "-no-progress", "-quiet", "-all-root"].map(String::from));
            if options.compressor == "none" {
                args.extend(["-noI", "-noD", "-noF", "-noX"].map(String::from));
            } else {
                args.extend(["-comp".to_string(), options.compressor.clone()]);
            }
            args.extend(["-b".to_string(), options.block_size.unwrap_or(128 << 10).to_string()]);
            if !options.fragments {
                args.push("-no-fragments".to_string());
            }
            if let Some(level) = options.level {
                args.extend(["-Xcompression-level".to_string(), level.to_string()]);
            }
            args.extend(extra.iter().cloned());
            "mksquashfs"
        }
        FsKind::Erofs => {
            args.extend(["--quiet", "--all-root", "-T0"].map(String::from));
            if options.compressor != "none" {
                match options.level {
                    Some(level) => args.push(format!("-z{},{level}", options.compressor)),
                    None => args.push(format!("-z{}", options.compressor)),
                }
            }
            if let Some(pcluster) = options.pcluster_size {
                args.push(format!("-C{pcluster}"));
            }
            args.extend(extra.iter().cloned());
            args.extend([image, staging]);
            "mkfs.erofs"
        }
        other => bail!("{other} is not a read-only image filesystem"),
    };
    Ok((program, args))
}

/// Compressors `mkfs.erofs --help` says it was built with (None when the
/// help text has no such list, e.g. another erofs-utils version).
pub fn erofs_compressors() -> Option<Vec<String>> {
    // --help exits 0 on some versions and 1 on others; read whatever it printed.
    let output =
        std::process::Command::new("mkfs.erofs").arg("--help").stdin(std::process::Stdio::null()).output().ok()?;
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    parse_erofs_compressors(&text)
}

/// The compressor names listed after `Available compressors are:`.
pub fn parse_erofs_compressors(help: &str) -> Option<Vec<String>> {
    let start = help.find("Available compressors are")?;
    let rest = &help[start..].split_once(':')?.1;
    let names: Vec<String> = rest
        .split(|c: char| c == ',' || c.is_whitespace())
        .map(|w| w.trim_matches(|c: char| !c.is_ascii_alphanumeric()))
        .filter(|w| ["lz4", "lz4hc", "lzma", "deflate", "libdeflate", "zstd"].contains(w))
        .map(String::from)
        .collect();
    (!names.is_empty()).then_some(names)
}

/// Pack `staging` into `image`; the image file must not exist yet.
pub fn build(
    fs: &FsKind,
    options: &ImageOptions,
    extra: &[String],
    staging: &Path,
    image: &Path,
) -> Result<BuiltImage> {
    if *fs == FsKind::Erofs && options.compressor != "none" {
        if let Some(available) = erofs_compressors() {
            if !available.contains(&options.compressor) {
                bail!(
                    "mkfs.erofs on this host cannot compress with `{}` (it offers {})",
                    options.compressor,
                    available.join(", ")
                );
            }
        }
    }
    let content_bytes = tree_bytes(staging)?;
    let (program, args) = command(fs, options, extra, staging, image)?;
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let start = Instant::now();
    run_tool(program, &argv).with_context(|| format!("building the {fs} image"))?;
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

    fn opts(compressor: &str) -> ImageOptions {
        ImageOptions {
            compressor: compressor.into(),
            level: None,
            block_size: None,
            fragments: true,
            pcluster_size: None,
        }
    }

    #[test]
    fn squashfs_arguments() {
        let mut o = opts("zstd");
        o.level = Some(19);
        o.fragments = false;
        o.block_size = Some(1 << 20);
        let (p, a) =
            command(&FsKind::Squashfs, &o, &["-Xdict-size".into()], Path::new("/s"), Path::new("/i.img")).unwrap();
        assert_eq!(p, "mksquashfs");
        assert_eq!(
            a.join(" "),
            "/s /i.img -noappend -no-progress -quiet -all-root -comp zstd -b 1048576 -no-fragments -Xcompression-level 19 -Xdict-size"
        );
        let (_, a) = command(&FsKind::Squashfs, &opts("none"), &[], Path::new("/s"), Path::new("/i")).unwrap();
        assert!(a.join(" ").contains("-noI -noD -noF -noX -b 131072"), "{a:?}");
    }

    #[test]
    fn erofs_arguments() {
        let mut o = opts("lz4hc");
        o.level = Some(9);
        o.pcluster_size = Some(65536);
        let (p, a) = command(&FsKind::Erofs, &o, &[], Path::new("/s"), Path::new("/i.img")).unwrap();
        assert_eq!(p, "mkfs.erofs");
        assert_eq!(a.join(" "), "--quiet --all-root -T0 -zlz4hc,9 -C65536 /i.img /s");
        let (_, a) = command(&FsKind::Erofs, &opts("none"), &[], Path::new("/s"), Path::new("/i")).unwrap();
        assert_eq!(a.join(" "), "--quiet --all-root -T0 /i /s");
        assert!(command(&FsKind::Ext4, &o, &[], Path::new("/s"), Path::new("/i")).is_err());
    }

    #[test]
    fn erofs_help_lists_compressors() {
        let help = "usage...\n --quiet   quiet\n\nAvailable compressors are: lz4hc, lz4\n";
        assert_eq!(parse_erofs_compressors(help), Some(vec!["lz4hc".to_string(), "lz4".to_string()]));
        let newer = "Available compressors are:\n  lz4\n  lz4hc [0..12, default=9]\n  lzma [0..109, default=6]\n  zstd [1..22]\n";
        assert_eq!(parse_erofs_compressors(newer).unwrap(), ["lz4", "lz4hc", "lzma", "zstd"]);
        assert_eq!(parse_erofs_compressors("nothing here"), None);
    }
}
