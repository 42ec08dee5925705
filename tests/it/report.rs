//! `fslab report`: a real experiment (ext4 on loop devices, so there are
//! device samples; shell1 for a concurrency sweep) rendered to HTML and
//! Markdown, checked for structure and escaping, then loaded in headless
//! Chromium (no console errors, a screenshot that is not blank). Also the
//! iostat-log HTML on the fixtures.

use crate::common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use fslab::analysis::ComparisonRow;
use fslab::experiment;
use fslab::report::data::{comparison_for, ReportData};
use fslab::report::{html, markdown};
use fslab::runner::{self, RunOptions, Silent};
use fslab::store::Store;

/// Variant names are letters, digits and `. _ - = +` (issue 20 item 9), so
/// the markup-bearing name is the experiment's; this one has every mark.
const HOSTILE_VARIANT: &str = "b.1_x-y=z+w";
const EXPERIMENT_NAME: &str = "report <script>alert('x')</script> & \"quotes\"";

/// One real experiment, shared by the checks of [`experiment_report`].
struct Fixture {
    _dir: tempfile::TempDir,
    db: PathBuf,
    out: PathBuf,
    id: i64,
}

fn fixture() -> Fixture {
    {
        let dir = common::workdir("fslab-report");
        let text = format!(
            r#"name = "{}"
description = "two ext4 variants, one throttled; <b>not bold</b>"
repetitions = 3
workdir = "{}"
sample_interval = "200ms"

[defaults]
fs = "ext4"
size = "256MiB"
mkfs = ["-E", "lazy_itable_init=0,lazy_journal_init=0"]
mount = "noatime"

[[variant]]
name = "a"

[[variant]]
name = "{HOSTILE_VARIANT}"
throttle = {{ write_bps = "16MiB" }}

[[workload]]
kind = "command"
name = "write"
command = "dd if=/dev/zero of=f bs=1M count=12 conv=fsync status=none"

[[workload]]
kind = "shell1"
concurrency = [1, 2]
duration = "1s"
"#,
            EXPERIMENT_NAME.replace('\\', "\\\\").replace('"', "\\\""),
            dir.path().join("work").display()
        );
        let exp = experiment::parse(&text, None).expect("experiment parses");
        let db = dir.path().join("r.db");
        let mut store = Store::open(&db).expect("store");
        let summary = runner::run(&exp, &mut store, &RunOptions::default(), &mut Silent).expect("run");
        assert_eq!(summary.runs_failed, 0);
        let out = dir.path().join("report.html");
        let data = ReportData::load(&store, summary.experiment_id, None, None).expect("load");
        std::fs::write(&out, html::render_html(&data)).expect("write report");
        Fixture { db: db.clone(), out, id: summary.experiment_id, _dir: dir }
    }
}

/// Runs the experiment once (it takes a while) and checks the HTML, the
/// Markdown and the page in headless Chromium.
#[test]
fn experiment_report() {
    if !common::root_or_skip() {
        return;
    }
    let f = fixture();
    html_has_every_section_and_chart_and_escapes_user_strings(&f);
    markdown_is_a_compact_escaped_summary(&f);
    report_loads_in_headless_chromium_without_errors_and_is_not_blank(&f);
}

/// Every `<tag` in the document, lower-cased (for an allow-list check).
fn tags(html: &str) -> Vec<String> {
    html.split('<')
        .skip(1)
        .filter_map(|s| {
            let name: String = s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '!' || *c == '/').collect();
            (!name.is_empty()).then(|| name.trim_start_matches('/').to_ascii_lowercase())
        })
        .collect()
}

