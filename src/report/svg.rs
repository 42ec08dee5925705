//! Small hand-written SVG charts for the HTML report: a dot plot with mean
//! and confidence interval, a numeric line chart (sweeps and time series,
//! long series reduced per pixel column by [`downsample`]) and a grouped
//! bar histogram. Numbers are written by [`crate::human`].
//!
//! Every chart is a self-contained inline `<svg>` element (no `xmlns`, no
//! external references, no script). All text that reaches the markup goes
//! through [`esc`]; hover details use SVG `<title>` elements, so tooltips
//! work without JavaScript.

use std::fmt::Write;

use crate::human;

/// A colour-blind-friendly palette (Okabe–Ito), one colour per variant.
pub const PALETTE: [&str; 8] = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#999933", "#000000"];

/// The colour of the `i`-th variant (wraps around).
pub fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// Escapes text for HTML/SVG element content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Geometry shared by the charts.
const W: f64 = 640.0;
const H: f64 = 260.0;
const ML: f64 = 64.0;
const MR: f64 = 16.0;
const MT: f64 = 30.0;
const MB: f64 = 46.0;

/// Pixel columns of a line chart's plot area: what a long series is
/// reduced to.
pub const PLOT_COLUMNS: usize = (W - ML - MR - 16.0) as usize;

/// The indices of `points` a line chart draws. Short series are drawn
/// whole; a series longer than four points per pixel column is reduced per
/// column (consecutive points that land in the same column) to its first,
/// lowest, highest and last point, plus its first gap (non-finite y, so a
/// break in the line stays a break). Peaks and dips survive and the page
/// grows with the chart's width, not with the log's length.
pub fn downsample(points: &[(f64, f64)], x0: f64, x1: f64, columns: usize) -> Vec<usize> {
    if points.len() <= 4 * columns || columns == 0 {
        return (0..points.len()).collect();
    }
    let span = if x1 > x0 { x1 - x0 } else { 1.0 };
    let column = |x: f64| -> Option<usize> {
        x.is_finite().then(|| (((x - x0) / span * columns as f64).floor().max(0.0) as usize).min(columns - 1))
    };
    let mut keep = Vec::new();
    let mut i = 0;
    while i < points.len() {
        let col = column(points[i].0);
        let mut j = i;
        let (mut first, mut last, mut lo, mut hi, mut gap) = (None, None, None::<usize>, None::<usize>, None);
        while j < points.len() && column(points[j].0) == col {
            let y = points[j].1;
            if y.is_finite() {
                first.get_or_insert(j);
                last = Some(j);
                if lo.is_none_or(|k| y < points[k].1) {
                    lo = Some(j);
                }
                if hi.is_none_or(|k| y > points[k].1) {
                    hi = Some(j);
                }
            } else {
                gap.get_or_insert(j);
            }
            j += 1;
        }
        let mut group: Vec<usize> = [first, lo, hi, last, gap].into_iter().flatten().collect();
        group.sort_unstable();
        group.dedup();
        keep.extend(group);
        i = j;
    }
    keep
}

/// Around `n` "nice" tick values covering `[lo, hi]` (1, 2, 5 × 10^k steps).
pub fn nice_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if !lo.is_finite() || !hi.is_finite() || hi <= lo || n == 0 {
        return if lo.is_finite() { vec![lo] } else { Vec::new() };
    }
    let raw = (hi - lo) / n as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let step = mag
        * if norm <= 1.0 {
            1.0
        } else if norm <= 2.0 {
            2.0
        } else if norm <= 5.0 {
            5.0
        } else {
            10.0
        };
    let mut t = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while t <= hi + step * 1e-9 && out.len() < 50 {
        // Avoid printing -0 and 0.30000000000000004.
        out.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        t += step;
    }
    out
}

/// Longest tick label, in characters: what fits between the y axis's
/// rotated label and the plot (`ML` less about 20 px, at 11 px text).
const TICK_CHARS: usize = 7;

