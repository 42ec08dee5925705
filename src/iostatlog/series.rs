//! Time series of any length kept in bounded memory for charts.
//!
//! A [`BoundedSeries`] holds at most a fixed number of buckets of
//! consecutive samples; each bucket keeps, per channel, the minimum, the
//! maximum and the mean of what it covers. When the buckets are full, pairs
//! are merged and every bucket covers twice as many samples, so a series of
//! a billion samples costs what one of a few thousand does, and a peak is
//! never averaged away: it stays the maximum of its bucket. With fewer
//! samples than buckets, every sample is its own bucket (nothing is lost).
//!
//! A chart draws a bucket as two points, its minimum and its maximum (see
//! [`BoundedSeries::chart_points`]); a renderer that reduces points to
//! min/max per pixel column then draws the same envelope as from the raw
//! samples, as long as there are at least as many buckets as pixels.
//!
//! [`SeriesBuilder`] builds one series per device of an iostat log, with
//! the channels of the report's charts ([`IO_CHANNELS`]), dropping iostat's
//! since-boot first report the way the summary does.

use super::parse::{LogInfo, Sample};
use super::summarize::{FirstGate, FirstReport, Route, MAX_DEVICES};

/// Buckets per series: more than the pixel width of any chart, so min/max
/// per pixel column stays exact.
pub const SERIES_BUCKETS: usize = 2048;

/// Min, max, sum and count of one channel over a bucket; `n == 0` when the
/// channel had no value there.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Envelope {
    pub min: f64,
    pub max: f64,
    pub sum: f64,
    pub n: u64,
}

impl Envelope {
    const EMPTY: Envelope = Envelope { min: f64::INFINITY, max: f64::NEG_INFINITY, sum: 0.0, n: 0 };

    fn add(&mut self, v: f64) {
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.sum += v;
        self.n += 1;
    }

    fn merge(&mut self, o: &Envelope) {
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        self.sum += o.sum;
        self.n += o.n;
    }

    pub fn min(&self) -> Option<f64> {
        (self.n > 0).then_some(self.min)
    }
    pub fn max(&self) -> Option<f64> {
        (self.n > 0).then_some(self.max)
    }
    pub fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / self.n as f64)
    }
}

/// Consecutive samples `first..=last` (0-based sample indexes of the
/// series) and their channels.
#[derive(Clone, Debug, PartialEq)]
pub struct Bucket<const C: usize> {
    pub first: u64,
    pub last: u64,
    /// Time of the first and last sample, when they had one.
    pub t_first: Option<f64>,
    pub t_last: Option<f64>,
    pub channels: [Envelope; C],
}

impl<const C: usize> Bucket<C> {
    fn new(k: u64, t: Option<f64>, values: &[Option<f64>; C]) -> Self {
        let mut b = Bucket { first: k, last: k, t_first: t, t_last: t, channels: [Envelope::EMPTY; C] };
        b.add_values(values);
        b
    }

    fn add_values(&mut self, values: &[Option<f64>; C]) {
        for (e, v) in self.channels.iter_mut().zip(values) {
            if let Some(v) = v {
                e.add(*v);
            }
        }
    }

    fn merge(&mut self, o: &Bucket<C>) {
        self.last = o.last;
        self.t_last = o.t_last;
        for (e, x) in self.channels.iter_mut().zip(&o.channels) {
            e.merge(x);
        }
    }
}

/// One point a chart draws (see [`BoundedSeries::chart_points`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ChartPoint<const C: usize> {
    /// Sample index in the series.
    pub index: u64,
    /// The sample's time, when it had one.
    pub t: Option<f64>,
    pub values: [Option<f64>; C],
}

/// A series of `C` channels in at most `cap` buckets (see the module
/// documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct BoundedSeries<const C: usize> {
    cap: usize,
    /// Samples per bucket (a power of two).
    width: u64,
    buckets: Vec<Bucket<C>>,
    samples: u64,
    all_timed: bool,
}

