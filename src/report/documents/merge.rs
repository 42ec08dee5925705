//! `fslab merge`: what each source store added to the target.

use serde::Serialize;

use crate::report::Document;
use crate::store::merge::MergeReport;

#[derive(Debug, Serialize)]
pub struct MergeSummary {
    /// The target store (a URL's password redacted).
    pub into: String,
    pub sources: Vec<MergedSource>,
}

#[derive(Debug, Serialize)]
pub struct MergedSource {
    pub source: String,
    pub merged: MergeReport,
}

impl Document for MergeSummary {
    fn what(&self) -> &'static str {
        "a merge summary"
    }

    fn text(&self) -> String {
        self.sources.iter().map(|s| format!("{}: {}\n", s.source, s.merged)).collect()
    }
}
