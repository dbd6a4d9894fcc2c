//! Paced submission for a device a UI draws on: a job submits once the work it recorded is
//! estimated to fill a time slice, keeps one slice in flight while it records the next, and
//! learns from each completion how long recorded work really takes.

use super::cost::Cost;
use futures_channel::oneshot;
use std::sync::{Arc, OnceLock};
use web_time::Instant;

/// When the device finished a submission (filled by the device's callback).
pub(crate) type Completion = Arc<OnceLock<Instant>>;

/// A completion the device fills (natively while it is polled; in a page from the browser's
/// event loop) with the time it finished the work submitted so far.
pub(super) fn completion(queue: &wgpu::Queue) -> Completion {
    completion_signal(queue).0
}

/// [`completion`] and a receiver that resolves at the same time (for awaiting it in a page).
pub(super) fn completion_signal(queue: &wgpu::Queue) -> (Completion, oneshot::Receiver<()>) {
    let done: Completion = Arc::new(OnceLock::new());
    let flag = done.clone();
    let (tx, rx) = oneshot::channel();
    queue.on_submitted_work_done(move || {
        let _ = flag.set(Instant::now());
        let _ = tx.send(());
    });
    (done, rx)
}

/// How a job shares the device with a UI that draws on it (see [`super::Gpu::set_pacing`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pacing {
    /// Device time one submission of the job may hold the queue for (seconds): a frame the UI
    /// submits waits behind at most about this much of the job's work.
    pub slice_seconds: f64,
    /// How the dispatches that can be split ([`super::Gpu::dispatch_parts`]) are cut.
    pub parts: Parts,
}

/// Parts of a splittable dispatch while paced.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Parts {
    /// Whole dispatches (a fast device, whose dispatches are short anyway).
    Whole,
    /// About one slice of device time each at the FLOP rate the pacer has learned, and at least
    /// [`MIN_PART_FLOPS`]: on a CPU device whole convolutions take up to 150 ms, and a frame
    /// cannot cut into a dispatch.
    OneSlice,
    /// At most this many FLOPs each (tests cut dispatches into many small parts).
    Flops(f64),
}

/// A dispatch's fixed cost in the estimate (seconds): binding, barrier and launch.
const DISPATCH_SECONDS: f64 = 20e-6;
/// FLOP and byte rates the estimate starts from (a CPU device's); the learned scale corrects them.
const START_FLOPS_PER_SECOND: f64 = 5e9;
const START_BYTES_PER_SECOND: f64 = 5e9;
/// The smallest part [`Parts::OneSlice`] cuts (a few ms on a CPU device): the learned rate
/// counts whatever else the device ran meanwhile (frames, other jobs), and below this a part
/// costs more in dispatches than it saves a frame.
const MIN_PART_FLOPS: f64 = 2.5e7;
/// Weight of the newest wait in the learned scale.
const LEARNING_RATE: f64 = 0.25;
/// Bounds of the learned scale (a device 50x faster or slower than the start rates).
const SCALE_RANGE: (f64, f64) = (0.02, 50.0);
/// Batches below this share of a slice teach nothing (a wait's own overhead dominates).
const LEARN_FROM_SHARE: f64 = 0.25;

/// A submitted slice: when it was submitted, its estimated device seconds, its completion.
#[derive(Debug)]
pub(super) struct Flight {
    submitted: Instant,
    estimated_seconds: f64,
    pub(super) done: Completion,
}

impl Flight {
    /// Work estimated at `estimated_seconds` of device time, submitted at `at`.
    pub(super) fn new(at: Instant, estimated_seconds: f64, done: Completion) -> Flight {
        Flight {
            submitted: at,
            estimated_seconds,
            done,
        }
    }
}

/// The paced job's state: its settings, the work recorded since the last submit, the slice in
/// flight, and the learned ratio of real to estimated device time.
#[derive(Debug)]
pub(super) struct Pacer {
    pacing: Option<Pacing>,
    pending_seconds: f64,
    in_flight: Option<Flight>,
    /// When the last slice waited for finished (the next one could start no earlier).
    last_done: Option<Instant>,
    scale: f64,
}