impl<const C: usize> Default for BoundedSeries<C> {
    fn default() -> Self {
        Self::new(SERIES_BUCKETS)
    }
}

impl<const C: usize> BoundedSeries<C> {
    /// At most `cap` buckets (rounded up to an even number, at least 2).
    pub fn new(cap: usize) -> Self {
        let cap = cap.max(2).next_multiple_of(2);
        BoundedSeries { cap, width: 1, buckets: Vec::new(), samples: 0, all_timed: true }
    }

    /// Appends one sample: its time (if any) and a value (or none) per channel.
    pub fn push(&mut self, t: Option<f64>, values: [Option<f64>; C]) {
        let k = self.samples;
        self.samples += 1;
        self.all_timed &= t.is_some();
        // A full list halves its resolution first; the sample may then fit
        // the (now wider) last bucket.
        if !self.fits(k) && self.buckets.len() == self.cap {
            self.halve();
        }
        if self.fits(k) {
            let last = self.buckets.last_mut().expect("fits() saw a bucket");
            last.last = k;
            last.t_last = t;
            last.add_values(&values);
            return;
        }
        self.buckets.push(Bucket::new(k, t, &values));
    }

    fn fits(&self, k: u64) -> bool {
        self.buckets.last().is_some_and(|b| k - b.first < self.width)
    }

    /// Merge neighbours: half as many buckets, each twice as wide.
    fn halve(&mut self) {
        let old = std::mem::take(&mut self.buckets);
        let mut it = old.into_iter();
        while let Some(mut a) = it.next() {
            if let Some(b) = it.next() {
                a.merge(&b);
            }
            self.buckets.push(a);
        }
        self.width *= 2;
    }

    /// Samples pushed.
    pub fn len(&self) -> u64 {
        self.samples
    }

    pub fn is_empty(&self) -> bool {
        self.samples == 0
    }

    /// Whether every sample had a time.
    pub fn all_timed(&self) -> bool {
        self.all_timed
    }

    /// Samples per bucket now.
    pub fn bucket_width(&self) -> u64 {
        self.width
    }

    pub fn buckets(&self) -> &[Bucket<C>] {
        &self.buckets
    }

    /// What a line chart draws: a one-sample bucket as that sample; a wider
    /// bucket as two points, every channel's minimum at the bucket's first
    /// sample and its maximum at its last, so the line sweeps the bucket's
    /// whole range. At most two points per bucket.
    pub fn chart_points(&self) -> Vec<ChartPoint<C>> {
        let mut out = Vec::with_capacity(self.buckets.len() * 2);
        for b in &self.buckets {
            out.push(ChartPoint { index: b.first, t: b.t_first, values: b.channels.map(|e| e.min()) });
            if b.last != b.first {
                out.push(ChartPoint { index: b.last, t: b.t_last, values: b.channels.map(|e| e.max()) });
            }
        }
        out
    }
}

/// The channels of an iostat chart, in [`IO_CHANNELS`] order.
pub const IO_CHANNELS: [&str; 8] =
    ["util_pct", "write_mb_s", "read_mb_s", "wareq_kb", "rareq_kb", "w_await_ms", "r_await_ms", "aqu_sz"];

/// One sample's values in [`IO_CHANNELS`] order.
pub fn io_values(s: &Sample) -> [Option<f64>; 8] {
    [s.util_pct, Some(s.wkb_s / 1024.0), Some(s.rkb_s / 1024.0), s.wareq_kb, s.rareq_kb, s.w_await, s.r_await, s.aqu_sz]
}

/// Per-device series of one log.
#[derive(Clone, Debug, Default)]
struct DeviceSeries {
    devices: Vec<(String, BoundedSeries<8>)>,
    /// Time of the first sample that had one.
    t0: Option<f64>,
}

