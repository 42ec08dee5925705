//! `untar`: extract a generated archive with GNU tar into the testbed, then
//! sync — the shape of the ext4 `mb_optimize_scan` SD-card case.
//!
//! Keys: `profile` (`rpi-firmware`, the default: the real 7,701-file, 151 MB
//! listing from the ext4 thread; `small`, a tenth of it; `synthetic`, 5 MB of
//! awkward names and links) or `list` (a `tar tv` listing file, relative to
//! the experiment file); `scale` (a fraction of the listing); `compressibility`
//! of the generated content (0.5); `sync` (true: `sync -f` after extracting).

use std::fs::File;
use std::io::Read;
use std::ops::Range;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::archive::{ensure_archive, ArchiveSpec};
use super::listing::Listing;
use super::{check, BuildEnv, Kind, RunContext, Workload};
use crate::keys::Source;
use crate::metric::Metric;

/// Built-in content lists.
pub const PROFILES: &[&str] = &["rpi-firmware", "small", "synthetic"];

/// Where the content list comes from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UntarSource {
    Profile(String),
    List(PathBuf),
}

/// `untar` keys as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UntarKeys {
    profile: Option<Spanned<String>>,
    list: Option<Spanned<String>>,
    scale: Option<Spanned<f64>>,
    compressibility: Option<Spanned<f64>>,
    sync: Option<Spanned<bool>>,
}

/// `untar` parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UntarParams {
    pub source: UntarSource,
    pub scale: f64,
    pub compressibility: f64,
    pub sync: bool,
}

impl Kind for UntarParams {
    const NAME: &'static str = "untar";
    const ABOUT: &'static str = "generated archive from a `tar tv` list, GNU tar, then `sync -f`";
    const METRICS: &'static str = "`extract_s`, `sync_s`, `total_s`, `files_per_s`";
    type Keys = UntarKeys;

    fn resolve(keys: UntarKeys, src: &Source, _table: Range<usize>) -> Result<Self> {
        let source = match (&keys.profile, &keys.list) {
            (Some(p), Some(_)) => {
                return Err(src.err(p.span(), "profile", "give either `profile` or `list`, not both"))
            }
            (Some(p), None) => {
                if !PROFILES.contains(&p.get_ref().as_str()) {
                    return Err(src.err(
                        p.span(),
                        "profile",
                        format!("unknown profile (built in: {})", PROFILES.join(", ")),
                    ));
                }
                UntarSource::Profile(p.get_ref().clone())
            }
            (None, Some(l)) => {
                let path = src.resolve_path(l.get_ref());
                if !path.is_file() {
                    return Err(src.err(l.span(), "list", format!("{} is not a readable file", path.display())));
                }
                UntarSource::List(path)
            }
            (None, None) => UntarSource::Profile("rpi-firmware".to_string()),
        };
        Ok(UntarParams {
            source,
            scale: check::scale(src, keys.scale.as_ref())?,
            compressibility: check::unit_fraction(src, keys.compressibility.as_ref(), "compressibility", 0.5)?,
            sync: keys.sync.as_ref().is_none_or(|s| *s.get_ref()),
        })
    }

    fn quick(&mut self) {
        self.scale = self.scale.min(0.1);
    }

    fn is_decisive(&self, metric: &str) -> bool {
        metric == "total_s"
    }

    fn build(&self, env: &BuildEnv) -> Box<dyn Workload> {
        Box::new(Untar::new(self.clone(), env.seed))
    }
}

/// Extract + sync of an archive built from a content list.
pub struct Untar {
    pub params: UntarParams,
    pub seed: u64,
    archive: Option<PathBuf>,
    files: usize,
}

impl Untar {
    pub fn new(params: UntarParams, seed: u64) -> Self {
        Untar { params, seed, archive: None, files: 0 }
    }

    /// The content list this workload extracts.
    pub fn listing(&self) -> Result<Listing> {
        let listing = match &self.params.source {
            // A tenth of the firmware tree (770 files, 15 MB): the real shape,
            // and enough data that the block throttle's initial burst does not
            // hide a bandwidth cap.
            UntarSource::Profile(p) if p == "small" => Listing::rpi_firmware().scaled(0.1)?,
            // 342 files, 5 MB, with the awkward cases (spaces, links, long names).
            UntarSource::Profile(p) if p == "synthetic" => Listing::synthetic(),
            UntarSource::Profile(_) => Listing::rpi_firmware(),
            UntarSource::List(path) => {
                let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
                Listing::parse(&text, &path.display().to_string())?
            }
        };
        if self.params.scale < 1.0 {
            listing.scaled(self.params.scale)
        } else {
            Ok(listing)
        }
    }
}

impl Workload for Untar {
    fn kind(&self) -> &'static str {
        "untar"
    }

    fn prepare_inputs(&mut self, cache_dir: &std::path::Path) -> Result<()> {
        let listing = self.listing()?;
        self.files = listing.file_count();
        let spec = ArchiveSpec { compressibility: self.params.compressibility, seed: self.seed };
        self.archive = Some(ensure_archive(&listing, &spec, cache_dir)?);
        Ok(())
    }

    fn footprint(&self) -> Option<u64> {
        // The extracted tree is about as large as the archive.
        std::fs::metadata(self.archive.as_ref()?).ok().map(|m| m.len())
    }

    fn warm_inputs(&mut self) -> Result<()> {
        // Read the archive once so the cold run measures the testbed, not the host disk.
        let path = self.archive.as_ref().context("untar inputs were not prepared")?;
        let mut file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let mut buf = vec![0u8; 1 << 20];
        while file.read(&mut buf)? > 0 {}
        Ok(())
    }

    fn run(&mut self, ctx: &RunContext) -> Result<Vec<Metric>> {
        let archive = self.archive.as_ref().context("untar inputs were not prepared")?;
        let start = Instant::now();
        let mut tar = ctx.command("tar");
        tar.arg("-xf").arg(archive);
        let extract = ctx.execute(tar, "tar -xf")?;
        let sync_s = if self.params.sync {
            // syncfs of the testbed only, so unrelated host writeback stays out.
            let mut sync = ctx.command("sync");
            sync.arg("-f").arg(".");
            ctx.execute(sync, "sync")?.wall_s
        } else {
            0.0
        };
        let total_s = start.elapsed().as_secs_f64();
        Ok(vec![
            Metric::lower("extract_s", "s", extract.wall_s),
            Metric::lower("sync_s", "s", sync_s),
            Metric::lower("total_s", "s", total_s),
            Metric::higher("files_per_s", "files/s", self.files as f64 / total_s.max(1e-9)),
        ])
    }
}
