//! Variant configurations, read back as their type
//! ([`crate::experiment::VariantConfig`]), as short text, the same in the
//! Markdown and HTML reports: one list of rows, [`VARIANT_ROWS`]. Also
//! [`json_text`], the plain text of a JSON document of any shape.

use std::fmt::Write;

use serde_json::Value;

use super::data::ReportData;
use crate::experiment::{TestbedConfig, Throttle, VariantConfig};
use crate::human;
use crate::media::DeviceSpec;
use crate::record::RunStatus;

/// Plain text of a JSON value: strings bare, arrays space-separated,
/// objects as `key=value` (a `type` key first and bare).
pub fn json_text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(json_text).collect::<Vec<_>>().join(" "),
        Value::Object(m) => {
            let kind = m.get("type").map(json_text);
            let rest: Vec<String> = m
                .iter()
                .filter(|(k, v)| k.as_str() != "type" && !v.is_null())
                .map(|(k, v)| format!("{k}={}", json_text(v)))
                .collect();
            match kind {
                Some(kind) if rest.is_empty() => kind,
                Some(kind) => format!("{kind} ({})", rest.join(", ")),
                None => rest.join(", "),
            }
        }
        Value::Number(n) => n.as_f64().filter(|_| n.is_f64()).map(human::number).unwrap_or_else(|| n.to_string()),
        other => other.to_string(),
    }
}

/// A throttle: `read 20 MiB/s, write 500 IOPS`, or `none`.
pub fn throttle_text(t: &Throttle) -> String {
    let bandwidths = [("read", t.read_bps), ("write", t.write_bps)]
        .into_iter()
        .filter_map(|(dir, b)| b.map(|b| format!("{dir} {}", human::byte_rate(b.0 as f64))));
    let iops = [("read", t.read_iops), ("write", t.write_iops)]
        .into_iter()
        .filter_map(|(dir, n)| n.map(|n| format!("{dir} {} IOPS", human::number(n as f64))));
    let parts: Vec<String> = bandwidths.chain(iops).collect();
    if parts.is_empty() {
        "none".to_string()
    } else {
        parts.join(", ")
    }
}

/// The medium a variant's image is served as: `sdcard`, a model with its
/// parameters (a changed preset, a fully given model), or `none` (the
/// image file itself).
pub fn device_text(device: Option<&DeviceSpec>) -> String {
    device.map_or_else(|| "none".to_string(), DeviceSpec::to_string)
}

/// The mount of the variant's first run that has one, as read back.
fn effective_mount(d: &ReportData, variant: &str) -> String {
    let Some(m) = d.runs.iter().find_map(|r| (r.run.variant == variant).then_some(r.run.mount.as_ref()).flatten())
    else {
        return human::NONE.to_string();
    };
    let mut s = format!("{} {}: {}; super: {}", m.fstype, m.source, m.mount_options, m.super_options);
    if let Some(fs) = &m.fs_options {
        let _ = write!(s, "; fs: {fs}");
    }
    s
}

/// Where a cell of the variants table comes from.
pub enum VariantCell {
    /// The variant's stored configuration; `–` when the store holds none
    /// this version reads.
    Config(fn(&TestbedConfig) -> String),
    /// What the variant's runs recorded: `(report, variant name)`.
    Runs(fn(&ReportData, &str) -> String),
}

/// One row of the variants table.
pub struct VariantTableRow {
    pub label: &'static str,
    /// Shown in the compact Markdown table too.
    pub compact: bool,
    pub cell: VariantCell,
}

impl VariantTableRow {
    /// The cell of variant `name`, whose stored configuration is `config`
    /// ([`ReportData::variant_config`]).
    pub fn text(&self, d: &ReportData, name: &str, config: Option<&VariantConfig>) -> String {
        match (&self.cell, config) {
            (VariantCell::Config(text), Some(c)) => text(&c.testbed),
            (VariantCell::Config(_), None) => human::NONE.to_string(),
            (VariantCell::Runs(text), _) => text(d, name),
        }
    }
}

