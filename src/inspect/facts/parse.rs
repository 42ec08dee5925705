//! Parsers for the text of other tools and kernel files the facts are read
//! from. Each takes text and returns what it found; missing or odd fields
//! stay `None` (these are inspection aids, not inputs a user wrote) except
//! for user-written mount option lists, whose errors name the item.

use std::collections::BTreeMap;

use super::model::PreemptModel;
use crate::inspect::kconfig::KValue;

/// Work out the preemption model, most authoritative source first:
/// debugfs `sched/preempt`, then `preempt=` on the command line (only with
/// `PREEMPT_DYNAMIC`), then the config, then the `uname -v` banner.
pub(crate) fn preempt_model(
    kconfig: Option<&BTreeMap<String, KValue>>,
    cmdline: Option<&str>,
    debugfs: Option<&str>,
    uname_v: Option<&str>,
) -> (Option<PreemptModel>, Option<String>) {
    if let Some(m) = debugfs.and_then(parse_debugfs_preempt) {
        return (Some(m), Some("/sys/kernel/debug/sched/preempt".to_string()));
    }
    let on = |name: &str| kconfig.is_some_and(|k| k.get(name) == Some(&KValue::Yes));
    if kconfig.is_some() {
        if on("PREEMPT_RT") || on("PREEMPT_RT_FULL") {
            return (Some(PreemptModel::Rt), Some("kernel config: PREEMPT_RT=y".to_string()));
        }
        if on("PREEMPT_DYNAMIC") {
            if let Some(m) =
                cmdline.map(parse_cmdline).and_then(|p| p.get("preempt").cloned()).and_then(|v| PreemptModel::parse(&v))
            {
                return (Some(m), Some(format!("command line preempt={}", m.as_str())));
            }
        }
        for (name, model) in [
            ("PREEMPT_LAZY", PreemptModel::Lazy),
            ("PREEMPT", PreemptModel::Full),
            ("PREEMPT_VOLUNTARY", PreemptModel::Voluntary),
            ("PREEMPT_NONE", PreemptModel::None),
        ] {
            if on(name) {
                return (Some(model), Some(format!("kernel config: {name}=y")));
            }
        }
    }
    if let Some(v) = uname_v {
        if v.contains("PREEMPT_RT") {
            return (Some(PreemptModel::Rt), Some("uname -v".to_string()));
        }
        if v.split_whitespace().any(|w| w == "PREEMPT") {
            return (Some(PreemptModel::Full), Some("uname -v".to_string()));
        }
    }
    (None, None)
}

/// `none voluntary (full) lazy` → `Full`.
pub(crate) fn parse_debugfs_preempt(text: &str) -> Option<PreemptModel> {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix('(').and_then(|w| w.strip_suffix(')')))
        .and_then(PreemptModel::parse)
}

