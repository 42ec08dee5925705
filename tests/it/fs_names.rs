//! A filesystem with internals is one file in `src/fsinternal/` (plus its
//! testbed kind in `src/testbed/filesystem/`): no other code matches on its
//! type name. This scans `src/` for the quoted type names
//! (`fslab::fsinternal::types()`, so a new filesystem is covered by its
//! list line) outside those two files and unit tests, and fails on any
//! that is not in [`ALLOWED`], which says why each one names a filesystem.

use std::path::{Path, PathBuf};

/// `(file, text on the same line, why the line may name a filesystem)`.
const ALLOWED: &[(&str, &str, &str)] = &[
    (
        "src/inspect/facts/gather.rs",
        r#""f2fs", "bcachefs""#,
        "KNOWN_FS_TYPES: every type the kernel may name, to check an offline `--fs`; data, not behaviour",
    ),
    (
        "src/inspect/facts/model.rs",
        r#"fs.fstype.is_empty() || fs.fstype == "ext4""#,
        "derived doctor fact ext4.groups (estimated from the size with mke2fs defaults); it needs the doctor's \
         model (kernel version, mount options), which fsinternal, a layer below, cannot see",
    ),
    (
        "src/inspect/facts/model.rs",
        r#".filter(|f| f.fstype == "ext4")"#,
        "derived doctor fact ext4.mb_optimize_scan (kernel default by version and group count), as above",
    ),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            // A module's unit-test directory exercises it with its callers.
            if path.file_name().is_some_and(|n| n != "tests") {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `file:line: text` for every line of non-test code outside a type's own
/// files that quotes the type and is not allowed.
fn strays(root: &Path, types: &[(&str, &str)]) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let rel = file.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            // Unit tests sit at the end of a file, after `#[cfg(test)]`.
            if line.trim_start().starts_with("#[cfg(test)]") {
                break;
            }
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            for (fstype, module) in types {
                let own = [format!("src/fsinternal/{module}.rs"), format!("src/testbed/filesystem/{module}.rs")];
                if !code.contains(&format!("\"{fstype}\"")) || own.contains(&rel) {
                    continue;
                }
                if ALLOWED.iter().any(|(f, on, _)| *f == rel && code.contains(on)) {
                    continue;
                }
                out.push(format!("{rel}:{}: `{fstype}`: {}", n + 1, code.trim()));
            }
        }
    }
    out
}

#[test]
fn filesystems_with_internals_are_named_only_in_their_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let types = fslab::fsinternal::types();
    for t in ["ext4", "ext3", "xfs", "btrfs"] {
        assert!(types.iter().any(|(name, _)| *name == t), "{t} not in fsinternal::types(): {types:?}");
    }
    let found = strays(root, &types);
    assert!(
        found.is_empty(),
        "a filesystem with internals is named outside its src/fsinternal/ and src/testbed/filesystem/ files \
         (look it up in fsinternal's list instead, or add the line to ALLOWED with the reason):\n{}",
        found.join("\n")
    );
    // Each allowance still matches a line, so the list cannot go stale.
    for (file, on, why) in ALLOWED {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        assert!(text.contains(on), "ALLOWED entry for {file} ({why}) matches no line any more: {on}");
    }
}

/// The scan itself: a stray match arm is found, its own file is not.
#[test]
fn the_name_scan_finds_a_stray_match_arm() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("fsinternal")).unwrap();
    std::fs::write(src.join("fsinternal/xfs.rs"), "const NAME: &str = \"xfs\";\n").unwrap();
    std::fs::write(
        src.join("elsewhere.rs"),
        "fn f(t: &str) {\n    match t {\n        \"xfs\" => {}\n        _ => {}\n    }\n}\n// \"xfs\" in a comment\n#[cfg(test)]\nmod tests { const T: &str = \"xfs\"; }\n",
    )
    .unwrap();
    let found = strays(dir.path(), &[("xfs", "xfs")]);
    assert_eq!(found, vec!["src/elsewhere.rs:3: `xfs`: \"xfs\" => {}".to_string()]);
}