/// The structural and escaping checks every generated page must pass.
pub(crate) fn assert_self_contained(html: &str) {
    let lower = html.to_ascii_lowercase();
    for bad in ["<script", "<link", "<img", "<iframe", "<object", "<embed", "src=", "url(", "@import", "xmlns", "<base"]
    {
        assert!(!lower.contains(bad), "report contains `{bad}`");
    }
    // No attribute may point off the page: every href is a fragment.
    for (i, _) in lower.match_indices("href=") {
        let rest = &lower[i + 5..];
        assert!(rest.starts_with("\"#"), "non-fragment link: {}", &html[i..(i + 60).min(html.len())]);
    }
    // URLs can only appear as escaped plain text (doctor references).
    for scheme in ["http://", "https://"] {
        for (i, _) in lower.match_indices(scheme) {
            let before = &lower[i.saturating_sub(6)..i];
            assert!(
                !before.contains('=') && !before.contains('('),
                "URL in an attribute: {}",
                &html[i.saturating_sub(20)..i + 20]
            );
        }
    }
    let allowed = [
        "!doctype",
        "html",
        "head",
        "meta",
        "title",
        "style",
        "body",
        "header",
        "footer",
        "nav",
        "section",
        "h1",
        "h2",
        "h3",
        "h4",
        "p",
        "a",
        "b",
        "i",
        "ul",
        "li",
        "table",
        "tr",
        "th",
        "td",
        "code",
        "pre",
        "details",
        "summary",
        "div",
        "span",
        "figure",
        "figcaption",
        "svg",
        "rect",
        "text",
        "line",
        "polyline",
        "circle",
        "g",
    ];
    for t in tags(html) {
        assert!(allowed.contains(&t.as_str()), "unexpected element <{t}>");
    }
}

fn verdict_rows(f: &Fixture) -> Vec<ComparisonRow> {
    let store = Store::open(&f.db).unwrap();
    comparison_for(&store, f.id, None, None).unwrap().rows
}

fn html_has_every_section_and_chart_and_escapes_user_strings(f: &Fixture) {
    let html = std::fs::read_to_string(&f.out).unwrap();
    assert_self_contained(&html);
    for id in [
        "summary",
        "experiment",
        "variants",
        "environment",
        "doctor",
        "verdicts",
        "metrics",
        "sweeps",
        "iostat",
        "extras",
    ] {
        assert!(html.contains(&format!("id=\"{id}\"")), "section {id} missing");
    }
    // User strings appear only escaped.
    assert!(html.contains(HOSTILE_VARIANT));
    assert!(html.contains("report &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;quotes&quot;"));
    assert!(html.contains("&lt;b&gt;not bold&lt;/b&gt;") && !html.contains("<b>not bold"));

    let store = Store::open(&f.db).unwrap();
    let series = store.metric_series(f.id).unwrap();
    let mut keys: Vec<(String, String)> = series.iter().map(|s| (s.workload.clone(), s.metric.clone())).collect();
    keys.dedup();
    let section = |id: &str, next: &str| {
        let at = |id: &str| html.find(&format!("<section id=\"{id}\"")).unwrap_or_else(|| panic!("no section {id}"));
        &html[at(id)..at(next)]
    };
    let (answer, metrics) = (section("summary", "verdicts"), section("metrics", "iostat"));
    // One dot plot per (workload, metric): write/{wall_s,user_s,sys_s}, shell1/{shell1-1,shell1-2}.
    assert_eq!(metrics.matches("data-chart=\"dot\"").count(), keys.len(), "{keys:?}");
    assert!(keys.iter().any(|k| k.1 == "shell1-2"), "{keys:?}");
    // The shell1 sweep is one line chart with one line per variant.
    assert_eq!(metrics.matches("data-chart=\"line\"").count(), 1);
    // The answer: write is decided by wall_s (its dot plot), shell1 by its sweep (the line chart).
    assert_eq!(answer.matches("data-chart=\"dot\"").count(), 1, "{answer}");
    assert_eq!(answer.matches("data-chart=\"line\"").count(), 1, "{answer}");
    assert!(answer.contains("write/wall_s") && !answer.contains("No metric regressed"));
    let headline = answer.split("<p class=\"headline\"><b>").nth(1).unwrap_or_default();
    assert!(headline.starts_with("Decided: ") || headline.starts_with("Nothing decided: "), "{headline}");
    // Device time series: util, written, read?, request size, await, queue, CPU per round per workload.
    let ts = html.matches("data-chart=\"ts\"").count();
    assert!(ts >= 2 * 3 * 5, "only {ts} time-series charts");
    assert!(html.contains("MB/s written") && html.contains("%util") && html.contains("await"));
    // Variants side by side with effective options and geometry.
    assert!(html.contains("noatime") && html.contains("write 16 MiB/s") && html.contains("Block count"));
    assert!(html.contains("mke2fs"), "tool versions missing");

    // The verdict table holds exactly the numbers `fslab compare` computes.
    let rows = verdict_rows(f);
    assert_eq!(html.matches("<tr class=\"v-").count(), rows.len());
    for r in &rows {
        // A metric that is 0 on both sides (user_s of a tiny dd) has no ratio; the
        // table shows a dash for it, which the row count above already covers.
        if !(r.change_pct.is_finite() && r.ci_low_pct.is_finite() && r.ci_high_pct.is_finite()) {
            continue;
        }
        let change = format!("{:+.2}%", r.change_pct);
        let ci = format!("[{:+.2}%, {:+.2}%]", r.ci_low_pct, r.ci_high_pct);
        assert!(html.contains(&change) && html.contains(&ci), "{} {change} {ci}", r.metric);
        assert!(html.contains(&format!("verdict v-{}", r.verdict.as_str())));
    }
    // The dd workload moved 12 MB per run: device totals were recorded.
    for run in store.runs(f.id).unwrap() {
        assert!(run.disk_totals.is_some_and(|t| t.written_mb > 5.0 || run.workload != "write"));
    }
}