impl Pacer {
    pub(super) fn new() -> Pacer {
        Pacer {
            pacing: None,
            pending_seconds: 0.0,
            in_flight: None,
            last_done: None,
            scale: 1.0,
        }
    }

    /// The pacing in force (None: batching freely).
    pub(super) fn pacing(&self) -> Option<Pacing> {
        self.pacing
    }

    /// Paces from now on with `pacing` (None: batch freely); what was learned is kept.
    pub(super) fn set(&mut self, pacing: Option<Pacing>) {
        self.pacing = pacing;
        self.pending_seconds = 0.0;
        self.in_flight = None;
        self.last_done = None;
    }

    /// The FLOPs per part of a splittable dispatch while paced (None: do not split).
    pub(super) fn part_flops(&self) -> Option<f64> {
        let pacing = self.pacing?;
        match pacing.parts {
            Parts::Whole => None,
            Parts::OneSlice => {
                Some((pacing.slice_seconds * START_FLOPS_PER_SECOND / self.scale).max(MIN_PART_FLOPS))
            }
            Parts::Flops(flops) => Some(flops),
        }
        .filter(|&f| f > 0.0)
    }

    /// Counts one recorded dispatch (`first_in_batch`: the work recorded before it was
    /// submitted by other means, a readback or a write, and no longer counts); true when the
    /// recorded work fills the slice, so the job should submit it ([`Pacer::submitted`]) and
    /// wait for the slice before it.
    pub(super) fn recorded(&mut self, cost: Option<&Cost>, first_in_batch: bool) -> bool {
        let Some(pacing) = self.pacing else {
            return false;
        };
        if first_in_batch {
            self.pending_seconds = 0.0;
        }
        self.pending_seconds += estimate_seconds(cost);
        self.pending_seconds * self.scale >= pacing.slice_seconds
    }

    /// The recorded work was submitted at `at` and finishes when `done` is filled: it is now in
    /// flight; returns the slice before it, which the job waits for ([`Pacer::finished`]), so
    /// the job records a slice while the device runs one and at most two sit ahead of a frame.
    pub(super) fn submitted(&mut self, at: Instant, done: Completion) -> Option<Flight> {
        let flight = Flight::new(at, self.cut(), done);
        self.in_flight.replace(flight)
    }

    /// Ends the recorded work as a slice without submitting it (a page defers it, see
    /// [`super::Gpu::drain`]); returns its estimated device seconds.
    pub(super) fn cut(&mut self) -> f64 {
        std::mem::take(&mut self.pending_seconds)
    }

    /// `flight` finished at `done_at`: learns the scale from its device time (from when it
    /// could start, its submit or the end of the slice before, to its end).
    pub(super) fn finished(&mut self, flight: &Flight, done_at: Instant) {
        let Some(pacing) = self.pacing else {
            return;
        };
        let start = self
            .last_done
            .map_or(flight.submitted, |d| d.max(flight.submitted));
        self.last_done = Some(done_at);
        let seconds = done_at.saturating_duration_since(start).as_secs_f64();
        let estimated = flight.estimated_seconds;
        if estimated * self.scale < pacing.slice_seconds * LEARN_FROM_SHARE || seconds <= 0.0 {
            return;
        }
        let observed = (seconds / estimated).clamp(SCALE_RANGE.0, SCALE_RANGE.1);
        self.scale = (self.scale.ln() * (1.0 - LEARNING_RATE) + observed.ln() * LEARNING_RATE).exp();
    }
}

