//! The guest side of a VM run: the `run` request the guest agent answers.
//! The host sends one planned run (variant, workload, seed, where the
//! cache is); the same fslab binary builds the workload, provisions the
//! testbed on the VM's testbed disk and runs it exactly as the host path
//! does ([`single::execute`]), and the run record travels back as JSON.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::single::{self, RunEnv};
use crate::experiment::{PlannedRun, VariantConfig, WorkloadConfig};
use crate::record::RunPlace;

/// The request kind.
pub const RUN: &str = "run";

/// Testbed directories inside the guest: its `/tmp` is guest memory
/// (virtme-ng overlays it), never the host's shared root.
const GUEST_WORKDIR: &str = "/tmp/fslab-guest";

/// One planned run, as the host sends it.
#[derive(Debug, Serialize, Deserialize)]
pub struct GuestRun {
    pub planned: PlannedRun,
    pub variant: VariantConfig,
    pub workload: WorkloadConfig,
    pub seed: u64,
    /// The host's input cache, visible read-only in the guest.
    pub cache_dir: PathBuf,
    pub sample_interval: Duration,
    /// The testbed disk in the guest (`/dev/vda`).
    pub device: Option<PathBuf>,
    /// The disk is served through a media model on the host: where to ask
    /// for its account (the exchange directory).
    #[serde(default)]
    pub media_relay: Option<PathBuf>,
    /// The read-only image the host packed (on the disk already, or to
    /// copy onto it from the cache).
    #[serde(default)]
    pub image: Option<crate::testbed::image::PreparedImage>,
}

/// The `run` handler: one run, its record as JSON. A failed run is a
/// record with status `failed`, not an error; an error means the request
/// itself was broken.
pub fn handle(body: Value) -> Result<Value> {
    let mut request: GuestRun = serde_json::from_value(body).context("the run request is not a guest run")?;
    if let (Some(spec), Some(device)) = (request.variant.testbed.device.take(), &request.device) {
        // The host serves this disk through the model (`VmConfig::disk_media`,
        // its evidence taken there): here it is an ordinary disk, shaped
        // like the host's loop device in front of a served image.
        let name = crate::sys::blockdev::kernel_name(device)?;
        let hw_limit = std::fs::read_to_string(format!("/sys/block/{name}/queue/max_hw_sectors_kb"))
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok());
        for (key, mut value) in spec.queue_settings() {
            if let (Some(limit), Ok(wanted)) = (hw_limit.filter(|_| key == "max_sectors_kb"), value.parse::<u64>()) {
                value = wanted.min(limit).to_string();
            }
            crate::testbed::tuning::set_queue(&name, key, &value)
                .with_context(|| format!("shaping the testbed disk for the media model {spec}"))?;
        }
    }
    let mut workload = request.workload.build(request.seed);
    let env = RunEnv {
        workdir: PathBuf::from(GUEST_WORKDIR),
        cache_dir: request.cache_dir.clone(),
        sample_interval: request.sample_interval,
        device: request.device.clone(),
        media_relay: request.media_relay.clone(),
        image: request.image.clone(),
    };
    let mut record = match workload
        .prepare_inputs(&request.cache_dir)
        .with_context(|| format!("finding the inputs of workload `{}` in the guest", request.workload.label))
    {
        Ok(()) => single::execute(&env, &request.planned, &request.variant, &request.workload, workload.as_mut()),
        Err(e) => single::failed(&request.planned, &request.variant, &request.workload, &e),
    };
    // The guest's own release; the host adds what only it knows (accelerator, size).
    record.place.get_or_insert_with(RunPlace::host).kind = "vm".to_string();
    Ok(serde_json::to_value(record)?)
}
