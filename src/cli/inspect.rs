//! `fslab doctor` and `fslab kconfig diff`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};

use super::{offer, FormatArgs};
use fslab::inspect::{builtin_rules, doctor, kconfig_diff, Facts, KernelConfig};
use fslab::output;
use fslab::report::{render, Format};

#[derive(Args, Debug)]
#[command(mut_arg("format", |a| offer(a, &[Format::Text, Format::Json])))]
pub struct DoctorArgs {
    /// Also inspect the filesystem holding this path.
    path: Option<PathBuf>,
    /// Evaluate another machine's kernel config instead of this machine (offline mode).
    #[arg(long, value_name = "FILE")]
    kconfig: Option<PathBuf>,
    /// Kernel release for offline mode (e.g. 5.15.32).
    #[arg(long, value_name = "X.Y.Z", requires = "kconfig")]
    kernel_release: Option<String>,
    /// Mount options for offline mode.
    #[arg(long, requires = "kconfig")]
    mount_options: Option<String>,
    /// Filesystem type for offline mode.
    #[arg(long, requires = "kconfig")]
    fs: Option<String>,
    /// Storage the filesystem is on, for offline mode.
    #[arg(long, value_enum, requires = "kconfig")]
    device_kind: Option<DeviceKindArg>,
    /// Filesystem size for offline mode (e.g. 32GiB): ext4's block-group count is estimated from it.
    #[arg(long, value_name = "SIZE", requires = "kconfig")]
    fs_size: Option<String>,
    #[command(flatten)]
    format: FormatArgs,
}

/// `--device-kind`.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum DeviceKindArg {
    Sdcard,
    Emmc,
    Hdd,
    Ssd,
}

pub fn doctor_cmd(args: DoctorArgs) -> Result<ExitCode> {
    let facts = match &args.kconfig {
        Some(kconfig) => {
            let mut facts = Facts::offline(
                Some(kconfig),
                args.kernel_release.as_deref(),
                args.mount_options.as_deref(),
                args.fs.as_deref(),
            )?;
            if let Some(kind) = args.device_kind {
                let name = kind.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_default();
                facts.set("device.kind", &name).map_err(|e| anyhow::anyhow!("--device-kind: {e}"))?;
            }
            if let Some(size) = &args.fs_size {
                facts.set("fs.size", size).map_err(|e| anyhow::anyhow!("--fs-size: {e}"))?;
            }
            facts
        }
        None => Facts::gather(args.path.as_deref())?,
    };
    let rules = builtin_rules().map_err(|e| anyhow::anyhow!("{e}"))?;
    let report = doctor(&facts, &rules);
    output::print(&render(args.format.chosen(), &report)?)?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct KconfigArgs {
    #[command(subcommand)]
    command: KconfigCommand,
}

#[derive(Subcommand, Debug)]
enum KconfigCommand {
    /// Differences between two kernel configs, grouped by area, with what each means for performance.
    /// Give two config files, or `--experiment ID --variants A,B` for the
    /// configs of two variants' kernels as stored with an experiment.
    #[command(mut_arg("format", |a| offer(a, &[Format::Text, Format::Json])))]
    Diff {
        #[arg(required_unless_present = "experiment")]
        a: Option<PathBuf>,
        #[arg(required_unless_present = "experiment")]
        b: Option<PathBuf>,
        /// Stored experiment whose variants' kernel configs to compare.
        #[arg(long, conflicts_with_all = ["a", "b"], requires = "variants")]
        experiment: Option<i64>,
        /// The two variants (`A,B`) of --experiment.
        #[arg(long, value_delimiter = ',', num_args = 1)]
        variants: Vec<String>,
        #[command(flatten)]
        db: super::DbArg,
        /// Only performance-relevant options.
        #[arg(long)]
        only_perf: bool,
        #[command(flatten)]
        format: FormatArgs,
    },
}

pub fn kconfig(args: KconfigArgs) -> Result<ExitCode> {
    match args.command {
        KconfigCommand::Diff { a, b, experiment, variants, db, only_perf, format } => {
            let (a, b) = match (experiment, a, b) {
                (Some(id), _, _) => stored_configs(&db, id, &variants)?,
                (None, Some(a), Some(b)) => (
                    KernelConfig::from_file(&a).with_context(|| format!("reading {}", a.display()))?,
                    KernelConfig::from_file(&b).with_context(|| format!("reading {}", b.display()))?,
                ),
                _ => return Err(fslab::exit::usage(anyhow::anyhow!("give two config files or --experiment"))),
            };
            let diff = kconfig_diff(&a, &b, only_perf);
            output::print(&render(format.chosen(), &diff)?)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The kernel configs of two variants as stored with experiment `id`.
fn stored_configs(db: &super::DbArg, id: i64, variants: &[String]) -> Result<(KernelConfig, KernelConfig)> {
    let [a, b] = variants else {
        return Err(fslab::exit::usage(anyhow::anyhow!("--variants takes two variant names, `A,B`")));
    };
    let store = db.open_existing()?;
    let experiment = store.experiment(id).map_err(fslab::exit::usage)?;
    let kernels = &experiment.environment.kernels;
    let config = |name: &str| -> Result<KernelConfig> {
        let Some(entry) = kernels.get(name) else {
            let known: Vec<&str> = kernels.keys().map(String::as_str).collect();
            return Err(fslab::exit::usage(anyhow::anyhow!(
                "experiment {id} has no variant `{name}` with a stored kernel (known: {})",
                known.join(", ")
            )));
        };
        let Some(text) = &entry.config else {
            anyhow::bail!("experiment {id}: the kernel of variant `{name}` ({:?}) has no config stored", entry.release);
        };
        let source = format!("experiment {id} variant {name} ({})", entry.release);
        Ok(KernelConfig::parse(text, &source)?)
    };
    Ok((config(a)?, config(b)?))
}
