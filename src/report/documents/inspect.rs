//! `fslab doctor` and `fslab kconfig diff`: their text is the inspect
//! types' own `Display`.

use crate::inspect::{DoctorReport, KconfigDiff};
use crate::report::Document;

impl Document for DoctorReport {
    fn what(&self) -> &'static str {
        "a doctor report"
    }

    fn text(&self) -> String {
        self.to_string()
    }
}

impl Document for KconfigDiff {
    fn what(&self) -> &'static str {
        "a kconfig diff"
    }

    fn text(&self) -> String {
        self.to_string()
    }
}
