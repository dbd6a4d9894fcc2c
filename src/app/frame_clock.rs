//! Frame times of the app: the interval between frames and the time spent building each
//! one, a readout (last, median, 95th percentile) and an optional CSV log (`--frame-log`).

use crate::median::percentile;
use web_time::Instant;

/// What the app was doing during a frame (a column of the frame log).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activity {
    Idle,
    Sampling,
    Training,
    Profiling,
    Measuring,
}

impl Activity {
    pub const ALL: [Activity; 5] = [
        Activity::Idle,
        Activity::Sampling,
        Activity::Training,
        Activity::Profiling,
        Activity::Measuring,
    ];

    /// The name in the log and the readout.
    pub fn name(self) -> &'static str {
        match self {
            Activity::Idle => "idle",
            Activity::Sampling => "sampling",
            Activity::Training => "training",
            Activity::Profiling => "profiling",
            Activity::Measuring => "measuring",
        }
    }
}

/// One frame: when it started (seconds since the app opened), the interval since the frame
/// before, the time spent building its UI, the previous frame's CPU time (eframe's
/// `cpu_usage`: building, tessellating and recording the paint, without the time spent waiting
/// for the surface texture, the submit and the present; None for the first), and the activity.
#[derive(Clone, Copy, Debug)]
pub struct FrameSample {
    pub at_s: f64,
    pub interval_ms: f64,
    pub build_ms: f64,
    pub previous_frame_ms: Option<f64>,
    pub activity: Activity,
}

/// The frames of one activity in the log (see [`FrameClock::per_activity`]).
#[derive(Clone, Debug, serde::Serialize)]
pub struct ActivityFrames {
    pub activity: &'static str,
    pub frames: usize,
    pub interval_median_ms: f64,
    pub interval_p95_ms: f64,
    pub interval_max_ms: f64,
    pub cpu_median_ms: f64,
    pub cpu_p95_ms: f64,
}

/// Keeps the recent frame times and, with a log, every frame.
pub struct FrameClock {
    opened: Instant,
    last_start: Option<Instant>,
    started: Option<Instant>,
    recent: std::collections::VecDeque<FrameSample>,
    /// Every frame since the app opened, when logging (`--frame-log`).
    pub log: Option<Vec<FrameSample>>,
}

/// Frames kept for the readout.
const RECENT: usize = 240;

impl FrameClock {
    /// The first line of every frame log (`--frame-log`).
    pub const CSV_HEADER: &'static str = "at_s,interval_ms,build_ms,previous_frame_ms,activity";

    pub fn new(logging: bool) -> FrameClock {
        FrameClock {
            opened: Instant::now(),
            last_start: None,
            started: None,
            recent: Default::default(),
            log: logging.then(Vec::new),
        }
    }

    /// Marks the start of building a frame.
    pub fn begin(&mut self) {
        self.started = Some(Instant::now());
    }

    /// What is left of `period` since the frame being built started: asking for the next frame
    /// after this keeps a steady cadence (frame starts `period` apart), where asking after
    /// `period` itself would add each frame's build time to the interval.
    pub fn rest_of(&self, period: std::time::Duration) -> std::time::Duration {
        self.started
            .map_or(period, |started| period.saturating_sub(started.elapsed()))
    }

    /// Marks the end of building a frame done during `activity`; `previous_frame_ms` is the
    /// frame before's CPU time (eframe's `frame.info().cpu_usage`, see [`FrameSample`]).
    pub fn end(&mut self, activity: Activity, previous_frame_ms: Option<f64>) {
        let Some(started) = self.started.take() else {
            return;
        };
        let interval_ms = self
            .last_start
            .map_or(0.0, |last| (started - last).as_secs_f64() * 1e3);
        self.last_start = Some(started);
        let sample = FrameSample {
            at_s: (started - self.opened).as_secs_f64(),
            interval_ms,
            build_ms: started.elapsed().as_secs_f64() * 1e3,
            previous_frame_ms,
            activity,
        };
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(sample);
        if let Some(log) = &mut self.log {
            log.push(sample);
        }
    }

    /// The frame ended last.
    pub fn last(&self) -> Option<&FrameSample> {
        self.recent.back()
    }

