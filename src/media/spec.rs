//! `device = { … }` of a variant: a preset by name (optionally with some
//! of its parameters changed) or a model with every parameter given.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::flash::{Flash, FlashParams, Gc};
use super::hdd::{Hdd, HddParams};
use super::passthrough::Passthrough;
use super::ssd::{Ssd, SsdParams};
use super::{presets, Model, Op, MODELS};
use crate::units::{Bytes, Seconds};

/// A checked medium: what a variant's `device` resolved to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceSpec {
    /// The preset or model named in the file (`sdcard`, `flash`, …).
    pub name: String,
    pub params: MediaParams,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "lowercase")]
pub enum MediaParams {
    Flash(FlashParams),
    Hdd(HddParams),
    Ssd(SsdParams),
    Passthrough,
}

impl DeviceSpec {
    /// A fresh model of this medium, `capacity` bytes large.
    pub fn model(&self, capacity: u64) -> Box<dyn Model> {
        match &self.params {
            MediaParams::Flash(p) => Box::new(Flash::new(p.clone())),
            MediaParams::Hdd(p) => Box::new(Hdd::new(p.clone(), capacity)),
            MediaParams::Ssd(p) => Box::new(Ssd(p.clone())),
            MediaParams::Passthrough => Box::new(Passthrough),
        }
    }

    /// Whether the medium serves one request at a time (no command
    /// queueing): SD cards, eMMC without CQ, USB sticks, and disks as
    /// modelled here. SSDs and passthrough take requests in parallel.
    pub fn serial(&self) -> bool {
        matches!(self.params, MediaParams::Flash(_) | MediaParams::Hdd(_))
    }

