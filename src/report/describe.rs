//! Variant configurations (stored as JSON) as short text, the same in the
//! Markdown and HTML reports: one list of rows, [`VARIANT_ROWS`].

use std::fmt::Write;

use serde_json::Value;

use super::data::ReportData;
use crate::human;
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

/// A byte count stored as a number: `256 MiB`.
pub fn bytes_text(v: &Value) -> String {
    v.as_f64().map(human::bytes).unwrap_or_else(|| json_text(v))
}

/// A throttle `{read_bps, write_bps, read_iops, write_iops}`:
/// `write 16 MiB/s, write 500 IOPS`, or `none`.
pub fn throttle_text(v: &Value) -> String {
    let mut parts = Vec::new();
    for (key, value) in v.as_object().into_iter().flatten().filter(|(_, v)| !v.is_null()) {
        let text = match (key.strip_suffix("_bps"), key.strip_suffix("_iops"), value.as_f64()) {
            (Some(dir), _, Some(b)) => format!("{dir} {}", human::byte_rate(b)),
            (_, Some(dir), Some(n)) => format!("{dir} {} IOPS", human::number(n)),
            _ => format!("{key}={}", json_text(value)),
        };
        parts.push(text);
    }
    if parts.is_empty() {
        "none".to_string()
    } else {
        parts.join(", ")
    }
}

/// `sysfs = [["mb_stream_req", 16], …]` as `mb_stream_req=16, …`.
fn sysfs_text(v: &Value) -> String {
    v.as_array()
        .map(|a| a.iter().map(|p| json_text(p).replacen(' ', "=", 1)).collect::<Vec<_>>().join(", "))
        .unwrap_or_default()
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

/// One row of the variants table.
pub struct VariantTableRow {
    pub label: &'static str,
    /// Shown in the compact Markdown table too.
    pub compact: bool,
    /// `(report, variant name, its stored configuration)` → cell text.
    pub value: fn(&ReportData, &str, &Value) -> String,
}

/// The variants table's rows, in order.
pub const VARIANT_ROWS: &[VariantTableRow] = &[
    VariantTableRow { label: "fs", compact: true, value: |_, _, c| json_text(&c["fs"]) },
    VariantTableRow { label: "size", compact: true, value: |_, _, c| bytes_text(&c["size"]) },
    VariantTableRow { label: "mkfs", compact: true, value: |_, _, c| json_text(&c["mkfs"]) },
    VariantTableRow { label: "mount (requested)", compact: true, value: |_, _, c| json_text(&c["mount"]) },
    VariantTableRow { label: "mount (effective)", compact: true, value: |d, n, _| effective_mount(d, n) },
    VariantTableRow { label: "throttle", compact: true, value: |_, _, c| throttle_text(&c["throttle"]) },
    VariantTableRow { label: "read_ahead_kb", compact: true, value: |_, _, c| json_text(&c["read_ahead_kb"]) },
    VariantTableRow { label: "scheduler", compact: true, value: |_, _, c| json_text(&c["scheduler"]) },
    VariantTableRow { label: "sysfs", compact: false, value: |_, _, c| sysfs_text(&c["sysfs"]) },
    VariantTableRow {
        label: "runs ok / failed",
        compact: true,
        value: |d, n, _| {
            let ok = d.runs.iter().filter(|r| r.run.variant == n && r.run.status == RunStatus::Ok).count();
            let failed = d.runs.iter().filter(|r| r.run.variant == n && r.run.status != RunStatus::Ok).count();
            format!("{ok} / {failed}")
        },
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn throttles_in_mib_per_second() {
        let t = json!({"read_bps": null, "write_bps": 16777216, "read_iops": null, "write_iops": 500});
        assert_eq!(throttle_text(&t), "write 16 MiB/s, write 500 IOPS");
        assert_eq!(throttle_text(&Value::Null), "none");
        assert_eq!(throttle_text(&json!({"read_bps": null})), "none");
    }

    #[test]
    fn config_values() {
        assert_eq!(json_text(&json!({"type": "ext4"})), "ext4");
        assert_eq!(json_text(&json!({"type": "dir", "path": "/x"})), "dir (path=/x)");
        assert_eq!(json_text(&json!(["-E", "lazy_itable_init=0"])), "-E lazy_itable_init=0");
        assert_eq!(json_text(&json!(0.00781)), "0.00781");
        assert_eq!(json_text(&json!(2262144)), "2262144");
        assert_eq!(bytes_text(&json!(268435456)), "256 MiB");
    }
}
