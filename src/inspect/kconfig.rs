//! Kernel configuration files: parsing (`.config`, `/proc/config.gz`,
//! `/boot/config-*`), loading the running kernel's config, and diffing two
//! configs grouped by area with one-line explanations of the options that
//! matter for filesystem performance.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::Read;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize, Serializer};

use super::kconfig_notes::{self, Area};

/// Value of one option.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KValue {
    /// `=y`: built in.
    Yes,
    /// `=m`: built as a module.
    Module,
    /// `=n` or `# CONFIG_X is not set`.
    No,
    /// `="text"` (unescaped).
    Str(String),
    /// A decimal or `0x` hexadecimal number, as written.
    Number(String),
}

impl KValue {
    /// `y` or `m`.
    pub fn is_enabled(&self) -> bool {
        matches!(self, KValue::Yes | KValue::Module)
    }

    /// The text a rule compares against: `y`, `m`, `n`, the unquoted
    /// string, or the number as written.
    pub fn as_plain(&self) -> &str {
        match self {
            KValue::Yes => "y",
            KValue::Module => "m",
            KValue::No => "n",
            KValue::Str(s) | KValue::Number(s) => s,
        }
    }
}

impl fmt::Display for KValue {
    /// Config-file form: `y`, `m`, `n`, `"text"`, `250`, `0x10`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KValue::Str(s) => write!(f, "\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\"")),
            other => f.write_str(other.as_plain()),
        }
    }
}

impl Serialize for KValue {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for KValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_value(&s).map_err(serde::de::Error::custom)
    }
}

/// A bad line in a config file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct KconfigError {
    /// File (or other source name) the text came from.
    pub file: String,
    /// 1-based line number.
    pub line: usize,
    pub message: String,
}

/// A parsed kernel config: option names without the `CONFIG_` prefix.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelConfig {
    /// Where it was read from (file path or `/proc/config.gz`).
    pub source: String,
    /// Every option the file mentions, including `is not set` ones (as `n`).
    pub options: BTreeMap<String, KValue>,
}

impl KernelConfig {
    /// Parse config text. `source` names the file in error messages.
    ///
    /// Accepts `CONFIG_X=y|m|n`, `CONFIG_X="string"`, `CONFIG_X=123`,
    /// `CONFIG_X=0x1f`, `# CONFIG_X is not set`, other `#` comments and
    /// blank lines; anything else is an error naming the line. A repeated
    /// option keeps its last value, as Kconfig does.
    pub fn parse(text: &str, source: &str) -> std::result::Result<Self, KconfigError> {
        let mut options = BTreeMap::new();
        for (idx, raw) in text.lines().enumerate() {
            let err = |message: String| KconfigError { file: source.to_string(), line: idx + 1, message };
            let line = raw.trim();
            if line.is_empty() {
                continue;
            }
            if let Some(comment) = line.strip_prefix('#') {
                if let Some(name) = not_set_name(comment.trim()) {
                    check_name(name).map_err(err)?;
                    options.insert(name.to_string(), KValue::No);
                }
                continue;
            }
            let Some(rest) = line.strip_prefix("CONFIG_") else {
                return Err(err(format!(
                    "expected `CONFIG_NAME=value`, `# CONFIG_NAME is not set`, a comment or a blank line, found `{}`",
                    shorten(line)
                )));
            };
            let Some((name, value)) = rest.split_once('=') else {
                return Err(err(format!("`CONFIG_{}` has no `=value`", shorten(rest))));
            };
            let name = name.trim_end();
            check_name(name).map_err(err)?;
            let value = parse_value(value.trim_start()).map_err(|m| err(format!("CONFIG_{name}: {m}")))?;
            options.insert(name.to_string(), value);
        }
        Ok(KernelConfig { source: source.to_string(), options })
    }

    /// The text of a config file; gzip-compressed files (`/proc/config.gz`,
    /// `config.gz`) are recognised by their magic bytes.
    pub fn read_text(path: &Path) -> Result<String> {
        let bytes = std::fs::read(path).with_context(|| format!("reading kernel config {}", path.display()))?;
        if bytes.starts_with(&[0x1f, 0x8b]) {
            let mut out = String::new();
            flate2::read::MultiGzDecoder::new(&bytes[..])
                .read_to_string(&mut out)
                .with_context(|| format!("decompressing kernel config {}", path.display()))?;
            return Ok(out);
        }
        String::from_utf8(bytes).map_err(|e| {
            anyhow::anyhow!(
                "{}: not UTF-8 text (byte offset {}); is this a kernel config?",
                path.display(),
                e.utf8_error().valid_up_to()
            )
        })
    }

