//! `fslab history WORKLOAD/METRIC`: one point per experiment (or per tag
//! value) in time order, with change points marked.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::{offer, DbArg, FormatArgs};
use fslab::exit;
use fslab::history::{self, ExperimentSnapshot, HistoryQuery};
use fslab::output;
use fslab::report::Format;
use fslab::store::Store;

/// What selects a series (shared with `fslab report --history`).
#[derive(Args, Debug, Clone)]
pub struct SeriesArgs {
    /// The variant followed (default: the newest experiment's baseline).
    #[arg(long)]
    pub variant: Option<String>,
    /// One point per value of this tag (e.g. kernel), the runs of its experiments pooled.
    #[arg(long, value_name = "TAG")]
    pub by: Option<String>,
    /// Keep experiments whose machine, workload or variant config differs from the newest's (marked).
    #[arg(long)]
    pub allow_mixed: bool,
}

impl SeriesArgs {
    /// The history of `metric` (`WORKLOAD/METRIC`) in `store`, ending at
    /// experiment `reference` (default: the newest with the metric).
    pub fn history(&self, store: &Store, metric: &str, reference: Option<i64>) -> Result<history::History> {
        let (workload, metric) = history::split_metric(metric).map_err(exit::usage)?;
        let q = HistoryQuery {
            workload,
            metric,
            variant: self.variant.clone(),
            by: self.by.clone(),
            allow_mixed: self.allow_mixed,
            reference,
            exclude_reference: false,
        };
        history::history(&ExperimentSnapshot::load_all(store)?, &q).map_err(exit::usage)
    }
}

#[derive(Args, Debug)]
#[command(mut_arg("format", |a| offer(a, &[Format::Text, Format::Json, Format::Html]).help("Output format: a table, or the series and change points as JSON.")))]
pub struct HistoryArgs {
    /// WORKLOAD/METRIC, e.g. untar/elapsed.
    metric: String,
    #[command(flatten)]
    db: DbArg,
    #[command(flatten)]
    series: SeriesArgs,
    /// End the series at this experiment (default: the newest with the metric).
    #[arg(long)]
    experiment: Option<i64>,
    #[command(flatten)]
    format: FormatArgs,
}

pub fn history(args: HistoryArgs) -> Result<ExitCode> {
    let store = args.db.open_existing()?;
    let h = args.series.history(&store, &args.metric, args.experiment)?;
    output::print(&fslab::report::render(args.format.chosen(), &h)?)?;
    Ok(ExitCode::SUCCESS)
}
