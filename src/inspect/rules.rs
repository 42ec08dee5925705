//! Known-issue rules: one TOML file per rule in the repository's `rules/`
//! folder, embedded into the binary, evaluated against [`Facts`].
//!
//! # Rule file format
//!
//! ```toml
//! id = "squashfs-single-decomp-readahead"   # must equal the file name
//! title = "One-line statement of the problem"
//! severity = "high"                 # info | low | medium | high
//! benchmark_hostile = false          # true: results taken now are distorted
//! affected = ">=5.8, <5.17"          # optional kernel range, ANDed with `when`
//! fixed_in = "5.17"                  # optional mainline version with the fix
//! fs = ["squashfs"]                  # optional: only for these filesystem types
//! summary = "What happens and why."
//! advice = "What to do."
//! references = ["https://lore.kernel.org/…"]
//!
//! [[commits]]                        # optional, any number
//! id = "c1f6925e1091"
//! title = "mm: put readahead pages in cache earlier"
//! role = "introduced"                # introduced | fixed | related
//! version = "5.8"                    # optional
//!
//! [when]                             # the condition, see below
//! all = [
//!   { kconfig = "SQUASHFS_DECOMP_SINGLE", is = "y" },
//!   { fact = "fs.type", eq = "squashfs" },
//! ]
//!
//! [likely]                           # optional: the "likely" tier, see below
//! when = { kconfig = "SQUASHFS", is = "set" }
//! assumes = "Why the unknown facts probably make the rule true."
//! ```
//!
//! # Condition language
//!
//! A condition is a table with exactly one of these forms:
//!
//! | form | true when |
//! | --- | --- |
//! | `{ all = [c, …] }` | every condition is true |
//! | `{ any = [c, …] }` | at least one is true |
//! | `{ not = c }` | `c` is false |
//! | `{ kernel = ">=5.13, <6.0" }` | the kernel version is in the range (`,` = and, `\|\|` = or; `=5.15` is the series) |
//! | `{ kconfig = "NAME", is = V }` | the option (no `CONFIG_`) has value `V`: `y`, `m`, `n`, `set` (y or m), `unset` (n or not mentioned), any literal, or a list of these (any matches) |
//! | `{ fact = "KEY", OP = V }` | the fact compares true; `OP` is one of `eq`, `ne`, `lt`, `le`, `gt`, `ge` (numbers), `in` (list), `exists` (bool), `contains`, `starts_with` (text) |
//!
//! Fact keys are listed in [`FACT_KEYS`](super::facts::FACT_KEYS). An
//! option or mount option that is not present is *absent*: it fails
//! `eq`/`in`/`lt`/…, passes `ne`, and answers `exists`.
//!
//! `fs` scopes a kernel-wide rule to filesystems: when the facts name the
//! filesystem of an inspected path and it is not listed, the rule does not
//! fire; without a path the rule is evaluated as usual.
//!
//! Evaluation is three-valued: a fact nobody could learn is *unknown*, and
//! `all`/`any`/`not` follow Kleene logic, so a rule fires only when its
//! condition is definitely true; undetermined rules are listed with the
//! facts they were missing.
//!
//! # The likely tier
//!
//! Offline, some facts are rarely known (the device, the filesystem size),
//! and a rule that depends on them would stay undetermined however clearly
//! the kernel is affected. A rule may say when it is *likely* anyway: when
//! its `when` is unknown (so nothing known contradicts it), its `affected`
//! range holds and `[likely] when` is true, the doctor reports it as a
//! likely finding with `assumes` (the default or common case it relies on)
//! and what would confirm it (the facts `when` was missing).

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use super::facts::{fact_key, FactKind, FactValue, Facts, Lookup};
use super::version::{KernelVersion, VersionReq};

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Low,
    Medium,
    High,
}

impl Severity {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a commit did for the issue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CommitRole {
    Introduced,
    Fixed,
    Related,
}

/// A kernel commit a rule refers to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Commit {
    /// Abbreviated or full hash.
    pub id: String,
    /// Subject line.
    pub title: String,
    pub role: CommitRole,
    /// Mainline release that first contained it.
    #[serde(default)]
    pub version: Option<String>,
}

/// Comparison in a `fact` condition.
#[derive(Clone, Debug, PartialEq)]
pub enum FactOp {
    Eq(FactValue),
    Ne(FactValue),
    Lt(f64),
    Le(f64),
    Gt(f64),
    Ge(f64),
    In(Vec<FactValue>),
    Exists(bool),
    Contains(String),
    StartsWith(String),
}

