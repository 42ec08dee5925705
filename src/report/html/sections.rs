//! The sections of the experiment report, in the order [`super::render_html`]
//! puts them: the answer first, then the evidence, then the configuration
//! and environment it holds for.

use std::collections::BTreeSet;
use std::fmt::Write;

use super::iostat::{iostat_charts, lighten, IoSeries};
use super::json_view::{collect_histograms, render_json, snapshot_table};
use crate::analysis::ComparisonRow;
use crate::human;
use crate::record::RunStatus;
use crate::report::data::{mean_ci, sweep_point, ReportData, RunData};
use crate::report::describe::{json_text, VARIANT_ROWS};
use crate::report::summary::{ci_level, notes, run_number, Cell, EVIDENCE_INTRO, VERDICT_COLUMNS};
use crate::report::svg::{color, dot_plot, esc, line_chart, DotGroup, Line};

/// `(workload, metric, unit, higher_is_better)` of a stored series.
type MetricKey<'a> = (&'a str, &'a str, &'a str, bool);

/// Every (workload, metric) with stored values, in store order.
fn metric_keys(d: &ReportData) -> Vec<MetricKey<'_>> {
    let mut keys: Vec<MetricKey> = Vec::new();
    for s in &d.series {
        let k = (s.workload.as_str(), s.metric.as_str(), s.unit.as_str(), s.higher_is_better);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys
}

fn better(higher_is_better: bool) -> &'static str {
    if higher_is_better {
        "higher is better"
    } else {
        "lower is better"
    }
}

/// The headline, the failed runs, and per workload one line per variant and
/// decisive metric (change, CI, verdict) beside that metric's chart.
pub fn answer(d: &ReportData, out: &mut String) {
    let headline = d.headline();
    out.push_str("<section id=\"summary\"><h2>Answer</h2>");
    for (i, line) in headline.lines().iter().enumerate() {
        let line = esc(line);
        let _ = write!(out, "<p class=\"headline\">{}</p>", if i == 0 { format!("<b>{line}</b>") } else { line });
    }
    let failures = headline.failure_lines();
    if !failures.is_empty() {
        out.push_str("<ul class=\"failures\">");
        for f in failures {
            let _ = write!(out, "<li><code>{}</code></li>", esc(&f));
        }
        out.push_str("</ul>");
    }
    if !d.places.all_host() {
        out.push_str("<p>Where the variants ran:</p><ul class=\"places\">");
        for line in d.places.lines() {
            let _ = write!(out, "<li>{}</li>", esc(&line));
        }
        out.push_str("</ul>");
        let notes = d.places.comparison_notes(&d.comparison.baseline, &d.comparison.variants);
        for line in notes.marks.into_iter().chain(notes.doctor.into_iter().map(|l| format!("doctor: {l}"))) {
            let _ = write!(out, "<p class=\"warning\">{}</p>", esc(&line));
        }
    }
    let hostile = d.experiment.environment.doctor.as_ref().map_or(0, |doc| doc.hostile.len());
    if hostile > 0 {
        let _ = write!(
            out,
            "<p>{hostile} benchmark-hostile doctor finding(s) when this ran: see <a href=\"#doctor\">doctor</a>.</p>"
        );
    }
    let c = &d.comparison;
    let mut workloads: Vec<&str> = Vec::new();
    for r in c.rows.iter().filter(|r| c.is_decisive(r)) {
        if !workloads.contains(&r.workload.as_str()) {
            workloads.push(&r.workload);
        }
    }
    let names = d.variant_names();
    let keys = metric_keys(d);
    for w in workloads {
        let rows: Vec<_> = c.rows.iter().filter(|r| r.workload == w && c.is_decisive(r)).collect();
        let _ = write!(
            out,
            "<h3>{}</h3><div class=\"answer\"><table class=\"answer\"><tr><th>variant</th><th>metric</th><th>change</th><th>CI</th><th>verdict</th></tr>",
            esc(w)
        );
        for r in &rows {
            let v = r.verdict.as_str();
            let notes = notes(r);
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{} ({}, {})</td><td class=\"num\">{}</td><td class=\"num\">{} {}</td><td><span class=\"verdict v-{v}\">{v}</span>{}</td></tr>",
                esc(&r.variant),
                esc(&r.metric),
                esc(&r.unit),
                better(r.higher_is_better),
                human::change_pct(r.change_pct),
                ci_level(r),
                human::ci_pct(r.ci_low_pct, r.ci_high_pct),
                if notes.is_empty() { String::new() } else { format!(" <span class=\"muted\">{}</span>", esc(&notes.join("; "))) }
            );
        }
        out.push_str("</table><div class=\"charts\">");
        // A sweep (shell1-1, shell1-2, …) is one line chart; other decisive metrics one dot plot each.
        let decisive: Vec<MetricKey> =
            keys.iter().copied().filter(|k| k.0 == w && rows.iter().any(|r| r.metric == k.1)).collect();
        let sweeps = sweeps_of(&decisive);
        if sweeps.is_empty() {
            for (w, m, unit, hib) in decisive.iter().take(4) {
                out.push_str(&metric_chart(d, &names, w, m, unit, *hib));
            }
        } else {
            for sweep in sweeps {
                out.push_str(&sweep_chart(d, &names, sweep));
            }
        }
        out.push_str("</div></div>");
    }
    out.push_str("</section>");
}

