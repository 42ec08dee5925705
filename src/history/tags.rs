//! The tags `fslab run` records on an experiment: the user's `--tag
//! key=value` and the automatic ones (kernel release, host name, fslab
//! version, and `machine`, a short hash of the hardware without the kernel).
//! A user tag replaces the automatic tag of the same key.

use std::path::Path;

use anyhow::Result;

use crate::inspect::machine::Machine;
use crate::store::{automatic_tags, Store};

/// Tag key for the hardware identity ([`Machine::hardware`], 12 hex digits).
pub const TAG_MACHINE: &str = "machine";

/// The automatic tags of this machine, with the testbed's disk under `backing`.
pub fn automatic(backing: &Path) -> Vec<(String, String)> {
    let existing = backing.ancestors().find(|p| p.exists()).unwrap_or(Path::new("/"));
    let m = Machine::capture(Some(existing));
    let mut tags = automatic_tags(&m);
    tags.push((TAG_MACHINE.to_string(), m.hardware().chars().take(12).collect()));
    tags
}

/// `user` tags plus the automatic ones whose key the user did not give.
pub fn merged(user: &[(String, String)], automatic: Vec<(String, String)>) -> Vec<(String, String)> {
    let mut tags = user.to_vec();
    tags.extend(automatic.into_iter().filter(|(k, _)| !user.iter().any(|(u, _)| u == k)));
    tags
}

/// Records `user` and the automatic tags on experiment `id` (the runner's hook).
pub fn record(store: &mut Store, id: i64, user: &[(String, String)], workdir: &Path) -> Result<()> {
    store.add_tags(id, &merged(user, automatic(workdir)))
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
        let t = automatic(Path::new("/var/tmp/fslab-not-created/x"));
        for key in ["kernel", "hostname", "fslab", "machine"] {
            assert!(t.iter().any(|(k, v)| k == key && !v.is_empty()), "{key} missing in {t:?}");
        }
    }
}