/// A rule's condition (see the module documentation for the TOML form).
#[derive(Clone, Debug, PartialEq)]
pub enum Condition {
    All(Vec<Condition>),
    Any(Vec<Condition>),
    Not(Box<Condition>),
    Kernel(VersionReq),
    /// Option name without `CONFIG_`, and the accepted values.
    Kconfig {
        name: String,
        is: Vec<String>,
    },
    Fact {
        key: String,
        op: FactOp,
    },
}

/// Three-valued truth.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Truth {
    True,
    False,
    Unknown,
}

/// Outcome of evaluating a condition.
#[derive(Clone, Debug, PartialEq)]
pub struct Eval {
    pub truth: Truth,
    /// Facts that decided the outcome, as `key = value` lines.
    pub evidence: Vec<String>,
    /// Facts that were unknown.
    pub missing: Vec<String>,
}

const OPS: &[&str] = &["eq", "ne", "lt", "le", "gt", "ge", "in", "exists", "contains", "starts_with"];

fn toml_to_fact(v: &toml::Value) -> Result<FactValue, String> {
    match v {
        toml::Value::String(s) => Ok(FactValue::Text(s.clone())),
        toml::Value::Integer(i) => Ok(FactValue::Int(*i)),
        toml::Value::Float(f) => Ok(FactValue::Float(*f)),
        toml::Value::Boolean(b) => Ok(FactValue::Bool(*b)),
        other => Err(format!("`{other}` is not a string, number or boolean")),
    }
}

fn build_fact_op(key: &str, op: &str, v: &toml::Value) -> Result<FactOp, String> {
    let kind = fact_key(key)
        .ok_or_else(|| format!("unknown fact `{key}` (see FACT_KEYS in src/inspect/facts/model.rs)"))?
        .kind;
    let number = || match v {
        toml::Value::Integer(i) => Ok(*i as f64),
        toml::Value::Float(f) => Ok(*f),
        _ => Err(format!("`{op}` needs a number, found `{v}`")),
    };
    let text = || match v {
        toml::Value::String(s) => Ok(s.clone()),
        _ => Err(format!("`{op}` needs a string, found `{v}`")),
    };
    let check_kind = |fv: &FactValue| -> Result<(), String> {
        let ok = match (kind, fv) {
            (FactKind::Bool, FactValue::Bool(_)) => true,
            (FactKind::Int | FactKind::Float, FactValue::Int(_) | FactValue::Float(_)) => true,
            // Text facts may hold numbers (kconfig HZ=250): allow both.
            (FactKind::Text, FactValue::Text(_) | FactValue::Int(_) | FactValue::Float(_)) => true,
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            Err(format!("fact `{key}` holds {kind:?} values; `{v}` can never match").to_lowercase())
        }
    };
    Ok(match op {
        "eq" | "ne" => {
            let fv = toml_to_fact(v)?;
            check_kind(&fv)?;
            if op == "eq" {
                FactOp::Eq(fv)
            } else {
                FactOp::Ne(fv)
            }
        }
        "lt" => FactOp::Lt(number()?),
        "le" => FactOp::Le(number()?),
        "gt" => FactOp::Gt(number()?),
        "ge" => FactOp::Ge(number()?),
        "in" => {
            let arr = v.as_array().ok_or_else(|| format!("`in` needs a list, found `{v}`"))?;
            if arr.is_empty() {
                return Err("`in` needs a non-empty list".to_string());
            }
            let vals = arr.iter().map(toml_to_fact).collect::<Result<Vec<_>, _>>()?;
            vals.iter().try_for_each(check_kind)?;
            FactOp::In(vals)
        }
        "exists" => FactOp::Exists(v.as_bool().ok_or_else(|| format!("`exists` needs true or false, found `{v}`"))?),
        "contains" => FactOp::Contains(text()?),
        "starts_with" => FactOp::StartsWith(text()?),
        _ => return Err(format!("unknown operator `{op}`")),
    })
}

fn valid_option_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl<'de> Deserialize<'de> for Condition {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(CondVisitor)
    }
}

struct CondVisitor;

