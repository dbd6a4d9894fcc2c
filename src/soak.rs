//! The soak log and its verdict: once a minute of a long app session (desktop or page), the
//! resident memory, the buffer pool's bytes and that minute's frame times (`gui --soak-log`).

use crate::median::{median, percentile};
use crate::{Error, Result};
use serde::Serialize;

/// Seconds between two lines of the log.
pub const SOAK_EVERY_S: f64 = 60.0;

/// Resident memory after the settling time may grow by at most this share.
pub const RSS_GROWTH_LIMIT: f64 = 0.05;

/// The buffer pool's held bytes at the end may exceed its plateau at the settling time by at most
/// this share.
pub const POOL_RETURN_LIMIT: f64 = 0.05;

/// One minute of the session.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SoakLine {
    /// Seconds since the app opened.
    pub at_s: f64,
    /// What the app's jobs were doing at the line (the frame log's activity names).
    pub activity: String,
    /// The process's resident set (in a page: the wasm heap), where known.
    pub rss_bytes: Option<u64>,
    /// Device bytes in the buffer pool: owned by tensors, and idle for reuse.
    pub pool_live_bytes: u64,
    pub pool_pooled_bytes: u64,
    /// Frames drawn since the line before, and their intervals' median and 95th percentile.
    pub frames: usize,
    pub frame_median_ms: f64,
    pub frame_p95_ms: f64,
    /// Sampling runs finished and training steps taken so far.
    pub runs: usize,
    pub steps: usize,
}

impl SoakLine {
    /// The first line of the CSV.
    pub const CSV_HEADER: &'static str = "at_s,activity,rss_bytes,pool_live_bytes,pool_pooled_bytes,frames,\
                                          frame_median_ms,frame_p95_ms,runs,steps";

    /// The buffer pool's held bytes (live and idle).
    pub fn pool_held_bytes(&self) -> u64 {
        self.pool_live_bytes + self.pool_pooled_bytes
    }

    fn csv(&self) -> String {
        format!(
            "{:.1},{},{},{},{},{},{:.1},{:.1},{},{}\n",
            self.at_s,
            self.activity,
            self.rss_bytes.map_or(String::new(), |b| b.to_string()),
            self.pool_live_bytes,
            self.pool_pooled_bytes,
            self.frames,
            self.frame_median_ms,
            self.frame_p95_ms,
            self.runs,
            self.steps
        )
    }

    /// The lines of a soak log's text; `name` names the file in errors.
    pub fn parse(text: &str, name: &str) -> Result<Vec<SoakLine>> {
        let mut lines = text.lines();
        if lines.next() != Some(Self::CSV_HEADER) {
            return Err(Error::Config(format!(
                "{name}: not a soak log (its first line is not `{}`; write one with wgdiff gui --soak-log)",
                Self::CSV_HEADER
            )));
        }
        lines
            .enumerate()
            .map(|(i, line)| {
                let bad = || Error::Config(format!("{name}: line {} is malformed: {line:?}", i + 2));
                let f: Vec<&str> = line.split(',').collect();
                if f.len() != 10 {
                    return Err(bad());
                }
                let num = |s: &str| s.parse::<f64>().map_err(|_| bad());
                let int = |s: &str| s.parse::<u64>().map_err(|_| bad());
                Ok(SoakLine {
                    at_s: num(f[0])?,
                    activity: f[1].to_string(),
                    rss_bytes: if f[2].is_empty() { None } else { Some(int(f[2])?) },
                    pool_live_bytes: int(f[3])?,
                    pool_pooled_bytes: int(f[4])?,
                    frames: int(f[5])? as usize,
                    frame_median_ms: num(f[6])?,
                    frame_p95_ms: num(f[7])?,
                    runs: int(f[8])? as usize,
                    steps: int(f[9])? as usize,
                })
            })
            .collect()
    }
}

/// Collects the frame intervals of the current minute and makes a line once a minute has
/// passed; keeps every line (one per minute: a day is 1,440).
#[derive(Default)]
pub struct SoakRecorder {
    last_line_at: f64,
    intervals: Vec<f64>,
    pub lines: Vec<SoakLine>,
}

/// What the app reports at a line besides its frames.
pub struct SoakState {
    pub activity: &'static str,
    pub rss_bytes: Option<u64>,
    pub pool_live_bytes: u64,
    pub pool_pooled_bytes: u64,
    pub runs: usize,
    pub steps: usize,
}