    /// (last, median, 95th percentile) frame interval in ms over the recent frames.
    pub fn readout(&self) -> Option<(f64, f64, f64)> {
        let mut ms: Vec<f64> = self.recent.iter().skip(1).map(|s| s.interval_ms).collect();
        let last = *ms.last()?;
        ms.sort_by(f64::total_cmp);
        Some((last, percentile(&ms, 0.5), percentile(&ms, 0.95)))
    }

    /// Per activity in the log (in [`Activity::ALL`]'s order, those with frames): frames,
    /// interval median, 95th percentile and maximum, and the median and 95th percentile of
    /// the frames' CPU time.
    pub fn per_activity(&self) -> Vec<ActivityFrames> {
        let log = self.log.as_deref().unwrap_or_default();
        Activity::ALL
            .into_iter()
            .filter_map(|activity| {
                // A frame's interval belongs to the activity of the frame that ends it.
                let frames: Vec<&FrameSample> =
                    log.iter().skip(1).filter(|s| s.activity == activity).collect();
                let mut ms: Vec<f64> = frames.iter().map(|s| s.interval_ms).collect();
                ms.sort_by(f64::total_cmp);
                let mut cost: Vec<f64> = frames.iter().filter_map(|s| s.previous_frame_ms).collect();
                cost.sort_by(f64::total_cmp);
                Some(ActivityFrames {
                    activity: activity.name(),
                    frames: ms.len(),
                    interval_median_ms: percentile(&ms, 0.5),
                    interval_p95_ms: percentile(&ms, 0.95),
                    interval_max_ms: *ms.last()?,
                    cpu_median_ms: percentile(&cost, 0.5),
                    cpu_p95_ms: percentile(&cost, 0.95),
                })
            })
            .collect()
    }

    /// [`FrameClock::per_activity`] as lines of text (printed with `--frame-log`).
    pub fn summary(&self) -> String {
        self.per_activity()
            .iter()
            .map(|a| {
                format!(
                    "{}: {} frames, interval median {:.1} ms, 95th percentile {:.1} ms, max {:.1} ms; \
                     frame CPU time median {:.1} ms, 95th percentile {:.1} ms",
                    a.activity,
                    a.frames,
                    a.interval_median_ms,
                    a.interval_p95_ms,
                    a.interval_max_ms,
                    a.cpu_median_ms,
                    a.cpu_p95_ms
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The log as CSV: `at_s,interval_ms,build_ms,previous_frame_ms,activity` (the last empty
    /// for the first frame).
    pub fn csv(&self) -> String {
        let mut out = format!("{}\n", Self::CSV_HEADER);
        for s in self.log.iter().flatten() {
            let previous = s.previous_frame_ms.map_or(String::new(), |ms| format!("{ms:.3}"));
            out += &format!(
                "{:.4},{:.3},{:.3},{previous},{}\n",
                s.at_s,
                s.interval_ms,
                s.build_ms,
                s.activity.name()
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::{Activity, FrameClock, FrameSample};

    fn sample(interval_ms: f64, activity: Activity) -> FrameSample {
        FrameSample {
            at_s: 0.0,
            interval_ms,
            build_ms: 1.0,
            previous_frame_ms: Some(interval_ms / 10.0),
            activity,
        }
    }

    #[test]
    fn frames_are_summed_up_per_activity_without_the_first() {
        let mut clock = FrameClock::new(true);
        let mut log = vec![sample(5_000.0, Activity::Sampling)]; // (the first: no interval)
        log.extend((1..=20).map(|i| sample(i as f64 * 10.0, Activity::Sampling)));
        log.extend([sample(40.0, Activity::Idle), sample(60.0, Activity::Idle)]);
        clock.log = Some(log);
        let frames = clock.per_activity();
        assert_eq!(frames.len(), 2, "idle and sampling only: {frames:?}");
        let (idle, sampling) = (&frames[0], &frames[1]);
        assert_eq!(
            (idle.activity, idle.frames, idle.interval_max_ms),
            ("idle", 2, 60.0)
        );
        assert_eq!((sampling.activity, sampling.frames), ("sampling", 20));
        assert_eq!(sampling.interval_median_ms, 100.0);
        assert_eq!(sampling.interval_p95_ms, 190.0);
        assert_eq!(sampling.interval_max_ms, 200.0);
        assert_eq!(sampling.cpu_p95_ms, 19.0);
        assert!(clock
            .summary()
            .contains("sampling: 20 frames, interval median 100.0 ms, 95th percentile 190.0 ms"));
    }
}