pub fn verdicts(d: &ReportData, out: &mut String) {
    let c = &d.comparison;
    let _ = write!(
        out,
        "<section id=\"verdicts\"><h2>Verdicts</h2><p>Every variant against the baseline <b>{}</b>; θ = ±{}%, α = {}. \
         Change is the relative change of the mean; CI is the 95% interval of the ratio of geometric means (Welch on logs); \
         p is Benjamini–Hochberg adjusted across the metrics of one comparison. <code>regressed</code>/<code>improved</code>: \
         p &lt; α and the whole CI beyond ±θ; <code>no-change</code>: the whole CI inside ±θ.</p>",
        esc(&c.baseline),
        human::number(c.theta * 100.0),
        c.alpha
    );
    if c.rows.is_empty() {
        out.push_str(
            "<p>No comparisons yet (needs successful runs of the baseline and another variant).</p></section>",
        );
        return;
    }
    let (metric_rows, evidence_rows) = c.split_evidence();
    verdict_table(&metric_rows, out);
    if !evidence_rows.is_empty() {
        let _ = write!(out, "<h3 id=\"evidence\">Evidence</h3><p>{}</p>", esc(EVIDENCE_INTRO));
        verdict_table(&evidence_rows, out);
    }
    out.push_str("</section>");
}

/// The full verdict table of `rows`.
fn verdict_table(rows: &[&ComparisonRow], out: &mut String) {
    out.push_str("<div class=\"scroll\"><table class=\"verdicts\"><tr>");
    for col in VERDICT_COLUMNS {
        let _ = write!(out, "<th>{}</th>", esc(col.header));
    }
    out.push_str("</tr>");
    for r in rows {
        let v = r.verdict.as_str();
        let _ = write!(
            out,
            "<tr class=\"v-{v}\" title=\"{}\">",
            esc(&format!("{} vs {}: {}", r.variant, r.baseline, better(r.higher_is_better)))
        );
        for col in VERDICT_COLUMNS {
            let text = esc(&(col.value)(r));
            let _ = match col.cell {
                Cell::Text if col.header == "notes" => write!(out, "<td class=\"notes\">{text}</td>"),
                Cell::Text => write!(out, "<td>{text}</td>"),
                Cell::Number => write!(out, "<td class=\"num\">{text}</td>"),
                Cell::Verdict => write!(out, "<td><span class=\"verdict v-{v}\">{text}</span></td>"),
            };
        }
        out.push_str("</tr>");
    }
    out.push_str("</table></div>");
}

/// The dot plot of one metric: every run of every variant, mean and CI.
fn metric_chart(d: &ReportData, names: &[String], w: &str, m: &str, unit: &str, hib: bool) -> String {
    let mut groups = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let Some(s) =
            d.series.iter().find(|s| s.workload == w && s.metric == m && s.unit == unit && s.variant == *name)
        else {
            continue;
        };
        let (mean, ci) = mean_ci(&s.values);
        let seqs: Vec<usize> = d
            .runs
            .iter()
            .filter(|r| r.run.status == RunStatus::Ok && r.run.variant == *name && r.run.workload == w)
            .filter(|r| r.run.metrics.iter().any(|x| x.name == m && x.value.is_finite()))
            .map(|r| r.run.seq)
            .collect();
        let labels = if seqs.len() == s.values.len() {
            seqs.iter().map(|q| format!("{name} run {}", run_number(*q))).collect()
        } else {
            Vec::new()
        };
        groups.push(DotGroup {
            name: name.clone(),
            color: color(i).to_string(),
            values: s.values.clone(),
            labels,
            mean,
            ci,
            outliers: crate::stats::outlier_indices(&s.values),
        });
    }
    let title = format!("{w}/{m}");
    format!(
        "<figure>{}<figcaption>{} ({}, {})</figcaption></figure>",
        dot_plot(&title, unit, &groups),
        esc(&title),
        esc(unit),
        better(hib)
    )
}

