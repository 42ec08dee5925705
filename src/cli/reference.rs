//! Reference text generated from the code, so the docs cannot drift from
//! it: the README's workload, filesystem, key and command tables come from
//! the kind registries (`workload_kinds!`, `filesystems!`), the experiment
//! file's key structs (their field doc comments) and clap. Each sits
//! between `<!-- generated:NAME -->` and `<!-- end:NAME -->` in the file it
//! belongs to. The test below fails when committed text is stale;
//! `FSLAB_UPDATE_DOCS=1 cargo test -p fslab --bin fslab reference` rewrites
//! it (uv's `generate-cli-reference` shape).

use std::fmt::Write as _;

use clap::CommandFactory;
use documented::DocumentedFieldsOpt;
use fslab::experiment::spec::{TopKeys, VariantKeys, WorkloadKeys};
use fslab::testbed::filesystem;
use fslab::workload;

/// A generated block: the file it lives in, its marker name, its text.
pub struct Block {
    pub file: &'static str,
    pub name: &'static str,
    pub text: String,
}

/// Every generated block.
pub fn blocks() -> Vec<Block> {
    vec![
        Block { file: "README.md", name: "workloads", text: workloads() },
        Block { file: "docs/workloads.md", name: "workloads", text: workloads() },
        Block { file: "README.md", name: "filesystems", text: filesystems() },
        Block { file: "README.md", name: "keys", text: keys() },
        Block { file: "README.md", name: "commands", text: commands() },
    ]
}

fn code_list(names: &[&str]) -> String {
    names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
}

/// A table cell: one line, with `|` escaped.
fn cell(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|")
}

fn workloads() -> String {
    let mut out = String::from("| kind | what | metrics | own keys |\n| --- | --- | --- | --- |\n");
    for kind in workload::KINDS {
        let ro = if kind.read_only { "; also on read-only images" } else { "" };
        let _ = writeln!(
            out,
            "| `{}` | {}{ro} | {} | {} |",
            kind.name,
            cell(kind.about),
            cell(kind.metrics),
            code_list((kind.keys)())
        );
    }
    out
}

fn filesystems() -> String {
    let mut out = String::from("| `fs =` | what | own keys |\n| --- | --- | --- |\n");
    for fs in filesystem::all() {
        let name = if fs.name() == "dir" { "dir:/path".to_string() } else { fs.name().to_string() };
        let keys = fs.image().map_or_else(|| "–".to_string(), |image| code_list(image.keys()));
        let _ = writeln!(out, "| `{name}` | {} | {keys} |", cell(fs.about()));
    }
    out
}

fn key_rows<T: DocumentedFieldsOpt>(out: &mut String, place: &str) {
    for (name, doc) in T::FIELD_NAMES.iter().zip(T::FIELD_DOCS) {
        let _ = writeln!(out, "| {place} | `{name}` | {} |", cell(doc.unwrap_or("")));
    }
}

fn keys() -> String {
    let mut out = String::from("| where | key | meaning |\n| --- | --- | --- |\n");
    key_rows::<TopKeys>(&mut out, "top");
    key_rows::<VariantKeys>(&mut out, "`[defaults]`, `[[variant]]`");
    for fs in filesystem::all() {
        if let Some(image) = fs.image() {
            let _ = writeln!(
                out,
                "| `[[variant]]` with `fs = \"{}\"` | {} | how the image is packed |",
                fs.name(),
                code_list(image.keys())
            );
        }
    }
    key_rows::<WorkloadKeys>(&mut out, "`[[workload]]`");
    for kind in workload::KINDS {
        let keys = (kind.keys)();
        if !keys.is_empty() {
            let _ = writeln!(
                out,
                "| `[[workload]]` with `kind = \"{}\"` | {} | see Workloads |",
                kind.name,
                code_list(keys)
            );
        }
    }
    out
}

