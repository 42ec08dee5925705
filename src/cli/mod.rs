//! Command-line arguments and dispatch. Each subcommand lives in its own file.

mod bisect;
mod bisect_commits;
mod changepoints;
mod check;
mod compare;
mod device;
mod guest;
mod history;
mod inspect;
mod iostat;
mod kernel;
mod maintenance;
mod merge;
mod plan;
// Generates the README's reference tables; only its test runs it.
#[cfg(test)]
mod reference;
mod report;
mod run;
mod simulate;
mod values;

use std::process::ExitCode;

use anyhow::Result;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Parser, Subcommand, ValueEnum};
use fslab::report::{Detail, Format};
use fslab::store::{Store, StoreLocation};

/// Reproduce, measure and explain Linux filesystem performance regressions.
#[derive(Parser, Debug)]
#[command(name = "fslab", version, about, after_help = fslab::exit::HELP)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Spellings the shared flag vocabulary replaced, as (command, old, new).
/// They still work, as hidden aliases, for a release; using one prints a
/// note on stderr so scripts and the `deploy/` recipes can be updated.
const RENAMED_FLAGS: &[(&str, &str, &str)] = &[
    ("bisect-commits", "--experiment", "the experiment file as the first argument"),
    ("bisect-commits", "--start-rounds", "--min-runs"),
    ("bisect-commits", "--max-rounds", "--max-runs"),
    ("simulate-changepoints", "--start-runs", "--min-runs"),
    ("merge", "-o", "--into"),
    ("merge", "--output", "--into"),
];

/// Print a note for each renamed flag in `args` (the command line without
/// the program name). Flags come after the subcommand, which is the first
/// argument: fslab has no global flags.
pub fn note_renamed_flags(args: &[String]) {
    let Some(command) = args.first() else { return };
    for arg in &args[1..] {
        if arg == "--" {
            break;
        }
        let flag = arg.split('=').next().unwrap_or(arg);
        for (cmd, old, new) in RENAMED_FLAGS {
            if cmd == command && flag == *old {
                fslab::output::diagnostic(&format!("fslab: note: `{old}` is now {new} (`{old}` still works for now)"));
            }
        }
    }
}

/// The stored experiment `id`, or the newest one in `db`.
pub fn experiment_id(store: &fslab::store::Store, db: &impl std::fmt::Display, id: Option<i64>) -> Result<i64> {
    use anyhow::Context;
    // A missing experiment is a usage error (2), decided before anything runs.
    match id {
        Some(id) => store.experiment(id).map(|_| id).map_err(fslab::exit::usage),
        None => {
            store.latest_experiment()?.with_context(|| format!("{db} holds no experiments")).map_err(fslab::exit::usage)
        }
    }
}

/// A `--format` parser that offers only the `allowed` formats of [`Format`]
/// (so `--help` lists what the command can write).
pub fn formats(allowed: &'static [Format]) -> impl TypedValueParser<Value = Format> {
    PossibleValuesParser::new(allowed.iter().filter_map(|f| f.to_possible_value()))
        .try_map(|name: String| Format::from_str(&name, false))
}

/// `--format`, and `--json`, its hidden alias that older scripts may still
/// pass: one group flattened into every command that prints results (uv's
/// shared arg groups). A command names the formats it can write, and its
/// default when not text, with `#[command(mut_arg("format", |a| offer(a, &[…])))]`.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct FormatArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Same as `--format json`.
    #[arg(long, hide = true, conflicts_with = "format")]
    pub json: bool,
}

impl FormatArgs {
    /// The format asked for.
    pub fn chosen(self) -> Format {
        chosen(self.format, self.json)
    }
}

/// Narrows a flattened [`FormatArgs`]' `--format` to the `allowed` formats.
pub fn offer(arg: clap::Arg, allowed: &'static [Format]) -> clap::Arg {
    arg.value_parser(formats(allowed))
}

/// The chosen format: `--format`, or `json` for the hidden `--json` that
/// older scripts may still pass.
pub fn chosen(format: Format, json: bool) -> Format {
    if json {
        Format::Json
    } else {
        format
    }
}

/// How much of a comparison `run`, `quickstart` and `compare` print: the
/// answer, or with `--full` every row too. One group flattened into each.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct DetailArgs {
    /// After the answer, print every metric row and a detail line per row (p, n, CV, notes);
    /// `--format json` is always complete.
    #[arg(long)]
    pub full: bool,
}