impl SoakRecorder {
    /// Notes a frame `interval_ms` after the one before, at `at_s` seconds since the app opened;
    /// true when a line is due ([`SoakRecorder::line`]).
    pub fn frame(&mut self, at_s: f64, interval_ms: f64) -> bool {
        if interval_ms > 0.0 {
            self.intervals.push(interval_ms);
        }
        at_s >= self.last_line_at + SOAK_EVERY_S
    }

    /// Ends the minute at `at_s` with the app's `state`: the new line.
    pub fn line(&mut self, at_s: f64, state: SoakState) -> &SoakLine {
        let mut ms = std::mem::take(&mut self.intervals);
        ms.sort_by(f64::total_cmp);
        let (frame_median_ms, frame_p95_ms) = match ms.is_empty() {
            true => (0.0, 0.0),
            false => (median(&ms), percentile(&ms, 0.95)),
        };
        self.last_line_at = at_s;
        self.lines.push(SoakLine {
            at_s,
            activity: state.activity.to_string(),
            rss_bytes: state.rss_bytes,
            pool_live_bytes: state.pool_live_bytes,
            pool_pooled_bytes: state.pool_pooled_bytes,
            frames: ms.len(),
            frame_median_ms,
            frame_p95_ms,
            runs: state.runs,
            steps: state.steps,
        });
        self.lines.last().unwrap()
    }

    /// The log so far as CSV text.
    pub fn csv(&self) -> String {
        let mut out = format!("{}\n", SoakLine::CSV_HEADER);
        for line in &self.lines {
            out += &line.csv();
        }
        out
    }
}

/// A soak's verdict: memory after `settle_s` against its end, and the worst minute's frames.
#[derive(Clone, Debug, Serialize)]
pub struct SoakSummary {
    pub minutes: f64,
    pub runs: usize,
    pub steps: usize,
    /// Resident memory at the first line at or after the settling time, its highest later,
    /// and the growth between (share).
    pub rss_settled_bytes: Option<u64>,
    pub rss_max_bytes: Option<u64>,
    pub rss_growth: Option<f64>,
    /// The pool's held bytes at the settling line (its plateau), at most, and at the end.
    pub pool_plateau_bytes: u64,
    pub pool_max_bytes: u64,
    pub pool_end_bytes: u64,
    /// The worst minute's 95th-percentile frame interval while jobs ran, and the target.
    pub worst_frame_p95_ms: f64,
    pub frame_target_ms: f64,
    /// What failed (empty: the soak passed).
    pub failures: Vec<String>,
}

impl SoakSummary {
    /// The verdict on `lines` (settling for `settle_s` seconds), frame intervals held to
    /// `frame_target_ms` in every minute with work; `name` names the log in errors.
    pub fn of(lines: &[SoakLine], settle_s: f64, frame_target_ms: f64, name: &str) -> Result<SoakSummary> {
        let settled = lines.iter().position(|l| l.at_s >= settle_s).ok_or_else(|| {
            Error::Config(format!(
                "{name}: no line at or after {settle_s:.0} s (the soak ended before memory settled; run it longer)"
            ))
        })?;
        let (base, last) = (&lines[settled], lines.last().unwrap());
        let later = &lines[settled..];
        let rss_max = later.iter().filter_map(|l| l.rss_bytes).max();
        let rss_growth = base
            .rss_bytes
            .zip(rss_max)
            .map(|(b, m)| m as f64 / b as f64 - 1.0);
        let busy: Vec<&SoakLine> = lines
            .iter()
            .filter(|l| l.activity != "idle" && l.frames > 0)
            .collect();
        let worst_frame_p95_ms = busy.iter().map(|l| l.frame_p95_ms).fold(0.0, f64::max);
        let mut failures = Vec::new();
        match rss_growth {
            Some(g) if g > RSS_GROWTH_LIMIT => failures.push(format!(
                "resident memory grew {:.1}% after {settle_s:.0} s (allowed {:.0}%)",
                100.0 * g,
                100.0 * RSS_GROWTH_LIMIT
            )),
            Some(_) => {}
            None => failures.push("the log has no resident memory (only Linux reports it)".into()),
        }
        let plateau = base.pool_held_bytes();
        if last.pool_held_bytes() as f64 > plateau as f64 * (1.0 + POOL_RETURN_LIMIT) {
            failures.push(format!(
                "the buffer pool held {} bytes at the end, above its plateau of {plateau} at {:.0} s",
                last.pool_held_bytes(),
                base.at_s
            ));
        }
        if worst_frame_p95_ms > frame_target_ms {
            failures.push(format!(
                "a minute's 95th-percentile frame interval reached {worst_frame_p95_ms:.0} ms (target {frame_target_ms:.0} ms)"
            ));
        }
        Ok(SoakSummary {
            minutes: last.at_s / 60.0,
            runs: last.runs,
            steps: last.steps,
            rss_settled_bytes: base.rss_bytes,
            rss_max_bytes: rss_max,
            rss_growth,
            pool_plateau_bytes: plateau,
            pool_max_bytes: lines.iter().map(SoakLine::pool_held_bytes).max().unwrap_or(0),
            pool_end_bytes: last.pool_held_bytes(),
            worst_frame_p95_ms,
            frame_target_ms,
            failures,
        })
    }

