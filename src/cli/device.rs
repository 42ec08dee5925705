//! `fslab device probe DEV|--model SPEC`: measure a flash device (or a
//! media model through fslab's own path) and print the `device = { … }`
//! line that emulates it.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use comfy_table::Table;

use fslab::exit;
use fslab::human;
use fslab::media::probe::{self, ModelDevice, Options, Probe, Region};
use fslab::media::DeviceSpec;
use fslab::testbed::DeviceOptIn;
use fslab::units::Bytes;

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
    #[arg(long, value_enum, default_value = "table")]
    format: ProbeFormat,
    /// Where --model's image and mounts go.
    #[arg(long, default_value = fslab::testbed::DEFAULT_WORKDIR)]
    workdir: PathBuf,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ProbeFormat {
    Table,
    Json,
    Toml,
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
    match args.format {
        ProbeFormat::Json => fslab::output::print(&format!("{}\n", serde_json::to_string_pretty(&found)?))?,
        ProbeFormat::Toml => fslab::output::print(&format!("{}\n", found.device_line()))?,
        ProbeFormat::Table => fslab::output::print(&render(&found))?,
    }
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

fn size(bytes: Option<u64>) -> String {
    bytes.map_or("not found".into(), |b| Bytes(b).to_string())
}

fn render(p: &Probe) -> String {
    let mut out = String::new();
    let mut summary = Table::new();
    summary.set_header(["figure", "value"]);
    summary.add_row(["AU size".to_string(), size(p.au)]);
    summary.add_row(["page size".to_string(), size(p.page)]);
    let open = p.open_aus.map_or(format!("more than {}", p.open_au_steps.len()), |n| n.to_string());
    summary.add_row(["open AUs".to_string(), open]);
    summary.add_row([
        "linear only".to_string(),
        p.linear_only.map_or("not measured".into(), |l| if l { "yes" } else { "no" }.into()),
    ]);
    for (name, line) in [("write", p.write), ("read", p.read)] {
        if let Some(line) = line {
            summary.add_row([
                format!("{name}: per command, rate"),
                format!("{}, {} MB/s", human::duration_s(line.latency_s), human::number(line.mbps)),
            ]);
        }
    }
    if let Some(copy) = p.copy_mbps {
        summary.add_row(["GC copy rate".to_string(), format!("{} MB/s", human::number(copy))]);
    }
    out.push_str(&format!("{summary}\n\nAU test (write straddling a boundary vs just after it):\n"));
    let mut au = Table::new();
    au.set_header(["boundary", "straddling", "after", "jump"]);
    for s in &p.au_steps {
        au.add_row([
            Bytes(s.boundary).to_string(),
            human::duration_s(s.straddling_s),
            human::duration_s(s.after_s),
            if s.jump { "yes" } else { "" }.to_string(),
        ]);
    }
    out.push_str(&format!("{au}\n\nopen-AU test (streams written round-robin):\n"));
    let mut open = Table::new();
    open.set_header(["streams", "MB/s"]);
    for s in &p.open_au_steps {
        open.add_row([s.streams.to_string(), human::number(s.mbps)]);
    }
    out.push_str(&format!("{open}\n\nrates:\n"));
    let mut rates = Table::new();
    rates.set_header(["pattern", "size", "requests", "per request", "MB/s", "IOPS"]);
    for r in &p.rates {
        rates.add_row([
            r.pattern.to_string(),
            Bytes(r.size).to_string(),
            r.requests.to_string(),
            human::duration_s(r.seconds),
            human::number(r.mbps),
            human::number(r.iops),
        ]);
    }
    out.push_str(&format!("{rates}\n\n{}\n", p.device_line()));
    out.push_str(&format!("probed {} in {}\n", p.device, human::duration_s(p.elapsed_s)));
    out
}