fn markdown_is_a_compact_escaped_summary(f: &Fixture) {
    let store = Store::open(&f.db).unwrap();
    let data = ReportData::load(&store, f.id, None, None).unwrap();
    let md = markdown::render_markdown(&data);
    assert!(md.contains("### Verdicts") && md.contains("### Variants") && md.contains("### Environment"));
    assert!(!md.contains("<script") && md.contains("&lt;script&gt;"));
    // The variants as stored, read as their type: no medium, the throttle given.
    assert!(md.lines().any(|l| l.starts_with("| device | none |")), "{md}");
    assert!(md.lines().any(|l| l.starts_with("| throttle |") && l.contains("write 16 MiB/s")), "{md}");
    // The workload's rows; evidence has its own table after them.
    let rows: Vec<ComparisonRow> = verdict_rows(f).into_iter().filter(|r| !r.evidence).collect();
    // Header, separator and one line per verdict row.
    let table_lines = md.lines().skip_while(|l| !l.starts_with("| metric")).take_while(|l| l.starts_with('|')).count();
    assert_eq!(table_lines, rows.len() + 2, "{md}");
    for r in &rows {
        assert!(md.contains(&fslab::human::change_pct(r.change_pct)), "{}: {md}", r.metric);
    }
    assert!(md.len() < 8000, "not compact: {} bytes", md.len());
    // Same result through another baseline (the escaped one).
    let other = ReportData::load(&store, f.id, Some(HOSTILE_VARIANT), Some(5.0 / 100.0)).unwrap();
    assert_eq!(other.comparison.baseline, HOSTILE_VARIANT);
    assert_eq!(other.comparison.theta, 0.05);
    assert!(ReportData::load(&store, f.id, Some("nope"), None).is_err());
}

fn iostat_fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/iostat");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files
}