impl DetailArgs {
    /// The detail asked for; the answer alone names `compare_args`, the
    /// `fslab compare` arguments that select this comparison again, and
    /// `report_args` (if any) for `fslab report`, as the way to the rest.
    pub fn detail(self, db: &DbArg, compare_args: &[String], report_args: Option<&[String]>) -> Detail {
        if self.full {
            return Detail::Full;
        }
        // `--db` only when neither the default nor FSLAB_DB supplies it
        // again: the hint stays short and works from where the command ran.
        // A URL's password stays masked.
        let from_env = std::env::var("FSLAB_DB").is_ok_and(|v| StoreLocation::parse(&v) == db.db);
        let db_args = match db.db.to_string() {
            d if d == DEFAULT_DB || from_env => vec![],
            d => vec!["--db".to_string(), d],
        };
        let command = |name: &str, args: &[String], extra: &[&str]| {
            let words = ["fslab", name].into_iter().chain(args.iter().chain(&db_args).map(String::as_str));
            let words: Vec<&str> = words.chain(extra.iter().copied()).collect();
            // shlex quotes what a shell would split or expand (a path with spaces).
            shlex::try_join(words.iter().copied()).unwrap_or_else(|_| words.join(" "))
        };
        let mut more = format!("see `{}`", command("compare", compare_args, &["--full"]));
        if let Some(args) = report_args {
            more.push_str(&format!(", or `{}` with charts", command("report", args, &[])));
        }
        Detail::Answer { more }
    }
}

/// The store `--db` names when not given.
const DEFAULT_DB: &str = "fslab.db";

/// Where results live.
#[derive(clap::Args, Debug, Clone)]
pub struct DbArg {
    /// Results store: an SQLite file, or a PostgreSQL server shared by many
    /// machines, as a URL (postgres://user@host/db; add ?sslmode=require for
    /// TLS) or a libpq keyword/value string ("host=H dbname=D user=U").
    // The environment's value is hidden from --help: a URL may hold a password.
    #[arg(long, value_name = "FILE|URL", default_value = DEFAULT_DB, env = "FSLAB_DB", hide_env_values = true)]
    pub db: StoreLocation,
}

impl DbArg {
    /// Opens the store, creating it when missing: for commands that write results.
    pub fn open(&self) -> Result<Store> {
        use anyhow::Context;
        Store::open(&self.db).with_context(|| format!("opening {}", self.db))
    }

    /// Opens an existing store, for commands that only read: a missing file
    /// is an error, not a new empty store. (Commands that write results use
    /// `Store::open`, which creates one.)
    pub fn open_existing(&self) -> Result<Store> {
        use anyhow::Context;
        Store::open_existing(&self.db).with_context(|| format!("opening {}", self.db))
    }
}

/// Where kernels are downloaded, unpacked and built: one rule for every
/// command that touches kernels ([`fslab::kernel::cache_dir`]), one flag
/// group flattened into each of them.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct KernelCacheArg {
    /// Where kernels are downloaded, unpacked and built [default: $FSLAB_KERNEL_CACHE, else WORKDIR/cache,
    /// WORKDIR being --workdir, else the file's `workdir`, else /var/tmp/fslab]
    #[arg(long = "kernel-cache", value_name = "DIR", global = true)]
    pub kernel_cache: Option<std::path::PathBuf>,
}

