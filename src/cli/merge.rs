//! `fslab merge A.db B.db … --into OUT`: copies experiments (with their runs,
//! tags and shard records) from other stores into one, for machines that
//! could not reach the shared database. Idempotent; refuses conflicts.

use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Args;

use fslab::output;
use fslab::report::Format;
use fslab::store::merge::merge as merge_into;
use fslab::store::{Store, StoreLocation};

#[derive(Args, Debug)]
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
    /// Output format of what was merged on stdout.
    #[arg(long, value_parser = super::formats(&[Format::Text, Format::Json]), default_value = "text")]
    format: Format,
    /// Same as `--format json`.
    #[arg(long, hide = true, conflicts_with = "format")]
    json: bool,
}

pub fn merge(args: MergeArgs) -> Result<ExitCode> {
    let json = super::chosen(args.format, args.json) == Format::Json;
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
    let mut reports = Vec::new();
    for (loc, source) in args.sources.iter().zip(&sources) {
        let report = merge_into(&mut target, source)?;
        if !json {
            println!("{loc}: {report}");
        }
        reports.push(serde_json::json!({ "source": loc.to_string(), "merged": report }));
    }
    for workdir in &args.spool {
        for line in target.merge_spool(workdir)? {
            output::diagnostic(&line);
        }
    }
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "into": args.into.to_string(), "sources": reports }))?
        );
    } else {
        output::diagnostic(&format!("merged {} store(s) into {}", reports.len(), args.into));
    }
    Ok(ExitCode::SUCCESS)
}