#[test]
fn iostat_logs_render_time_series() {
    let mut all = Vec::new();
    for path in iostat_fixtures() {
        let log = fslab::iostatlog::parse_file(&path, true).unwrap();
        let name = path.display().to_string();
        let page = fslab::iostatlog::report::render_html(&[(name.clone(), log.clone())]);
        assert_self_contained(&page);
        let has_rows = !log.samples.is_empty();
        assert_eq!(page.contains("data-chart=\"ts\""), has_rows, "{name}");
        if log.samples.iter().any(|s| s.util_pct.is_some()) {
            assert!(page.contains("%util"), "{name}");
        }
        all.push((name, log));
    }
    // Several logs: overlaid per device, one colour per file.
    let page = fslab::iostatlog::report::render_html(&all);
    assert_self_contained(&page);
    assert!(page.contains("real-12.6.1-vm-xtk.log"));
    // Hostile text in a device name or path is escaped.
    let log = fslab::iostatlog::parse_log(
        "Device            r/s     w/s     rkB/s     wkB/s   rrqm/s   wrqm/s  %rrqm  %wrqm r_await w_await aqu-sz rareq-sz wareq-sz  svctm  %util\n\
         x<b>y             1.00    2.00     4.00     8.00     0.00     0.00   0.00   0.00    1.00    2.00   0.10     4.00     4.00   1.00  50.00\n",
        false,
    )
    .unwrap();
    let page = fslab::iostatlog::report::render_html(&[("<i>.log".into(), log)]);
    assert_self_contained(&page);
    assert!(page.contains("x&lt;b&gt;y") && page.contains("&lt;i&gt;.log"));
}

/// A long log (over five hours at 1 s, 36 samples per pixel column) gives a small page: the charts draw the extremes of each pixel
/// column, not every sample.
#[test]
fn iostat_report_of_a_long_log_stays_small() {
    let header = "Device            r/s     w/s     rkB/s     wkB/s   rrqm/s   wrqm/s  %rrqm  %wrqm r_await w_await aqu-sz rareq-sz wareq-sz  svctm  %util";
    let n = 20_000;
    let mut text = String::with_capacity(n * 300);
    for i in 0..n {
        let util = if i == 12_345 { 100.0 } else { 20.0 + (i % 17) as f64 };
        text.push_str(&format!(
            "{header}\nsda {:.2} {:.2} {:.2} {:.2} 0.00 0.00 0.00 0.00 1.00 2.00 0.10 4.00 {:.2} 1.00 {util:.2}\n\n",
            (i % 7) as f64,
            (i % 11) as f64,
            (i % 13) as f64 * 4.0,
            (i % 19) as f64 * 8.0,
            4.0 + (i % 5) as f64
        ));
    }
    let log = fslab::iostatlog::parse_log(&text, false).unwrap();
    assert_eq!(log.samples.len(), n);
    let page = fslab::iostatlog::report::render_html(&[("day.log".into(), log)]);
    assert_self_contained(&page);
    assert!(page.matches("data-chart=\"ts\"").count() >= 5);
    // Drawing every sample made this page 1.9 MB (8 MB for a day).
    assert!(page.len() < 512 * 1024, "iostat page of a long log is {} bytes", page.len());
}

// ---- headless Chromium ----------------------------------------------------

const CHROMIUM: &str = "/usr/bin/chromium";

/// Runs headless Chromium on `page` with `extra` arguments; returns
/// (stdout, stderr).
pub(crate) fn chromium(page: &Path, extra: &[String]) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(CHROMIUM);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--enable-logging=stderr",
        "--v=0",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()))
    .args(extra)
    .arg(format!("file://{}", page.display()));
    let out = cmd.output().expect("chromium runs");
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Lines of Chromium's log that report a problem of the page itself:
/// console messages (`CONSOLE(`/`console`), uncaught exceptions, and failed
/// loads of anything (a network fetch from a file:// page would fail here).
pub(crate) fn page_errors(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| {
            l.contains("CONSOLE")
                || l.contains("Uncaught")
                || l.contains(":console(")
                || l.contains("ERR_FILE_NOT_FOUND")
                || l.contains("ERR_NAME_NOT_RESOLVED")
                || l.contains("net::ERR_")
        })
        .map(str::to_string)
        .collect()
}