impl<'de> Visitor<'de> for CondVisitor {
    type Value = Condition;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a condition table such as { kconfig = \"NAME\", is = \"y\" }")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Condition, A::Error> {
        let mut heads: Vec<&'static str> = Vec::new();
        let mut all = None;
        let mut any = None;
        let mut not = None;
        let mut kernel: Option<String> = None;
        let mut kconfig: Option<String> = None;
        let mut is: Option<toml::Value> = None;
        let mut fact: Option<String> = None;
        let mut ops: Vec<(String, toml::Value)> = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "all" => {
                    heads.push("all");
                    all = Some(map.next_value::<Vec<Condition>>()?);
                }
                "any" => {
                    heads.push("any");
                    any = Some(map.next_value::<Vec<Condition>>()?);
                }
                "not" => {
                    heads.push("not");
                    not = Some(Box::new(map.next_value::<Condition>()?));
                }
                "kernel" => {
                    heads.push("kernel");
                    kernel = Some(map.next_value::<String>()?);
                }
                "kconfig" => {
                    heads.push("kconfig");
                    kconfig = Some(map.next_value::<String>()?);
                }
                "fact" => {
                    heads.push("fact");
                    fact = Some(map.next_value::<String>()?);
                }
                "is" => is = Some(map.next_value::<toml::Value>()?),
                k if OPS.contains(&k) => ops.push((key.clone(), map.next_value::<toml::Value>()?)),
                other => {
                    return Err(de::Error::custom(format!(
                        "unknown key `{other}` in condition (expected all, any, not, kernel, kconfig with is, or fact with one of {})",
                        OPS.join(", ")
                    )))
                }
            }
        }
        let err = |m: String| de::Error::custom(m);
        if heads.len() != 1 {
            return Err(err(if heads.is_empty() {
                "empty condition: use one of all, any, not, kernel, kconfig, fact".to_string()
            } else {
                format!("a condition has exactly one of all/any/not/kernel/kconfig/fact, found {}", heads.join(" and "))
            }));
        }
        if heads[0] != "kconfig" && is.is_some() {
            return Err(err("`is` belongs with `kconfig`".to_string()));
        }
        if heads[0] != "fact" && !ops.is_empty() {
            return Err(err(format!("`{}` belongs with `fact`", ops[0].0)));
        }
        Ok(match heads[0] {
            "all" | "any" => {
                let list = all.or(any).unwrap_or_default();
                if list.is_empty() {
                    return Err(err(format!("`{}` needs at least one condition", heads[0])));
                }
                if heads[0] == "all" {
                    Condition::All(list)
                } else {
                    Condition::Any(list)
                }
            }
            "not" => match not {
                Some(c) => Condition::Not(c),
                None => return Err(err("`not` needs a condition".to_string())),
            },
            "kernel" => {
                let text = kernel.unwrap_or_default();
                Condition::Kernel(VersionReq::parse(&text).map_err(err)?)
            }
            "kconfig" => {
                let name = kconfig.unwrap_or_default();
                let name = name.strip_prefix("CONFIG_").unwrap_or(&name).to_string();
                if !valid_option_name(&name) {
                    return Err(err(format!("`{name}` is not a config option name")));
                }
                let values = match is {
                    None => return Err(err(format!("kconfig `{name}` needs `is = …`"))),
                    Some(toml::Value::String(s)) => vec![s],
                    Some(toml::Value::Array(a)) if !a.is_empty() => a
                        .into_iter()
                        .map(|v| match v {
                            toml::Value::String(s) => Ok(s),
                            other => Err(err(format!("`is` values are strings, found `{other}`"))),
                        })
                        .collect::<Result<Vec<_>, _>>()?,
                    Some(other) => {
                        return Err(err(format!("`is` needs a string or a non-empty list, found `{other}`")))
                    }
                };
                if values.iter().any(|v| v.is_empty()) {
                    return Err(err("`is` has an empty value".to_string()));
                }
                Condition::Kconfig { name, is: values }
            }
            _ => {
                let key = fact.unwrap_or_default();
                if ops.len() != 1 {
                    return Err(err(format!(
                        "fact `{key}` needs exactly one of {}, found {}",
                        OPS.join(", "),
                        ops.len()
                    )));
                }
                let (op, v) = &ops[0];
                Condition::Fact { key: key.clone(), op: build_fact_op(&key, op, v).map_err(err)? }
            }
        })
    }
}

fn missing_label(key: &str) -> String {
    if key.starts_with("kconfig.") {
        "kernel config".to_string()
    } else if key.starts_with("cmdline.") {
        "kernel command line".to_string()
    } else if key.starts_with("mount.") {
        "mount options".to_string()
    } else {
        key.to_string()
    }
}