/// Device seconds a dispatch of `cost` is estimated to take at the start rates.
fn estimate_seconds(cost: Option<&Cost>) -> f64 {
    DISPATCH_SECONDS
        + cost.map_or(0.0, |c| {
            c.flops / START_FLOPS_PER_SECOND + c.bytes as f64 / START_BYTES_PER_SECOND
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn paced(slice_seconds: f64) -> Pacer {
        let mut p = Pacer::new();
        p.set(Some(Pacing {
            slice_seconds,
            parts: Parts::Whole,
        }));
        p
    }

    /// Submits what `p` recorded at `*now`; the device runs it in `seconds`.
    fn run(p: &mut Pacer, now: &mut Instant, seconds: f64) {
        assert!(p.submitted(*now, Arc::new(OnceLock::new())).is_none());
        let flight = p.in_flight.take().unwrap();
        *now += Duration::from_secs_f64(seconds);
        p.finished(&flight, *now);
        *now += Duration::from_millis(1);
    }

    #[test]
    fn an_unpaced_job_never_submits_early() {
        let mut p = Pacer::new();
        let heavy = Cost::new("matmul", 1e12, 0);
        assert!(!p.recorded(Some(&heavy), false));
        assert_eq!(p.part_flops(), None);
    }

    #[test]
    fn a_slice_fills_with_estimated_work_and_the_scale_follows_the_device() {
        let mut p = paced(0.01);
        let mut now = Instant::now();
        // 10 ms at the start rates: 5e7 FLOPs minus the dispatch's fixed cost
        let cost = Cost::new("conv2d", 5e9 * (0.01 - DISPATCH_SECONDS), 0);
        assert!(p.recorded(Some(&cost), false));
        // the device took 4x the estimate: later slices hold a quarter of the work
        for _ in 0..40 {
            p.recorded(Some(&cost), false);
            run(&mut p, &mut now, 0.04);
        }
        assert!((p.scale - 4.0).abs() < 0.05, "scale {}", p.scale);
        let quarter = Cost::new("conv2d", 5e9 * (0.0025 - DISPATCH_SECONDS) * 1.01, 0);
        assert!(p.recorded(Some(&quarter), false));
        run(&mut p, &mut now, 0.01);
        // cheap dispatches without a cost fill a slice by their fixed cost alone: a quarter
        // of 10 ms is 125 of them
        let until_full = (1..1000).find(|_| p.recorded(None, false)).unwrap();
        assert!((120..=130).contains(&until_full), "{until_full} dispatches");
    }

    #[test]
    fn one_slice_parts_follow_the_learned_rate() {
        let mut p = paced(0.01);
        p.pacing = Some(Pacing {
            slice_seconds: 0.01,
            parts: Parts::OneSlice,
        });
        // 10 ms at the start rate of 5 GFLOP/s
        assert!((p.part_flops().unwrap() - 5e7).abs() < 1.0);
        // a device that took 1.6x the estimate: parts of 1/1.6 as many FLOPs
        p.scale = 1.6;
        assert!((p.part_flops().unwrap() - 3.125e7).abs() < 1.0);
        // one 10x slower (or busy with other work): not below the floor
        p.scale = 10.0;
        assert_eq!(p.part_flops(), Some(MIN_PART_FLOPS));
        p.pacing = Some(Pacing {
            slice_seconds: 0.01,
            parts: Parts::Flops(1e3),
        });
        assert_eq!(p.part_flops(), Some(1e3));
    }

    #[test]
    fn a_slice_queued_behind_another_counts_from_when_that_one_ended() {
        let mut p = paced(0.01);
        let start = Instant::now();
        let cost = Cost::new("conv2d", 5e9 * (0.01 - DISPATCH_SECONDS), 0);
        // two slices submitted 1 ms apart; each runs 10 ms, the second after the first
        p.recorded(Some(&cost), false);
        assert!(p.submitted(start, Arc::new(OnceLock::new())).is_none());
        p.recorded(Some(&cost), false);
        let first = p.submitted(start + Duration::from_millis(1), Arc::new(OnceLock::new()));
        p.finished(&first.unwrap(), start + Duration::from_millis(10));
        let second = p.in_flight.take().unwrap();
        p.finished(&second, start + Duration::from_millis(20));
        assert!((p.scale - 1.0).abs() < 1e-6, "scale {}", p.scale);
    }

    #[test]
    fn work_submitted_by_a_readback_leaves_the_estimate() {
        let mut p = paced(0.01);
        let half = Cost::new("conv2d", 5e9 * (0.005 - DISPATCH_SECONDS), 0);
        assert!(!p.recorded(Some(&half), false));
        // a readback submitted that half: the next half starts a new slice
        assert!(!p.recorded(Some(&half), true));
        assert!(p.recorded(Some(&half), false));
    }

    #[test]
    fn small_slices_teach_nothing() {
        let mut p = paced(0.01);
        let mut now = Instant::now();
        p.recorded(None, false);
        run(&mut p, &mut now, 0.5);
        assert_eq!(p.scale, 1.0);
    }
}
