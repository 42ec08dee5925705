//! `fslab report --format markdown`: a compact summary for mail and issue
//! trackers — the verdict table, the variants and the environment.

use std::fmt::Write;

use serde_json::Value;

use super::data::ReportData;
use super::svg::fmt_num;

/// Escapes text for a Markdown table cell or inline text: pipes, HTML
/// brackets, backticks and emphasis characters cannot break the layout or
/// inject markup.
pub fn md_esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '|' => out.push_str("\\|"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '`' | '*' | '_' | '[' | ']' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\n' | '\r' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(text).collect::<Vec<_>>().join(" "),
        Value::Object(m) => m
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| if k == "type" { text(v) } else { format!("{k}={}", text(v)) })
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    }
}

fn pct(v: f64) -> String {
    if v.is_finite() {
        format!("{v:+.2}%")
    } else {
        "–".into()
    }
}

/// The Markdown summary of an experiment.
pub fn render_markdown(d: &ReportData) -> String {
    let mut out = String::new();
    let c = &d.comparison;
    let _ = writeln!(out, "## fslab experiment {}: {}\n", d.experiment.id, md_esc(&d.experiment.name));
    let _ = writeln!(
        out,
        "Status {}, created {}. Baseline **{}**, θ = ±{}%, α = {}.\n",
        md_esc(&d.experiment.status),
        md_esc(&d.experiment.created_at),
        md_esc(&c.baseline),
        fmt_num(c.theta * 100.0),
        c.alpha
    );

    out.push_str("### Verdicts\n\n");
    if c.rows.is_empty() {
        out.push_str("No comparisons yet (needs successful runs of the baseline and another variant).\n\n");
    } else {
        out.push_str("| metric | variant | mean | baseline | variant | change | 95% CI | p (BH) | n | verdict |\n");
        out.push_str("| --- | --- | --- | ---: | ---: | ---: | --- | ---: | ---: | --- |\n");
        for r in &c.rows {
            let verdict = match r.verdict.as_str() {
                v @ ("regressed" | "improved") => format!("**{v}**"),
                v => v.to_string(),
            };
            let needed = r
                .runs_needed
                .filter(|_| r.verdict == crate::stats::Verdict::Inconclusive)
                .map(|n| format!(" (~{n} runs needed)"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "| {}/{} ({}) | {} | {} | {} | {} | {} | [{}, {}] | {} | {}+{} | {}{} |",
                md_esc(&r.workload),
                md_esc(&r.metric),
                md_esc(&r.unit),
                md_esc(&r.variant),
                r.mean_kind.label(),
                fmt_num(r.mean_baseline),
                fmt_num(r.mean_variant),
                pct(r.change_pct),
                pct(r.ci_low_pct),
                pct(r.ci_high_pct),
                if r.p_adjusted.is_finite() { format!("{:.3}", r.p_adjusted) } else { "–".into() },
                r.n_baseline,
                r.n_variant,
                verdict,
                needed
            );
        }
        out.push('\n');
    }

    out.push_str("### Variants\n\n");
    let names = d.variant_names();
    out.push_str("| |");
    for n in &names {
        let _ = write!(out, " {} |", md_esc(n));
    }
    out.push_str("\n| --- |");
    for _ in &names {
        out.push_str(" --- |");
    }
    out.push('\n');
    let configs: Vec<Value> = names.iter().map(|n| d.variant_config(n)).collect();
    for key in ["fs", "size", "mkfs", "mount", "throttle", "read_ahead_kb", "scheduler"] {
        let _ = write!(out, "| {} |", md_esc(key));
        for c in &configs {
            let cell = match (key, c[key].as_f64()) {
                ("size", Some(b)) => format!("{} MiB", fmt_num(b / 1024.0 / 1024.0)),
                ("throttle", _) if text(&c[key]).is_empty() => "none".into(),
                _ => text(&c[key]),
            };
            let _ = write!(out, " {} |", md_esc(&cell));
        }
        out.push('\n');
    }
    out.push_str("| effective mount |");
    for n in &names {
        let eff = d
            .runs
            .iter()
            .find_map(|r| (r.run.variant == *n).then_some(r.run.mount.as_ref()).flatten())
            .map(|m| {
                let mut s = format!("{} {}", m.fstype, m.mount_options);
                if let Some(fs) = &m.fs_options {
                    let _ = write!(s, " ({fs})");
                }
                s
            })
            .unwrap_or_else(|| "–".into());
        let _ = write!(out, " {} |", md_esc(&eff));
    }
    out.push_str("\n\n### Environment\n\n");
    let env = &d.environment;
    let _ =
        writeln!(out, "- kernel: {} {}", md_esc(&text(&env["kernel_release"])), md_esc(&text(&env["kernel_version"])));
    let _ = writeln!(out, "- CPU: {} × {}", md_esc(&text(&env["cpu_count"])), md_esc(&text(&env["cpu_model"])));
    if let Some(kb) = env["mem_total_kb"].as_f64() {
        let _ = writeln!(out, "- memory: {} GiB", fmt_num(kb / 1024.0 / 1024.0));
    }
    if let Some(tools) = env["tools"].as_object() {
        let list: Vec<String> = tools.iter().map(|(k, v)| format!("{k}: {}", text(v))).collect();
        let _ = writeln!(out, "- tools: {}", md_esc(&list.join("; ")));
    }
    let hostile: Vec<String> =
        env["doctor"]["hostile"].as_array().map(|a| a.iter().map(text).collect()).unwrap_or_default();
    if !hostile.is_empty() {
        out.push_str("\nBenchmark-hostile findings when this experiment ran:\n\n");
        for h in hostile {
            let _ = writeln!(out, "- {}", md_esc(&h));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_cells() {
        assert_eq!(md_esc("a|b<script>`x`"), "a\\|b&lt;script&gt;\\`x\\`");
    }
}