fn fact_eq(actual: &FactValue, expected: &FactValue) -> bool {
    match (actual, expected) {
        (FactValue::Bool(a), FactValue::Bool(b)) => a == b,
        (FactValue::Bool(_), _) | (_, FactValue::Bool(_)) => false,
        (FactValue::Text(a), FactValue::Text(b)) => a == b,
        (a, b) => match (a.as_f64(), b.as_f64()) {
            (Some(x), Some(y)) => x == y,
            _ => false,
        },
    }
}

fn atom(truth: bool, evidence: String) -> Eval {
    Eval { truth: if truth { Truth::True } else { Truth::False }, evidence: vec![evidence], missing: vec![] }
}

fn unknown(label: String) -> Eval {
    Eval { truth: Truth::Unknown, evidence: vec![], missing: vec![label] }
}

impl Condition {
    /// Evaluate against facts with three-valued logic.
    pub fn eval(&self, facts: &Facts) -> Eval {
        match self {
            Condition::All(cs) | Condition::Any(cs) => {
                let is_all = matches!(self, Condition::All(_));
                let results: Vec<Eval> = cs.iter().map(|c| c.eval(facts)).collect();
                // The deciding value: false for all, true for any.
                let decisive = if is_all { Truth::False } else { Truth::True };
                let mut out = Eval { truth: Truth::Unknown, evidence: vec![], missing: vec![] };
                if results.iter().any(|r| r.truth == decisive) {
                    out.truth = decisive;
                    for r in results.iter().filter(|r| r.truth == decisive) {
                        out.evidence.extend(r.evidence.iter().cloned());
                    }
                } else if results.iter().any(|r| r.truth == Truth::Unknown) {
                    for r in &results {
                        out.missing.extend(r.missing.iter().cloned());
                    }
                } else {
                    out.truth = if is_all { Truth::True } else { Truth::False };
                    for r in &results {
                        out.evidence.extend(r.evidence.iter().cloned());
                    }
                }
                out
            }
            Condition::Not(c) => {
                let mut r = c.eval(facts);
                r.truth = match r.truth {
                    Truth::True => Truth::False,
                    Truth::False => Truth::True,
                    Truth::Unknown => Truth::Unknown,
                };
                r
            }
            Condition::Kernel(req) => match facts.kernel_version {
                None => unknown("kernel.version".to_string()),
                Some(v) => {
                    let m = req.matches(v);
                    atom(m, format!("kernel {v} {} {req}", if m { "is in" } else { "is not in" }))
                }
            },
            Condition::Kconfig { name, is } => {
                let value = match facts.get(&format!("kconfig.{name}")) {
                    Lookup::Unknown => return unknown("kernel config".to_string()),
                    Lookup::Absent => None,
                    Lookup::Known(FactValue::Text(t)) => Some(t),
                    Lookup::Known(v) => Some(v.to_string()),
                };
                let effective = value.clone().unwrap_or_else(|| "n".to_string());
                let matched = is.iter().any(|want| match want.as_str() {
                    "set" => effective == "y" || effective == "m",
                    "unset" => effective == "n",
                    lit => effective == lit,
                });
                let shown = match value {
                    Some(v) if v == "n" => format!("CONFIG_{name} is not set"),
                    Some(v) => format!("CONFIG_{name}={v}"),
                    None => format!("CONFIG_{name} is not in the config"),
                };
                atom(matched, shown)
            }
            Condition::Fact { key, op } => match facts.get(key) {
                Lookup::Unknown => unknown(missing_label(key)),
                Lookup::Absent => {
                    let truth = matches!(op, FactOp::Ne(_) | FactOp::Exists(false));
                    atom(truth, format!("{key} is not set"))
                }
                Lookup::Known(v) => {
                    let num = v.as_f64();
                    let cmp = |f: fn(f64, f64) -> bool, b: f64| num.is_some_and(|a| f(a, b));
                    let text = match &v {
                        FactValue::Text(t) => t.clone(),
                        other => other.to_string(),
                    };
                    let truth = match op {
                        FactOp::Eq(e) => fact_eq(&v, e),
                        FactOp::Ne(e) => !fact_eq(&v, e),
                        FactOp::Lt(b) => cmp(|a, b| a < b, *b),
                        FactOp::Le(b) => cmp(|a, b| a <= b, *b),
                        FactOp::Gt(b) => cmp(|a, b| a > b, *b),
                        FactOp::Ge(b) => cmp(|a, b| a >= b, *b),
                        FactOp::In(list) => list.iter().any(|e| fact_eq(&v, e)),
                        FactOp::Exists(b) => *b,
                        FactOp::Contains(s) => text.contains(s.as_str()),
                        FactOp::StartsWith(s) => text.starts_with(s.as_str()),
                    };
                    atom(truth, format!("{key} = {v}"))
                }
            },
        }
    }
}

