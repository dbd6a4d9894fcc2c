//! A run's steps as CSV (`--step-log` of `wgdiff train` and `wgdiff gui`): step, loss, the
//! step's seconds and the run's elapsed seconds; and the throughput a benchmark reads from it.

use super::TrainEvent;
use crate::{Error, Result};

/// One step of the log.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepRow {
    pub step: usize,
    pub loss: f32,
    /// The step's own wall time.
    pub seconds: f64,
    /// Wall seconds since the run began, at the end of this step.
    pub elapsed: f64,
}

/// The steps of a run, in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepLog {
    pub rows: Vec<StepRow>,
}

impl StepLog {
    /// The first line of every step log.
    pub const CSV_HEADER: &'static str = "step,loss,seconds,elapsed";

    /// Keeps `event` when it is a step.
    pub fn observe(&mut self, event: &TrainEvent) {
        if let TrainEvent::Step {
            step,
            loss,
            seconds,
            elapsed,
            ..
        } = *event
        {
            self.rows.push(StepRow {
                step,
                loss,
                seconds,
                elapsed,
            });
        }
    }

    /// The log as CSV text.
    pub fn csv(&self) -> String {
        let mut text = format!("{}\n", Self::CSV_HEADER);
        for r in &self.rows {
            text += &format!("{},{},{:.6},{:.6}\n", r.step, r.loss, r.seconds, r.elapsed);
        }
        text
    }

    /// Reads a log written by [`StepLog::csv`]; `name` (the file) appears in errors.
    pub fn parse(text: &str, name: &str) -> Result<StepLog> {
        let mut lines = text.lines();
        if lines.next() != Some(Self::CSV_HEADER) {
            return Err(Error::Config(format!(
                "{name}: not a step log (its first line is not `{}`)",
                Self::CSV_HEADER
            )));
        }
        let rows = lines
            .enumerate()
            .map(|(i, line)| {
                let bad = || {
                    Error::Config(format!(
                        "{name}: line {} is not `{}`: {line:?}",
                        i + 2,
                        Self::CSV_HEADER
                    ))
                };
                let fields: Vec<&str> = line.split(',').collect();
                let [step, loss, seconds, elapsed] = fields[..] else {
                    return Err(bad());
                };
                Ok(StepRow {
                    step: step.parse().map_err(|_| bad())?,
                    loss: loss.parse().map_err(|_| bad())?,
                    seconds: seconds.parse().map_err(|_| bad())?,
                    elapsed: elapsed.parse().map_err(|_| bad())?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(StepLog { rows })
    }

    /// Steps per second after the first `skip` steps (compiling kernels, tuning, warming
    /// caches): the steps after it over the elapsed time they took, everything the run did
    /// between them included. None when fewer than two steps are left.
    pub fn steps_per_second(&self, skip: usize) -> Option<f64> {
        let kept = self.rows.get(skip..).filter(|rows| rows.len() >= 2)?;
        let (first, last) = (kept[0], kept[kept.len() - 1]);
        let seconds = last.elapsed - first.elapsed;
        (seconds > 0.0).then(|| (last.step - first.step) as f64 / seconds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(step: usize, elapsed: f64) -> TrainEvent {
        TrainEvent::Step {
            step,
            loss: 1.0 / step as f32,
            seconds: 0.25,
            elapsed,
            flops: None,
            all_reduce_seconds: None,
            scaler: None,
        }
    }

    #[test]
    fn a_log_round_trips_and_measures_steps_per_second_after_warm_up() {
        let mut log = StepLog::default();
        log.observe(&step(1, 5.0));
        for s in 2..=11 {
            log.observe(&step(s, 5.0 + 0.5 * (s - 1) as f64));
        }
        let read = StepLog::parse(&log.csv(), "steps.csv").unwrap();
        assert_eq!(read.rows.len(), 11);
        assert_eq!(read.rows[3].step, 4);
        // steps 2..=11 took 4.5 s: 9 steps at 2 per second; the slow first one is skipped
        assert!((read.steps_per_second(1).unwrap() - 2.0).abs() < 1e-9);
        assert_eq!(read.steps_per_second(10), None);
        let error = StepLog::parse("step,loss\n1,2\n", "x.csv")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("x.csv") && error.contains("not a step log"),
            "{error}"
        );
        let error = StepLog::parse(&format!("{}\n1,0.5,abc,1\n", StepLog::CSV_HEADER), "x.csv")
            .unwrap_err()
            .to_string();
        assert!(error.contains("line 2"), "{error}");
    }
}
