//! `--quick`: the same experiment, scaled down to finish in a minute or two.
//!
//! Shipped examples are sized to be meaningful (minutes); tests and a
//! first look want the same shape, smaller: two repetitions, and each
//! workload kind's own idea of small ([`crate::workload::Kind::quick`]).

use super::{Experiment, Repetitions};

/// Scale `exp` down in place. The name and hash change so a quick run is
/// never resumed as (or compared with) the full one by accident.
pub fn make_quick(exp: &mut Experiment) {
    exp.name.push_str(" (quick)");
    exp.spec_hash.push_str("+quick");
    exp.repetitions = Repetitions::Fixed(2);
    for workload in &mut exp.workloads {
        workload.params.quick();
    }
}
