//! The layering of ARCHITECTURE.md's module map, checked against the code:
//! every module under `src/` (but `cli/`, `lib.rs` and `main.rs`, which sit
//! on top) is in the map; no module names a module of a higher layer, nor
//! one of its own layer that its row's "may use" column does not name,
//! through a `crate::` path (in `use` lines, `crate::{…}` groups or inline);
//! and no modules import each other, directly or around a longer loop.
//! Comments are not code: doc links may point anywhere. A module's unit-test
//! directory (`src/<module>/tests/`) exercises it with its callers and is not
//! checked. The statistics crate (`crates/stats`) has no dependency on fslab
//! at all, which Cargo enforces. Also its "Adding a kind" table: each list a
//! kind is registered in has its row, and the list is still where it says.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// One row of the module map.
#[derive(Debug, PartialEq)]
struct Row {
    layer: u32,
    /// The modules of its own layer its "may use" column names (`x` or
    /// `x::part`; a name after "not" is a refusal, not a permission).
    peers: BTreeSet<String>,
}

/// `x/`, `x.rs` or `x::{a, b}` as the module name `x`.
fn module_name(code: &str) -> &str {
    code.split("::").next().unwrap_or_default().trim_end_matches('/').trim_end_matches(".rs")
}

/// Module name → its row, from the `**Layer N: …**` tables of the module map.
fn module_map(architecture: &str) -> BTreeMap<String, Row> {
    let mut named: Vec<(String, u32, Vec<String>)> = Vec::new();
    let mut layer = None;
    for line in architecture.lines() {
        if line.starts_with("## ") && !named.is_empty() {
            break; // the map ends with its section
        }
        if let Some(rest) = line.strip_prefix("**Layer ") {
            layer = rest.split(':').next().and_then(|n| n.trim().parse::<u32>().ok());
            continue;
        }
        let (Some(layer), Some(cell)) = (layer, line.strip_prefix("| `")) else { continue };
        let name = module_name(cell.split('`').next().unwrap_or_default());
        if name == "module" {
            continue;
        }
        // The last cell; `what it is` may hold anything, "may use" holds no ` | `.
        let may_use = line.trim_end().trim_end_matches('|').rsplit(" | ").next().unwrap_or_default();
        let mut uses = Vec::new();
        let pieces: Vec<&str> = may_use.split('`').collect();
        for (i, code) in pieces.iter().enumerate().skip(1).step_by(2) {
            if !pieces[i - 1].trim_end().ends_with("not") {
                uses.push(module_name(code).to_string());
            }
        }
        named.push((name.to_string(), layer, uses));
    }
    let layers: BTreeMap<&str, u32> = named.iter().map(|(n, l, _)| (n.as_str(), *l)).collect();
    named
        .iter()
        .map(|(name, layer, uses)| {
            let peers = uses.iter().filter(|u| layers.get(u.as_str()) == Some(layer)).cloned().collect();
            (name.clone(), Row { layer: *layer, peers })
        })
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The modules a source text names through `crate::` (or `$crate::`), by
/// line: `crate::a::…` names `a`, `crate::{a, b::c}` (over several lines
/// too) names `a` and `b`.
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    // An open `crate::{` group: its line and the text read into it so far.
    let mut group: Option<(usize, String)> = None;
    for (n, line) in text.lines().enumerate() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        let code = code.split(" // ").next().unwrap_or_default();
        if let Some((start, mut text)) = group.take() {
            text.push_str(code);
            match group_names(&text) {
                Some(names) => out.extend(names.into_iter().map(|name| (start, name))),
                None => group = Some((start, text)),
            }
            continue;
        }
        for (i, _) in code.match_indices("crate::") {
            let preceded = code[..i].chars().next_back();
            if preceded.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue; // e.g. `fslab_crate::`
            }
            let rest = &code[i + "crate::".len()..];
            if rest.starts_with('{') {
                match group_names(rest) {
                    Some(names) => out.extend(names.into_iter().map(|name| (n + 1, name))),
                    None => group = Some((n + 1, rest.to_string())),
                }
                continue;
            }
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if !name.is_empty() {
                out.push((n + 1, name));
            }
        }
    }
    out
}

/// The first path segment of each item of the group `{a, b::{c, d}, e}`
/// that `text` starts with; None until the group is closed.
fn group_names(text: &str) -> Option<Vec<String>> {
    let mut names = Vec::new();
    let (mut depth, mut item) = (0, String::new());
    for c in text.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        if depth == 1 && (c == ',' || c == '{') || depth == 0 {
            let name: String = item.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if !name.is_empty() && !names.contains(&name) {
                names.push(name);
            }
            item.clear();
            if depth == 0 {
                return Some(names);
            }
        } else if depth == 1 {
            item.push(c);
        }
    }
    None
}