    /// Queue settings of the block device in front of the served image (the
    /// host's loop device, a guest's virtio disk): requests no larger than
    /// the server takes, so the model sees the block layer's requests whole,
    /// and a disk model is rotational to the filesystem too (allocators and
    /// schedulers look at the flag); flash models are not.
    pub fn queue_settings(&self) -> [(&'static str, String); 2] {
        let rotational = matches!(self.params, MediaParams::Hdd(_));
        [
            ("max_sectors_kb", (super::serve::MAX_REQUEST / 1024).to_string()),
            ("rotational", if rotational { "1" } else { "0" }.to_string()),
        ]
    }

    /// An AU must fit in the image it serves (`au = "1GiB"` on a 128 MiB
    /// image is a model of a different card). Errors as [`DeviceSpec::parse`].
    pub fn check_capacity(&self, capacity: u64) -> Result<(), (String, String)> {
        match &self.params {
            MediaParams::Flash(p) if p.au > capacity => Err((
                "device.au".into(),
                format!(
                    "{} is larger than the {} image it serves (an allocation unit must fit in it)",
                    Bytes(p.au),
                    Bytes(capacity)
                ),
            )),
            _ => Ok(()),
        }
    }

    /// The least one 4 KiB write (`write`) or read costs on this medium,
    /// in seconds, and the parameter that costs most of it: no request of
    /// a workload that writes (or reads) can take less.
    pub fn least_request_s(&self, write: bool) -> (f64, &'static str) {
        const BLOCK: f64 = 4096.0;
        let per_byte = |mbps: f64| if mbps > 0.0 { BLOCK / (mbps * 1e6) } else { 0.0 };
        let parts: Vec<(f64, &'static str)> = match (&self.params, write) {
            (MediaParams::Flash(p), true) => {
                vec![(p.program_latency, "program_latency"), (per_byte(p.write_mbps), "write_mbps")]
            }
            (MediaParams::Flash(p), false) => {
                vec![(p.read_latency, "read_latency"), (per_byte(p.read_mbps), "read_mbps")]
            }
            (MediaParams::Hdd(p), _) => vec![(per_byte(p.mbps), "mbps")],
            (MediaParams::Ssd(p), true) => {
                vec![(p.write_latency, "write_latency"), (per_byte(p.write_mbps), "write_mbps")]
            }
            (MediaParams::Ssd(p), false) => {
                vec![(p.read_latency, "read_latency"), (per_byte(p.read_mbps), "read_mbps")]
            }
            (MediaParams::Passthrough, _) => vec![(0.0, "model")],
        };
        let total = parts.iter().map(|(s, _)| s).sum();
        let key = parts.iter().max_by(|a, b| a.0.total_cmp(&b.0)).map_or("model", |(_, k)| k);
        (total, key)
    }

    /// The most one request the server takes ([`super::serve::MAX_REQUEST`])
    /// can cost, in seconds: a full-size write that closes two AUs with
    /// their copies, a full stroke and a turn, whichever the model has.
    pub fn slowest_request_s(&self) -> f64 {
        let max = f64::from(super::serve::MAX_REQUEST);
        let at = |mbps: f64| if mbps > 0.0 { max / (mbps * 1e6) } else { 0.0 };
        match &self.params {
            MediaParams::Flash(p) => {
                let gc =
                    if p.gc == Gc::AuCopy && p.copy_mbps > 0.0 { 2.0 * p.au as f64 / (p.copy_mbps * 1e6) } else { 0.0 };
                (p.program_latency + at(p.write_mbps) + gc).max(p.read_latency + at(p.read_mbps))
            }
            MediaParams::Hdd(p) => p.seek_full + 60.0 / f64::from(p.rpm.max(1)) + at(p.mbps),
            MediaParams::Ssd(p) => (p.write_latency + at(p.write_mbps)).max(p.read_latency + at(p.read_mbps)),
            MediaParams::Passthrough => 0.0,
        }
    }

    /// Seconds this medium, fresh, takes to write `bytes` from the start
    /// in requests of the largest size the server takes: the model itself
    /// charges each.
    pub fn sequential_write_s(&self, bytes: u64) -> f64 {
        let mut model = self.model(bytes);
        let step = u64::from(super::serve::MAX_REQUEST);
        (0..bytes.div_ceil(step)).map(|i| model.charge(Op::Write, i * step, step.min(bytes - i * step)).total()).sum()
    }

    /// Parse a `device` value (an inline table). Errors are the message
    /// only; the caller names file, line and key.
    pub fn parse(value: &toml::Value) -> Result<DeviceSpec, (String, String)> {
        let table = value.as_table().ok_or_else(|| {
            ("device".to_string(), format!("must be a table such as {{ model = \"sdcard\" }} ({})", choices()))
        })?;
        let model = match table.get("model") {
            Some(toml::Value::String(m)) => m.clone(),
            Some(_) => return Err(("device.model".into(), "must be a string".into())),
            None => return Err(("device.model".into(), format!("is required ({})", choices()))),
        };
        let mut spec = match presets::find(&model) {
            Some(preset) => preset,
            None if MODELS.contains(&model.as_str()) => DeviceSpec { name: model.clone(), params: blank(&model) },
            None => return Err(("device.model".into(), format!("unknown model `{model}` ({})", choices()))),
        };
        let from_preset = presets::find(&model).is_some();
        let mut given: Vec<&str> = Vec::new();
        for (key, v) in table {
            if key == "model" {
                continue;
            }
            let err = |msg: String| (format!("device.{key}"), msg);
            set(&mut spec.params, key, v).map_err(err)?;
            given.push(key);
        }
        if !from_preset {
            let missing: Vec<&str> = required(&spec.params).iter().copied().filter(|k| !given.contains(k)).collect();
            if !missing.is_empty() {
                return Err((
                    "device".into(),
                    format!(
                        "model `{model}` needs {} (or name a preset: {})",
                        missing.join(", "),
                        presets::names().join(", ")
                    ),
                ));
            }
        }
        check(&spec.params).map_err(|(k, m)| (format!("device.{k}"), m))?;
        Ok(with_defaults(spec))
    }
}

fn choices() -> String {
    format!("presets {}; models {}", presets::names().join(", "), MODELS.join(", "))
}

/// A model with every parameter unset (zero), to be filled from the file.
fn blank(model: &str) -> MediaParams {
    match model {
        "flash" => MediaParams::Flash(FlashParams {
            au: 0,
            page: 0,
            open_aus: 0,
            linear_only: false,
            write_mbps: 0.0,
            read_mbps: 0.0,
            read_latency: 0.0,
            program_latency: 0.0,
            copy_mbps: 0.0,
            gc: Gc::AuCopy,
        }),
        "hdd" => MediaParams::Hdd(HddParams { rpm: 0, seek_full: 0.0, seek_track: 0.0, mbps: 0.0 }),
        "ssd" => MediaParams::Ssd(SsdParams { read_latency: 0.0, write_latency: 0.0, read_mbps: 0.0, write_mbps: 0.0 }),
        _ => MediaParams::Passthrough,
    }
}

/// The keys a fully specified model must give (the rest have defaults:
/// flash `linear_only` false, `gc` au-copy, `copy_mbps` = `write_mbps`,
/// latencies 0).
fn required(params: &MediaParams) -> &'static [&'static str] {
    match params {
        MediaParams::Flash(_) => &["au", "page", "open_aus", "write_mbps", "read_mbps"],
        MediaParams::Hdd(_) => &["rpm", "seek_full", "seek_track", "mbps"],
        MediaParams::Ssd(_) => &["read_mbps", "write_mbps"],
        MediaParams::Passthrough => &[],
    }
}