    /// One Markdown table row: phase, minutes, work, memory, pool, frames, verdict.
    pub fn row(&self, phase: &str) -> String {
        let mb = |b: u64| format!("{:.0}", b as f64 / 1e6);
        let rss = match (self.rss_settled_bytes, self.rss_max_bytes, self.rss_growth) {
            (Some(s), Some(m), Some(g)) => format!("{} -> {} MB ({:+.1}%)", mb(s), mb(m), 100.0 * g),
            _ => "-".into(),
        };
        format!(
            "| {phase} | {:.0} | {} runs, {} steps | {rss} | {} / {} / {} MB | {:.0} ms (target {:.0}) | {} |\n",
            self.minutes,
            self.runs,
            self.steps,
            mb(self.pool_plateau_bytes),
            mb(self.pool_max_bytes),
            mb(self.pool_end_bytes),
            self.worst_frame_p95_ms,
            self.frame_target_ms,
            match self.failures.is_empty() {
                true => "passed".to_string(),
                false => self.failures.join("; "),
            }
        )
    }

    /// The table's first two lines.
    pub const TABLE_HEADER: &'static str = "| phase | minutes | work | resident memory after settling -> highest | \
        buffer pool plateau / highest / end | worst minute's frame p95 | verdict |\n|---|---:|---|---|---|---|---|\n";
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(at_s: f64, rss: u64, pool: u64, p95: f64) -> SoakLine {
        SoakLine {
            at_s,
            activity: "training".into(),
            rss_bytes: Some(rss),
            pool_live_bytes: pool,
            pool_pooled_bytes: 0,
            frames: 100,
            frame_median_ms: p95 / 2.0,
            frame_p95_ms: p95,
            runs: 0,
            steps: at_s as usize,
        }
    }

    #[test]
    fn a_log_reads_back_and_its_verdict_names_what_grew() {
        let mut recorder = SoakRecorder::default();
        assert!(!recorder.frame(10.0, 40.0));
        assert!(recorder.frame(61.0, 80.0));
        let state = |rss| SoakState {
            activity: "sampling",
            rss_bytes: Some(rss),
            pool_live_bytes: 10,
            pool_pooled_bytes: 5,
            runs: 3,
            steps: 0,
        };
        assert_eq!(recorder.line(61.0, state(1000)).frames, 2);
        assert!(!recorder.frame(100.0, 50.0));
        recorder.line(121.0, state(1000));
        let lines = SoakLine::parse(&recorder.csv(), "soak.csv").unwrap();
        assert_eq!(lines, recorder.lines);
        assert_eq!((lines[0].frame_median_ms, lines[1].frames), (60.0, 1));

        let steady: Vec<SoakLine> = (0..10).map(|m| line(60.0 * m as f64, 1000, 50, 80.0)).collect();
        let summary = SoakSummary::of(&steady, 300.0, 100.0, "soak.csv").unwrap();
        assert!(summary.failures.is_empty(), "{:?}", summary.failures);
        assert_eq!(summary.rss_growth, Some(0.0));

        let mut leaking = steady.clone();
        leaking[9] = line(540.0, 1100, 80, 130.0);
        let summary = SoakSummary::of(&leaking, 300.0, 100.0, "soak.csv").unwrap();
        let failures = summary.failures.join("; ");
        assert!(
            failures.contains("grew 10.0%")
                && failures.contains("plateau of 50")
                && failures.contains("130 ms"),
            "{failures}"
        );
        let short = SoakSummary::of(&steady[..2], 300.0, 100.0, "soak.csv").unwrap_err();
        assert!(short.to_string().contains("run it longer"), "{short}");
        let wrong = SoakLine::parse("step,loss\n", "x.csv").unwrap_err();
        assert!(wrong.to_string().contains("--soak-log"), "{wrong}");
    }
}
