//! Experiment tags: `key=value` labels (`fslab run --tag`, plus automatic
//! ones) that `history` and `compare --experiments` select experiments by.
//! A key may carry several values (a campaign run on three hosts has three
//! `hostname` tags). `fslab run` records the user's `--tag key=value` and
//! the automatic ones (kernel release, host name, fslab version, and
//! `machine`, a short hash of the hardware without the kernel); a user tag
//! replaces the automatic tag of the same key.

use std::path::Path;

use anyhow::{bail, Context, Result};

use super::sql::{params, Sql, Value};
use super::Store;
use crate::inspect::machine::Machine;

/// Tag key for the kernel release the experiment ran under.
pub const TAG_KERNEL: &str = "kernel";
/// Tag key for the host name of a machine that ran it.
pub const TAG_HOSTNAME: &str = "hostname";
/// Tag key for the fslab version that ran it.
pub const TAG_FSLAB: &str = "fslab";
/// Tag key for the hardware identity ([`Machine::hardware`], 12 hex digits).
pub const TAG_MACHINE: &str = "machine";

/// Parses `key=value` (as given to `--tag`). Keys are 1–64 characters of
/// `a-z`, `0-9`, `_`, `-`, `.`; values are any text (possibly empty) up to
/// 1024 bytes.
pub fn parse_tag(s: &str) -> Result<(String, String)> {
    let Some((key, value)) = s.split_once('=') else {
        bail!("tag {s:?} is not key=value");
    };
    check_tag(key, value)?;
    Ok((key.to_string(), value.to_string()))
}

fn check_tag(key: &str, value: &str) -> Result<()> {
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-' | '.');
    if key.is_empty() || key.len() > 64 || !key.chars().all(ok_char) {
        bail!("tag key {key:?} must be 1-64 characters of a-z, 0-9, '_', '-', '.'");
    }
    if value.len() > 1024 {
        bail!("tag {key}: value is {} bytes, more than 1024", value.len());
    }
    Ok(())
}

/// The tags fslab adds to every experiment a machine runs: kernel release,
/// host name and fslab version.
pub fn automatic_tags(machine: &Machine) -> Vec<(String, String)> {
    vec![
        (TAG_KERNEL.to_string(), machine.kernel_release.clone()),
        (TAG_HOSTNAME.to_string(), machine.hostname.clone()),
        (TAG_FSLAB.to_string(), env!("CARGO_PKG_VERSION").to_string()),
    ]
}

/// The automatic tags of this machine, with the testbed's disk under `backing`.
fn this_machine_tags(backing: &Path) -> Vec<(String, String)> {
    let existing = backing.ancestors().find(|p| p.exists()).unwrap_or(Path::new("/"));
    let m = Machine::capture(Some(existing));
    let mut tags = automatic_tags(&m);
    tags.push((TAG_MACHINE.to_string(), m.hardware().chars().take(12).collect()));
    tags
}

/// `user` tags plus the automatic ones whose key the user did not give.
fn merged(user: &[(String, String)], automatic: Vec<(String, String)>) -> Vec<(String, String)> {
    let mut tags = user.to_vec();
    tags.extend(automatic.into_iter().filter(|(k, _)| !user.iter().any(|(u, _)| u == k)));
    tags
}

pub(super) fn insert_tags(q: &mut dyn Sql, experiment_id: i64, tags: &[(String, String)]) -> Result<usize> {
    let mut added = 0;
    for (k, v) in tags {
        added += q.execute(
            "INSERT INTO experiment_tags (experiment_id, key, value) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
            params![experiment_id, k, v],
        )? as usize;
    }
    Ok(added)
}

pub(super) fn read_tags(q: &mut dyn Sql, experiment_id: i64) -> Result<Vec<(String, String)>> {
    q.query(
        "SELECT key, value FROM experiment_tags WHERE experiment_id = ?1
         ORDER BY key COLLATE BINARY, value COLLATE BINARY",
        params![experiment_id],
    )?
    .iter()
    .map(|r| Ok((r.get(0)?, r.get(1)?)))
    .collect()
}

impl Store {
    /// Adds tags to an experiment (a tag it already has is not repeated).
    pub fn add_tags(&mut self, experiment_id: i64, tags: &[(String, String)]) -> Result<()> {
        for (k, v) in tags {
            check_tag(k, v)?;
        }
        let loc = self.location();
        self.write(|q| {
            super::read::require_experiment(q, experiment_id, &loc)?;
            insert_tags(q, experiment_id, tags)
        })
        .with_context(|| format!("cannot tag experiment {experiment_id} in {loc}"))?;
        Ok(())
    }

    /// Records `user` and this machine's automatic tags (its disk under
    /// `workdir`) on experiment `experiment_id`: what `fslab run` tags.
    pub fn tag_experiment(&mut self, experiment_id: i64, user: &[(String, String)], workdir: &Path) -> Result<()> {
        self.add_tags(experiment_id, &merged(user, this_machine_tags(workdir)))
    }

    /// An experiment's tags, sorted by key then value.
    pub fn tags(&self, experiment_id: i64) -> Result<Vec<(String, String)>> {
        let loc = self.location();
        self.read(|q| read_tags(q, experiment_id))
            .with_context(|| format!("cannot read tags of experiment {experiment_id} from {loc}"))
    }

    /// Ids of the experiments that carry every one of `tags`, oldest first
    /// (all experiments when `tags` is empty).
    pub fn experiments_tagged(&self, tags: &[(String, String)]) -> Result<Vec<i64>> {
        let loc = self.location();
        let mut sql = String::from("SELECT e.id FROM experiments e");
        let mut params = Vec::new();
        for (i, (k, v)) in tags.iter().enumerate() {
            let (a, b) = (2 * i + 1, 2 * i + 2);
            sql.push_str(&format!(
                " JOIN experiment_tags t{i} ON t{i}.experiment_id = e.id AND t{i}.key = ?{a} AND t{i}.value = ?{b}"
            ));
            params.push(Value::from(k));
            params.push(Value::from(v));
        }
        sql.push_str(" ORDER BY e.id");
        self.read(|q| q.query(&sql, &params)?.iter().map(|r| r.get(0)).collect())
            .with_context(|| format!("cannot search tagged experiments in {loc}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_tag_replaces_the_automatic_one() {
        let auto = vec![("kernel".to_string(), "6.1".to_string()), ("fslab".to_string(), "1".to_string())];
        let user = vec![("kernel".to_string(), "6.18.4".to_string()), ("commit".to_string(), "abc".to_string())];
        let t = merged(&user, auto);
        assert_eq!(t.iter().filter(|(k, _)| k == "kernel").count(), 1);
        assert!(t.contains(&("kernel".into(), "6.18.4".into())) && t.contains(&("fslab".into(), "1".into())));
    }

    #[test]
    fn automatic_tags_name_this_machine() {
        let t = this_machine_tags(Path::new("/var/tmp/fslab-not-created/x"));
        for key in [TAG_KERNEL, TAG_HOSTNAME, TAG_FSLAB, TAG_MACHINE] {
            assert!(t.iter().any(|(k, v)| k == key && !v.is_empty()), "{key} missing in {t:?}");
        }
    }
}