/// Kernel command-line parameters before `--` (what follows goes to init).
/// Double quotes group a value with spaces.
pub(crate) fn parse_cmdline(cmdline: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_quotes = false;
    for c in cmdline.chars() {
        match c {
            '"' => in_quotes = !in_quotes,
            c if c.is_whitespace() && !in_quotes => {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    for w in words {
        if w == "--" {
            break;
        }
        match w.split_once('=') {
            Some((k, v)) => out.insert(k.to_string(), v.to_string()),
            None => out.insert(w, String::new()),
        };
    }
    out
}

/// Parse a user-supplied mount option list (`rw,noatime,commit=60`).
/// Errors name the item position.
pub fn parse_mount_options(s: &str) -> std::result::Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    let s = s.trim();
    if s.is_empty() {
        return Ok(out);
    }
    for (i, item) in s.split(',').enumerate() {
        let item = item.trim();
        let pos = i + 1;
        if item.is_empty() {
            return Err(format!("option {pos} is empty (doubled or trailing comma?) in `{s}`"));
        }
        let (name, value) = item.split_once('=').unwrap_or((item, ""));
        if name.is_empty() {
            return Err(format!("option {pos} (`{item}`) has no name"));
        }
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')) {
            return Err(format!("option {pos} (`{item}`): `{name}` is not an option name"));
        }
        if item.contains('=') && value.is_empty() {
            return Err(format!("option {pos} (`{item}`) has an empty value"));
        }
        out.insert(name.to_string(), value.to_string());
    }
    Ok(out)
}

/// Lenient option-list merge for kernel-produced lists (mountinfo,
/// `/proc/fs/ext4/*/options`, which is one option per line).
pub(crate) fn merge_options(into: &mut BTreeMap<String, String>, list: &str) {
    for item in list.split([',', '\n']).map(str::trim).filter(|i| !i.is_empty()) {
        let (k, v) = item.split_once('=').unwrap_or((item, ""));
        into.insert(k.to_string(), v.to_string());
    }
}

/// `none [mq-deadline] kyber` → (`mq-deadline`, all three).
pub fn parse_scheduler(text: &str) -> (Option<String>, Vec<String>) {
    let mut active = None;
    let mut all = Vec::new();
    for w in text.split_whitespace() {
        if let Some(inner) = w.strip_prefix('[').and_then(|w| w.strip_suffix(']')) {
            active = Some(inner.to_string());
            all.push(inner.to_string());
        } else {
            all.push(w.to_string());
        }
    }
    // A queue with a single scheduler prints it without brackets.
    if active.is_none() && all.len() == 1 {
        active = all.first().cloned();
    }
    (active, all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::kconfig::KernelConfig;

    #[test]
    fn scheduler_cmdline_and_preempt() {
        assert_eq!(
            parse_scheduler("none [mq-deadline] kyber bfq"),
            (Some("mq-deadline".to_string()), vec!["none".into(), "mq-deadline".into(), "kyber".into(), "bfq".into()])
        );
        assert_eq!(parse_scheduler("none").0.as_deref(), Some("none"));
        assert_eq!(parse_scheduler("[none] mq-deadline").0.as_deref(), Some("none"));
        let p = parse_cmdline("ro quiet slub_debug=FZ preempt=full x=\"a b\" -- init=1 slub_debug=-");
        assert_eq!(p.get("slub_debug").map(String::as_str), Some("FZ"));
        assert_eq!(p.get("quiet").map(String::as_str), Some(""));
        assert_eq!(p.get("x").map(String::as_str), Some("a b"));
        assert!(!p.contains_key("init"));
        assert_eq!(parse_debugfs_preempt("none voluntary (full) lazy\n"), Some(PreemptModel::Full));
        assert_eq!(parse_debugfs_preempt("none voluntary full"), None);

        let cfg = |t: &str| KernelConfig::parse(t, "c").unwrap().options;
        let dynamic = cfg("CONFIG_PREEMPT_VOLUNTARY=y\nCONFIG_PREEMPT_DYNAMIC=y\n");
        assert_eq!(preempt_model(Some(&dynamic), None, None, None).0, Some(PreemptModel::Voluntary));
        assert_eq!(preempt_model(Some(&dynamic), Some("preempt=full"), None, None).0, Some(PreemptModel::Full));
        assert_eq!(
            preempt_model(Some(&dynamic), Some("preempt=full"), Some("none (voluntary) full"), None).0,
            Some(PreemptModel::Voluntary)
        );
        let fixed = cfg("CONFIG_PREEMPT_NONE=y\n");
        assert_eq!(preempt_model(Some(&fixed), Some("preempt=full"), None, None).0, Some(PreemptModel::None));
        let rt = cfg("CONFIG_PREEMPT_RT=y\nCONFIG_PREEMPT=y\n");
        assert_eq!(preempt_model(Some(&rt), None, None, None).0, Some(PreemptModel::Rt));
        assert_eq!(preempt_model(None, None, None, Some("#1 SMP PREEMPT_RT Tue")).0, Some(PreemptModel::Rt));
        assert_eq!(preempt_model(None, None, None, Some("#1 SMP PREEMPT Tue")).0, Some(PreemptModel::Full));
        assert_eq!(preempt_model(None, None, None, Some("#1 SMP PREEMPT_DYNAMIC")).0, None);
    }

    #[test]
    fn mount_option_lists() {
        let m = parse_mount_options("rw,noatime,commit=60,mb_optimize_scan=1").unwrap();
        assert_eq!(m.get("commit").map(String::as_str), Some("60"));
        assert_eq!(m.get("noatime").map(String::as_str), Some(""));
        assert!(parse_mount_options("").unwrap().is_empty());
        for (bad, msg) in [
            ("rw,,noatime", "option 2 is empty"),
            ("rw,=1", "option 2 (`=1`) has no name"),
            ("rw,commit=", "option 2 (`commit=`) has an empty value"),
            ("a b", "option 1 (`a b`): `a b` is not an option name"),
        ] {
            let e = parse_mount_options(bad).unwrap_err();
            assert!(e.contains(msg), "{bad}: {e}");
        }
    }
}