    /// Read and parse a config file (see [`KernelConfig::read_text`]).
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = Self::read_text(path)?;
        let cfg = Self::parse(&text, &path.display().to_string())?;
        // An empty or comment-only file parses, but is no config: diffing
        // it would call every option of the other side "added".
        if cfg.options.is_empty() {
            bail!(
                "{}: no kernel config options in it (expected lines like `CONFIG_EXT4_FS=y` or \
                 `# CONFIG_EXT4_FS is not set`); is this a kernel .config?",
                path.display()
            );
        }
        Ok(cfg)
    }

    /// The running kernel's config: `/proc/config.gz`, else
    /// `/boot/config-$(uname -r)`.
    pub fn load_running() -> Result<Self> {
        let release = crate::sys::kernel_release();
        let path = super::environment::kernel_config_path(&release).ok_or_else(|| {
            anyhow::anyhow!(
                "no kernel config found: /proc/config.gz is missing (CONFIG_IKCONFIG_PROC) and so is /boot/config-{release}"
            )
        })?;
        Self::from_file(&path)
    }

    /// Value of an option; `name` may carry the `CONFIG_` prefix.
    pub fn get(&self, name: &str) -> Option<&KValue> {
        self.options.get(name.strip_prefix("CONFIG_").unwrap_or(name))
    }

    /// `y` or `m`.
    pub fn is_enabled(&self, name: &str) -> bool {
        self.get(name).is_some_and(KValue::is_enabled)
    }
}

/// `CONFIG_X is not set` → `X`.
fn not_set_name(comment: &str) -> Option<&str> {
    let rest = comment.strip_prefix("CONFIG_")?;
    let name = rest.strip_suffix(" is not set")?;
    Some(name.trim_end())
}

fn check_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!("`{}` is not a valid option name", shorten(name)));
    }
    Ok(())
}

fn shorten(s: &str) -> String {
    if s.chars().count() > 60 {
        format!("{}…", s.chars().take(60).collect::<String>())
    } else {
        s.to_string()
    }
}

/// Parse the right-hand side of `CONFIG_X=`.
fn parse_value(v: &str) -> std::result::Result<KValue, String> {
    match v {
        "y" => return Ok(KValue::Yes),
        "m" => return Ok(KValue::Module),
        "n" => return Ok(KValue::No),
        "" => return Err("empty value".to_string()),
        _ => {}
    }
    if let Some(body) = v.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = body.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some(e) => out.push(e),
                    None => return Err("string ends inside an escape".to_string()),
                },
                '"' => {
                    let rest: String = chars.collect();
                    if !rest.trim().is_empty() {
                        return Err(format!("text after closing quote: `{}`", shorten(rest.trim())));
                    }
                    return Ok(KValue::Str(out));
                }
                c => out.push(c),
            }
        }
        return Err("string has no closing quote".to_string());
    }
    let is_hex = v
        .strip_prefix("0x")
        .or_else(|| v.strip_prefix("0X"))
        .is_some_and(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()));
    let dec = v.strip_prefix('-').unwrap_or(v);
    let is_dec = !dec.is_empty() && dec.chars().all(|c| c.is_ascii_digit());
    if is_hex || is_dec {
        return Ok(KValue::Number(v.to_string()));
    }
    Err(format!("value `{}` is not y, m, n, a \"string\" or a number", shorten(v)))
}

/// How an option differs between the two files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    /// In both files with different values.
    Changed,
    /// Only in the second file.
    Added,
    /// Only in the first file.
    Removed,
}

/// One differing option.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DiffEntry {
    /// Option name without `CONFIG_`.
    pub option: String,
    pub kind: ChangeKind,
    /// Value in the first file (`None`: not mentioned).
    pub a: Option<KValue>,
    /// Value in the second file.
    pub b: Option<KValue>,
    /// Listed in fslab's table of options that matter for performance.
    pub perf: bool,
    /// What the option does to performance, when known.
    pub note: Option<String>,
    /// False when the difference has no effect: `is not set` on one side,
    /// not mentioned on the other.
    pub effective: bool,
}

