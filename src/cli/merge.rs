//! `fslab merge A.db B.db … --into OUT`: copies experiments (with their runs,
//! tags and shard records) from other stores into one, for machines that
//! could not reach the shared database. Idempotent; refuses conflicts.

use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Args;

use super::{offer, FormatArgs};
use fslab::output;
use fslab::report::documents::merge::{MergeSummary, MergedSource};
use fslab::report::{render, Format};
use fslab::store::merge::merge as merge_into;
use fslab::store::{Store, StoreLocation};

#[derive(Args, Debug)]
#[command(mut_arg("format", |a| offer(a, &[Format::Text, Format::Json]).help("Output format of what was merged")))]
pub struct MergeArgs {
    /// Stores to copy from: SQLite files or PostgreSQL URLs.
    #[arg(required = true, value_name = "SOURCE")]
    sources: Vec<StoreLocation>,
    /// The store to copy into (SQLite file or PostgreSQL URL); created if missing.
    #[arg(long, value_name = "TARGET", short_alias = 'o', alias = "output")]
    into: StoreLocation,
    /// Work directories whose spooled runs (kept there while a database was away, `WORKDIR/spool/`) are
    /// stored into the target too, when it holds their experiment.
    #[arg(long, value_name = "WORKDIR")]
    spool: Vec<std::path::PathBuf>,
    #[command(flatten)]
    format: FormatArgs,
}

pub fn merge(args: MergeArgs) -> Result<ExitCode> {
    for s in &args.sources {
        if *s == args.into {
            bail!("{s} is both a source and the target (--into); merge it into another store");
        }
    }
    // Sources first: a typo in one must not leave a new empty target behind.
    let sources: Vec<Store> = args
        .sources
        .iter()
        .map(|s| Store::open_existing(s).with_context(|| format!("opening source {s}")))
        .collect::<Result<_>>()?;
    let mut target = Store::open_or_create(&args.into).with_context(|| format!("opening {}", args.into))?;
    let mut merged = Vec::new();
    for (loc, source) in args.sources.iter().zip(&sources) {
        merged.push(MergedSource { source: loc.to_string(), merged: merge_into(&mut target, source)? });
    }
    for workdir in &args.spool {
        for line in target.merge_spool(workdir)? {
            output::diagnostic(&line);
        }
    }
    let summary = MergeSummary { into: args.into.to_string(), sources: merged };
    output::print(&render(args.format.chosen(), &summary)?)?;
    output::diagnostic(&format!("merged {} store(s) into {}", summary.sources.len(), args.into));
    Ok(ExitCode::SUCCESS)
}