/// The variants table's rows, in order.
pub const VARIANT_ROWS: &[VariantTableRow] = &[
    VariantTableRow { label: "fs", compact: true, cell: VariantCell::Config(|c| c.fs.to_string()) },
    VariantTableRow { label: "size", compact: true, cell: VariantCell::Config(|c| human::bytes(c.size.0 as f64)) },
    VariantTableRow { label: "device", compact: true, cell: VariantCell::Config(|c| device_text(c.device.as_ref())) },
    VariantTableRow { label: "mkfs", compact: true, cell: VariantCell::Config(|c| c.mkfs.join(" ")) },
    VariantTableRow { label: "mount (requested)", compact: true, cell: VariantCell::Config(|c| c.mount.clone()) },
    VariantTableRow { label: "mount (effective)", compact: true, cell: VariantCell::Runs(effective_mount) },
    VariantTableRow { label: "throttle", compact: true, cell: VariantCell::Config(|c| throttle_text(&c.throttle)) },
    VariantTableRow {
        label: "read_ahead_kb",
        compact: true,
        cell: VariantCell::Config(|c| c.read_ahead_kb.map(|kb| kb.to_string()).unwrap_or_default()),
    },
    VariantTableRow {
        label: "scheduler",
        compact: true,
        cell: VariantCell::Config(|c| c.scheduler.clone().unwrap_or_default()),
    },
    VariantTableRow {
        label: "sysfs",
        compact: false,
        cell: VariantCell::Config(|c| c.sysfs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ")),
    },
    VariantTableRow {
        label: "runs ok / failed",
        compact: true,
        cell: VariantCell::Runs(|d, n| {
            let ok = d.runs.iter().filter(|r| r.run.variant == n && r.run.status == RunStatus::Ok).count();
            let failed = d.runs.iter().filter(|r| r.run.variant == n && r.run.status != RunStatus::Ok).count();
            format!("{ok} / {failed}")
        }),
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;
    use crate::units::Bytes;
    use serde_json::json;

    #[test]
    fn throttles_in_mib_per_second() {
        let t = Throttle { write_bps: Some(Bytes(16 << 20)), write_iops: Some(500), ..Throttle::default() };
        assert_eq!(throttle_text(&t), "write 16 MiB/s, write 500 IOPS");
        assert_eq!(throttle_text(&Throttle::default()), "none");
    }

    #[test]
    fn json_documents_as_text() {
        assert_eq!(json_text(&json!({"type": "ext4"})), "ext4");
        assert_eq!(json_text(&json!({"type": "dir", "path": "/x"})), "dir (path=/x)");
        assert_eq!(json_text(&json!(["-E", "lazy_itable_init=0"])), "-E lazy_itable_init=0");
        assert_eq!(json_text(&json!(0.00781)), "0.00781");
        assert_eq!(json_text(&json!(2262144)), "2262144");
    }

    /// Every cell of `variant`'s column, by row label.
    fn column(d: &ReportData, variant: &str) -> Vec<(&'static str, String)> {
        let config = d.variant_config(variant);
        VARIANT_ROWS.iter().map(|row| (row.label, row.text(d, variant, config.as_ref()))).collect()
    }

    #[test]
    fn the_variants_table_reads_the_stored_variant_as_its_type() {
        let d = fixture::decided();
        let cells = column(&d, "optimize_scan=1");
        let cell = |label: &str| cells.iter().find(|(l, _)| *l == label).map(|(_, t)| t.as_str()).unwrap();
        assert_eq!(cell("fs"), "ext4");
        assert_eq!(cell("size"), "4 GiB");
        assert_eq!(cell("device"), "none");
        assert_eq!(cell("mkfs"), "-E lazy_itable_init=0,lazy_journal_init=0");
        assert_eq!(cell("mount (requested)"), "noatime,mb_optimize_scan=1");
        assert_eq!(cell("throttle"), "read 20 MiB/s, write 20 MiB/s, write 500 IOPS");
        assert_eq!(cell("read_ahead_kb"), "128");
        assert_eq!(cell("scheduler"), "");
        assert_eq!(cell("sysfs"), "mb_stream_req=16");
        assert_eq!(cell("runs ok / failed"), "10 / 0");
        // The third variant's image is served as an SD card.
        let tuned = column(&d, "tuned|<b>");
        assert!(tuned.contains(&("device", "sdcard".to_string())), "{tuned:?}");
    }

    #[test]
    fn a_changed_preset_shows_its_parameters_and_an_unreadable_variant_shows_nothing() {
        let mut d = fixture::decided();
        let mut sdcard = crate::media::presets::find("sdcard").unwrap();
        let crate::media::spec::MediaParams::Flash(p) = &mut sdcard.params else { panic!("sdcard is flash") };
        p.open_aus = 3;
        let mut variant = d.variant_config("tuned|<b>").unwrap();
        variant.testbed.device = Some(sdcard);
        d.experiment.plan.experiment.variants[2] = serde_json::to_value(&variant).unwrap();
        let device = column(&d, "tuned|<b>").into_iter().find(|(l, _)| *l == "device").unwrap().1;
        assert!(device.starts_with("flash(au=4MiB, page=16KiB, open_aus=3"), "{device}");
        // A variant this version cannot read: no cell pretends to know it.
        d.experiment.plan.experiment.variants[0] = json!({"name": "optimize_scan=0", "fs": 3});
        d.experiment.variants[0].config_json = "{}".into();
        assert_eq!(d.variant_config("optimize_scan=0"), None);
        for row in VARIANT_ROWS.iter().filter(|r| matches!(r.cell, VariantCell::Config(_))) {
            assert_eq!(row.text(&d, "optimize_scan=0", None), human::NONE, "{}", row.label);
        }
    }
}
