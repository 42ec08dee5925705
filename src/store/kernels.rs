//! What a store's experiments need of a kernel cache, for `fslab kernel
//! prune`: each kernel variant's recorded source names its cache entries
//! and trees ([`crate::kernel::KernelSource::keeps`]), its image and config
//! paths name the entries they lie in.

use std::path::Path;

use anyhow::Result;

use super::Store;
use crate::kernel::prune::Needs;

impl Store {
    /// Add what this store's experiments need to `needs`; how many
    /// experiments it holds.
    pub fn kernel_needs(&self, needs: &mut Needs) -> Result<usize> {
        let list = self.list_experiments()?;
        for e in &list {
            let exp = self.experiment(e.id)?;
            let mut untyped = false;
            for k in exp.environment.kernels.values().filter(|k| k.place == "vm") {
                match &k.origin {
                    Some(origin) => needs.names.extend(origin.keeps().into_iter().filter(|n| !n.is_empty())),
                    None => untyped = true,
                }
                for path in k.image.iter().map(|p| p.as_path()).chain(k.config_source.as_deref().map(Path::new)) {
                    needs.add_path(path);
                }
            }
            // Stored before kernels recorded their kind: whatever their
            // documents name is kept.
            if untyped {
                needs.legacy_text.push_str(&serde_json::to_string(&exp.environment)?);
                needs.legacy_text.push_str(&serde_json::to_string(&exp.plan)?);
            }
        }
        Ok(list.len())
    }
}