pub(crate) fn chromium_or_skip() -> bool {
    if Path::new(CHROMIUM).exists() {
        true
    } else {
        fslab::testsupport::skip(&format!(
            "{CHROMIUM} is absent (apt-get install -y chromium); the report was not loaded in a browser"
        ));
        false
    }
}

/// Minimal PNG decoder (8-bit RGB/RGBA, non-interlaced, as Chromium writes
/// screenshots): returns (width, height, channels, pixels).
pub(crate) fn decode_png(bytes: &[u8]) -> (usize, usize, usize, Vec<u8>) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    let (mut pos, mut idat) = (8, Vec::new());
    let (mut w, mut h, mut channels) = (0usize, 0usize, 0usize);
    while pos + 8 <= bytes.len() {
        let len = u32::from_be_bytes(bytes[pos..pos + 4].try_into().unwrap()) as usize;
        let kind = &bytes[pos + 4..pos + 8];
        let data = &bytes[pos + 8..pos + 8 + len];
        match kind {
            b"IHDR" => {
                w = u32::from_be_bytes(data[0..4].try_into().unwrap()) as usize;
                h = u32::from_be_bytes(data[4..8].try_into().unwrap()) as usize;
                assert_eq!(data[8], 8, "bit depth");
                assert_eq!(data[12], 0, "interlaced");
                channels = match data[9] {
                    2 => 3,
                    6 => 4,
                    other => panic!("colour type {other}"),
                };
            }
            b"IDAT" => idat.extend_from_slice(data),
            b"IEND" => break,
            _ => {}
        }
        pos += 12 + len;
    }
    let mut raw = Vec::new();
    flate2::read::ZlibDecoder::new(&idat[..]).read_to_end(&mut raw).unwrap();
    let stride = w * channels;
    let mut px = vec![0u8; h * stride];
    for y in 0..h {
        let filter = raw[y * (stride + 1)];
        let line = &raw[y * (stride + 1) + 1..(y + 1) * (stride + 1)];
        for x in 0..stride {
            let a = if x >= channels { px[y * stride + x - channels] as i32 } else { 0 };
            let b = if y > 0 { px[(y - 1) * stride + x] as i32 } else { 0 };
            let c = if x >= channels && y > 0 { px[(y - 1) * stride + x - channels] as i32 } else { 0 };
            let pred = match filter {
                0 => 0,
                1 => a,
                2 => b,
                3 => (a + b) / 2,
                4 => {
                    let p = a + b - c;
                    let (pa, pb, pc) = ((p - a).abs(), (p - b).abs(), (p - c).abs());
                    if pa <= pb && pa <= pc {
                        a
                    } else if pb <= pc {
                        b
                    } else {
                        c
                    }
                }
                other => panic!("PNG filter {other}"),
            };
            px[y * stride + x] = (line[x] as i32 + pred) as u8;
        }
    }
    (w, h, channels, px)
}

#[test]
fn console_error_check_catches_a_broken_page() {
    // The check used on the report must see a page's own errors.
    if !chromium_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.html");
    std::fs::write(
        &bad,
        "<!DOCTYPE html><html><body><p>x</p><script>console.error('boom'); undefinedFunction();</script></body></html>",
    )
    .unwrap();
    let (_, stderr) = chromium(&bad, &["--dump-dom".into()]);
    let errors = page_errors(&stderr);
    assert!(errors.iter().any(|l| l.contains("boom")), "console.error not seen:\n{stderr}");
    assert!(errors.iter().any(|l| l.contains("Uncaught")), "uncaught exception not seen:\n{stderr}");
}

