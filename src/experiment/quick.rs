//! `--quick`: the same experiment, scaled down to finish in a minute or two.
//!
//! Shipped examples are sized to be meaningful (minutes); tests and a
//! first look want the same shape, smaller: two repetitions, short
//! durations, smaller data, the first two sweep points.

use std::time::Duration;

use super::{Experiment, Repetitions, WorkloadParams};

/// Longest measured duration a quick run keeps for timed workloads.
const QUICK_DURATION: Duration = Duration::from_secs(3);

/// Scale `exp` down in place. The name and hash change so a quick run is
/// never resumed as (or compared with) the full one by accident.
pub fn make_quick(exp: &mut Experiment) {
    exp.name.push_str(" (quick)");
    exp.spec_hash.push_str("+quick");
    exp.repetitions = Repetitions::Fixed(2);
    for workload in &mut exp.workloads {
        match &mut workload.params {
            WorkloadParams::Untar { scale, .. } => *scale = scale.min(0.1),
            WorkloadParams::Shell1 { concurrency, duration } => {
                concurrency.truncate(2);
                *duration = (*duration).min(QUICK_DURATION);
            }
            WorkloadParams::Filemix { users, duration, .. } => {
                users.truncate(2);
                *duration = (*duration).min(QUICK_DURATION);
            }
            WorkloadParams::Coldstart { files, readers, .. } => {
                readers.truncate(2);
                *files = (*files).min(60);
            }
            WorkloadParams::Metadata { files, dirs, .. } => {
                *files = (*files).min(2000);
                *dirs = (*dirs).min(*files);
            }
            WorkloadParams::Fio { job: super::FioJob::Inline { options, .. } } => {
                for (key, value) in options.iter_mut() {
                    if key == "runtime" {
                        *value = "3".to_string();
                    }
                }
            }
            _ => {}
        }
    }
}