fn set(params: &mut MediaParams, key: &str, v: &toml::Value) -> Result<(), String> {
    match params {
        MediaParams::Flash(p) => match key {
            "au" => p.au = bytes(v)?,
            "page" => p.page = bytes(v)?,
            "open_aus" => p.open_aus = count(v)?,
            "linear_only" => p.linear_only = v.as_bool().ok_or("must be true or false")?,
            "write_mbps" => p.write_mbps = rate(v)?,
            "read_mbps" => p.read_mbps = rate(v)?,
            "copy_mbps" => p.copy_mbps = rate(v)?,
            "read_latency" => p.read_latency = seconds(v)?,
            "program_latency" => p.program_latency = seconds(v)?,
            "gc" => {
                p.gc = match v.as_str() {
                    Some("au-copy") => Gc::AuCopy,
                    Some("none") => Gc::None,
                    _ => return Err("must be \"au-copy\" or \"none\"".into()),
                }
            }
            _ => return Err(unknown("flash", FLASH_KEYS)),
        },
        MediaParams::Hdd(p) => match key {
            "rpm" => p.rpm = count(v)?,
            "seek_full" => p.seek_full = seconds(v)?,
            "seek_track" => p.seek_track = seconds(v)?,
            "mbps" => p.mbps = rate(v)?,
            _ => return Err(unknown("hdd", HDD_KEYS)),
        },
        MediaParams::Ssd(p) => match key {
            "read_latency" => p.read_latency = seconds(v)?,
            "write_latency" => p.write_latency = seconds(v)?,
            "read_mbps" => p.read_mbps = rate(v)?,
            "write_mbps" => p.write_mbps = rate(v)?,
            _ => return Err(unknown("ssd", SSD_KEYS)),
        },
        MediaParams::Passthrough => return Err("passthrough has no parameters".into()),
    }
    Ok(())
}

/// The keys of `device = { model = "flash", … }`, and the parameters every
/// flash preset's sources must account for.
pub(crate) const FLASH_KEYS: &[&str] = &[
    "au",
    "page",
    "open_aus",
    "linear_only",
    "write_mbps",
    "read_mbps",
    "copy_mbps",
    "read_latency",
    "program_latency",
    "gc",
];
const HDD_KEYS: &[&str] = &["rpm", "seek_full", "seek_track", "mbps"];
const SSD_KEYS: &[&str] = &["read_latency", "write_latency", "read_mbps", "write_mbps"];

fn unknown(model: &str, keys: &[&str]) -> String {
    format!("is not a {model} parameter ({})", keys.join(", "))
}

/// Cross-parameter checks, with defaults filled in.
fn check(params: &MediaParams) -> Result<(), (&'static str, String)> {
    match params {
        MediaParams::Flash(p) => {
            if p.au < 64 * 1024 || !p.au.is_power_of_two() {
                return Err(("au", "must be a power of two of at least 64KiB".into()));
            }
            if p.page < 512 || !p.page.is_power_of_two() || p.page > p.au {
                return Err(("page", "must be a power of two between 512 bytes and the AU size".into()));
            }
            if p.open_aus == 0 || p.open_aus > 64 {
                return Err(("open_aus", "must be between 1 and 64".into()));
            }
        }
        MediaParams::Hdd(p) => {
            if p.rpm < 1000 || p.rpm > 20000 {
                return Err(("rpm", "must be between 1000 and 20000".into()));
            }
            if p.seek_track > p.seek_full {
                return Err(("seek_track", "must not exceed seek_full".into()));
            }
        }
        MediaParams::Ssd(_) | MediaParams::Passthrough => {}
    }
    Ok(())
}