/// Differences in one area.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AreaDiff {
    pub area: Area,
    /// Human title of the area.
    pub title: String,
    pub entries: Vec<DiffEntry>,
}

/// Result of [`diff`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KconfigDiff {
    /// Source of the first config.
    pub a: String,
    /// Source of the second config.
    pub b: String,
    /// Whether non-performance options were left out.
    pub only_perf: bool,
    pub changed: usize,
    pub added: usize,
    pub removed: usize,
    /// Differing options left out because `only_perf` was set.
    pub hidden: usize,
    /// Areas in fixed order (filesystems, block layer, memory management,
    /// scheduler and preemption, debugging, other); empty areas omitted.
    pub areas: Vec<AreaDiff>,
}

impl KconfigDiff {
    /// All listed entries across areas.
    pub fn entries(&self) -> impl Iterator<Item = &DiffEntry> {
        self.areas.iter().flat_map(|a| a.entries.iter())
    }
}

/// Compare two configs. With `only_perf`, options without a performance
/// note are counted in [`KconfigDiff::hidden`] instead of listed.
pub fn diff(a: &KernelConfig, b: &KernelConfig, only_perf: bool) -> KconfigDiff {
    let names: BTreeSet<&String> = a.options.keys().chain(b.options.keys()).collect();
    let mut by_area: BTreeMap<Area, Vec<DiffEntry>> = BTreeMap::new();
    let (mut changed, mut added, mut removed, mut hidden) = (0, 0, 0, 0);
    for name in names {
        let va = a.options.get(name);
        let vb = b.options.get(name);
        let kind = match (va, vb) {
            (Some(x), Some(y)) if x == y => continue,
            (Some(_), Some(_)) => ChangeKind::Changed,
            (None, Some(_)) => ChangeKind::Added,
            (Some(_), None) => ChangeKind::Removed,
            (None, None) => continue,
        };
        match kind {
            ChangeKind::Changed => changed += 1,
            ChangeKind::Added => added += 1,
            ChangeKind::Removed => removed += 1,
        }
        let effective_a = va.cloned().unwrap_or(KValue::No);
        let effective_b = vb.cloned().unwrap_or(KValue::No);
        let (area, note) = kconfig_notes::classify(name);
        if only_perf && note.is_none() {
            hidden += 1;
            continue;
        }
        by_area.entry(area).or_default().push(DiffEntry {
            option: name.clone(),
            kind,
            a: va.cloned(),
            b: vb.cloned(),
            perf: note.is_some(),
            note: note.map(str::to_string),
            effective: effective_a != effective_b,
        });
    }
    let areas = by_area
        .into_iter()
        .map(|(area, mut entries)| {
            // Performance-relevant first, then by name.
            entries.sort_by(|x, y| y.perf.cmp(&x.perf).then(x.option.cmp(&y.option)));
            AreaDiff { area, title: area.title().to_string(), entries }
        })
        .collect();
    KconfigDiff { a: a.source.clone(), b: b.source.clone(), only_perf, changed, added, removed, hidden, areas }
}

fn side(v: &Option<KValue>) -> String {
    v.as_ref().map_or_else(|| "(absent)".to_string(), |v| v.to_string())
}