/// The label of tick `t` of an axis with `ticks`: one SI prefix for the
/// whole axis, from its largest tick ([`human::si_prefix`]: `24.3 G`,
/// `512 k`, `250 µ`), and as many decimals as the step needs in that unit,
/// no more than fit in [`TICK_CHARS`]. Without a prefix, 2.4e10 was
/// written in full and cut off at the chart's edge (`000000000`).
fn tick_label(t: f64, ticks: &[f64]) -> String {
    if !t.is_finite() {
        return human::NONE.to_string();
    }
    let largest = ticks.iter().filter(|v| v.is_finite()).fold(t.abs(), |m, v| m.max(v.abs()));
    let (factor, prefix) = human::si_prefix(largest);
    let v = t / factor;
    let suffix = if prefix.is_empty() { String::new() } else { format!(" {prefix}") };
    let step = match ticks {
        [a, b, ..] => (b - a).abs() / factor,
        _ => return format!("{}{suffix}", human::number(v)),
    };
    let needed = if step.is_finite() && step > 0.0 { (-step.log10().floor()).max(0.0) as usize } else { 0 };
    let whole = format!("{:.0}", (largest / factor).trunc()).len() + usize::from(ticks.iter().any(|v| *v < 0.0));
    let room = TICK_CHARS.saturating_sub(whole + 1 + suffix.chars().count());
    let decimals = needed.min(room);
    if v == 0.0 {
        return "0".to_string();
    }
    format!("{v:.decimals$}{suffix}")
}

/// A value range padded for plotting; starts at zero when the data is
/// non-negative and zero is not far away.
fn padded_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if lo >= 0.0 && lo <= 0.5 * hi {
        lo = 0.0;
    }
    if hi <= lo {
        let d = if hi == 0.0 { 1.0 } else { hi.abs() * 0.1 };
        return (lo - if lo == 0.0 { 0.0 } else { d }, hi + d);
    }
    let pad = (hi - lo) * 0.08;
    (if lo == 0.0 { 0.0 } else { lo - pad }, hi + pad)
}

/// Linear map from a data range onto a pixel range.
#[derive(Clone, Copy)]
struct Scale {
    d0: f64,
    d1: f64,
    p0: f64,
    p1: f64,
}

impl Scale {
    fn at(&self, v: f64) -> f64 {
        if self.d1 == self.d0 {
            return (self.p0 + self.p1) / 2.0;
        }
        self.p0 + (v - self.d0) / (self.d1 - self.d0) * (self.p1 - self.p0)
    }
}

