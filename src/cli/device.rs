//! `fslab device probe DEV|--model SPEC`: measure a flash device (or a
//! media model through fslab's own path) and print the `device = { … }`
//! line that emulates it.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, Context, Result};
use clap::{Args, Subcommand};

use super::{offer, FormatArgs};
use fslab::exit;
use fslab::media::probe::{self, Options, Region};
use fslab::media::DeviceSpec;
use fslab::report::{render, Format};
use fslab::testbed::{DeviceOptIn, ModelDevice};

#[derive(Args, Debug)]
pub struct DeviceArgs {
    #[command(subcommand)]
    command: DeviceCommand,
}

#[derive(Subcommand, Debug)]
enum DeviceCommand {
    /// Measure a device flashbench-style: AU size, page size, open-AU limit, sequential and random
    /// rates; `--format toml` prints the `device = { … }` line that emulates it.
    Probe(ProbeArgs),
}

#[derive(Args, Debug)]
#[command(after_help = "Exit status:\n  0  probed\n  1  the probe failed (an I/O error, the region ran out)\n  \
    2  usage: no --destroy-data, a bad --region or --model, a refused device (mounted, in use, not a block device)\n  \
    3  not root, or no loop/FUSE for --model\n  \
    128+N  stopped by signal N after tearing everything down")]
// `table` was the text format's name once.
#[command(mut_arg("format", |a| offer(a, &[Format::Text, Format::Json, Format::Toml])
    .help("Output format; toml: the `device = { … }` line that emulates what was measured")))]
struct ProbeArgs {
    /// The block device to probe (it is written to: needs --destroy-data).
    #[arg(value_name = "DEV", required_unless_present = "model", conflicts_with = "model")]
    device: Option<PathBuf>,
    /// Probe a media model served through fslab's own FUSE + loop path instead: a preset name
    /// (sdcard, emmc, usb-stick, hdd, ssd) or an inline table such as '{ model = "sdcard", open_aus = 3 }'.
    #[arg(long, value_name = "SPEC")]
    model: Option<String>,
    /// Confirm that the data on DEV (within --region, or all of it) may be destroyed.
    #[arg(long)]
    destroy_data: bool,
    /// Write only here: OFFSET:LEN (e.g. 1GiB:6GiB, multiples of 1MiB); default the whole device.
    #[arg(long, value_name = "OFFSET:LEN", requires = "destroy_data")]
    region: Option<String>,
    /// Stop each search at its first answer, fewer repetitions (seconds to half a minute on a preset).
    #[arg(long)]
    quick: bool,
    #[command(flatten)]
    format: FormatArgs,
    /// Where --model's image and mounts go.
    #[arg(long, default_value = fslab::testbed::DEFAULT_WORKDIR)]
    workdir: PathBuf,
}

pub fn device_cmd(args: DeviceArgs) -> Result<ExitCode> {
    match args.command {
        DeviceCommand::Probe(args) => probe_cmd(args),
    }
}

fn probe_cmd(args: ProbeArgs) -> Result<ExitCode> {
    if !nix::unistd::geteuid().is_root() {
        return Err(exit::environment(anyhow!("device probe needs root (O_DIRECT on block devices, loop and FUSE)")));
    }
    fslab::sys::signals::install()?;
    let options = Options { quick: args.quick };
    let found = match (&args.device, &args.model) {
        (_, Some(text)) => {
            let spec = parse_model(text).map_err(exit::usage)?;
            let size = Region::needed();
            let mut served = ModelDevice::start(&spec, &args.workdir, size).map_err(exit::environment)?;
            let region = Region { offset: 0, len: size };
            let found = probe::probe(served.path(), region, options);
            served.stop()?;
            found?
        }
        (Some(path), None) => {
            if !args.destroy_data {
                return Err(exit::usage(anyhow!(
                    "device probe writes to {}: add --destroy-data (and --region OFFSET:LEN to confine it)",
                    path.display()
                )));
            }
            let opt_in = DeviceOptIn::new(path).map_err(exit::usage)?;
            // Held exclusively while probing: nothing can mount it meanwhile.
            let _claim = opt_in.claim().map_err(exit::usage)?;
            let size = fslab::sys::blockdev::size_bytes(path)?;
            let region = match &args.region {
                Some(text) => Region::parse(text, size).map_err(|e| exit::usage(anyhow!("--region: {e}")))?,
                None => {
                    let whole = Region { offset: 0, len: size / (1 << 20) * (1 << 20) };
                    whole.check(size).map_err(|e| exit::usage(anyhow!("{}: {e}", path.display())))?;
                    whole
                }
            };
            probe::probe(path, region, options)?
        }
        (None, None) => return Err(exit::usage(anyhow!("name a device or --model SPEC"))),
    };
    fslab::output::print(&render(args.format.chosen(), &found)?)?;
    Ok(ExitCode::SUCCESS)
}

/// A preset name or an inline table, checked as an experiment file's `device`.
fn parse_model(text: &str) -> Result<DeviceSpec> {
    let text = text.trim();
    let value = if text.starts_with('{') {
        let doc: toml::Table = toml::from_str(&format!("device = {text}"))
            .with_context(|| format!("--model: `{text}` is not a TOML inline table"))?;
        doc["device"].clone()
    } else {
        let mut table = toml::Table::new();
        table.insert("model".into(), toml::Value::String(text.to_string()));
        toml::Value::Table(table)
    };
    DeviceSpec::parse(&value).map_err(|(key, message)| anyhow!("--model: `{key}` {message}"))
}