impl fmt::Display for KconfigDiff {
    /// Terminal text: one block per area, `~` changed, `+` added,
    /// `-` removed. Entries whose only difference is "is not set" versus
    /// "not mentioned" are counted, not listed (the JSON has them).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "kernel config diff: A = {}", self.a)?;
        writeln!(f, "                    B = {}", self.b)?;
        write!(f, "{} changed, {} added (only in B), {} removed (only in A)", self.changed, self.added, self.removed)?;
        if self.only_perf {
            write!(f, "; {} without a performance note hidden", self.hidden)?;
        }
        writeln!(f)?;
        if self.areas.is_empty() {
            writeln!(f, "\nno differences to show")?;
            return Ok(());
        }
        for area in &self.areas {
            let shown: Vec<&DiffEntry> = area.entries.iter().filter(|e| e.effective).collect();
            let silent = area.entries.len() - shown.len();
            writeln!(f, "\n{} ({})", area.title, area.entries.len())?;
            let name_w = shown.iter().map(|e| e.option.len()).max().unwrap_or(0).min(40);
            let val_w = shown
                .iter()
                .map(|e| side(&e.a).chars().count() + side(&e.b).chars().count() + 3)
                .max()
                .unwrap_or(0)
                .min(30);
            for e in shown {
                let mark = match e.kind {
                    ChangeKind::Changed => '~',
                    ChangeKind::Added => '+',
                    ChangeKind::Removed => '-',
                };
                let values = format!("{} → {}", side(&e.a), side(&e.b));
                match &e.note {
                    Some(note) => writeln!(f, "  {mark} {:name_w$}  {:val_w$}  {note}", e.option, values)?,
                    None => writeln!(f, "  {mark} {:name_w$}  {values}", e.option)?,
                }
            }
            if silent > 0 {
                writeln!(f, "  ({silent} option(s) only listed as \"is not set\" in one file: no effect)")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_all_value_kinds() {
        let text = "\
#
# Automatically generated file; DO NOT EDIT.
#
CONFIG_CC_VERSION_TEXT=\"gcc (Debian 12.2.0-14) 12.2.0\"
CONFIG_HZ_250=y
CONFIG_HZ=250
CONFIG_EXT4_FS=m
# CONFIG_XFS_DEBUG is not set
CONFIG_PHYSICAL_START=0x1000000
CONFIG_X=n
CONFIG_NEG=-1
CONFIG_ESC=\"a \\\"q\\\" b\\\\\"

CONFIG_DOS=y\r
";
        let c = KernelConfig::parse(text, "t.config").unwrap();
        assert_eq!(c.get("HZ_250"), Some(&KValue::Yes));
        assert_eq!(c.get("CONFIG_HZ"), Some(&KValue::Number("250".into())));
        assert_eq!(c.get("EXT4_FS"), Some(&KValue::Module));
        assert_eq!(c.get("XFS_DEBUG"), Some(&KValue::No));
        assert_eq!(c.get("X"), Some(&KValue::No));
        assert_eq!(c.get("PHYSICAL_START"), Some(&KValue::Number("0x1000000".into())));
        assert_eq!(c.get("NEG"), Some(&KValue::Number("-1".into())));
        assert_eq!(c.get("ESC"), Some(&KValue::Str("a \"q\" b\\".into())));
        assert_eq!(c.get("DOS"), Some(&KValue::Yes));
        assert_eq!(c.get("CC_VERSION_TEXT").unwrap().as_plain(), "gcc (Debian 12.2.0-14) 12.2.0");
        assert!(c.is_enabled("EXT4_FS") && !c.is_enabled("XFS_DEBUG") && !c.is_enabled("NOPE"));
        // Display is the config-file form; it parses back.
        let esc = c.get("ESC").unwrap().to_string();
        assert_eq!(parse_value(&esc).unwrap(), KValue::Str("a \"q\" b\\".into()));
    }

    #[test]
    fn empty_or_comment_only_files_are_no_config() {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in
            [("empty.config", ""), ("comments.config", "#\n# Linux/x86 6.1 Kernel Configuration\n#\n\n")]
        {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            let e = KernelConfig::from_file(&p).unwrap_err().to_string();
            assert!(e.contains(name) && e.contains("no kernel config options"), "{e}");
        }
    }

    #[test]
    fn bad_lines_name_file_and_line() {
        let cases = [
            ("CONFIG_A=y\nfoo bar\n", 2, "expected `CONFIG_NAME=value`"),
            ("\n\nCONFIG_A\n", 3, "has no `=value`"),
            ("CONFIG_A=yes\n", 1, "is not y, m, n"),
            ("CONFIG_A=\"open\n", 1, "no closing quote"),
            ("CONFIG_A=\"x\" y\n", 1, "text after closing quote"),
            ("CONFIG_A=\n", 1, "empty value"),
            ("CONFIG_A-B=y\n", 1, "not a valid option name"),
            ("# CONFIG_A B is not set\n", 1, "not a valid option name"),
            ("CONFIG_A=0x\n", 1, "is not y, m, n"),
        ];
        for (text, line, msg) in cases {
            let e = KernelConfig::parse(text, "bad.config").unwrap_err();
            assert_eq!(e.file, "bad.config");
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.message.contains(msg), "{text:?}: {e}");
            assert!(e.to_string().starts_with(&format!("bad.config:{line}: ")), "{e}");
        }
    }

    #[test]
    fn from_file_reads_plain_and_gzip() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("config");
        std::fs::write(&plain, "CONFIG_A=y\n# CONFIG_B is not set\n").unwrap();
        let gz = dir.path().join("config.gz");
        let mut enc =
            flate2::write::GzEncoder::new(std::fs::File::create(&gz).unwrap(), flate2::Compression::default());
        enc.write_all(b"CONFIG_A=y\n# CONFIG_B is not set\n").unwrap();
        enc.finish().unwrap();
        let a = KernelConfig::from_file(&plain).unwrap();
        let b = KernelConfig::from_file(&gz).unwrap();
        assert_eq!(a.options, b.options);
        let bad = dir.path().join("bad");
        std::fs::write(&bad, "CONFIG_A=y\nhello\n").unwrap();
        let e = KernelConfig::from_file(&bad).unwrap_err().to_string();
        assert_eq!(e, format!("{}:2: expected `CONFIG_NAME=value`, `# CONFIG_NAME is not set`, a comment or a blank line, found `hello`", bad.display()));
        assert!(KernelConfig::from_file(&dir.path().join("missing")).is_err());
    }