fn open_svg(out: &mut String, kind: &str, title: &str) {
    let _ = write!(
        out,
        r##"<svg class="chart" data-chart="{kind}" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{t}"><title>{t}</title><rect x="0" y="0" width="{W}" height="{H}" fill="#fff"/>"##,
        t = esc(title)
    );
    let _ = write!(out, r#"<text x="{ML}" y="16" class="ct">{}</text>"#, esc(title));
}

/// The y axis with grid lines and the axis label.
fn y_axis(out: &mut String, y: Scale, label: &str) {
    let ticks = nice_ticks(y.d0, y.d1, 5);
    for &t in &ticks {
        let py = y.at(t);
        let _ = write!(
            out,
            r#"<line x1="{ML}" x2="{:.1}" y1="{py:.1}" y2="{py:.1}" class="grid"/><text x="{:.1}" y="{:.1}" class="tick" text-anchor="end">{}</text>"#,
            W - MR,
            ML - 4.0,
            py + 4.0,
            esc(&tick_label(t, &ticks))
        );
    }
    let _ = write!(
        out,
        r#"<line x1="{ML}" x2="{ML}" y1="{MT}" y2="{:.1}" class="axis"/><text transform="translate(14 {:.1}) rotate(-90)" class="al" text-anchor="middle">{}</text>"#,
        H - MB,
        (MT + H - MB) / 2.0,
        esc(label)
    );
}

/// A horizontal legend in the top right corner, drawn only when it fits
/// beside the title (`title_chars` long); the report's swatch tables name
/// the colours otherwise.
fn legend(out: &mut String, title_chars: usize, items: &[(&str, &str)]) {
    // Right-aligned: estimate widths from character counts.
    let mut x = W - MR;
    let mut parts = Vec::new();
    for (name, col) in items.iter().rev() {
        let w = 16.0 + 6.5 * name.chars().count().min(40) as f64;
        x -= w;
        parts.push((x, *name, *col));
        x -= 8.0;
    }
    if x < ML + 8.0 * title_chars as f64 + 12.0 {
        return;
    }
    for (x, name, col) in parts {
        let short: String = name.chars().take(40).collect();
        let _ = write!(
            out,
            r#"<rect x="{x:.1}" y="8" width="10" height="10" fill="{col}"/><text x="{:.1}" y="17" class="lg">{}</text>"#,
            x + 14.0,
            esc(&short)
        );
    }
}

/// One group of a dot plot: every run of one variant.
#[derive(Clone, Debug)]
pub struct DotGroup {
    pub name: String,
    pub color: String,
    /// Per-run values in run order.
    pub values: Vec<f64>,
    /// Hover labels per value (same length as `values`, or empty).
    pub labels: Vec<String>,
    pub mean: f64,
    /// 95% confidence interval of the mean (NaN when undefined).
    pub ci: (f64, f64),
    /// Indices into `values` flagged as outliers (drawn hollow).
    pub outliers: Vec<usize>,
}

/// Dot plot: one column per group, each run a dot, the mean a bar and its
/// confidence interval a whisker.
pub fn dot_plot(title: &str, y_label: &str, groups: &[DotGroup]) -> String {
    let mut out = String::new();
    open_svg(&mut out, "dot", title);
    let all = groups.iter().flat_map(|g| g.values.iter().copied().chain([g.ci.0, g.ci.1, g.mean]));
    let (lo, hi) = padded_range(all);
    let y = Scale { d0: lo, d1: hi, p0: H - MB, p1: MT };
    y_axis(&mut out, y, y_label);
    let n = groups.len().max(1) as f64;
    let band = (W - ML - MR) / n;
    for (i, g) in groups.iter().enumerate() {
        let cx = ML + band * (i as f64 + 0.5);
        let col = esc(&g.color);
        let name: String = g.name.chars().take(((band / 6.5) as usize).max(4)).collect();
        let _ = write!(
            out,
            r#"<text x="{cx:.1}" y="{:.1}" class="tick" text-anchor="middle">{}</text>"#,
            H - MB + 16.0,
            esc(&name)
        );
        let half = (band * 0.25).min(40.0);
        if g.ci.0.is_finite() && g.ci.1.is_finite() {
            let (a, b) = (y.at(g.ci.0), y.at(g.ci.1));
            let _ = write!(
                out,
                r#"<g class="ci"><line x1="{cx:.1}" x2="{cx:.1}" y1="{a:.1}" y2="{b:.1}" stroke="{col}" stroke-width="2"/><line x1="{:.1}" x2="{:.1}" y1="{a:.1}" y2="{a:.1}" stroke="{col}" stroke-width="2"/><line x1="{:.1}" x2="{:.1}" y1="{b:.1}" y2="{b:.1}" stroke="{col}" stroke-width="2"/><title>{} 95% CI of the mean: {} … {}</title></g>"#,
                cx - half / 2.0,
                cx + half / 2.0,
                cx - half / 2.0,
                cx + half / 2.0,
                esc(&g.name),
                esc(&human::number(g.ci.0)),
                esc(&human::number(g.ci.1))
            );
        }
        if g.mean.is_finite() {
            let m = y.at(g.mean);
            let _ = write!(
                out,
                r#"<line class="mean" x1="{:.1}" x2="{:.1}" y1="{m:.1}" y2="{m:.1}" stroke="{col}" stroke-width="3"><title>{} mean {}</title></line>"#,
                cx - half,
                cx + half,
                esc(&g.name),
                esc(&human::number(g.mean))
            );
        }
        for (j, v) in g.values.iter().enumerate().filter(|(_, v)| v.is_finite()) {
            // Deterministic jitter so equal values stay visible.
            let jx = cx + half * 1.6 + ((j * 7) % 11) as f64 - 5.0;
            let fill = if g.outliers.contains(&j) { "#fff".to_string() } else { col.clone() };
            let label = g.labels.get(j).cloned().unwrap_or_else(|| format!("run {}", j + 1));
            let _ = write!(
                out,
                r#"<circle class="dot" cx="{jx:.1}" cy="{:.1}" r="4" fill="{fill}" stroke="{col}" stroke-width="1.5" fill-opacity="0.8"><title>{}: {}</title></circle>"#,
                y.at(*v),
                esc(&label),
                esc(&human::number(*v))
            );
        }
    }
    out.push_str("</svg>");
    out
}

/// One line of a line chart.
#[derive(Clone, Debug)]
pub struct Line {
    pub name: String,
    pub color: String,
    /// (x, y); non-finite y breaks the line.
    pub points: Vec<(f64, f64)>,
    /// Optional error bars per point (same length as `points`).
    pub err: Vec<(f64, f64)>,
    /// Draw a marker at every point (sweeps) or not (time series).
    pub markers: bool,
}

/// Line chart of numeric x against y, one line per series. `kind` is the
/// `data-chart` attribute (`line` for sweeps, `ts` for time series).
pub fn line_chart(kind: &str, title: &str, x_label: &str, y_label: &str, lines: &[Line]) -> String {
    let mut out = String::new();
    open_svg(&mut out, kind, title);
    let ys = lines.iter().flat_map(|l| l.points.iter().map(|p| p.1).chain(l.err.iter().flat_map(|e| [e.0, e.1])));
    let (lo, hi) = padded_range(ys);
    let (mut x0, mut x1) = (f64::INFINITY, f64::NEG_INFINITY);
    for p in lines.iter().flat_map(|l| l.points.iter()).filter(|p| p.0.is_finite()) {
        x0 = x0.min(p.0);
        x1 = x1.max(p.0);
    }
    if !x0.is_finite() {
        (x0, x1) = (0.0, 1.0);
    }
    // Time series start at zero, so runs of different length line up.
    if kind == "ts" && x0 > 0.0 {
        x0 = 0.0;
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let y = Scale { d0: lo, d1: hi, p0: H - MB, p1: MT };
    let x = Scale { d0: x0, d1: x1, p0: ML + 8.0, p1: W - MR - 8.0 };
    y_axis(&mut out, y, y_label);
    let ticks = nice_ticks(x0, x1, 6);
    for &t in &ticks {
        let px = x.at(t);
        let _ = write!(
            out,
            r#"<line x1="{px:.1}" x2="{px:.1}" y1="{:.1}" y2="{:.1}" class="axis"/><text x="{px:.1}" y="{:.1}" class="tick" text-anchor="middle">{}</text>"#,
            H - MB,
            H - MB + 4.0,
            H - MB + 16.0,
            esc(&tick_label(t, &ticks))
        );
    }
    let _ = write!(
        out,
        r#"<line x1="{ML}" x2="{:.1}" y1="{:.1}" y2="{:.1}" class="axis"/><text x="{:.1}" y="{:.1}" class="al" text-anchor="middle">{}</text>"#,
        W - MR,
        H - MB,
        H - MB,
        (ML + W - MR) / 2.0,
        H - 8.0,
        esc(x_label)
    );
    for l in lines {
        let col = esc(&l.color);
        let kept = downsample(&l.points, x0, x1, PLOT_COLUMNS);
        let mut seg: Vec<String> = Vec::new();
        let flush = |seg: &mut Vec<String>, out: &mut String| {
            if let [only] = seg.as_slice() {
                // An isolated sample (e.g. a run shorter than two intervals) stays visible.
                let (cx, cy) = only.split_once(',').unwrap_or(("0", "0"));
                let _ = write!(
                    out,
                    r#"<circle cx="{cx}" cy="{cy}" r="2.5" fill="{col}"><title>{}</title></circle>"#,
                    esc(&l.name)
                );
            } else if seg.len() > 1 {
                let _ = write!(
                    out,
                    r#"<polyline fill="none" stroke="{col}" stroke-width="1.8" points="{}"><title>{}</title></polyline>"#,
                    seg.join(" "),
                    esc(&l.name)
                );
            }
            seg.clear();
        };
        for &i in &kept {
            let p = l.points[i];
            if p.0.is_finite() && p.1.is_finite() {
                seg.push(format!("{:.1},{:.1}", x.at(p.0), y.at(p.1)));
            } else {
                flush(&mut seg, &mut out);
            }
        }
        flush(&mut seg, &mut out);
        for &i in &kept {
            let p = l.points[i];
            if !(p.0.is_finite() && p.1.is_finite()) {
                continue;
            }
            let (px, py) = (x.at(p.0), y.at(p.1));
            if let Some(e) = l.err.get(i).filter(|e| e.0.is_finite() && e.1.is_finite()) {
                let _ = write!(
                    out,
                    r#"<line x1="{px:.1}" x2="{px:.1}" y1="{:.1}" y2="{:.1}" stroke="{col}" stroke-width="1.2"/>"#,
                    y.at(e.0),
                    y.at(e.1)
                );
            }
            if l.markers {
                let _ = write!(
                    out,
                    r#"<circle cx="{px:.1}" cy="{py:.1}" r="3.5" fill="{col}"><title>{} at {}: {}</title></circle>"#,
                    esc(&l.name),
                    esc(&human::number(p.0)),
                    esc(&human::number(p.1))
                );
            }
        }
    }
    let items: Vec<(&str, &str)> = lines.iter().map(|l| (l.name.as_str(), l.color.as_str())).collect();
    let items: Vec<(String, String)> = items.iter().map(|(n, c)| (n.to_string(), esc(c))).collect();
    let refs: Vec<(&str, &str)> = items.iter().map(|(n, c)| (n.as_str(), c.as_str())).collect();
    legend(&mut out, title.chars().count(), &refs);
    out.push_str("</svg>");
    out
}

/// Grouped bar histogram: one group of bars per bucket label, one bar per
/// series (e.g. read and write).
pub fn bar_histogram(
    title: &str,
    y_label: &str,
    series: &[(String, String)],
    buckets: &[(String, Vec<f64>)],
) -> String {
    let mut out = String::new();
    open_svg(&mut out, "hist", title);
    let (_, hi) = padded_range(buckets.iter().flat_map(|b| b.1.iter().copied()).chain([0.0]));
    let y = Scale { d0: 0.0, d1: hi, p0: H - MB, p1: MT };
    y_axis(&mut out, y, y_label);
    let nb = buckets.len().max(1) as f64;
    let band = (W - ML - MR) / nb;
    let ns = series.len().max(1) as f64;
    let bw = (band * 0.8 / ns).max(1.0);
    // Label every k-th bucket so labels do not overlap.
    let every = ((40.0 / band).ceil() as usize).max(1);
    for (i, (label, vals)) in buckets.iter().enumerate() {
        let bx = ML + band * i as f64 + band * 0.1;
        for (s, v) in vals.iter().enumerate().filter(|(_, v)| v.is_finite()) {
            let (name, col) = series.get(s).map(|(n, c)| (n.as_str(), c.as_str())).unwrap_or(("", "#888"));
            let top = y.at(v.max(0.0));
            let _ = write!(
                out,
                r#"<rect class="bar" x="{:.1}" y="{top:.1}" width="{bw:.1}" height="{:.1}" fill="{}"><title>{} {}: {}</title></rect>"#,
                bx + bw * s as f64,
                (H - MB - top).max(0.0),
                esc(col),
                esc(name),
                esc(label),
                esc(&human::number(*v))
            );
        }
        if i % every == 0 {
            let short: String = label.chars().take(10).collect();
            let _ = write!(
                out,
                r#"<text x="{:.1}" y="{:.1}" class="tick" text-anchor="middle">{}</text>"#,
                ML + band * (i as f64 + 0.5),
                H - MB + 16.0,
                esc(&short)
            );
        }
    }
    let _ = write!(out, r#"<line x1="{ML}" x2="{:.1}" y1="{:.1}" y2="{:.1}" class="axis"/>"#, W - MR, H - MB, H - MB);
    let items: Vec<(String, String)> = series.iter().map(|(n, c)| (n.clone(), esc(c))).collect();
    let refs: Vec<(&str, &str)> = items.iter().map(|(n, c)| (n.as_str(), c.as_str())).collect();
    legend(&mut out, title.chars().count(), &refs);
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(esc("<script>\"a\"&'b'"), "&lt;script&gt;&quot;a&quot;&amp;&#39;b&#39;");
    }

    #[test]
    fn ticks_are_nice() {
        assert_eq!(nice_ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert!(nice_ticks(f64::NAN, 1.0, 5).is_empty());
        assert_eq!(nice_ticks(3.0, 3.0, 5), vec![3.0]);
    }

    #[test]
    fn charts_survive_empty_and_nan_input() {
        let g = DotGroup {
            name: "<a>".into(),
            color: color(0).into(),
            values: vec![f64::NAN, 1.0],
            labels: vec![],
            mean: f64::NAN,
            ci: (f64::NAN, f64::NAN),
            outliers: vec![1],
        };
        let s = dot_plot("t", "s", &[g]);
        assert!(s.contains("&lt;a&gt;") && !s.contains("<a>"));
        assert!(dot_plot("t", "s", &[]).ends_with("</svg>"));
        let l = Line {
            name: "x".into(),
            color: color(1).into(),
            points: vec![(0.0, f64::NAN), (1.0, 2.0)],
            err: vec![],
            markers: true,
        };
        assert!(line_chart("ts", "t", "x", "y", std::slice::from_ref(&l)).contains("circle"));
        let single = Line { markers: false, ..l };
        assert!(line_chart("ts", "t", "x", "y", &[single]).contains("<circle"), "isolated point not drawn");
        assert!(line_chart("ts", "t", "x", "y", &[]).ends_with("</svg>"));
        assert!(bar_histogram("h", "n", &[], &[]).ends_with("</svg>"));
        let h = bar_histogram("h", "n", &[("r".into(), color(0).into())], &[("4k".into(), vec![3.0])]);
        assert!(h.contains("class=\"bar\""));
    }

    #[test]
    fn long_series_are_reduced_to_extremes_per_pixel_column() {
        let n = 1_000_000;
        let mut points: Vec<(f64, f64)> = (0..n).map(|i| (i as f64, ((i * 7919) % 1000) as f64 / 1000.0)).collect();
        points[123_456].1 = 50.0;
        points[654_321].1 = -3.0;
        points[777_777].1 = f64::NAN;
        let kept = downsample(&points, 0.0, (n - 1) as f64, PLOT_COLUMNS);
        assert!(kept.len() <= 5 * PLOT_COLUMNS, "{} points kept", kept.len());
        for i in [0, 123_456, 654_321, 777_777, n - 1] {
            assert!(kept.contains(&i), "point {i} dropped");
        }
        assert!(kept.windows(2).all(|w| w[0] < w[1]), "kept points out of order");
        // Short series are drawn whole.
        assert_eq!(downsample(&points[..100], 0.0, 99.0, PLOT_COLUMNS).len(), 100);

        let line = Line { name: "x".into(), color: color(0).into(), points, err: vec![], markers: false };
        let svg = line_chart("ts", "t", "s", "v", &[line]);
        assert!(svg.len() < 64 * 1024, "chart of a long series is {} bytes", svg.len());
        // The spike reaches the top of the plot: its y is the smallest drawn.
        let min_y = svg
            .split("points=\"")
            .skip(1)
            .flat_map(|p| p.split('"').next().unwrap_or("").split(' ').map(str::to_string).collect::<Vec<_>>())
            .filter_map(|xy| xy.split_once(',').and_then(|(_, y)| y.parse::<f64>().ok()))
            .fold(f64::INFINITY, f64::min);
        assert!(min_y < MT + 20.0, "peak flattened: topmost point at y={min_y}");
    }

    #[test]
    fn numbers_are_compact() {
        assert_eq!(tick_label(0.4, &[0.2, 0.4]), "0.4");
        assert_eq!(tick_label(2000.0, &[0.0, 2000.0]), "2000");
        assert_eq!(tick_label(0.005, &[0.0, 0.005]), "0.005");
    }

    /// The labels of an axis from `lo` to `hi`, as a chart draws them.
    fn labels(lo: f64, hi: f64) -> Vec<String> {
        let ticks = nice_ticks(lo, hi, 5);
        ticks.iter().map(|&t| tick_label(t, &ticks)).collect()
    }

    /// Large values get an SI prefix and small ones a sensible form, and
    /// every label fits left of the plot (issue 28 item 6: the ticks of
    /// `vm/instructions`, about 2.4e10, were cut off to `000000000`).
    #[test]
    fn tick_labels_have_si_prefixes_and_fit() {
        assert_eq!(labels(0.0, 2.5e10), ["0", "5 G", "10 G", "15 G", "20 G", "25 G"]);
        assert_eq!(labels(2.41e10, 2.45e10), ["24.1 G", "24.2 G", "24.3 G", "24.4 G", "24.5 G"]);
        assert_eq!(labels(0.0, 1.6e6), ["0", "0.5 M", "1.0 M", "1.5 M"]);
        assert_eq!(labels(0.0, 600e3), ["0", "200 k", "400 k", "600 k"]);
        assert_eq!(labels(0.0, 2.5e-6), ["0", "1 µ", "2 µ"]);
        assert_eq!(labels(2e-7, 6e-7), ["200 n", "300 n", "400 n", "500 n", "600 n"]);
        assert_eq!(labels(0.0, 0.005), ["0", "0.001", "0.002", "0.003", "0.004", "0.005"]);
        assert_eq!(labels(0.0012, 0.0018), ["0.0012", "0.0014", "0.0016", "0.0018"]);
        assert_eq!(labels(0.0, 8000.0), ["0", "2000", "4000", "6000", "8000"]);
        for (lo, hi) in
            [(0.0, 2.5e10), (2.4e10, 2.40001e10), (999e9, 999.9e9), (0.0, 3e-9), (1e3, 1.00001e3), (0.0, 1e18)]
        {
            for label in labels(lo, hi) {
                assert!(label.chars().count() <= TICK_CHARS, "`{label}` ({lo}..{hi}) does not fit");
            }
        }
        // In a chart: the y axis of a 2.4e10 series.
        let g = DotGroup {
            name: "a".into(),
            color: color(0).into(),
            values: vec![2.41e10, 2.43e10, 2.45e10],
            labels: vec![],
            mean: 2.43e10,
            ci: (2.40e10, 2.46e10),
            outliers: vec![],
        };
        let svg = dot_plot("vm/instructions", "instructions", &[g]);
        let ticks: Vec<&str> =
            svg.split(r#"class="tick" text-anchor="end">"#).skip(1).filter_map(|rest| rest.split('<').next()).collect();
        assert_eq!(ticks, ["24.0 G", "24.2 G", "24.4 G", "24.6 G"], "{svg}");
    }
}
