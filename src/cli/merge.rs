//! `fslab merge A.db B.db … -o OUT`: copies experiments (with their runs,
//! tags and shard records) from other stores into one, for machines that
//! could not reach the shared database. Idempotent; refuses conflicts.

use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Args;

use fslab::output;
use fslab::store::merge::merge as merge_into;
use fslab::store::{Store, StoreLocation};

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// Stores to copy from: SQLite files or PostgreSQL URLs.
    #[arg(required = true, value_name = "SOURCE")]
    sources: Vec<StoreLocation>,
    /// The store to copy into (SQLite file or PostgreSQL URL); created if missing.
    #[arg(short, long, value_name = "TARGET")]
    output: StoreLocation,
    /// Work directories whose spooled runs (kept there while a database was away, `WORKDIR/spool/`) are
    /// stored into the target too, when it holds their experiment.
    #[arg(long, value_name = "WORKDIR")]
    spool: Vec<std::path::PathBuf>,
    /// Print what was merged as JSON.
    #[arg(long)]
    json: bool,
}

pub fn merge(args: MergeArgs) -> Result<ExitCode> {
    for s in &args.sources {
        if *s == args.output {
            bail!("{s} is both a source and the output (-o); merge it into another store");
        }
    }
    // Sources first: a typo in one must not leave a new empty target behind.
    let sources: Vec<Store> = args
        .sources
        .iter()
        .map(|s| Store::open_existing(s).with_context(|| format!("opening source {s}")))
        .collect::<Result<_>>()?;
    let mut target = Store::open_or_create(&args.output).with_context(|| format!("opening {}", args.output))?;
    let mut reports = Vec::new();
    for (loc, source) in args.sources.iter().zip(&sources) {
        let report = merge_into(&mut target, source)?;
        if !args.json {
            println!("{loc}: {report}");
        }
        reports.push(serde_json::json!({ "source": loc.to_string(), "merged": report }));
    }
    for workdir in &args.spool {
        for line in target.merge_spool(workdir)? {
            output::diagnostic(&line);
        }
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({ "output": args.output.to_string(), "sources": reports })
            )?
        );
    } else {
        output::diagnostic(&format!("merged {} store(s) into {}", reports.len(), args.output));
    }
    Ok(ExitCode::SUCCESS)
}