impl DeviceSeries {
    fn push(&mut self, s: &Sample) -> Result<(), String> {
        if self.t0.is_none() {
            self.t0 = s.t_s;
        }
        let i = match self.devices.iter().position(|(d, _)| *d == s.device) {
            Some(i) => i,
            None if self.devices.len() >= MAX_DEVICES => {
                return Err(format!("more than {MAX_DEVICES} device names: not an iostat log of one machine?"))
            }
            None => {
                self.devices.push((s.device.clone(), BoundedSeries::default()));
                self.devices.len() - 1
            }
        };
        self.devices[i].1.push(s.t_s, io_values(s));
        Ok(())
    }
}

/// Builds the charts' series of one iostat log, streaming: one
/// [`BoundedSeries`] per device (in order of first appearance), without
/// iostat's since-boot first report when the summary drops it.
pub struct SeriesBuilder {
    gate: FirstGate,
    first: DeviceSeries,
    main: DeviceSeries,
}

/// The finished series of one log.
#[derive(Clone, Debug)]
pub struct LogSeries {
    /// (device, series) in order of first appearance.
    pub devices: Vec<(String, BoundedSeries<8>)>,
    /// Time of the first kept sample that had one (the charts' zero).
    pub t0: Option<f64>,
}

impl SeriesBuilder {
    pub fn new(first_report: FirstReport) -> Self {
        SeriesBuilder {
            gate: FirstGate::new(first_report),
            first: DeviceSeries::default(),
            main: DeviceSeries::default(),
        }
    }

    /// Whether the log has iostat's banner (known before its first report).
    pub fn set_banner(&mut self, present: bool) {
        self.gate.set_banner(present);
    }

    pub fn push(&mut self, s: &Sample) -> Result<(), String> {
        match self.gate.route(s.report) {
            Route::First => self.first.push(s),
            Route::Decided(keep) => {
                self.close_first(keep);
                self.main.push(s)
            }
            Route::Main => self.main.push(s),
        }
    }

    fn close_first(&mut self, keep: bool) {
        let first = std::mem::take(&mut self.first);
        if keep {
            self.main = first;
        }
    }

    pub fn finish(mut self, info: &LogInfo) -> LogSeries {
        if let Some(keep) = self.gate.settle(info) {
            self.close_first(keep);
        }
        LogSeries { devices: self.main.devices, t0: self.main.t0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_series_are_kept_sample_by_sample() {
        let mut s = BoundedSeries::<2>::new(8);
        for k in 0..5 {
            s.push(Some(k as f64), [Some(k as f64), None]);
        }
        assert_eq!((s.len(), s.bucket_width(), s.buckets().len()), (5, 1, 5));
        let p = s.chart_points();
        assert_eq!(p.len(), 5);
        assert_eq!(p[3], ChartPoint { index: 3, t: Some(3.0), values: [Some(3.0), None] });
    }

    #[test]
    fn long_series_stay_bounded_and_keep_every_peak() {
        let mut s = BoundedSeries::<1>::new(64);
        let n = 1_000_003u64;
        for k in 0..n {
            // A single spike, and a floor that never reaches it.
            let v = if k == 777_777 { 1000.0 } else { (k % 10) as f64 };
            s.push(None, [Some(v)]);
        }
        assert!(s.buckets().len() <= 64 && s.buckets().len() > 32, "{}", s.buckets().len());
        assert_eq!(s.len(), n);
        assert!(!s.all_timed());
        // Buckets tile the samples without gaps or overlaps.
        let b = s.buckets();
        assert_eq!(b[0].first, 0);
        assert_eq!(b.last().unwrap().last, n - 1);
        assert!(b.windows(2).all(|w| w[1].first == w[0].last + 1));
        let max = b.iter().filter_map(|x| x.channels[0].max()).fold(f64::MIN, f64::max);
        let min = b.iter().filter_map(|x| x.channels[0].min()).fold(f64::MAX, f64::min);
        assert_eq!((min, max), (0.0, 1000.0));
        let spike = b.iter().find(|x| (x.first..=x.last).contains(&777_777)).unwrap();
        assert_eq!(spike.channels[0].max(), Some(1000.0));
        let total: u64 = b.iter().map(|x| x.channels[0].n).sum();
        assert_eq!(total, n);
        assert!(s.chart_points().len() <= 128);
    }
}
