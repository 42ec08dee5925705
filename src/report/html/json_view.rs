//! The generic JSON-to-HTML viewer for evidence whose shape fslab does not
//! fix (block-trace summaries, filesystem snapshots): histograms become bar
//! charts, scalars key/value tables, nested objects sections; snapshots
//! taken before and after a run become a before/after/delta table.

use std::fmt::Write;

use serde_json::Value;

use crate::human;
use crate::report::describe::json_text;
use crate::report::svg::{bar_histogram, color, esc};

/// Leading number of a bucket key, with k/M/G (binary) suffixes: `"4k"` → 4096.
fn bucket_value(key: &str) -> Option<f64> {
    let k = key.trim_start_matches(['<', '>', '≥', '≤', '=', ' ']);
    let end = k.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(k.len());
    let num: f64 = k.get(..end)?.parse().ok()?;
    let mult = match k.get(end..).and_then(|s| s.chars().next()).map(|c| c.to_ascii_lowercase()) {
        Some('k') => 1024.0,
        Some('m') => 1024.0 * 1024.0,
        Some('g') => 1024.0 * 1024.0 * 1024.0,
        _ => 1.0,
    };
    Some(num * mult)
}

/// `{bucket: count}`: at least two entries, every key starting with a
/// number, every value a non-negative number.
fn is_histogram(v: &Value) -> bool {
    v.as_object().is_some_and(|m| {
        m.len() >= 2 && m.iter().all(|(k, v)| bucket_value(k).is_some() && v.as_f64().is_some_and(|x| x >= 0.0))
    })
}

/// Bucket keys of several histograms, merged and sorted by their value.
fn bucket_keys<'a>(hists: impl Iterator<Item = &'a Value>) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for h in hists {
        for k in h.as_object().into_iter().flat_map(|m| m.keys()) {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    keys.sort_by(|a, b| bucket_value(a).unwrap_or(f64::MAX).total_cmp(&bucket_value(b).unwrap_or(f64::MAX)));
    keys
}

/// A table cell: numbers right-aligned on one line, text free to wrap (so
/// a long value cannot widen the page).
fn value_cell(text: &str) -> String {
    let class = if text.parse::<f64>().is_ok() || text == human::NONE { " class=\"num\"" } else { "" };
    format!("<td{class}>{}</td>", esc(text))
}

/// Renders an arbitrary JSON value: histograms as bar charts (sibling
/// histograms such as read/write as one grouped chart), scalars as a
/// key/value table, nested objects recursively.
pub fn render_json(title: &str, v: &Value, depth: usize, out: &mut String) {
    if depth > 6 {
        let _ = write!(out, "<pre>{}</pre>", esc(&v.to_string()));
        return;
    }
    if is_histogram(v) {
        let keys = bucket_keys(std::iter::once(v));
        let buckets: Vec<(String, Vec<f64>)> =
            keys.iter().map(|k| (k.clone(), vec![v[k.as_str()].as_f64().unwrap_or(0.0)])).collect();
        let _ = write!(
            out,
            "<figure>{}<figcaption>{}</figcaption></figure>",
            bar_histogram(title, "count", &[(title.to_string(), color(0).to_string())], &buckets),
            esc(title)
        );
        return;
    }
    match v {
        Value::Object(m) => {
            let scalars: Vec<(&String, &Value)> =
                m.iter().filter(|(_, v)| !v.is_object() && !is_nested_array(v)).collect();
            if !scalars.is_empty() {
                out.push_str("<table class=\"kv\">");
                for (k, v) in scalars {
                    let text = match v.as_f64() {
                        Some(x) if !v.is_u64() && !v.is_i64() => human::number(x),
                        _ => json_text(v),
                    };
                    let _ = write!(out, "<tr><th>{}</th>{}</tr>", esc(k), value_cell(&text));
                }
                out.push_str("</table>");
            }
            let objects: Vec<(&String, &Value)> =
                m.iter().filter(|(_, v)| v.is_object() || is_nested_array(v)).collect();
            let hists: Vec<(&String, &Value)> = objects.iter().copied().filter(|(_, v)| is_histogram(v)).collect();
            let mut charts = String::new();
            if hists.len() >= 2 {
                // Sibling histograms (read/write) in one grouped chart.
                let keys = bucket_keys(hists.iter().map(|(_, v)| *v));
                let series: Vec<(String, String)> =
                    hists.iter().enumerate().map(|(i, (k, _))| (k.to_string(), color(i).to_string())).collect();
                let buckets: Vec<(String, Vec<f64>)> = keys
                    .iter()
                    .map(|k| (k.clone(), hists.iter().map(|(_, h)| h[k.as_str()].as_f64().unwrap_or(0.0)).collect()))
                    .collect();
                let names: Vec<&str> = hists.iter().map(|(k, _)| k.as_str()).collect();
                let _ = write!(
                    charts,
                    "<figure>{}<figcaption>{}: {}</figcaption></figure>",
                    bar_histogram(title, "count", &series, &buckets),
                    esc(title),
                    esc(&names.join(" / "))
                );
            }
            for (k, v) in objects {
                if hists.len() >= 2 && is_histogram(v) {
                    continue;
                }
                if is_histogram(v) {
                    render_json(&format!("{title} {k}"), v, depth + 1, &mut charts);
                } else {
                    let _ = write!(out, "<h4>{}</h4>", esc(&format!("{title} {k}")));
                    render_json(&format!("{title} {k}"), v, depth + 1, out);
                }
            }
            if !charts.is_empty() {
                let _ = write!(out, "<div class=\"charts\">{charts}</div>");
            }
        }
        Value::Array(a) => {
            for (i, item) in a.iter().enumerate() {
                let _ = write!(out, "<h4>{}</h4>", esc(&format!("{title} [{i}]")));
                render_json(&format!("{title} [{i}]"), item, depth + 1, out);
            }
        }
        other => {
            let _ = write!(out, "<p><code>{}</code></p>", esc(&json_text(other)));
        }
    }
}

fn is_nested_array(v: &Value) -> bool {
    v.as_array().is_some_and(|a| a.iter().any(|x| x.is_object() || x.is_array()))
}

/// Flattens JSON into `a.b.c` → leaf value, in key order.
fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                flatten(&key, v, out);
            }
        }
        Value::Array(a) if a.iter().any(|x| x.is_object() || x.is_array()) => {
            for (i, x) in a.iter().enumerate() {
                flatten(&format!("{prefix}[{i}]"), x, out);
            }
        }
        other => out.push((prefix.to_string(), other.clone())),
    }
}