fn report_loads_in_headless_chromium_without_errors_and_is_not_blank(f: &Fixture) {
    if !chromium_or_skip() {
        return;
    }
    let html = std::fs::read_to_string(&f.out).unwrap();
    // The DOM Chromium built holds every chart of the source.
    let (dom, stderr) = chromium(&f.out, &["--dump-dom".into(), "--virtual-time-budget=2000".into()]);
    assert!(page_errors(&stderr).is_empty(), "page errors:\n{}", page_errors(&stderr).join("\n"));
    let charts = html.matches("<svg class=\"chart\"").count();
    assert!(charts > 10);
    assert_eq!(dom.matches("<svg class=\"chart\"").count(), charts, "DOM lost charts");
    assert!(dom.contains("id=\"verdicts\"") && !dom.contains("<script"));

    let png = f.out.with_extension("png");
    let keep = std::env::var_os("FSLAB_REPORT_SCREENSHOT").map(PathBuf::from);
    let (_, stderr) = chromium(&f.out, &[format!("--screenshot={}", png.display()), "--window-size=1366,4000".into()]);
    assert!(page_errors(&stderr).is_empty(), "page errors:\n{}", page_errors(&stderr).join("\n"));
    let bytes = std::fs::read(&png).unwrap_or_else(|e| panic!("no screenshot ({e}):\n{stderr}"));
    if let Some(keep) = keep {
        std::fs::copy(&png, &keep).unwrap();
        std::fs::copy(&f.out, keep.with_extension("html")).unwrap();
        std::fs::copy(&f.db, keep.with_extension("db")).unwrap();
    }
    let (w, h, ch, px) = decode_png(&bytes);
    assert_eq!((w, h), (1366, 4000));
    let (mut non_bg, mut blue, mut orange) = (0usize, 0usize, 0usize);
    let mut colours = std::collections::HashSet::new();
    for p in px.chunks(ch) {
        let (r, g, b) = (p[0] as i32, p[1] as i32, p[2] as i32);
        if !(r > 240 && g > 240 && b > 240) {
            non_bg += 1;
        }
        // Variant colours #0072B2 and #E69F00 (charts and swatches).
        if r < 24 && (g - 0x72).abs() < 24 && (b - 0xB2).abs() < 24 {
            blue += 1;
        }
        if (r - 0xE6).abs() < 24 && (g - 0x9F).abs() < 24 && b < 24 {
            orange += 1;
        }
        if colours.len() < 1000 {
            colours.insert((r, g, b));
        }
    }
    let total = w * h;
    assert!(non_bg * 100 > total, "screenshot nearly blank: {non_bg} of {total} pixels drawn");
    assert!(colours.len() > 20, "only {} colours", colours.len());
    assert!(blue > 200 && orange > 200, "variant colours barely visible: blue {blue}, orange {orange}");
    page_fits_a_laptop_screen(&f.out);
}

/// The page's layout width at a 1366 px wide window (a common laptop
/// screen) is the window's: nothing makes it scroll sideways. Measured by
/// a copy of the page with one script line added (the report itself has
/// none), read back from the title Chromium's DOM dump shows.
pub(crate) fn page_fits_a_laptop_screen(page: &Path) {
    let html = std::fs::read_to_string(page).unwrap();
    let probe = page.with_extension("width.html");
    let script = "<script>document.title='W'+document.documentElement.scrollWidth+'x'+window.innerWidth</script>";
    std::fs::write(&probe, html.replace("</body>", &format!("{script}</body>"))).unwrap();
    let (dom, stderr) = chromium(&probe, &["--dump-dom".into(), "--window-size=1366,900".into()]);
    let title = dom.split("<title>").nth(1).and_then(|t| t.split("</title>").next()).unwrap_or_default();
    let (scroll, inner) = title
        .strip_prefix('W')
        .and_then(|t| t.split_once('x'))
        .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)))
        .unwrap_or_else(|| panic!("no width measured (title {title:?}):\n{stderr}"));
    assert_eq!(inner, 1366, "window width");
    assert!(scroll <= inner, "the page is {scroll} px wide in a {inner} px window");
}