pub fn metrics(d: &ReportData, out: &mut String) {
    out.push_str("<section id=\"metrics\"><h2>Metrics per run</h2>");
    let names = d.variant_names();
    out.push_str(&legend_table(&names));
    out.push_str("<p>Each dot is one successful run (hollow: flagged outlier, never dropped); the bar is the arithmetic mean, the whisker its 95% CI.</p>");
    let keys = metric_keys(d);
    if keys.is_empty() {
        out.push_str("<p>No successful runs with metrics yet.</p>");
    }
    out.push_str("<div class=\"charts\">");
    for (w, m, unit, hib) in &keys {
        out.push_str(&metric_chart(d, &names, w, m, unit, *hib));
    }
    out.push_str("</div>");
    let sweeps = sweeps_of(&keys);
    if !sweeps.is_empty() {
        out.push_str("<h3 id=\"sweeps\">Sweeps</h3><p>Mean per sweep value with its 95% CI, one line per variant.</p><div class=\"charts\">");
        for sweep in sweeps {
            out.push_str(&sweep_chart(d, &names, sweep));
        }
        out.push_str("</div>");
    }
    out.push_str("</section>");
}

/// A sweep: title, unit, higher-is-better, and its (sweep value, workload, metric) points.
type Sweep = (String, String, bool, Vec<(f64, String, String)>);

/// Sweeps among `keys`: metrics `<name>-<n>` within a workload, or one
/// metric across workloads labelled `<name>-<n>`, with at least two values.
fn sweeps_of(keys: &[MetricKey]) -> Vec<Sweep> {
    let mut groups: Vec<Sweep> = Vec::new();
    for (w, m, unit, hib) in keys {
        let (title, x) = if let Some((name, x)) = sweep_point(m) {
            (format!("{w}/{name}-N"), x)
        } else if let Some((name, x)) = sweep_point(w) {
            (format!("{name}-N/{m}"), x)
        } else {
            continue;
        };
        match groups.iter_mut().find(|g| g.0 == title && g.1 == *unit) {
            Some(g) => g.3.push((x, w.to_string(), m.to_string())),
            None => groups.push((title, unit.to_string(), *hib, vec![(x, w.to_string(), m.to_string())])),
        }
    }
    groups.retain(|g| g.3.iter().map(|p| p.0.to_bits()).collect::<BTreeSet<_>>().len() >= 2);
    groups
}

/// The line chart of a sweep: mean and CI per sweep value, one line per variant.
fn sweep_chart(d: &ReportData, names: &[String], (title, unit, hib, mut pts): Sweep) -> String {
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut lines = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let mut points = Vec::new();
        let mut err = Vec::new();
        for (x, w, m) in &pts {
            if let Some(s) =
                d.series.iter().find(|s| s.workload == *w && s.metric == *m && s.variant == *name && s.unit == unit)
            {
                let (mean, ci) = mean_ci(&s.values);
                points.push((*x, mean));
                err.push(ci);
            }
        }
        if !points.is_empty() {
            lines.push(Line { name: name.clone(), color: color(i).to_string(), points, err, markers: true });
        }
    }
    let x_label =
        title.split('/').find(|p| p.ends_with("-N")).unwrap_or("sweep value").trim_end_matches("-N").to_string();
    format!(
        "<figure>{}<figcaption>{} ({}, {})</figcaption></figure>",
        line_chart("line", &title, &format!("{x_label} sweep value"), &unit, &lines),
        esc(&title),
        esc(&unit),
        better(hib)
    )
}

