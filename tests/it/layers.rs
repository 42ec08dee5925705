//! The layering of ARCHITECTURE.md's module map, checked against the code:
//! every module under `src/` (but `cli/`, `lib.rs` and `main.rs`, which sit
//! on top) is in the map, and no module names a module of a higher layer
//! through a `crate::` path (in `use` lines or inline). Comments are not
//! code: doc links may point anywhere. A module's unit-test directory
//! (`src/<module>/tests/`) exercises it with its callers and is not
//! checked. The statistics crate
//! (`crates/stats`) has no dependency on fslab at all, which Cargo enforces.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Module name → layer, from the `**Layer N: …**` tables of the module map.
fn layers(architecture: &str) -> BTreeMap<String, u32> {
    let mut out = BTreeMap::new();
    let mut layer = None;
    for line in architecture.lines() {
        if line.starts_with("## ") && !out.is_empty() {
            break; // the map ends with its section
        }
        if let Some(rest) = line.strip_prefix("**Layer ") {
            layer = rest.split(':').next().and_then(|n| n.trim().parse::<u32>().ok());
            continue;
        }
        let (Some(layer), Some(cell)) = (layer, line.strip_prefix("| `")) else { continue };
        let Some(name) = cell.split('`').next() else { continue };
        let name = name.trim_end_matches('/').trim_end_matches(".rs");
        if name != "module" {
            out.insert(name.to_string(), layer);
        }
    }
    out
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

/// The modules a source text names through `crate::` (or `$crate::`), by line.
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        let code = code.split(" // ").next().unwrap_or_default();
        for (i, _) in code.match_indices("crate::") {
            let preceded = code[..i].chars().next_back();
            if preceded.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue; // e.g. `fslab_crate::`
            }
            let name: String =
                code[i + "crate::".len()..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if !name.is_empty() {
                out.push((n + 1, name));
            }
        }
    }
    out
}

/// Every import of a higher layer, as `file:line: a (layer 1) uses b (layer 2)`.
fn violations(root: &Path, architecture: &str) -> Vec<String> {
    let layers = layers(architecture);
    let src = root.join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let rel = file.strip_prefix(&src).unwrap();
        let first = rel.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
        let module = first.trim_end_matches(".rs").to_string();
        if ["lib", "main", "cli"].contains(&module.as_str())
            || rel.components().nth(1).is_some_and(|c| c.as_os_str() == "tests")
        {
            continue;
        }
        let Some(&own) = layers.get(&module) else {
            out.push(format!("src/{}: module `{module}` is not in ARCHITECTURE.md's module map", rel.display()));
            continue;
        };
        let text = std::fs::read_to_string(&file).unwrap();
        for (line, used) in crate_paths(&text) {
            match layers.get(&used) {
                Some(&theirs) if theirs > own => out.push(format!(
                    "src/{}:{line}: `{module}` (layer {own}) uses `{used}` (layer {theirs})",
                    rel.display()
                )),
                None if used != module => out.push(format!(
                    "src/{}:{line}: `{module}` uses `{used}`, which is not in ARCHITECTURE.md's module map",
                    rel.display()
                )),
                _ => {}
            }
        }
    }
    out
}

#[test]
fn no_module_uses_a_higher_layer() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let layers = layers(&architecture);
    for (module, layer) in [("sys", 0), ("stats", 0), ("record", 1), ("stored", 1), ("store", 2), ("runner", 4)] {
        assert_eq!(layers.get(module), Some(&layer), "the map was not read as expected: {layers:?}");
    }
    let found = violations(root, &architecture);
    assert!(found.is_empty(), "imports against ARCHITECTURE.md's layers:\n{}", found.join("\n"));
}

#[test]
fn a_lower_module_naming_a_higher_one_is_found() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src/sys")).unwrap();
    std::fs::write(dir.path().join("src/sys/mod.rs"), "// crate::runner in a comment is fine\nuse crate::sys::x;\n")
        .unwrap();
    std::fs::write(dir.path().join("src/sys/bad.rs"), "fn f() {\n    let _ = crate::runner::run;\n}\n").unwrap();
    std::fs::write(dir.path().join("src/runner.rs"), "use crate::sys::exec;\n").unwrap();
    let map = "**Layer 0: x**\n\n| module | what | may use |\n| `sys/` | a | — |\n\n\
               **Layer 4: y**\n\n| `runner/` | b | all |\n\n## Next\n";
    assert_eq!(
        violations(dir.path(), map),
        vec!["src/sys/bad.rs:2: `sys` (layer 0) uses `runner` (layer 4)".to_string()]
    );
}
