//! What a kernel source tree's Kconfig says about the symbols a variant
//! `set`s: whether each exists and can be set at all (has a prompt), the
//! choice it belongs to (setting one member clears the others), its
//! dependencies (to say why Kconfig dropped a value) and who `select`s it.
//!
//! Kconfig's own tools (`conf`, `merge_config.sh`) apply a config but do
//! not explain one, and no crate parses Kconfig: this reads only the few
//! keywords those questions need (`config`, `menuconfig`, `choice`,
//! `endchoice`, `if`, `endif`, `menu`, `endmenu`, `depends on`, `select`,
//! prompts), line by line, which is enough to name an unmet dependency.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::Path;

use anyhow::{Context, Result};

/// One symbol, as every Kconfig file that mentions it defines it.
#[derive(Clone, Debug, Default)]
pub struct Symbol {
    /// Has a prompt somewhere: a `.config` line can set it.
    pub prompt: bool,
    /// `bool`, `tristate`, `string`, `int`, `hex`.
    pub kind: String,
    /// `depends on` expressions, its own and its enclosing `if`s, menus and choice.
    pub depends: Vec<String>,
    /// The choice it is a member of (index into [`Kconfig::choices`]).
    pub choice: Option<usize>,
}

/// The symbols and choices of one source tree (x86 and generic Kconfig files).
#[derive(Clone, Debug, Default)]
pub struct Kconfig {
    pub symbols: HashMap<String, Symbol>,
    /// Members of each choice.
    pub choices: Vec<Vec<String>>,
    /// Symbol -> the symbols whose `select` forces it on.
    pub selected_by: HashMap<String, Vec<String>>,
}

/// Symbols renamed between kernel versions, old name first: a `set` of the
/// name this version lacks (or hides) says which name to use.
const RENAMED: &[(&str, &str)] = &[
    // 6.2 made the decompressor a mount option; the build-time choice moved to COMPILE_ names.
    ("SQUASHFS_DECOMP_SINGLE", "SQUASHFS_COMPILE_DECOMP_SINGLE"),
    ("SQUASHFS_DECOMP_MULTI", "SQUASHFS_COMPILE_DECOMP_MULTI"),
    ("SQUASHFS_DECOMP_MULTI_PERCPU", "SQUASHFS_COMPILE_DECOMP_MULTI_PERCPU"),
];

impl Kconfig {
    /// Read every `Kconfig*` file of `tree` outside other architectures,
    /// `Documentation/`, `tools/` and `samples/`.
    pub fn read(tree: &Path) -> Result<Kconfig> {
        let mut k = Kconfig::default();
        let mut files = Vec::new();
        collect(tree, tree, &mut files).with_context(|| format!("reading the Kconfig files of {}", tree.display()))?;
        files.sort();
        for f in files {
            let text = fs::read_to_string(&f).with_context(|| format!("reading {}", f.display()))?;
            k.parse(&text);
        }
        Ok(k)
    }