/// A known-issue rule.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Rule {
    pub id: String,
    pub title: String,
    pub severity: Severity,
    /// Findings of this rule distort benchmark results taken now;
    /// `fslab run` prints them before starting.
    pub benchmark_hostile: bool,
    /// Kernel versions affected, ANDed with the condition.
    #[serde(serialize_with = "ser_opt_display")]
    pub affected: Option<VersionReq>,
    /// Mainline release with the fix.
    pub fixed_in: Option<String>,
    /// Filesystem types the rule concerns (empty: any).
    pub fs: Vec<String>,
    pub commits: Vec<Commit>,
    pub references: Vec<String>,
    /// What happens and why.
    pub summary: String,
    /// What to do.
    pub advice: String,
    #[serde(skip)]
    pub when: Condition,
    /// When the rule is likely though `when` is undecided.
    pub likely: Option<Likely>,
    /// File the rule came from.
    pub file: String,
}

/// The likely tier of a rule (see the module documentation).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Likely {
    #[serde(skip)]
    pub when: Condition,
    /// The defaults or common case the unknown facts are assumed to follow.
    pub assumes: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LikelyFile {
    when: Condition,
    assumes: String,
}

fn ser_opt_display<S: serde::Serializer, T: fmt::Display>(v: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.collect_str(v),
        None => s.serialize_none(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    id: toml::Spanned<String>,
    title: String,
    severity: Severity,
    #[serde(default)]
    benchmark_hostile: bool,
    affected: Option<VersionReq>,
    fixed_in: Option<toml::Spanned<String>>,
    #[serde(default)]
    fs: Vec<String>,
    #[serde(default)]
    commits: Vec<toml::Spanned<Commit>>,
    #[serde(default)]
    references: Vec<toml::Spanned<String>>,
    summary: String,
    advice: String,
    when: Condition,
    likely: Option<LikelyFile>,
}

/// A rule file that could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct RuleError {
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{}: {}", self.file, l, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset.min(text.len())).map_or(1, |t| t.matches('\n').count() + 1)
}

impl Rule {
    /// Parse one rule file. `file` names it in errors; when it ends in
    /// `.toml`, the rule id must equal its stem.
    pub fn parse(text: &str, file: &str) -> Result<Rule, RuleError> {
        let fail = |span: Option<std::ops::Range<usize>>, message: String| RuleError {
            file: file.to_string(),
            line: span.map(|s| line_of(text, s.start)),
            message,
        };
        let raw: RuleFile = toml::from_str(text).map_err(|e| fail(e.span(), e.message().trim().to_string()))?;
        let id = raw.id.get_ref().clone();
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
            return Err(fail(Some(raw.id.span()), format!("id `{id}` must be lower-case letters, digits and dashes")));
        }
        if let Some(stem) = Path::new(file).file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".toml")) {
            if stem != id {
                return Err(fail(Some(raw.id.span()), format!("id `{id}` does not match the file name `{stem}.toml`")));
            }
        }
        for (field, value) in [("title", &raw.title), ("summary", &raw.summary), ("advice", &raw.advice)] {
            if value.trim().is_empty() {
                return Err(fail(None, format!("`{field}` is empty")));
            }
        }
        if raw.likely.as_ref().is_some_and(|l| l.assumes.trim().is_empty()) {
            return Err(fail(None, "`likely.assumes` is empty: say what the likely tier assumes".to_string()));
        }
        if let Some(f) = &raw.fixed_in {
            KernelVersion::parse(f.get_ref()).map_err(|e| fail(Some(f.span()), format!("fixed_in: {e}")))?;
        }
        if raw.fs.iter().any(|t| t.is_empty() || !t.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_'))
        {
            return Err(fail(None, format!("`fs` entries must be filesystem type names, found {:?}", raw.fs)));
        }
        for c in &raw.commits {
            let commit = c.get_ref();
            let ok = (7..=40).contains(&commit.id.len()) && commit.id.chars().all(|ch| ch.is_ascii_hexdigit());
            if !ok {
                return Err(fail(Some(c.span()), format!("commit id `{}` is not a 7-40 digit hex hash", commit.id)));
            }
            if let Some(v) = &commit.version {
                KernelVersion::parse(v).map_err(|e| fail(Some(c.span()), format!("commit {}: {e}", commit.id)))?;
            }
        }
        for r in &raw.references {
            let s = r.get_ref();
            if !(s.starts_with("https://") || s.starts_with("http://")) {
                return Err(fail(Some(r.span()), format!("reference `{s}` is not an http(s) URL")));
            }
        }
        Ok(Rule {
            id,
            title: raw.title,
            severity: raw.severity,
            benchmark_hostile: raw.benchmark_hostile,
            affected: raw.affected,
            fixed_in: raw.fixed_in.map(|f| f.into_inner()),
            fs: raw.fs,
            commits: raw.commits.into_iter().map(|c| c.into_inner()).collect(),
            references: raw.references.into_iter().map(|r| r.into_inner()).collect(),
            summary: raw.summary.trim().to_string(),
            advice: raw.advice.trim().to_string(),
            when: raw.when,
            likely: raw.likely.map(|l| Likely { when: l.when, assumes: l.assumes.trim().to_string() }),
            file: file.to_string(),
        })
    }

    /// The likely tier: `Some` with the evidence when [`Rule::eval`] is
    /// unknown and the rule's `affected` range and `[likely] when` are true.
    pub fn eval_likely(&self, facts: &Facts) -> Option<Eval> {
        let likely = self.likely.as_ref()?;
        if self.eval(facts).truth != Truth::Unknown {
            return None;
        }
        let cond = match &self.affected {
            None => likely.when.clone(),
            Some(req) => Condition::All(vec![Condition::Kernel(req.clone()), likely.when.clone()]),
        };
        let ev = cond.eval(facts);
        (ev.truth == Truth::True).then_some(ev)
    }

    /// Evaluate the rule: its filesystem scope, `affected` range and
    /// condition.
    pub fn eval(&self, facts: &Facts) -> Eval {
        if !self.fs.is_empty() {
            if let Lookup::Known(FactValue::Text(t)) = facts.get("fs.type") {
                if !self.fs.contains(&t) {
                    return Eval {
                        truth: Truth::False,
                        evidence: vec![format!("fs.type = {t}; the rule concerns {}", self.fs.join(", "))],
                        missing: vec![],
                    };
                }
            }
        }
        match &self.affected {
            None => self.when.eval(facts),
            Some(req) => Condition::All(vec![Condition::Kernel(req.clone()), self.when.clone()]).eval(facts),
        }
    }
}