/// Every use against the map (`file:line: …`), then the import cycles
/// among the uses the map allows.
fn violations(root: &Path, architecture: &str) -> Vec<String> {
    let map = module_map(architecture);
    let src = root.join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut out = Vec::new();
    // module → module it uses → where it does first.
    let mut edges: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(&src).unwrap();
        let first = rel.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
        let module = first.trim_end_matches(".rs").to_string();
        if ["lib", "main", "cli"].contains(&module.as_str())
            || rel.components().nth(1).is_some_and(|c| c.as_os_str() == "tests")
        {
            continue;
        }
        let Some(own) = map.get(&module) else {
            out.push(format!("src/{}: module `{module}` is not in ARCHITECTURE.md's module map", rel.display()));
            continue;
        };
        let text = std::fs::read_to_string(&file).unwrap();
        for (line, used) in crate_paths(&text) {
            let at = format!("src/{}:{line}", rel.display());
            if used == module {
                continue;
            }
            let wrong = match map.get(&used) {
                Some(theirs) if theirs.layer > own.layer => {
                    format!("{at}: `{module}` (layer {}) uses `{used}` (layer {})", own.layer, theirs.layer)
                }
                Some(theirs) if theirs.layer == own.layer && !own.peers.contains(&used) => format!(
                    "{at}: `{module}` uses `{used}` of its own layer ({}), which its \"may use\" column does not name",
                    own.layer
                ),
                Some(_) => {
                    // Allowed by the map; loops of allowed uses are looked for below.
                    edges.entry(module.clone()).or_default().entry(used).or_insert(at);
                    continue;
                }
                None => format!("{at}: `{module}` uses `{used}`, which is not in ARCHITECTURE.md's module map"),
            };
            out.push(wrong);
        }
    }
    out.extend(cycles(&edges));
    out
}

/// Loops of imports as `import cycle: `a` → `b` (where a uses b) → `a`
/// (where b uses a)`: a shortest one from each module (by name) that no
/// loop shown so far passes through.
fn cycles(edges: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<String> {
    let reaches = |from: &str, to: &str| -> Option<Vec<String>> {
        // Breadth first, so the loop shown is a shortest one.
        let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = VecDeque::from([from]);
        while let Some(at) = queue.pop_front() {
            for next in edges.get(at).into_iter().flat_map(|e| e.keys()) {
                if next == to {
                    let mut path = vec![to.to_string(), at.to_string()];
                    let mut back = at;
                    while back != from {
                        back = came_from[back];
                        path.push(back.to_string());
                    }
                    path.reverse();
                    return Some(path);
                }
                if next != from && !came_from.contains_key(next.as_str()) {
                    came_from.insert(next, at);
                    queue.push_back(next);
                }
            }
        }
        None
    };
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::new();
    for module in edges.keys() {
        if seen.contains(module) {
            continue;
        }
        let Some(path) = reaches(module, module) else { continue };
        seen.extend(path.iter().cloned());
        let mut text = format!("import cycle: `{}`", path[0]);
        for pair in path.windows(2) {
            let _ = write!(text, " → `{}` ({})", pair[1], edges[&pair[0]][&pair[1]]);
        }
        out.push(text);
    }
    out
}

#[test]
fn every_import_follows_the_module_map() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let map = module_map(&architecture);
    for (module, layer) in [("sys", 0), ("stats", 0), ("record", 1), ("stored", 1), ("store", 2), ("runner", 4)] {
        assert_eq!(map.get(module).map(|r| r.layer), Some(layer), "the map was not read as expected: {map:?}");
    }
    // Peers come from the "may use" column: names of the same layer only.
    assert_eq!(map["history"].peers, BTreeSet::from(["report".to_string()]), "{map:?}");
    assert!(map["report"].peers.is_empty(), "report's \"(not `runner`)\" read as a permission: {map:?}");
    let found = violations(root, &architecture);
    assert!(found.is_empty(), "imports against ARCHITECTURE.md's module map:\n{}", found.join("\n"));
}

/// A tree of `src/` files and a module map, in a temporary directory.
fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join("src").join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

#[test]
fn a_lower_module_naming_a_higher_one_is_found() {
    let dir = tree(&[
        ("sys/mod.rs", "// crate::runner in a comment is fine\nuse crate::sys::x;\n"),
        ("sys/bad.rs", "fn f() {\n    let _ = crate::runner::run;\n}\n"),
        ("sys/grouped.rs", "use crate::{\n    sys::x,\n    runner::{a, b},\n};\n"),
        ("runner.rs", "use crate::sys::exec;\n"),
    ]);
    let map = "**Layer 0: x**\n\n| module | what | may use |\n| `sys/` | a | — |\n\n\
               **Layer 4: y**\n\n| `runner/` | b | all |\n\n## Next\n";
    assert_eq!(
        violations(dir.path(), map),
        vec![
            "src/sys/bad.rs:2: `sys` (layer 0) uses `runner` (layer 4)".to_string(),
            "src/sys/grouped.rs:1: `sys` (layer 0) uses `runner` (layer 4)".to_string(),
        ]
    );
}