/// iostat time series per round (the k-th run of every variant overlaid),
/// CPU beside them, and whole-run device totals.
pub fn device_time_series(d: &ReportData, out: &mut String) {
    out.push_str("<section id=\"iostat\"><h2>Device time series</h2>");
    let names = d.variant_names();
    let with_disk: Vec<&RunData> = d
        .runs
        .iter()
        .filter(|r| r.run.status == RunStatus::Ok && r.monitor.as_ref().is_some_and(|m| !m.disk.is_empty()))
        .collect();
    if with_disk.is_empty() {
        out.push_str("<p class=\"muted\">No device samples were recorded (no monitored block device, e.g. tmpfs or dir variants).</p>");
    } else {
        out.push_str(&legend_table(&names));
        out.push_str("<p>iostat <code>-x</code> figures per sample interval; the k-th run of every variant overlaid (round 1 open, later rounds folded). Read lines are lighter.</p>");
    }
    let mut workloads: Vec<&str> = Vec::new();
    for r in &with_disk {
        if !workloads.contains(&r.run.workload.as_str()) {
            workloads.push(&r.run.workload);
        }
    }
    for w in workloads {
        let _ = write!(out, "<h3>{}</h3>", esc(w));
        let per_variant: Vec<(usize, Vec<&RunData>)> = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                (i, with_disk.iter().copied().filter(|r| r.run.workload == w && r.run.variant == *n).collect())
            })
            .collect();
        let rounds = per_variant.iter().map(|(_, v)| v.len()).max().unwrap_or(0);
        for k in 0..rounds {
            let mut series = Vec::new();
            let mut seqs = Vec::new();
            for (i, runs) in &per_variant {
                if let Some(m) = runs.get(k).and_then(|r| r.monitor.as_ref().map(|m| (r, m))) {
                    let name = names.get(*i).cloned().unwrap_or_default();
                    seqs.push(format!("{name}: run {}", run_number(m.0.run.seq)));
                    series.push(IoSeries::from_monitor(&name, color(*i), m.1));
                }
            }
            let caption = format!("{w}, run {} of each variant ({})", k + 1, seqs.join(", "));
            let _ = write!(
                out,
                "<details class=\"round\"{}><summary>run {} of each variant — {}</summary>{}",
                if k == 0 { " open" } else { "" },
                k + 1,
                esc(&seqs.join(", ")),
                iostat_charts(&caption, &series)
            );
            let mut cpu_lines = Vec::new();
            for (i, runs) in &per_variant {
                if let Some(m) = runs.get(k).and_then(|r| r.monitor.as_ref()).filter(|m| !m.cpu.is_empty()) {
                    let name = names.get(*i).cloned().unwrap_or_default();
                    cpu_lines.push(Line {
                        name: format!("{name} busy"),
                        color: color(*i).to_string(),
                        points: m.cpu.iter().map(|c| (c.t_s, 100.0 - c.idle_pct - c.iowait_pct)).collect(),
                        err: vec![],
                        markers: false,
                    });
                    cpu_lines.push(Line {
                        name: format!("{name} iowait"),
                        color: lighten(color(*i)),
                        points: m.cpu.iter().map(|c| (c.t_s, c.iowait_pct)).collect(),
                        err: vec![],
                        markers: false,
                    });
                }
            }
            if !cpu_lines.is_empty() {
                let _ = write!(
                    out,
                    "<div class=\"charts\"><figure>{}<figcaption>{} — CPU busy (user+sys+…) and iowait, % of all CPUs</figcaption></figure></div>",
                    line_chart("ts", "CPU", "seconds", "%", &cpu_lines),
                    esc(&caption)
                );
            }
            out.push_str("</details>");
        }
    }
    let with_totals: Vec<&RunData> = d.runs.iter().filter(|r| r.run.disk_totals.is_some()).collect();
    if !with_totals.is_empty() {
        out.push_str(
            "<h3>Device totals per run</h3><div class=\"scroll\"><table><tr><th>run</th><th>variant</th><th>workload</th><th>read MB</th><th>written MB</th>\
             <th>reads</th><th>writes</th><th>flushes</th><th>mean read kB</th><th>mean write kB</th><th>busy</th><th>duration</th></tr>",
        );
        for r in with_totals {
            if let Some(t) = &r.run.disk_totals {
                let _ = write!(
                    out,
                    "<tr><td class=\"num\">{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
                     <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                    run_number(r.run.seq),
                    esc(&r.run.variant),
                    esc(&r.run.workload),
                    human::number(t.read_mb),
                    human::number(t.written_mb),
                    t.reads,
                    t.writes,
                    t.flushes,
                    human::number(t.mean_read_kb),
                    human::number(t.mean_write_kb),
                    human::duration_s(t.busy_s),
                    human::duration_s(t.duration_s)
                );
            }
        }
        out.push_str("</table></div>");
    }
    out.push_str("</section>");
}