/// Fill defaults that depend on other parameters (`copy_mbps`).
fn with_defaults(mut spec: DeviceSpec) -> DeviceSpec {
    if let MediaParams::Flash(p) = &mut spec.params {
        if p.copy_mbps <= 0.0 {
            p.copy_mbps = p.write_mbps;
        }
    }
    spec
}

fn bytes(v: &toml::Value) -> Result<u64, String> {
    match v {
        toml::Value::Integer(i) if *i > 0 => Ok(*i as u64),
        toml::Value::String(s) => Bytes::parse(s).map(|b| b.0),
        _ => Err("must be a size such as \"4MiB\" or a byte count".into()),
    }
}

fn seconds(v: &toml::Value) -> Result<f64, String> {
    match v {
        toml::Value::String(s) => Seconds::parse(s).map(|d| d.0.as_secs_f64()),
        toml::Value::Integer(0) => Ok(0.0),
        _ => Err("must be a duration such as \"300us\" or \"18ms\"".into()),
    }
}

fn rate(v: &toml::Value) -> Result<f64, String> {
    let x = match v {
        toml::Value::Integer(i) => *i as f64,
        toml::Value::Float(f) => *f,
        _ => return Err("must be a number of MB/s".into()),
    };
    if x.is_finite() && x > 0.0 && x <= 100_000.0 {
        Ok(x)
    } else {
        Err("must be a positive number of MB/s (at most 100000)".into())
    }
}

fn count(v: &toml::Value) -> Result<u32, String> {
    match v {
        toml::Value::Integer(i) if *i > 0 && *i <= i64::from(u32::MAX) => Ok(*i as u32),
        _ => Err("must be a positive whole number".into()),
    }
}

impl DeviceSpec {
    /// The model behind the medium (`flash`, `hdd`, `ssd`, `passthrough`).
    pub fn model_name(&self) -> &'static str {
        match self.params {
            MediaParams::Flash(_) => "flash",
            MediaParams::Hdd(_) => "hdd",
            MediaParams::Ssd(_) => "ssd",
            MediaParams::Passthrough => "passthrough",
        }
    }

    /// Every parameter as `(key, value)`, in the model's key order, values
    /// written as in the file (`4MiB`, `300us`).
    pub fn parameters(&self) -> Vec<(&'static str, String)> {
        let us = |s: f64| format!("{}us", (s * 1e6).round());
        match &self.params {
            MediaParams::Flash(p) => vec![
                ("au", Bytes(p.au).to_string()),
                ("page", Bytes(p.page).to_string()),
                ("open_aus", p.open_aus.to_string()),
                ("linear_only", p.linear_only.to_string()),
                ("write_mbps", p.write_mbps.to_string()),
                ("read_mbps", p.read_mbps.to_string()),
                ("copy_mbps", p.copy_mbps.to_string()),
                ("read_latency", us(p.read_latency)),
                ("program_latency", us(p.program_latency)),
                ("gc", if p.gc == Gc::AuCopy { "au-copy" } else { "none" }.to_string()),
            ],
            MediaParams::Hdd(p) => vec![
                ("rpm", p.rpm.to_string()),
                ("seek_full", us(p.seek_full)),
                ("seek_track", us(p.seek_track)),
                ("mbps", p.mbps.to_string()),
            ],
            MediaParams::Ssd(p) => vec![
                ("read_latency", us(p.read_latency)),
                ("write_latency", us(p.write_latency)),
                ("read_mbps", p.read_mbps.to_string()),
                ("write_mbps", p.write_mbps.to_string()),
            ],
            MediaParams::Passthrough => Vec::new(),
        }
    }

    /// Whether `name` is a preset (else a model given in full).
    pub fn is_preset(&self) -> bool {
        presets::find(&self.name).is_some()
    }

    /// The parameters that differ from the preset the medium names (every
    /// parameter of a model given in full).
    pub fn changed(&self) -> Vec<(&'static str, String)> {
        let preset = presets::find(&self.name).map(|p| p.parameters()).unwrap_or_default();
        self.parameters().into_iter().filter(|kv| !preset.contains(kv)).collect()
    }
}