    #[test]
    fn running_config_loads_when_available() {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        if super::super::environment::kernel_config_path(release.trim()).is_none() {
            return;
        }
        let c = KernelConfig::load_running().unwrap();
        assert!(c.options.len() > 100);
    }

    fn cfg(text: &str, name: &str) -> KernelConfig {
        KernelConfig::parse(text, name).unwrap()
    }

    #[test]
    fn diff_groups_by_area() {
        let a = cfg(
            "CONFIG_SQUASHFS_DECOMP_SINGLE=y\n\
             CONFIG_SQUASHFS_FILE_CACHE=y\n\
             # CONFIG_SQUASHFS_FILE_DIRECT is not set\n\
             CONFIG_PREEMPT_NONE=y\n\
             CONFIG_HZ=250\n\
             CONFIG_BLK_WBT=y\n\
             CONFIG_KASAN=y\n\
             CONFIG_TRANSPARENT_HUGEPAGE=y\n\
             CONFIG_LOCALVERSION=\"-vendor\"\n\
             CONFIG_SOUND=m\n\
             # CONFIG_OLD_THING is not set\n\
             CONFIG_SAME=y\n",
            "vendor.config",
        );
        let b = cfg(
            "CONFIG_SQUASHFS_DECOMP_MULTI_PERCPU=y\n\
             CONFIG_SQUASHFS_FILE_DIRECT=y\n\
             # CONFIG_SQUASHFS_FILE_CACHE is not set\n\
             CONFIG_PREEMPT_RT=y\n\
             CONFIG_HZ=1000\n\
             # CONFIG_BLK_WBT is not set\n\
             # CONFIG_KASAN is not set\n\
             CONFIG_TRANSPARENT_HUGEPAGE=y\n\
             CONFIG_LOCALVERSION=\"\"\n\
             CONFIG_SOUND=y\n\
             CONFIG_SAME=y\n",
            "mainline.config",
        );
        let d = diff(&a, &b, false);
        let areas: Vec<Area> = d.areas.iter().map(|a| a.area).collect();
        assert_eq!(
            areas,
            vec![Area::Filesystems, Area::BlockLayer, Area::SchedulerPreemption, Area::Debugging, Area::Other]
        );
        let find = |n: &str| d.entries().find(|e| e.option == n).cloned();
        let single = find("SQUASHFS_DECOMP_SINGLE").unwrap();
        assert_eq!(single.kind, ChangeKind::Removed);
        assert!(single.perf && single.note.is_some() && single.effective);
        let percpu = find("SQUASHFS_DECOMP_MULTI_PERCPU").unwrap();
        assert_eq!(percpu.kind, ChangeKind::Added);
        assert_eq!(find("SQUASHFS_FILE_DIRECT").unwrap().kind, ChangeKind::Changed);
        assert_eq!(find("HZ").unwrap().kind, ChangeKind::Changed);
        assert!(find("SAME").is_none() && find("TRANSPARENT_HUGEPAGE").is_none());
        let old = find("OLD_THING").unwrap();
        assert_eq!(old.kind, ChangeKind::Removed);
        assert!(!old.effective && !old.perf);
        assert_eq!(find("SOUND").unwrap().area_of(&d), Area::Other);
        assert_eq!(find("KASAN").unwrap().area_of(&d), Area::Debugging);
        assert_eq!(find("BLK_WBT").unwrap().area_of(&d), Area::BlockLayer);
        assert_eq!(find("PREEMPT_RT").unwrap().area_of(&d), Area::SchedulerPreemption);
        assert_eq!((d.changed, d.added, d.removed, d.hidden), (7, 2, 3, 0));

        let text = d.to_string();
        assert!(text.contains("Filesystems"), "{text}");
        assert!(text.contains("~ HZ"), "{text}");
        assert!(text.contains("+ SQUASHFS_DECOMP_MULTI_PERCPU"), "{text}");
        assert!(text.contains("- SQUASHFS_DECOMP_SINGLE"), "{text}");
        assert!(text.contains("y → (absent)"), "{text}");
        assert!(text.contains("\"-vendor\" → \"\""), "{text}");
        assert!(text.contains("only listed as \"is not set\""), "{text}");

        let perf = diff(&a, &b, true);
        assert!(perf.entries().all(|e| e.perf));
        assert!(perf.entries().all(|e| e.option != "SOUND" && e.option != "LOCALVERSION"));
        assert_eq!(perf.hidden, 3);
        assert!(perf.to_string().contains("3 without a performance note hidden"));

        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(json["areas"][0]["area"], "filesystems");
        assert!(json["areas"][0]["entries"][0]["a"].is_string() || json["areas"][0]["entries"][0]["a"].is_null());
        let removed = json["areas"][0]["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["option"] == "SQUASHFS_DECOMP_SINGLE")
            .unwrap()
            .clone();
        assert_eq!(removed["kind"], "removed");
        assert_eq!(removed["a"], "y");
        assert!(removed["b"].is_null());
    }

    impl DiffEntry {
        fn area_of(&self, d: &KconfigDiff) -> Area {
            d.areas.iter().find(|a| a.entries.iter().any(|e| e.option == self.option)).map(|a| a.area).unwrap()
        }
    }

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/inspect/kconfig").join(name)
    }