/// Block-trace summaries and filesystem snapshots, per run.
pub fn extras(d: &ReportData, out: &mut String) {
    out.push_str("<section id=\"extras\"><h2>Block trace and filesystem internals</h2>");
    let with: Vec<&RunData> = d.runs.iter().filter(|r| !r.extras.is_empty()).collect();
    if with.is_empty() {
        out.push_str("<p class=\"muted\">No block-trace or filesystem-internal data was recorded for these runs.</p>");
    }
    for r in with {
        let _ = write!(
            out,
            "<details class=\"extras\"{}><summary>run {} — {} — {}</summary>",
            if r.run.round == 0 { " open" } else { "" },
            run_number(r.run.seq),
            esc(&r.run.variant),
            esc(&r.run.workload)
        );
        let find = |kind: &str| r.extras.iter().find(|(k, _)| k == kind).map(|(_, v)| v);
        let (before, after, delta) = (find("fs_before"), find("fs_after"), find("fs_delta"));
        for (kind, v) in &r.extras {
            // The profile has a section of its own.
            if matches!(kind.as_str(), "fs_before" | "fs_after" | "fs_delta" | crate::vm::profile::EXTRA) {
                continue;
            }
            let _ = write!(out, "<h3>{}</h3>", esc(kind));
            render_json(kind, v, 0, out);
        }
        if before.is_some() || after.is_some() || delta.is_some() {
            out.push_str("<h3>filesystem snapshots: before / after / delta</h3>");
            snapshot_table(before, after, delta, out);
            // Histograms inside the snapshots (e.g. free-extent orders) as charts.
            for (label, v) in [("before", before), ("after", after)] {
                if let Some(v) = v {
                    let mut charts = String::new();
                    collect_histograms(&format!("fs {label}"), v, 0, &mut charts);
                    if !charts.is_empty() {
                        let _ = write!(out, "<div class=\"charts\">{charts}</div>");
                    }
                }
            }
        }
        out.push_str("</details>");
    }
    out.push_str("</section>");
}

/// The experiment's settings, its file as run, and the variants side by side.
pub fn experiment(d: &ReportData, out: &mut String) {
    let e = &d.experiment;
    let spec = &e.plan.experiment;
    let _ = write!(out, "<section id=\"experiment\"><h2>Experiment</h2><table>");
    let mut kv = |k: &str, v: String| {
        let _ = write!(out, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(&v));
    };
    kv("id", e.id.to_string());
    kv("name", e.name.clone());
    if let Some(desc) = &spec.description {
        kv("description", desc.clone());
    }
    kv("status", e.status.to_string());
    kv("created", e.created_at.clone());
    kv("finished", e.finished_at.clone().unwrap_or_else(|| human::NONE.into()));
    if let Some(p) = &e.spec_path {
        kv("spec file", p.clone());
    }
    kv("seed", e.seed.to_string());
    kv("order", spec.order.as_ref().map(json_text).unwrap_or_default());
    kv(
        "repetitions",
        spec.repetitions.and_then(|r| serde_json::to_value(r).ok()).map(|r| json_text(&r)).unwrap_or_default(),
    );
    kv("baseline", d.comparison.baseline.clone());
    kv("θ / α", format!("±{}% / {}", human::number(d.comparison.theta * 100.0), d.comparison.alpha));
    let workloads: Vec<String> = e.workloads.iter().map(|w| format!("{} ({})", w.label, w.kind)).collect();
    kv("workloads", workloads.join(", "));
    out.push_str("</table><details><summary>experiment file as run</summary><pre>");
    out.push_str(&esc(&e.spec_text));
    out.push_str("</pre></details>");

    let names = d.variant_names();
    out.push_str("<h3 id=\"variants\">Variants</h3><div class=\"scroll\"><table class=\"variants\"><tr><th></th>");
    for (i, n) in names.iter().enumerate() {
        let _ = write!(out, "<th><span class=\"swatch\" style=\"background:{}\"></span>{}</th>", color(i), esc(n));
    }
    out.push_str("</tr>");
    let configs: Vec<_> = names.iter().map(|n| d.variant_config(n)).collect();
    for row in VARIANT_ROWS {
        let _ = write!(out, "<tr><th>{}</th>", esc(row.label));
        for (n, c) in names.iter().zip(&configs) {
            let _ = write!(out, "<td><code>{}</code></td>", esc(&row.text(d, n, c.as_ref())));
        }
        out.push_str("</tr>");
    }
    out.push_str("<tr><th>geometry</th>");
    for n in &names {
        match d.runs.iter().find_map(|r| (r.run.variant == *n).then_some(r.run.geometry.as_ref()).flatten()) {
            Some(g) => {
                let _ = write!(out, "<td><details><summary>show</summary><pre>{}</pre></details></td>", esc(g));
            }
            None => out.push_str("<td>–</td>"),
        }
    }
    out.push_str("</tr></table></div></section>");
}