#[test]
fn a_module_of_the_same_layer_needs_its_row_to_name_it() {
    let dir = tree(&[
        ("report.rs", "use crate::store::x;\n"),
        ("history/mod.rs", "use crate::report::render;\n"),
        ("runner.rs", "fn f() {\n    crate::history::tags::record();\n}\n"),
        ("store.rs", ""),
    ]);
    // `runner` may use the layers below only; "not `runner`" forbids, it does not permit.
    let map = "**Layer 2: s**\n\n| module | what | may use |\n| `store/` | s | — |\n\n\
               **Layer 4: o**\n\n| `report/` | r | layers 0–3 (not `runner`) |\n\
               | `history/` | h | layers 0–3, `report` |\n| `runner/` | x, `history` | layers 0–3 |\n\n## Next\n";
    assert_eq!(
        violations(dir.path(), map),
        vec![
            "src/runner.rs:2: `runner` uses `history` of its own layer (4), which its \"may use\" column does not name"
                .to_string()
        ]
    );
    assert!(module_map(map)["report"].peers.is_empty());
}

#[test]
fn modules_that_import_each_other_are_a_cycle_even_when_both_rows_allow_it() {
    let dir = tree(&[
        ("testbed/mod.rs", "pub media: Option<crate::media::host::MediaServer>,\n"),
        ("media/host.rs", "fn stop() {\n    crate::testbed::mount::unmount(p);\n}\n"),
        ("vm/mod.rs", "use crate::a::x;\n"),
        ("a.rs", "use crate::b::y;\n"),
        ("b.rs", "use crate::vm::z;\n"),
    ]);
    let map = "**Layer 2: stages**\n\n| module | what | may use |\n\
               | `testbed/` | t | layers 0–1, `media` |\n| `media/` | m | `testbed::{mount, loopdev}` |\n\
               | `vm/` | v | `a` |\n| `a` | a | `b` |\n| `b` | b | `vm` |\n\n## Next\n";
    assert_eq!(
        violations(dir.path(), map),
        vec![
            "import cycle: `a` → `b` (src/a.rs:1) → `vm` (src/b.rs:1) → `a` (src/vm/mod.rs:1)".to_string(),
            "import cycle: `media` → `testbed` (src/media/host.rs:2) → `media` (src/testbed/mod.rs:1)".to_string(),
        ]
    );
}

/// The rows of ARCHITECTURE.md's "Adding a kind" table, as `(kind, the rest
/// of the row)`.
fn kind_rows(architecture: &str) -> Vec<(String, String)> {
    let section = architecture.split("\n## Adding a kind\n").nth(1).unwrap_or_default();
    let section = section.split("\n## ").next().unwrap_or_default();
    section
        .lines()
        .filter_map(|line| line.strip_prefix("| "))
        .filter_map(|row| row.split_once(" | "))
        .filter(|(kind, _)| *kind != "kind" && !kind.starts_with("---"))
        .map(|(kind, rest)| (kind.to_string(), rest.to_string()))
        .collect()
}

/// Every list a pluggable kind is registered in: `(kind, the list as the
/// table names it, the file that defines it, how the definition starts)`.
/// A kernel source is the next to get its row.
const KIND_LISTS: &[(&str, &str, &str, &str)] = &[
    ("workload", "workload_kinds!", "src/workload/mod.rs", "macro_rules! workload_kinds"),
    ("filesystem", "filesystems!", "src/testbed/filesystem/mod.rs", "macro_rules! filesystems"),
    ("filesystem internals", "internals!", "src/fsinternal/mod.rs", "macro_rules! internals"),
    ("output format", "Format", "src/report/mod.rs", "pub enum Format"),
    ("monitor", "monitors!", "src/runner/monitors/mod.rs", "macro_rules! monitors"),
    ("VM request", "KINDS", "src/vm/kinds/mod.rs", "const KINDS"),
    ("media model", "MODELS", "src/media/mod.rs", "pub const MODELS"),
    ("kernel source", "kernel_sources!", "src/kernel/source/mod.rs", "macro_rules! kernel_sources"),
];

#[test]
fn every_kind_list_has_its_row_in_adding_a_kind() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let rows = kind_rows(&architecture);
    assert!(rows.iter().any(|(k, _)| k == "workload"), "the table was not read: {rows:?}");
    let mut wrong = Vec::new();
    for (kind, list, file, definition) in KIND_LISTS {
        let code = std::fs::read_to_string(root.join(file)).unwrap();
        if !code.contains(definition) {
            wrong.push(format!("{file} no longer defines `{list}` (`{definition}`)"));
        }
        match rows.iter().find(|(k, _)| k == kind) {
            None => wrong.push(format!("no \"Adding a kind\" row for a {kind} (its list: `{list}` in {file})")),
            Some((_, row)) if !row.contains(&format!("`{list}`")) => {
                wrong.push(format!("the \"Adding a kind\" row for a {kind} does not name its list `{list}`"))
            }
            Some(_) => {}
        }
    }
    assert!(wrong.is_empty(), "ARCHITECTURE.md's \"Adding a kind\" against the code:\n{}", wrong.join("\n"));
}