macro_rules! builtin {
    ($($name:literal),* $(,)?) => {
        &[$(($name, include_str!(concat!("../../rules/", $name, ".toml")))),*]
    };
}

/// The rule files compiled into fslab: (id, TOML text).
pub const BUILTIN_RULE_FILES: &[(&str, &str)] = builtin![
    "squashfs-single-decomp-readahead",
    "squashfs-single-decompressor",
    "squashfs-single-decomp-preemptible",
    "squashfs-file-cache",
    "ext4-mb-optimize-scan-spreading",
    "ext4-lazyinit-running",
    "ext4-lazyinit-bitmap-prefetch",
    "ext4-data-journal",
    "xfs-agcount-below-cpus",
    "btrfs-metadata-dup",
    "debug-xfs",
    "debug-lockdep",
    "debug-kasan",
    "debug-kmemleak",
    "debug-pagealloc",
    "debug-slub",
    "debug-other-instrumentation",
    "init-on-free",
    "preempt-rt",
    "queue-read-ahead-tiny",
    "queue-none-on-rotational",
    "queue-write-through",
    "mount-nobarrier",
    "mount-strictatime",
];

/// Parse a list of (file name, text) into rules, rejecting duplicate ids.
pub fn parse_rules(files: &[(&str, &str)]) -> Result<Vec<Rule>, RuleError> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(files.len());
    for (name, text) in files {
        let file = if name.ends_with(".toml") { format!("rules/{name}") } else { format!("rules/{name}.toml") };
        let rule = Rule::parse(text, &file)?;
        if !seen.insert(rule.id.clone()) {
            return Err(RuleError { file, line: None, message: format!("duplicate rule id `{}`", rule.id) });
        }
        out.push(rule);
    }
    Ok(out)
}

/// The rules compiled into fslab.
pub fn builtin_rules() -> Result<Vec<Rule>, RuleError> {
    parse_rules(BUILTIN_RULE_FILES)
}