    /// Add one Kconfig file's definitions.
    pub fn parse(&mut self, text: &str) {
        // Conditions in force: enclosing `if`s and menus' `depends on`.
        let mut scopes: Vec<(&str, Option<String>)> = Vec::new();
        let mut choice_stack: Vec<usize> = Vec::new();
        let mut current: Option<String> = None;
        let mut in_menu_header = false;
        let mut in_choice_header = false;
        let mut in_help = false;
        let mut help_indent = 0usize;
        for raw in text.lines() {
            let indent = raw.len() - raw.trim_start().len();
            let line = raw.trim();
            if in_help {
                if line.is_empty() || indent > help_indent {
                    continue;
                }
                in_help = false;
            }
            let line = line.split(" #").next().unwrap_or(line).trim();
            let mut words = line.split_whitespace();
            let Some(first) = words.next() else { continue };
            match first {
                "config" | "menuconfig" => {
                    let name = words.next().unwrap_or_default().to_string();
                    let sym = self.symbols.entry(name.clone()).or_default();
                    for (_, cond) in &scopes {
                        if let Some(c) = cond {
                            if !sym.depends.contains(c) {
                                sym.depends.push(c.clone());
                            }
                        }
                    }
                    if let Some(&c) = choice_stack.last() {
                        sym.choice = Some(c);
                        if !self.choices[c].contains(&name) {
                            self.choices[c].push(name.clone());
                        }
                    }
                    current = Some(name);
                    in_menu_header = false;
                    in_choice_header = false;
                }
                "choice" => {
                    self.choices.push(Vec::new());
                    choice_stack.push(self.choices.len() - 1);
                    scopes.push(("choice", None));
                    current = None;
                    in_choice_header = true;
                }
                "endchoice" => {
                    choice_stack.pop();
                    pop_scope(&mut scopes, "choice");
                    current = None;
                }
                "if" => {
                    scopes.push(("if", Some(line[2..].trim().to_string())));
                    current = None;
                }
                "endif" => {
                    pop_scope(&mut scopes, "if");
                    current = None;
                }
                "menu" => {
                    scopes.push(("menu", None));
                    current = None;
                    in_menu_header = true;
                }
                "endmenu" => {
                    pop_scope(&mut scopes, "menu");
                    current = None;
                }
                "source" | "comment" | "mainmenu" => {
                    current = None;
                    in_menu_header = false;
                    in_choice_header = false;
                }
                "help" | "---help---" => {
                    in_help = true;
                    help_indent = indent;
                }
                "depends" => {
                    let expr = line.trim_start_matches("depends").trim().trim_start_matches("on").trim().to_string();
                    if let Some(name) = &current {
                        let sym = self.symbols.entry(name.clone()).or_default();
                        if !sym.depends.contains(&expr) {
                            sym.depends.push(expr);
                        }
                    } else if in_menu_header || in_choice_header {
                        if let Some(last) = scopes.last_mut() {
                            last.1 = Some(expr);
                        }
                    }
                }
                "select" => {
                    if let (Some(name), Some(target)) = (&current, words.next()) {
                        self.selected_by.entry(target.to_string()).or_default().push(name.clone());
                    }
                }
                "bool" | "tristate" | "string" | "int" | "hex" | "def_bool" | "def_tristate" | "prompt" => {
                    if let Some(name) = &current {
                        let sym = self.symbols.entry(name.clone()).or_default();
                        let has_prompt = line[first.len()..].trim_start().starts_with('"');
                        if has_prompt && !first.starts_with("def_") {
                            sym.prompt = true;
                        }
                        if first != "prompt" {
                            sym.kind = first.trim_start_matches("def_").to_string();
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// The choice siblings of `name` (empty when it is in no choice).
    pub fn siblings(&self, name: &str) -> Vec<String> {
        let Some(c) = self.symbols.get(name).and_then(|s| s.choice) else { return Vec::new() };
        self.choices[c].iter().filter(|m| *m != name).cloned().collect()
    }
}

fn pop_scope(scopes: &mut Vec<(&str, Option<String>)>, kind: &str) {
    if let Some(at) = scopes.iter().rposition(|(k, _)| *k == kind) {
        scopes.truncate(at);
    }
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<std::path::PathBuf>) -> Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = path.strip_prefix(root).unwrap_or(&path).to_string_lossy().into_owned();
        if entry.file_type()?.is_dir() {
            let skip = ["Documentation", "tools", "samples", ".git", "debian"].contains(&rel.as_str())
                || (rel.starts_with("arch/") && rel.matches('/').count() == 1 && rel != "arch/x86");
            if !skip {
                collect(root, &path, out)?;
            }
        } else if name.starts_with("Kconfig") {
            out.push(path);
        }
    }
    Ok(())
}

/// A `.config` as symbol -> value (`y`, `m`, `"text"`, `42`); `is not set`
/// lines read as `n`.
pub fn parse_config(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# CONFIG_") {
            if let Some(name) = rest.strip_suffix(" is not set") {
                out.insert(name.to_string(), "n".to_string());
            }
        } else if let Some((name, value)) = line.strip_prefix("CONFIG_").and_then(|l| l.split_once('=')) {
            out.insert(name.to_string(), value.to_string());
        }
    }
    out
}

/// How a `set` value is written in a `.config` line for a symbol of `kind`.
pub fn config_line(name: &str, value: &str, kind: &str) -> String {
    if value == "n" {
        return format!("# CONFIG_{name} is not set");
    }
    if kind == "string" && !value.starts_with('"') {
        return format!("CONFIG_{name}=\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""));
    }
    format!("CONFIG_{name}={value}")
}

/// The fragment that applies `set`: each value, and for a choice member set
/// to `y` every sibling cleared.
pub fn set_fragment(k: &Kconfig, set: &BTreeMap<String, String>) -> String {
    let mut lines = Vec::new();
    let mut cleared = BTreeSet::new();
    for (name, value) in set {
        let kind = k.symbols.get(name).map(|s| s.kind.as_str()).unwrap_or("");
        lines.push(config_line(name, value, kind));
        if value == "y" {
            for sib in k.siblings(name) {
                if !set.contains_key(&sib) && cleared.insert(sib.clone()) {
                    lines.push(format!("# CONFIG_{sib} is not set"));
                }
            }
        }
    }
    lines.join("\n") + "\n"
}

/// Before building: every `set` symbol must exist on this version and be
/// settable. Each problem is one message naming the version and, when the
/// symbol was renamed, the name to use.
pub fn check_symbols(k: &Kconfig, version: &str, set: &BTreeMap<String, String>) -> Vec<String> {
    let mut problems = Vec::new();
    for name in set.keys() {
        let renamed = RENAMED.iter().find_map(|(old, new)| {
            if name == old {
                Some(*new)
            } else if name == new {
                Some(*old)
            } else {
                None
            }
        });
        let hint = renamed
            .filter(|other| k.symbols.get(*other).is_some_and(|s| s.prompt))
            .map(|other| format!("; on {version} set CONFIG_{other} instead"))
            .unwrap_or_default();
        match k.symbols.get(name) {
            None => problems.push(format!("CONFIG_{name} does not exist in Linux {version}{hint}")),
            Some(s) if !s.prompt => problems.push(format!(
                "CONFIG_{name} cannot be set in Linux {version}: it has no prompt (Kconfig derives it{}){hint}",
                match k.selected_by.get(name) {
                    Some(by) =>
                        format!(" from {}", by.iter().map(|s| format!("CONFIG_{s}")).collect::<Vec<_>>().join(", ")),
                    None => String::new(),
                }
            )),
            Some(_) => {}
        }
    }
    problems
}

/// After `make olddefconfig`: every `set` option read back from the final
/// config. A value Kconfig dropped is a message naming the option and why.
/// Options whose meaning changed between versions are named too.
pub fn check_readback(
    k: &Kconfig,
    version: &str,
    set: &BTreeMap<String, String>,
    final_config: &BTreeMap<String, String>,
) -> Vec<String> {
    let value_of = |name: &str| final_config.get(name).map(String::as_str).unwrap_or("n");
    let mut problems = Vec::new();
    for (name, wanted) in set {
        let kind = k.symbols.get(name).map(|s| s.kind.as_str()).unwrap_or("");
        let wanted_line = config_line(name, wanted, kind);
        let got = value_of(name);
        let got_line = config_line(name, got, kind);
        if wanted_line == got_line {
            continue;
        }
        let mut why = Vec::new();
        if let Some(sym) = k.symbols.get(name) {
            for dep in &sym.depends {
                let unmet: Vec<String> = identifiers(dep)
                    .into_iter()
                    .filter(|d| k.symbols.contains_key(d) && matches!(value_of(d), "n"))
                    .map(|d| format!("CONFIG_{d}"))
                    .collect();
                let negated_met: Vec<String> = negated(dep)
                    .into_iter()
                    .filter(|d| !matches!(value_of(d), "n"))
                    .map(|d| format!("CONFIG_{d}=y"))
                    .collect();
                if !unmet.is_empty() || !negated_met.is_empty() {
                    let mut parts = Vec::new();
                    if !unmet.is_empty() {
                        parts.push(format!("{} not set", unmet.join(", ")));
                    }
                    if !negated_met.is_empty() {
                        parts.push(negated_met.join(", "));
                    }
                    why.push(format!("unmet dependency `depends on {dep}` ({})", parts.join("; ")));
                }
            }
            if wanted == "n" {
                if let Some(by) = k.selected_by.get(name) {
                    let on: Vec<String> =
                        by.iter().filter(|s| value_of(s) != "n").map(|s| format!("CONFIG_{s}")).collect();
                    if !on.is_empty() {
                        why.push(format!("selected by {}", on.join(", ")));
                    }
                }
            }
            if sym.choice.is_some() && why.is_empty() {
                let chosen: Vec<String> = k
                    .siblings(name)
                    .into_iter()
                    .filter(|s| value_of(s) == "y")
                    .map(|s| format!("CONFIG_{s}"))
                    .collect();
                if !chosen.is_empty() {
                    why.push(format!("the choice kept {}", chosen.join(", ")));
                }
            }
        }
        if why.is_empty() {
            why.push("Kconfig did not honour it".to_string());
        }
        problems.push(format!(
            "CONFIG_{name} = {wanted} was dropped by Linux {version}'s Kconfig (the final config has `{got_line}`): {}",
            why.join("; ")
        ));
    }
    // Same name, other meaning: on kernels with PREEMPT_DYNAMIC, the
    // preemption choice only picks the boot-time default of a kernel built
    // preemptible (PREEMPT_BUILD), not a non-preemptible kernel as before 5.12.
    for model in ["PREEMPT_NONE", "PREEMPT_VOLUNTARY"] {
        if set.get(model).map(String::as_str) == Some("y")
            && value_of("PREEMPT_DYNAMIC") == "y"
            && !set.contains_key("PREEMPT_DYNAMIC")
        {
            let mode = model.trim_start_matches("PREEMPT_").to_lowercase();
            problems.push(format!(
                "CONFIG_{model} = y means something else in Linux {version}: with CONFIG_PREEMPT_DYNAMIC=y (kept on) \
                 it only picks the boot-time mode of a kernel built preemptible; for a kernel built without \
                 preemption also set PREEMPT_DYNAMIC = \"n\", or keep the dynamic kernel and say so with \
                 `vm.cmdline = [\"preempt={mode}\"]` (set PREEMPT_DYNAMIC = \"y\" to silence this)"
            ));
        }
    }
    problems
}

/// The symbol names of a dependency expression, except negated ones.
fn identifiers(expr: &str) -> Vec<String> {
    tokens(expr).into_iter().filter(|(neg, _)| !neg).map(|(_, t)| t).collect()
}

/// Symbols a dependency expression negates (`!FOO`).
fn negated(expr: &str) -> Vec<String> {
    tokens(expr).into_iter().filter(|(neg, _)| *neg).map(|(_, t)| t).collect()
}

fn tokens(expr: &str) -> Vec<(bool, String)> {
    let mut out = Vec::new();
    let bytes: Vec<char> = expr.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_alphanumeric() || c == '_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == '_') {
                i += 1;
            }
            let word: String = bytes[start..i].iter().collect();
            let neg = start > 0 && bytes[start - 1] == '!' && (start < 2 || bytes[start - 2] != '=');
            // Comparisons (`A = B`, `A != B`) are left out: too rare to explain here.
            let next = bytes[i..].iter().find(|c| !c.is_whitespace());
            let prev = bytes[..start].iter().rev().find(|c| !c.is_whitespace());
            let compared = matches!(next, Some('=') | Some('<') | Some('>'))
                || (matches!(prev, Some('=')) && !neg)
                || (next == Some(&'!') && bytes.get(i + 1) == Some(&'='));
            let literal = matches!(word.as_str(), "y" | "m" | "n") || word.chars().all(|c| c.is_ascii_digit());
            if !compared && !literal && word.chars().any(|c| c.is_ascii_uppercase()) {
                out.push((neg, word));
            }
        } else if c == '"' {
            i += 1;
            while i < bytes.len() && bytes[i] != '"' {
                i += 1;
            }
            i += 1;
        } else {
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SQUASHFS_5_10: &str = r#"
config SQUASHFS
	tristate "SquashFS 4.0 - Squashed file system support"
	depends on BLOCK
	help
	  Saying Y here includes support for SquashFS.
	  config FAKE in help text is not a symbol

choice
	prompt "Decompressor parallelisation options"
	depends on SQUASHFS
	default SQUASHFS_DECOMP_SINGLE

config SQUASHFS_DECOMP_SINGLE
	bool "Single threaded compression"

config SQUASHFS_DECOMP_MULTI_PERCPU
	bool "Use percpu multiple decompressors"
endchoice

if SQUASHFS
config SQUASHFS_XZ
	bool "Include support for XZ compressed file systems"
	select XZ_DEC
endif

config XZ_DEC
	tristate
"#;

    fn sets(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    #[test]
    fn choices_dependencies_and_prompts_are_read() {
        let mut k = Kconfig::default();
        k.parse(SQUASHFS_5_10);
        assert!(!k.symbols.contains_key("FAKE"), "help text is skipped");
        assert_eq!(k.siblings("SQUASHFS_DECOMP_SINGLE"), vec!["SQUASHFS_DECOMP_MULTI_PERCPU".to_string()]);
        assert_eq!(k.symbols["SQUASHFS_DECOMP_SINGLE"].depends, vec!["SQUASHFS".to_string()]);
        assert_eq!(k.symbols["SQUASHFS_XZ"].depends, vec!["SQUASHFS".to_string()]);
        assert!(k.symbols["SQUASHFS_XZ"].prompt && !k.symbols["XZ_DEC"].prompt);
        assert_eq!(k.selected_by["XZ_DEC"], vec!["SQUASHFS_XZ".to_string()]);
        let frag = set_fragment(&k, &sets(&[("SQUASHFS_DECOMP_MULTI_PERCPU", "y")]));
        assert_eq!(frag, "CONFIG_SQUASHFS_DECOMP_MULTI_PERCPU=y\n# CONFIG_SQUASHFS_DECOMP_SINGLE is not set\n");
    }

    #[test]
    fn unknown_hidden_and_renamed_symbols_are_named_with_the_version() {
        let mut k = Kconfig::default();
        k.parse(SQUASHFS_5_10);
        let p = check_symbols(&k, "5.10.262", &sets(&[("SQUASHFS_COMPILE_DECOMP_SINGLE", "y"), ("XZ_DEC", "y")]));
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p[0].contains("CONFIG_SQUASHFS_COMPILE_DECOMP_SINGLE does not exist in Linux 5.10.262"), "{p:?}");
        assert!(p[0].contains("set CONFIG_SQUASHFS_DECOMP_SINGLE instead"), "{p:?}");
        assert!(p[1].contains("no prompt") && p[1].contains("CONFIG_SQUASHFS_XZ"), "{p:?}");
    }

    #[test]
    fn a_dropped_option_names_the_unmet_dependency() {
        let mut k = Kconfig::default();
        k.parse(SQUASHFS_5_10);
        let config = parse_config("# CONFIG_SQUASHFS is not set\n# CONFIG_BLOCK is not set\n");
        let p = check_readback(&k, "5.10.262", &sets(&[("SQUASHFS_XZ", "y")]), &config);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].contains("CONFIG_SQUASHFS_XZ = y was dropped") && p[0].contains("CONFIG_SQUASHFS not set"),
            "{p:?}"
        );
        let config =
            parse_config("CONFIG_SQUASHFS=y\nCONFIG_SQUASHFS_XZ=y\nCONFIG_PREEMPT_DYNAMIC=y\nCONFIG_PREEMPT_NONE=y\n");
        assert!(check_readback(&k, "6.1", &sets(&[("SQUASHFS_XZ", "y")]), &config).is_empty());
        let p = check_readback(&k, "6.1.192", &sets(&[("PREEMPT_NONE", "y")]), &config);
        assert!(p.len() == 1 && p[0].contains("means something else in Linux 6.1.192"), "{p:?}");
        assert!(p[0].contains("preempt=none"), "{p:?}");
    }

    #[test]
    fn dependency_expressions_give_their_symbols() {
        assert_eq!(identifiers("BLOCK && (X86 || ARM) && !UML"), vec!["BLOCK", "X86", "ARM"]);
        assert_eq!(negated("BLOCK && !UML"), vec!["UML"]);
        assert!(identifiers("ARCH = \"x86\"").is_empty());
        assert_eq!(identifiers("64BIT || X86_PAE"), vec!["64BIT", "X86_PAE"]);
    }
}