/// The machine: kernel, CPU, memory, tool versions (folded).
pub fn environment(d: &ReportData, out: &mut String) {
    let stored = &d.experiment.environment;
    let env = &stored.host;
    out.push_str("<section id=\"environment\"><h2>Environment</h2><details><summary>");
    let _ = write!(
        out,
        "{} · {} × {}</summary><table>",
        esc(&format!("{} {}", env.kernel_release, env.hostname)),
        env.cpu_count,
        esc(&env.cpu_model)
    );
    let mut kv = |k: &str, v: String| {
        let _ = write!(out, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(&v));
    };
    kv("kernel", format!("{} {}", env.kernel_release, env.kernel_version));
    kv("command line", env.kernel_cmdline.clone());
    kv("CPU", format!("{} × {}", env.cpu_count, env.cpu_model));
    kv("memory", human::bytes(env.mem_total_kb as f64 * 1024.0));
    kv("host", env.hostname.clone());
    kv("kernel config", env.kernel_config_source.clone().unwrap_or_default());
    kv("captured", env.captured_at.clone());
    if let Some(err) = &stored.error {
        kv("error", err.clone());
    }
    out.push_str("</table>");
    out.push_str("<h3>Tool versions</h3><table>");
    for (k, v) in &env.tools {
        let _ = write!(out, "<tr><th>{}</th><td><code>{}</code></td></tr>", esc(k), esc(v));
    }
    out.push_str("</table>");
    out.push_str("</details></section>");
}

/// What `fslab doctor` found when the experiment started.
pub fn doctor(d: &ReportData, out: &mut String) {
    out.push_str("<section id=\"doctor\"><h2>Doctor findings at run start</h2>");
    let Some(doc) = &d.experiment.environment.doctor else {
        out.push_str("<p class=\"muted\">No doctor diagnosis was recorded with this experiment.</p></section>");
        return;
    };
    if let Some(err) = &doc.error {
        let _ = write!(out, "<p>The doctor could not run: {}</p>", esc(err));
    }
    if doc.findings.is_empty() && doc.error.is_none() {
        out.push_str("<p>No known issue applied to this machine.</p>");
    }
    for f in &doc.findings {
        let sev = f.severity.to_lowercase();
        let sev_class: String = sev.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
        let _ = write!(
            out,
            "<div class=\"finding sev-{sev_class}\"><b>{}</b> <span class=\"muted\">[{}{}] {}</span><p>{}</p>",
            esc(&f.title),
            esc(&sev),
            if f.benchmark_hostile { ", benchmark-hostile" } else { "" },
            esc(&f.id),
            esc(&f.summary)
        );
        if !f.advice.is_empty() {
            let _ = write!(out, "<p><i>Advice:</i> {}</p>", esc(&f.advice));
        }
        if !f.evidence.is_empty() {
            out.push_str("<ul>");
            for e in &f.evidence {
                let _ = write!(out, "<li><code>{}</code></li>", esc(e));
            }
            out.push_str("</ul>");
        }
        for (v, label) in [(&f.affected, "affected"), (&f.fixed_in, "fixed in")] {
            if let Some(v) = v {
                let _ = write!(out, "<span class=\"muted\">{label}: {}</span> ", esc(v));
            }
        }
        // References as plain text: the report itself never links out.
        if !f.references.is_empty() {
            let _ = write!(out, "<p class=\"muted\">references: {}</p>", esc(&f.references.join(" · ")));
        }
        out.push_str("</div>");
    }
    if !doc.facts.is_empty() {
        let _ = write!(
            out,
            "<details><summary>facts the doctor saw</summary><pre>{}</pre></details>",
            esc(&doc.facts.join("\n"))
        );
    }
    out.push_str("</section>");
}

/// The variants with a colour swatch each (the chart legend).
fn legend_table(names: &[String]) -> String {
    let mut out = String::from("<p class=\"legend\">");
    for (i, n) in names.iter().enumerate() {
        let _ = write!(out, "<span class=\"swatch\" style=\"background:{}\"></span>{} &nbsp; ", color(i), esc(n));
    }
    out.push_str("</p>");
    out
}