/// Load every `*.toml` rule in `dir` (for site-specific rules), sorted by
/// file name.
pub fn load_rules_dir(dir: &Path) -> Result<Vec<Rule>, RuleError> {
    let io = |e: std::io::Error| RuleError { file: dir.display().to_string(), line: None, message: e.to_string() };
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .map_err(io)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for p in paths {
        let file = p.display().to_string();
        let text = std::fs::read_to_string(&p).map_err(|e| RuleError {
            file: file.clone(),
            line: None,
            message: e.to_string(),
        })?;
        let rule = Rule::parse(&text, &file)?;
        if !seen.insert(rule.id.clone()) {
            return Err(RuleError { file, line: None, message: format!("duplicate rule id `{}`", rule.id) });
        }
        out.push(rule);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::facts::FactsMode;
    use std::collections::BTreeMap;

    const MINIMAL: &str = r#"
id = "t"
title = "test"
severity = "low"
summary = "s"
advice = "a"
"#;

    fn rule_with(when: &str) -> Result<Rule, RuleError> {
        Rule::parse(&format!("{MINIMAL}{when}"), "t.toml")
    }

    #[test]
    fn condition_language() {
        let r = rule_with(
            r#"
[when]
all = [
  { kconfig = "CONFIG_A", is = ["y", "m"] },
  { not = { fact = "mount.threads", exists = true } },
  { any = [ { fact = "queue.read_ahead_kb", lt = 64 }, { kernel = "<5.0" } ] },
  { fact = "fs.type", in = ["ext4", "xfs"] },
]
"#,
        )
        .unwrap();
        let mut f = Facts::empty(FactsMode::Offline);
        assert_eq!(r.eval(&f).truth, Truth::Unknown);
        f.set("kconfig.A", "m").unwrap();
        f.set("fs.type", "xfs").unwrap();
        f.set("mount.noatime", "").unwrap();
        f.set("kernel.release", "6.1").unwrap();
        // read_ahead unknown and kernel not < 5.0: any() is unknown.
        let e = r.eval(&f);
        assert_eq!(e.truth, Truth::Unknown);
        assert_eq!(e.missing, vec!["queue.read_ahead_kb".to_string()]);
        f.set("queue.read_ahead_kb", "16").unwrap();
        let e = r.eval(&f);
        assert_eq!(e.truth, Truth::True);
        assert!(e.evidence.contains(&"CONFIG_A=m".to_string()), "{:?}", e.evidence);
        assert!(e.evidence.contains(&"queue.read_ahead_kb = 16".to_string()), "{:?}", e.evidence);
        f.set("mount.threads", "4").unwrap();
        assert_eq!(r.eval(&f).truth, Truth::False);
    }

    #[test]
    fn kconfig_semantics() {
        let r = rule_with("[when]\nkconfig = \"B\"\nis = \"unset\"\n").unwrap();
        let mut f = Facts::empty(FactsMode::Offline);
        assert_eq!(r.eval(&f).truth, Truth::Unknown);
        f.set("kconfig.A", "y").unwrap();
        let e = r.eval(&f);
        assert_eq!(e.truth, Truth::True, "absent means not set");
        assert_eq!(e.evidence, vec!["CONFIG_B is not in the config".to_string()]);
        let local = rule_with("[when]\nkconfig = \"LOCALVERSION\"\nis = \"-vendor\"\n").unwrap();
        f.set("kconfig.LOCALVERSION", "\"-vendor\"").unwrap();
        assert_eq!(local.eval(&f).truth, Truth::True);
        let hz = rule_with("[when]\nfact = \"kconfig.HZ\"\nge = 1000\n").unwrap();
        f.set("kconfig.HZ", "1000").unwrap();
        assert_eq!(hz.eval(&f).truth, Truth::True);
        f.set("kconfig.HZ", "250").unwrap();
        assert_eq!(hz.eval(&f).truth, Truth::False);
    }

    #[test]
    fn bad_rules_report_file_and_line() {
        let cases: &[(&str, usize, &str)] = &[
            (
                "[when]\nall = [\n  { kconfig = \"A\", is = \"y\" },\n  { kconfg = \"B\", is = \"y\" },\n]\n",
                10,
                "unknown key `kconfg`",
            ),
            ("[when]\nfact = \"queue.readahead\"\nlt = 3\n", 7, "unknown fact `queue.readahead`"),
            ("[when]\nfact = \"queue.read_ahead_kb\"\nlt = \"x\"\n", 7, "`lt` needs a number"),
            ("[when]\nfact = \"queue.rotational\"\neq = \"yes\"\n", 7, "can never match"),
            ("[when]\nkernel = \"5.8\"\n", 7, "needs one of >="),
            ("[when]\nkconfig = \"A\"\n", 7, "needs `is = …`"),
            ("[when]\nkconfig = \"A\"\nis = \"y\"\nfact = \"cpu.count\"\n", 7, "exactly one of"),
            ("[when]\nfact = \"cpu.count\"\nlt = 3\ngt = 1\n", 7, "exactly one of"),
            ("[when]\nall = []\n", 7, "at least one condition"),
            ("severity2 = 1\n[when]\nkernel = \">=5\"\n", 7, "unknown field `severity2`"),
        ];
        for (when, line, msg) in cases {
            let e = rule_with(when).unwrap_err();
            assert_eq!(e.file, "t.toml");
            assert!(e.message.contains(msg), "{when:?}: {e}");
            assert_eq!(e.line, Some(*line), "{when:?}: {e}");
        }
        let e = Rule::parse(&format!("{MINIMAL}[when]\nkernel = \">=5.8\"\n"), "rules/other.toml").unwrap_err();
        assert!(e.to_string().starts_with("rules/other.toml:2: id `t` does not match"), "{e}");
        let e = Rule::parse(
            &format!(
                "{MINIMAL}[[commits]]\nid = \"xyz\"\ntitle = \"t\"\nrole = \"fixed\"\n[when]\nkernel = \">=5.8\"\n"
            ),
            "t.toml",
        )
        .unwrap_err();
        assert_eq!(e.line, Some(7), "{e}");
        assert!(e.message.contains("not a 7-40 digit hex hash"), "{e}");
        let e = Rule::parse("id = \"t\"\nseverity = \"severe\"\n", "t.toml").unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        let e = Rule::parse("id = [\n", "t.toml").unwrap_err();
        assert!(e.line.is_some(), "{e}");
    }

    fn fixture_dir() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/inspect/rules")
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct FixtureFile {
        case: Vec<FixtureCase>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct FixtureCase {
        name: String,
        /// fire | quiet | undetermined
        expect: String,
        facts: BTreeMap<String, toml::Value>,
    }

    fn facts_from(case: &FixtureCase, file: &str) -> Facts {
        let mut f = Facts::empty(FactsMode::Offline);
        for (k, v) in &case.facts {
            let text = match v {
                toml::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            if let Err(e) = f.set(k, &text) {
                panic!("{file}: case `{}`: {e}", case.name);
            }
        }
        f
    }

    #[test]
    fn builtin_rules_load_and_match_the_folder() {
        let rules = builtin_rules().unwrap_or_else(|e| panic!("{e}"));
        assert!(rules.len() >= 15, "only {} rules", rules.len());
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("rules");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.strip_suffix(".toml")).map(str::to_string))
            .collect();
        on_disk.sort();
        let mut listed: Vec<String> = rules.iter().map(|r| r.id.clone()).collect();
        listed.sort();
        assert_eq!(on_disk, listed, "rules/ and BUILTIN_RULE_FILES differ");
        assert_eq!(load_rules_dir(&dir).unwrap().len(), rules.len());
    }

    /// Every rule has a fixture with a case that fires it and one that
    /// does not; every case behaves as its `expect` says.
    #[test]
    fn every_rule_fires_on_its_fixture_and_stays_quiet_on_another() {
        let rules = builtin_rules().unwrap();
        for rule in &rules {
            let file = fixture_dir().join(format!("{}.toml", rule.id));
            let text = std::fs::read_to_string(&file)
                .unwrap_or_else(|e| panic!("fixture {} for rule {}: {e}", file.display(), rule.id));
            let fx: FixtureFile = toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let (mut fired, mut quiet) = (0, 0);
            for case in &fx.case {
                let facts = facts_from(case, &file.display().to_string());
                let ev = rule.eval(&facts);
                let want = match case.expect.as_str() {
                    "fire" => Truth::True,
                    "quiet" => Truth::False,
                    "undetermined" | "likely" => Truth::Unknown,
                    other => panic!("{}: case `{}`: bad expect `{other}`", file.display(), case.name),
                };
                assert_eq!(
                    rule.eval_likely(&facts).is_some(),
                    case.expect == "likely",
                    "rule {} case `{}`: likely tier",
                    rule.id,
                    case.name
                );
                assert_eq!(
                    ev.truth, want,
                    "rule {} case `{}`: evidence {:?}, missing {:?}",
                    rule.id, case.name, ev.evidence, ev.missing
                );
                match ev.truth {
                    Truth::True => fired += 1,
                    Truth::False => quiet += 1,
                    Truth::Unknown => {}
                }
            }
            assert!(fired >= 1 && quiet >= 1, "rule {} needs a firing and a quiet case", rule.id);
        }
    }
}
