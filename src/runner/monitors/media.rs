//! What the media model went through during the measured part (a new
//! account is started just before it): its [`Evidence`] stored under
//! [`MEDIA`], and as `media/…` metrics. Nothing for testbeds without a
//! model. In a guest whose disk the host serves through a model, the
//! account is asked for across the exchange directory ([`relay`]).

use anyhow::Result;

use super::{RunMonitor, Watch};
use crate::media::evidence::Evidence;
use crate::media::relay;
use crate::record::RunRecord;

/// The stored extra's key.
pub const MEDIA: &str = "media";

#[derive(Default)]
pub struct Media;

impl RunMonitor for Media {
    fn name(&self) -> &'static str {
        "media model"
    }

    fn start(&mut self, watch: &Watch) -> Result<()> {
        match (&watch.testbed.media, watch.media_relay) {
            (Some(server), _) => server.reset_evidence(),
            (None, Some(exchange)) => relay::guest_start(exchange),
            (None, None) => Ok(()),
        }
    }

    fn stop(&mut self, watch: &Watch, record: &mut RunRecord) -> Result<()> {
        let (evidence, device): (Evidence, String) = match (&watch.testbed.media, watch.media_relay) {
            (Some(server), _) => {
                let evidence = server.evidence()?;
                server.pause()?;
                (evidence, server.spec.to_string())
            }
            (None, Some(exchange)) => (relay::guest_stop(exchange)?, "the host's model".to_string()),
            (None, None) => return Ok(()),
        };
        record.metrics.extend(evidence.metrics());
        record.notes.extend(evidence.late_note(&device));
        record.put_extra(MEDIA, &evidence)
    }
}
