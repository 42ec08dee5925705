//! `fslab cleanup`: what was removed and what was left alone.

use crate::cleanup::CleanupReport;
use crate::report::Document;

impl Document for CleanupReport {
    fn what(&self) -> &'static str {
        "a cleanup report"
    }

    /// One line per thing; errors are on stderr, said as they happen.
    fn text(&self) -> String {
        let mut text = String::new();
        for item in &self.removed {
            text.push_str(&format!("removed {item}\n"));
        }
        for item in &self.in_use {
            text.push_str(&format!("left alone (its fslab is still running): {item}\n"));
        }
        for item in &self.not_ours {
            text.push_str(&format!("left alone (not made by fslab): {item}\n"));
        }
        if self.removed.is_empty() && self.errors.is_empty() {
            text.push_str("nothing to clean up\n");
        }
        text
    }
}
