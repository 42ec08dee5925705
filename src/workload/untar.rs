//! `untar`: extract a generated archive with GNU tar into the testbed, then
//! sync — the shape of the ext4 `mb_optimize_scan` SD-card case.

use std::fs::File;
use std::io::Read;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};

use super::archive::{ensure_archive, ArchiveSpec};
use super::listing::Listing;
use super::{RunContext, Workload};
use crate::experiment::UntarSource;
use crate::metric::Metric;

/// Extract + sync of an archive built from a content list.
pub struct Untar {
    pub source: UntarSource,
    pub scale: f64,
    pub compressibility: f64,
    pub sync: bool,
    pub seed: u64,
    archive: Option<PathBuf>,
    files: usize,
}

impl Untar {
    pub fn new(source: UntarSource, scale: f64, compressibility: f64, sync: bool, seed: u64) -> Self {
        Untar { source, scale, compressibility, sync, seed, archive: None, files: 0 }
    }

    /// The content list this workload extracts.
    pub fn listing(&self) -> Result<Listing> {
        let listing = match &self.source {
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
        if self.scale < 1.0 {
            listing.scaled(self.scale)
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
        let spec = ArchiveSpec { compressibility: self.compressibility, seed: self.seed };
        self.archive = Some(ensure_archive(&listing, &spec, cache_dir)?);
        Ok(())
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
        let sync_s = if self.sync {
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
