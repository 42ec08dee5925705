//! erofs: a read-only image packed with mkfs.erofs from the workload's tree
//! (`compressor`, `level`, `pcluster_size`), loop-mounted `ro`.
//!
//! Arguments fslab always passes: `--quiet --all-root -T0`, `-zALG[,LEVEL]`
//! unless uncompressed, `-C PCLUSTER`; the variant's `mkfs` list is
//! appended before the paths.

use std::ops::RangeInclusive;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use toml::Spanned;

use super::{Filesystem, ImageFormat, Medium};
use crate::keys::{self, Source, Table};
use crate::testbed::config::ImageOptions;
use crate::units::Bytes;

pub struct Erofs;

const COMPRESSORS: &[&str] = &["lz4", "lz4hc", "lzma", "deflate", "libdeflate", "zstd", "none"];

/// The variant keys of an erofs testbed.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Keys {
    compressor: Option<Spanned<String>>,
    level: Option<Spanned<i64>>,
    pcluster_size: Option<Spanned<Bytes>>,
}

impl Filesystem for Erofs {
    fn name(&self) -> &'static str {
        "erofs"
    }

    fn medium(&self) -> Medium {
        Medium::Image
    }

    fn about(&self) -> &'static str {
        "read-only image from the workload's tree; `compressor`, `level`, `pcluster_size`"
    }

    fn image(&self) -> Option<&dyn ImageFormat> {
        Some(self)
    }
}

impl ImageFormat for Erofs {
    fn keys(&self) -> &'static [&'static str] {
        keys::names::<Keys>()
    }

    fn resolve(&self, table: Table, src: &Source) -> Result<ImageOptions> {
        let k: Keys = table.parse(src)?;
        // mkfs.erofs's own default: uncompressed.
        let (compressor, level) =
            super::resolve_compression("erofs", &k.compressor, "none", COMPRESSORS, &k.level, levels, src)?;
        let pcluster_size = match &k.pcluster_size {
            None => None,
            Some(p) if compressor == "none" => {
                let msg = "needs a `compressor` (an uncompressed erofs has no clusters)";
                return Err(src.err(p.span(), "pcluster_size", msg));
            }
            Some(p) if p.get_ref().0 % 4096 == 0 && (4096..=1 << 20).contains(&p.get_ref().0) => Some(p.get_ref().0),
            Some(p) => return Err(src.err(p.span(), "pcluster_size", "must be a multiple of 4KiB from 4KiB to 1MiB")),
        };
        Ok(ImageOptions { compressor, level, block_size: None, fragments: true, pcluster_size })
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
        let mut args: Vec<String> = ["--quiet", "--all-root", "-T0"].map(String::from).to_vec();
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
        Ok(("mkfs.erofs", args))
    }

    fn check_host(&self, options: &ImageOptions) -> Result<()> {
        if options.compressor == "none" {
            return Ok(());
        }
        if let Some(available) = compressors() {
            if !available.contains(&options.compressor) {
                bail!(
                    "mkfs.erofs on this host cannot compress with `{}` (it offers {})",
                    options.compressor,
                    available.join(", ")
                );
            }
        }
        Ok(())
    }

    fn describe(&self, options: &ImageOptions) -> String {
        let mut text = format!("compressor={}", options.compressor);
        if let Some(level) = options.level {
            text.push_str(&format!(" level={level}"));
        }
        if let Some(p) = options.pcluster_size {
            text.push_str(&format!(" pcluster_size={}", Bytes(p)));
        }
        text
    }
}

/// Compressors `mkfs.erofs --help` says it was built with (None when the
/// help text has no such list, e.g. another erofs-utils version).
pub fn compressors() -> Option<Vec<String>> {
    // --help exits 0 on some versions and 1 on others; read whatever it printed.
    let output = crate::sys::exec::run("mkfs.erofs", &["--help"], crate::sys::exec::DEFAULT_TIMEOUT).ok()?;
    parse_compressors(&format!("{}{}", output.stdout, output.stderr))
}

/// The compressor names listed after `Available compressors are:`.
pub fn parse_compressors(help: &str) -> Option<Vec<String>> {
    let start = help.find("Available compressors are")?;
    let rest = &help[start..].split_once(':')?.1;
    let names: Vec<String> = rest
        .split(|c: char| c == ',' || c.is_whitespace())
        .map(|w| w.trim_matches(|c: char| !c.is_ascii_alphanumeric()))
        .filter(|w| COMPRESSORS.contains(w) && *w != "none")
        .map(String::from)
        .collect();
    (!names.is_empty()).then_some(names)
}

/// The levels erofs's packer takes for a compressor (`None`: it takes no level).
fn levels(compressor: &str) -> Option<RangeInclusive<i64>> {
    match compressor {
        "zstd" => Some(1..=22),
        "lz4hc" | "libdeflate" => Some(0..=12),
        "lzma" | "deflate" => Some(0..=9),
        _ => None,
    }
}
