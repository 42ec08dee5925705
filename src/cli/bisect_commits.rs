//! `fslab bisect-commits`: the first commit of a source tree that brought a
//! regression (see [`fslab::bisect::commits`]).

use std::fmt::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use comfy_table::{presets::NOTHING, Cell, CellAlignment, Table};

use super::bisect::PerExperiment;
use super::DbArg;
use fslab::bisect::commits::{bisect_commits, CommitBisectConfig, CommitBisectReport, CommitBisectStatus};
use fslab::bisect::MetricRef;
use fslab::human;
use fslab::output;
use fslab::report::{render_plain, Format};
use fslab::runner::{progress::Console, RunOptions};

#[derive(Args, Debug)]
#[command(after_help = "Exit status: 0 first bad commit found; 1 only a range (skipped or undecided commits) \
                        or failed runs; 2 bad usage, or the bad end is not worse than the good end")]
pub struct BisectCommitsArgs {
    /// The git repository (its checkout is never touched: fslab works in worktrees of its own).
    #[arg(long, value_name = "DIR")]
    repo: PathBuf,
    /// A revision without the regression.
    #[arg(long, value_name = "REV")]
    good: String,
    /// A later revision with it.
    #[arg(long, value_name = "REV")]
    bad: String,
    /// Experiment file; `{rev}` (the full commit id) and `{worktree}` (the checked-out tree) are filled in.
    #[arg(value_name = "FILE", required_unless_present = "experiment")]
    file: Option<PathBuf>,
    /// The old spelling of FILE.
    #[arg(long, value_name = "FILE", hide = true, conflicts_with = "file")]
    experiment: Option<PathBuf>,
    /// Build command, run with `sh -c` in each commit's worktree (FSLAB_REV, FSLAB_WORKTREE set);
    /// exit 125 or a failure skips the commit.
    #[arg(long, value_name = "CMD")]
    build: Option<String>,
    /// The variant measured (default: the file's baseline).
    #[arg(long, value_name = "NAME")]
    variant: Option<String>,
    /// The metric, as WORKLOAD/METRIC (default: the first workload's main time).
    #[arg(long, value_name = "WORKLOAD/METRIC")]
    metric: Option<MetricRef>,
    /// Runs each commit (and each end) starts with.
    #[arg(long, value_name = "N", default_value_t = 3, alias = "start-rounds")]
    min_runs: usize,
    /// Most runs per commit before its step is reported undecided (and skipped).
    #[arg(long, value_name = "N", default_value_t = 20, alias = "max-rounds")]
    max_runs: usize,
    /// Error rate of one step's answer.
    #[arg(long, default_value_t = 0.01, value_parser = super::values::alpha)]
    alpha: f64,
    /// Where the (marked, removed afterwards) worktrees are made.
    #[arg(long, value_name = "DIR", default_value = "/var/tmp")]
    worktrees: PathBuf,
    /// Work directory for images, mount points and caches (overrides the file).
    #[arg(long)]
    workdir: Option<PathBuf>,
    #[command(flatten)]
    db: DbArg,
    /// Output format of the result on stdout.
    #[arg(long, value_parser = super::formats(&[Format::Text, Format::Json]), default_value = "text")]
    format: Format,
    /// Same as `--format json`.
    #[arg(long, hide = true, conflicts_with = "format")]
    json: bool,
}

pub fn bisect_commits_cmd(args: BisectCommitsArgs) -> Result<ExitCode> {
    fslab::sys::signals::install()?;
    let mut store = args.db.open()?;
    let cfg = CommitBisectConfig {
        repo: args.repo,
        good: args.good,
        bad: args.bad,
        experiment: args.file.or(args.experiment).expect("clap requires FILE or --experiment"),
        build: args.build,
        variant: args.variant,
        metric: args.metric,
        start_rounds: args.min_runs,
        max_rounds: args.max_runs,
        alpha: args.alpha,
        worktree_base: args.worktrees,
        run_options: RunOptions { workdir: args.workdir, ..RunOptions::default() },
    };
    let mut console = PerExperiment(Console::new());
    let report = bisect_commits(&cfg, &mut store, &mut console)?;
    let text = render_plain(super::chosen(args.format, args.json), "a commit bisection", &report, render_text)?;
    output::print(&text)?;
    output::diagnostic(&format!("results in {} (tag bisect={})", args.db.db.display(), report.id));
    Ok(ExitCode::from(match report.status {
        CommitBisectStatus::Found => 0,
        CommitBisectStatus::Range => 1,
        CommitBisectStatus::NotWorse => 2,
    }))
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}

/// The result, the ends' check and the evidence of every step.
pub fn render_text(r: &CommitBisectReport) -> String {
    let mut out = String::new();
    let e = &r.ends;
    let _ = writeln!(
        out,
        "{} between {} (good, {} over {} runs) and {} (bad, {} over {} runs): {} {} [{}], p {}",
        r.metric,
        short(&r.good.sha),
        human::number(e.mean_good),
        e.n_good,
        short(&r.bad.sha),
        human::number(e.mean_bad),
        e.n_bad,
        human::change_pct(e.change_pct),
        e.verdict,
        human::ci_pct(e.ci_low_pct, e.ci_high_pct),
        human::p_value(e.p_value)
    );
    match r.status {
        CommitBisectStatus::NotWorse => {
            let _ = writeln!(out, "the bad end is not worse than the good end ({}): nothing bisected", e.verdict);
        }
        CommitBisectStatus::Found => {
            if let Some(c) = &r.first_bad {
                let _ = writeln!(out, "first bad commit: {} {}", c.sha, c.subject);
            }
        }
        CommitBisectStatus::Range => {
            let _ = writeln!(out, "the first bad commit is one of (skipped or undecided commits in between):");
            for c in &r.candidates {
                let _ = writeln!(out, "  {} {}", c.sha, c.subject);
            }
        }
    }
    for w in &r.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    if !r.steps.is_empty() {
        let mut t = Table::new();
        t.load_style(NOTHING);
        t.set_header([
            "step",
            "commit",
            "subject",
            "build",
            "runs",
            "good",
            "bad",
            "candidate",
            "position",
            "p",
            "decision",
        ]);
        for (i, s) in r.steps.iter().enumerate() {
            let position = if s.position.is_finite() {
                format!("{:.2} [{:.2}, {:.2}]", s.position, s.position_low, s.position_high)
            } else {
                "–".into()
            };
            let mut decision = s.decision.as_str().to_string();
            if s.partial {
                decision.push_str(" (partial step)");
            }
            let runs =
                if s.reused_runs > 0 { format!("{} ({} stored)", s.runs, s.reused_runs) } else { s.runs.to_string() };
            t.add_row(vec![
                Cell::new(i + 1).set_alignment(CellAlignment::Right),
                Cell::new(short(&s.commit.sha)),
                Cell::new(&s.commit.subject),
                Cell::new(&s.build),
                Cell::new(runs).set_alignment(CellAlignment::Right),
                Cell::new(format!("{} (n {})", human::number(s.mean_good), s.n_good)),
                Cell::new(format!("{} (n {})", human::number(s.mean_bad), s.n_bad)),
                Cell::new(human::number(s.mean_candidate)),
                Cell::new(position),
                Cell::new(human::p_value(s.p_value)),
                Cell::new(decision),
            ]);
        }
        let _ = writeln!(out, "{t}");
    }
    let _ = writeln!(
        out,
        "{} runs done, {} reused from the store, {} builds, {}",
        r.runs_done,
        r.runs_reused,
        r.builds,
        human::duration_s(r.elapsed_s)
    );
    out
}