    /// The squashfs thread's comparison: vendor 5.15 config against a
    /// mainline-style one, from fixture files.
    #[test]
    fn diff_of_fixture_files() {
        let a = KernelConfig::from_file(&fixture("imx8mm-vendor-5.15.config")).unwrap();
        let b = KernelConfig::from_file(&fixture("mainline-5.17.config")).unwrap();
        let d = diff(&a, &b, true);
        let fs = d.areas.iter().find(|x| x.area == Area::Filesystems).unwrap();
        let names: Vec<&str> = fs.entries.iter().map(|e| e.option.as_str()).collect();
        for want in
            ["SQUASHFS_DECOMP_SINGLE", "SQUASHFS_DECOMP_MULTI_PERCPU", "SQUASHFS_FILE_CACHE", "SQUASHFS_FILE_DIRECT"]
        {
            assert!(names.contains(&want), "{want} not in {names:?}");
        }
        let sched = d.areas.iter().find(|x| x.area == Area::SchedulerPreemption).unwrap();
        assert!(sched.entries.iter().any(|e| e.option == "PREEMPT_RT" && e.kind == ChangeKind::Removed));
        assert!(sched.entries.iter().any(|e| e.option == "PREEMPT_NONE" && e.kind == ChangeKind::Changed));
        assert!(d.areas.iter().any(|x| x.area == Area::MemoryManagement));
        assert!(d.areas.iter().any(|x| x.area == Area::BlockLayer));
        // Options without a performance note are hidden with only_perf.
        assert!(d.entries().all(|e| e.option != "LOCALVERSION" && e.option != "VENDOR_GPU_DRIVER"));
        assert_eq!(d.hidden, 2);
        let full = diff(&a, &b, false);
        assert!(full.entries().any(|e| e.option == "VENDOR_GPU_DRIVER" && e.kind == ChangeKind::Removed));
        let text = full.to_string();
        assert!(text.contains(&format!("A = {}", fixture("imx8mm-vendor-5.15.config").display())), "{text}");

        let e = KernelConfig::from_file(&fixture("bad-line-7.config")).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "{}:7: CONFIG_SQUASHFS: value `yes please` is not y, m, n, a \"string\" or a number",
                fixture("bad-line-7.config").display()
            )
        );
    }

    #[test]
    fn identical_configs_have_no_diff() {
        let a = cfg("CONFIG_A=y\n", "a");
        let d = diff(&a, &a.clone(), false);
        assert!(d.areas.is_empty());
        assert!(d.to_string().contains("no differences"));
    }
}