impl KernelCacheArg {
    /// The overrides an experiment file is read with.
    pub fn overrides(&self, workdir: Option<&std::path::Path>) -> fslab::experiment::Overrides {
        fslab::experiment::Overrides {
            workdir: workdir.map(std::path::Path::to_path_buf),
            kernel_cache: self.kernel_cache.clone(),
        }
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the ext4 mb_optimize_scan SD-card example end to end and print the verdict.
    Quickstart(run::QuickstartArgs),
    /// Run an experiment file.
    Run(run::RunArgs),
    /// Compare the variants of a stored experiment.
    Compare(compare::CompareArgs),
    /// One metric over experiments in time order, with change points marked.
    History(history::HistoryArgs),
    /// CI gate: the newest experiment against its history or another experiment; exit 1 on a regression.
    Check(check::CheckArgs),
    /// Write a self-contained HTML (or Markdown) report of a stored experiment.
    Report(report::ReportArgs),
    /// Dump the runs of a stored experiment with their metrics.
    Export(maintenance::ExportArgs),
    /// List stored experiments.
    List(maintenance::ListArgs),
    /// Copy the experiments of other stores into one (e.g. from machines that could not reach the shared database).
    Merge(merge::MergeArgs),
    /// Remove testbeds (mounts, loop devices, cgroups, images) left by a killed fslab.
    Cleanup(maintenance::CleanupArgs),
    /// Check this system (or another's kernel config) against known filesystem performance issues.
    Doctor(inspect::DoctorArgs),
    /// Kernel config tools.
    Kconfig(inspect::KconfigArgs),
    /// Measure a device (or a media model) flashbench-style and print the `device = { … }` line that emulates it.
    Device(device::DeviceArgs),
    /// Kernels under test: list cached and available ones, fetch, build, export and import, prune the cache.
    Kernel(kernel::KernelArgs),
    /// Parse, summarize, compare and record iostat logs (from any machine).
    Iostat(iostat::IostatArgs),
    /// Find which differing setting between a good and a bad variant carries a regression (ddmin).
    BisectOptions(bisect::BisectArgs),
    /// Find which kernel config options between a good and a bad variant built from one source carry a regression (ddmin, a kernel built per step).
    BisectKconfig(bisect::BisectArgs),
    /// Find the first commit of a source tree that brought a regression (git bisect with a statistical oracle).
    BisectCommits(bisect_commits::BisectCommitsArgs),
    /// Runs per variant needed to detect a change, from the noise of earlier results (or a pilot).
    Plan(plan::PlanArgs),
    /// Simulate the verdict rules and print their error rates (the evidence behind the statistics docs).
    #[command(hide = true)]
    Simulate(simulate::SimulateArgs),
    /// Measure change-point detection and CI-gate error rates on synthetic series.
    #[command(hide = true)]
    SimulateChangepoints(changepoints::SimulateChangepointsArgs),
    #[command(flatten)]
    Guest(guest::GuestCommand),
    /// Serve a testbed image through a media model (started by the testbed).
    #[command(hide = true)]
    MediaServe(MediaServeArgs),
}

#[derive(clap::Args, Debug)]
struct MediaServeArgs {
    /// The model, as JSON (`DeviceSpec`).
    #[arg(long)]
    spec: String,
    #[arg(long)]
    image: std::path::PathBuf,
    #[arg(long)]
    mountpoint: std::path::PathBuf,
}

/// Run the chosen subcommand.
pub fn dispatch(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Quickstart(args) => run::quickstart(args),
        Command::Run(args) => run::run(args),
        Command::Compare(args) => compare::compare(args),
        Command::History(args) => history::history(args),
        Command::Check(args) => check::check_cmd(args),
        Command::Report(args) => report::report(args),
        Command::Export(args) => maintenance::export(args),
        Command::List(args) => maintenance::list(args),
        Command::Merge(args) => merge::merge(args),
        Command::Cleanup(args) => maintenance::cleanup(args),
        Command::Doctor(args) => inspect::doctor_cmd(args),
        Command::Kconfig(args) => inspect::kconfig(args),
        Command::Device(args) => device::device_cmd(args),
        Command::Kernel(args) => kernel::kernel_cmd(args),
        Command::Iostat(args) => iostat::iostat(args),
        Command::BisectOptions(args) => bisect::bisect_options(args),
        Command::BisectKconfig(args) => bisect::bisect_kconfig(args),
        Command::BisectCommits(args) => bisect_commits::bisect_commits_cmd(args),
        Command::Plan(args) => plan::plan_cmd(args),
        Command::Simulate(args) => simulate::simulate(args),
        Command::SimulateChangepoints(args) => changepoints::simulate(args),
        Command::Guest(command) => guest::dispatch(command),
        Command::MediaServe(args) => {
            let spec: fslab::media::DeviceSpec =
                serde_json::from_str(&args.spec).map_err(|e| anyhow::anyhow!("--spec: {e}"))?;
            fslab::media::serve::serve(&spec, &args.image, &args.mountpoint).map(|()| ExitCode::SUCCESS)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Commands that print no results on stdout, only diagnostics on stderr
    /// (or write their result to a file they are given), so `--format` would
    /// choose nothing.
    const NO_RESULTS: &[&str] = &[
        // Serves a VM session's requests inside the guest; talks through files.
        "guest-agent",
        // Serves an image through a media model (FUSE) until stopped.
        "media-serve",
        // Writes the log to `--output`; stdout stays empty.
        "iostat record",
        // Writes one HTML file (`--output`); HTML is its only form.
        "iostat report",
    ];

    /// The answer's last line names the commands that show the rest: the
    /// experiment selected again, `--db` only when not the default (quoted
    /// for a shell, a URL's password masked), `--full` last.
    #[test]
    fn the_answer_names_the_commands_that_show_the_rest() {
        use super::{DbArg, Detail, DetailArgs};
        use fslab::store::StoreLocation;
        let db = |s: &str| DbArg { db: StoreLocation::parse(s) };
        let selection = ["--experiment".to_string(), "3".to_string()];
        let (answer, full) = (DetailArgs { full: false }, DetailArgs { full: true });
        assert_eq!(full.detail(&db("fslab.db"), &selection, Some(&selection)), Detail::Full);
        let more = |d: Detail| match d {
            Detail::Answer { more } => more,
            Detail::Full => panic!("the answer was asked for"),
        };
        assert_eq!(
            more(answer.detail(&db("fslab.db"), &selection, Some(&selection))),
            "see `fslab compare --experiment 3 --full`, or `fslab report --experiment 3` with charts"
        );
        assert_eq!(
            more(answer.detail(&db("my results/r.db"), &selection, None)),
            "see `fslab compare --experiment 3 --db 'my results/r.db' --full`"
        );
        let url = more(answer.detail(&db("postgres://lab:secret@db.example/fslab"), &selection, None));
        assert!(url.contains("--db 'postgres://lab:***@db.example/fslab'") && !url.contains("secret"), "{url}");
    }

    /// Every leaf subcommand, as `parent child`.
    fn leaves(cmd: &clap::Command, prefix: &str, out: &mut Vec<(String, clap::Command)>) {
        for sub in cmd.get_subcommands() {
            let name =
                if prefix.is_empty() { sub.get_name().to_string() } else { format!("{prefix} {}", sub.get_name()) };
            if sub.has_subcommands() {
                leaves(sub, &name, out);
            } else {
                out.push((name, sub.clone()));
            }
        }
    }

    /// Commands that read experiment files or the kernel cache: each takes
    /// the one `--kernel-cache` flag and a `--workdir`, so every one of them
    /// finds kernels where the others do (issue 28.4).
    const TOUCH_KERNELS: &[&str] = &[
        "run",
        "kernel list",
        "kernel fetch",
        "kernel build",
        "kernel prune",
        "kernel export",
        "kernel import",
        "bisect-kconfig",
        "bisect-commits",
        "vm-probe",
        "plan",
    ];

    #[test]
    fn every_command_that_touches_kernels_takes_the_one_cache_flag() {
        let mut all = Vec::new();
        // Built, so a group's global flags reach its subcommands.
        let mut root = super::Cli::command();
        root.build();
        leaves(&root, "", &mut all);
        let mut missing = Vec::new();
        for name in TOUCH_KERNELS {
            let Some((_, cmd)) = all.iter().find(|(n, _)| n == name) else {
                missing.push(format!("{name}: no such command"));
                continue;
            };
            for flag in ["kernel-cache", "workdir"] {
                if !cmd.get_arguments().any(|a| a.get_long() == Some(flag)) {
                    missing.push(format!("{name}: no --{flag}"));
                }
            }
        }
        assert!(missing.is_empty(), "{}", missing.join("\n"));
    }

    /// Every command that prints results takes `--format`, and `--json` as
    /// its hidden alias wherever it can write JSON.
    #[test]
    fn every_result_printing_command_takes_format() {
        let mut all = Vec::new();
        leaves(&super::Cli::command(), "", &mut all);
        let mut missing = Vec::new();
        for (name, cmd) in &all {
            if NO_RESULTS.contains(&name.as_str()) {
                assert!(
                    cmd.get_arguments().all(|a| a.get_id() != "format"),
                    "{name} takes --format: drop it from NO_RESULTS"
                );
                continue;
            }
            let Some(format) = cmd.get_arguments().find(|a| a.get_id() == "format") else {
                missing.push(format!("{name}: no --format"));
                continue;
            };
            let json = format.get_possible_values().iter().any(|v| v.get_name() == "json");
            match cmd.get_arguments().find(|a| a.get_id() == "json") {
                Some(alias) if json => assert!(alias.is_hide_set(), "{name}: --json should be hidden"),
                None if json => missing.push(format!("{name}: no hidden --json alias of --format json")),
                _ => {}
            }
        }
        assert!(missing.is_empty(), "{}", missing.join("\n"));
        // The walk saw the commands this test is about.
        for name in
            ["kernel list", "kernel prune", "merge", "simulate", "vm-probe", "device probe", "run", "quickstart"]
        {
            assert!(all.iter().any(|(n, _)| n == name), "{name} not found");
        }
    }
}