/// The arguments of a command as users write them: positionals, then
/// `--long` flags, hidden ones left out.
fn arguments(cmd: &clap::Command) -> String {
    let mut parts = Vec::new();
    for arg in cmd.get_positionals().filter(|a| !a.is_hide_set()) {
        let name = arg.get_value_names().and_then(|v| v.first()).map_or(arg.get_id().as_str(), |v| v.as_str());
        parts.push(format!("`{name}`"));
    }
    for arg in
        cmd.get_opts().chain(cmd.get_arguments().filter(|a| a.get_long().is_some() && !a.get_action().takes_values()))
    {
        if arg.is_hide_set() || arg.get_long().is_none() {
            continue;
        }
        let flag = format!("`--{}`", arg.get_long().unwrap_or_default());
        if !parts.contains(&flag) {
            parts.push(flag);
        }
    }
    let subcommands: Vec<String> =
        cmd.get_subcommands().filter(|s| !s.is_hide_set()).map(|s| format!("`{}`", s.get_name())).collect();
    if !subcommands.is_empty() {
        parts.insert(0, subcommands.join(" \\| "));
    }
    parts.join(" ")
}

fn commands() -> String {
    let cli = crate::cli::Cli::command();
    let mut out = String::from("| command | what | arguments |\n| --- | --- | --- |\n");
    for cmd in cli.get_subcommands().filter(|c| !c.is_hide_set() && c.get_name() != "help") {
        let about = cmd.get_about().map(|a| a.to_string()).unwrap_or_default();
        let _ = writeln!(out, "| `fslab {}` | {} | {} |", cmd.get_name(), cell(&about), arguments(cmd));
    }
    out
}

/// `text` with the block `name` replaced by `body`; an error when the
/// markers are missing.
pub fn splice(text: &str, name: &str, body: &str) -> Result<String, String> {
    let open = format!("<!-- generated:{name} -->\n");
    let close = format!("<!-- end:{name} -->");
    let start = text.find(&open).ok_or_else(|| format!("no `{}` marker", open.trim_end()))? + open.len();
    let end = start + text[start..].find(&close).ok_or_else(|| format!("no `{close}` marker"))?;
    Ok(format!("{}{body}{}", &text[..start], &text[end..]))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// Fails when a generated block in the committed docs differs from what
    /// the code generates now; `FSLAB_UPDATE_DOCS=1` rewrites them instead.
    #[test]
    fn reference_docs_match_the_code() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let update = std::env::var_os("FSLAB_UPDATE_DOCS").is_some();
        let mut stale = Vec::new();
        for block in blocks() {
            let path = root.join(block.file);
            let text = std::fs::read_to_string(&path).unwrap();
            let fresh = splice(&text, block.name, &block.text).unwrap_or_else(|e| panic!("{}: {e}", block.file));
            if fresh != text {
                if update {
                    std::fs::write(&path, fresh).unwrap();
                } else {
                    stale.push(format!("{} ({})", block.file, block.name));
                }
            }
        }
        assert!(
            stale.is_empty(),
            "generated docs are stale: {}; run FSLAB_UPDATE_DOCS=1 cargo test -p fslab --bin fslab reference",
            stale.join(", ")
        );
    }

    /// Every key of the experiment file has a meaning in its doc comment.
    #[test]
    fn every_key_is_documented() {
        fn undocumented<T: DocumentedFieldsOpt>() -> Vec<&'static str> {
            T::FIELD_NAMES
                .iter()
                .zip(T::FIELD_DOCS)
                .filter(|(_, d)| d.is_none_or(|d| d.trim().is_empty()))
                .map(|(n, _)| *n)
                .collect()
        }
        let mut missing = undocumented::<TopKeys>();
        missing.extend(undocumented::<VariantKeys>());
        missing.extend(undocumented::<WorkloadKeys>());
        assert!(missing.is_empty(), "keys without a doc comment: {missing:?}");
        // The names are the ones serde reads (no renames), so the table is what users write.
        assert_eq!(TopKeys::FIELD_NAMES, fslab::keys::names::<TopKeys>());
        assert_eq!(VariantKeys::FIELD_NAMES, fslab::keys::names::<VariantKeys>());
        assert_eq!(WorkloadKeys::FIELD_NAMES, fslab::keys::names::<WorkloadKeys>());
    }

    #[test]
    fn splice_replaces_only_the_named_block() {
        let text = "a\n<!-- generated:x -->\nold\n<!-- end:x -->\nb\n";
        assert_eq!(splice(text, "x", "new\n").unwrap(), "a\n<!-- generated:x -->\nnew\n<!-- end:x -->\nb\n");
        assert!(splice(text, "y", "new\n").is_err());
    }
}