impl fmt::Display for DeviceSpec {
    /// `sdcard`, or the model with its parameters for fully given ones
    /// and changed presets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if presets::find(&self.name).is_some_and(|p| p.params == self.params) {
            return f.write_str(&self.name);
        }
        let parameters: Vec<String> = self.parameters().iter().map(|(k, v)| format!("{k}={v}")).collect();
        match parameters.is_empty() {
            true => f.write_str(self.model_name()),
            false => write!(f, "{}({})", self.model_name(), parameters.join(", ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<DeviceSpec, (String, String)> {
        let value: toml::Table = toml::from_str(&format!("device = {text}")).unwrap();
        DeviceSpec::parse(&value["device"])
    }

    #[test]
    fn presets_and_full_models() {
        assert_eq!(parse(r#"{ model = "sdcard" }"#).unwrap(), presets::find("sdcard").unwrap());
        let full = parse(
            r#"{ model = "flash", au = "4MiB", page = "16KiB", open_aus = 2, linear_only = true, write_mbps = 20,
                 read_mbps = 80, read_latency = "300us", program_latency = "800us", gc = "au-copy" }"#,
        )
        .unwrap();
        let MediaParams::Flash(p) = &full.params else { panic!() };
        assert_eq!((p.au, p.page, p.open_aus), (4 << 20, 16 << 10, 2));
        assert!((p.read_latency - 300e-6).abs() < 1e-12 && (p.copy_mbps - 20.0).abs() < 1e-12);
        let hdd = parse(r#"{ model = "hdd", rpm = 5400, seek_full = "18ms", seek_track = "1ms", mbps = 110 }"#);
        assert_eq!(hdd.unwrap().params, presets::find("hdd").unwrap().params);
        let changed = parse(r#"{ model = "sdcard", open_aus = 3 }"#).unwrap();
        assert!(changed.to_string().starts_with("flash(au=4MiB, page=16KiB, open_aus=3"));
        assert_eq!(presets::find("sdcard").unwrap().to_string(), "sdcard");
    }

    #[test]
    fn every_model_name_gets_its_own_parameters() {
        // `blank` picks by name with a fallback arm: a model added to `MODELS` without its arm would be passthrough.
        for name in MODELS {
            let params = serde_json::to_value(blank(name)).unwrap();
            assert_eq!(params["model"], *name, "{params}");
        }
    }

    #[test]
    fn changes_are_what_differs_from_the_preset() {
        assert_eq!(parse(r#"{ model = "sdcard" }"#).unwrap().changed(), []);
        let changed = parse(r#"{ model = "sdcard", open_aus = 3, program_latency = "2ms" }"#).unwrap();
        assert_eq!(changed.changed(), [("open_aus", "3".to_string()), ("program_latency", "2000us".to_string())]);
        assert_eq!((changed.model_name(), changed.is_preset()), ("flash", true));
        let hdd =
            parse(r#"{ model = "hdd", rpm = 7200, seek_full = "15ms", seek_track = "1ms", mbps = 150 }"#).unwrap();
        // `hdd` is a preset too: only what differs from it.
        assert_eq!(hdd.changed().len(), 3, "{:?}", hdd.changed());
        let flash =
            parse(r#"{ model = "flash", au = "4MiB", page = "16KiB", open_aus = 2, write_mbps = 20, read_mbps = 80 }"#);
        let flash = flash.unwrap();
        assert!(!flash.is_preset());
        assert_eq!(flash.changed(), flash.parameters(), "a model given in full: every parameter");
    }

    #[test]
    fn errors_name_the_key() {
        let key = |text: &str| parse(text).unwrap_err().0;
        assert_eq!(key(r#"{ model = "floppy" }"#), "device.model");
        assert_eq!(key(r#"{ model = "sdcard", rpm = 5400 }"#), "device.rpm");
        assert_eq!(key(r#"{ model = "flash", au = "4MiB" }"#), "device");
        assert_eq!(key(r#"{ model = "sdcard", au = "3MiB" }"#), "device.au");
        assert_eq!(key(r#"{ model = "sdcard", read_latency = 5 }"#), "device.read_latency");
        assert_eq!(key(r#""sdcard""#), "device");
        let (_, msg) = parse(r#"{ model = "floppy" }"#).unwrap_err();
        assert!(msg.contains("sdcard") && msg.contains("passthrough"), "{msg}");
    }
}