/// Before/after/delta table of filesystem snapshots. The delta column is
/// the stored `fs_delta` when present, else after − before for numbers.
pub fn snapshot_table(before: Option<&Value>, after: Option<&Value>, delta: Option<&Value>, out: &mut String) {
    let mut cols: Vec<Vec<(String, Value)>> = Vec::new();
    for v in [before, after, delta] {
        let mut flat = Vec::new();
        if let Some(v) = v {
            flatten("", v, &mut flat);
        }
        cols.push(flat);
    }
    let mut keys: Vec<String> = Vec::new();
    for c in &cols {
        for (k, _) in c {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    let get = |c: usize, k: &str| cols.get(c).and_then(|c| c.iter().find(|(kk, _)| kk == k)).map(|(_, v)| v.clone());
    let show = |v: &Option<Value>| match v {
        Some(v) if v.is_f64() => v.as_f64().map(human::number).unwrap_or_default(),
        Some(v) => json_text(v),
        None => "–".into(),
    };
    let cell = value_cell;
    out.push_str(
        "<div class=\"scroll\"><table class=\"snapshot\"><tr><th>counter</th><th>before</th><th>after</th><th>delta</th></tr>",
    );
    for k in keys {
        let (b, a, dl) = (get(0, &k), get(1, &k), get(2, &k));
        let delta_text = match (&dl, &b, &a) {
            (Some(_), _, _) => show(&dl),
            (None, Some(b), Some(a)) => match (b.as_i64(), a.as_i64(), b.as_f64(), a.as_f64()) {
                (Some(b), Some(a), _, _) => a.saturating_sub(b).to_string(),
                (_, _, Some(b), Some(a)) => human::number(a - b),
                _ => "–".into(),
            },
            _ => "–".into(),
        };
        let changed = delta_text != "0" && delta_text != "–";
        let _ = write!(
            out,
            "<tr{}><th>{}</th>{}{}{}</tr>",
            if changed { " class=\"changed\"" } else { "" },
            esc(&k),
            cell(&show(&b)),
            cell(&show(&a)),
            cell(&delta_text)
        );
    }
    out.push_str("</table></div>");
}

pub fn collect_histograms(title: &str, v: &Value, depth: usize, out: &mut String) {
    if depth > 6 {
        return;
    }
    if is_histogram(v) {
        render_json(title, v, depth, out);
    } else if let Some(m) = v.as_object() {
        for (k, v) in m {
            collect_histograms(&format!("{title} {k}"), v, depth + 1, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_detection_and_order() {
        let h = serde_json::json!({"16k": 1, "4k": 5, "8k": 2});
        assert!(is_histogram(&h));
        assert_eq!(bucket_keys(std::iter::once(&h)), vec!["4k", "8k", "16k"]);
        assert!(!is_histogram(&serde_json::json!({"p50": 1.0, "p99": 2.0})));
        assert!(!is_histogram(&serde_json::json!({"4": -1, "8": 2})));
    }

    #[test]
    fn json_rendering_escapes_and_groups() {
        let v = serde_json::json!({
            "read": {"4096": 3, "8192": 1},
            "write": {"4096": 1, "65536": 9},
            "latency_ms": {"p50": 0.5, "p99": 3.25},
            "<b>": "x<y"
        });
        let mut out = String::new();
        render_json("blocktrace", &v, 0, &mut out);
        assert_eq!(out.matches("data-chart=\"hist\"").count(), 1, "{out}");
        assert!(out.contains("&lt;b&gt;") && out.contains("x&lt;y") && !out.contains("<b>"));
        assert!(out.contains("p99"));
    }

    #[test]
    fn snapshot_deltas() {
        let b = serde_json::json!({"xs": {"alloc": 10, "name": "a"}});
        let a = serde_json::json!({"xs": {"alloc": 15, "name": "a"}});
        let mut out = String::new();
        snapshot_table(Some(&b), Some(&a), None, &mut out);
        assert!(out.contains("xs.alloc") && out.contains(">5<"), "{out}");
    }
}
