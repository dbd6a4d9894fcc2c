//! `wgdiff bench app`: a training job in the app against the same job from the CLI, rounds
//! alternating: steps per second of each (from their step logs) and the app's frame intervals.

use crate::median::median;
use crate::train::StepLog;
use crate::{Error, Result};
use serde::Serialize;

/// One round: the CLI's and the app's steps per second (after the warm-up steps) and the
/// app's frame intervals while it trained.
#[derive(Clone, Debug, Serialize)]
pub struct AppRound {
    pub round: usize,
    pub cli_steps_per_second: f64,
    pub app_steps_per_second: f64,
    /// App over CLI.
    pub ratio: f64,
    pub frames: usize,
    pub frame_median_ms: f64,
    pub frame_p95_ms: f64,
}

impl AppRound {
    /// A round from the two step logs (CSV texts, `skip` warm-up steps left out) and the app's
    /// frame log (`wgdiff gui --frame-log`); names are the files, for errors.
    pub fn from_logs(
        round: usize,
        cli_steps: (&str, &str),
        app_steps: (&str, &str),
        app_frames: (&str, &str),
        skip: usize,
    ) -> Result<AppRound> {
        let rate = |(text, name): (&str, &str)| {
            StepLog::parse(text, name)?.steps_per_second(skip).ok_or_else(|| {
                Error::Config(format!(
                    "{name}: fewer than two steps after the {skip} warm-up steps (raise --steps)"
                ))
            })
        };
        let (cli, app) = (rate(cli_steps)?, rate(app_steps)?);
        let mut ms = frame_intervals(app_frames.0, app_frames.1, "training")?;
        if ms.is_empty() {
            return Err(Error::Config(format!(
                "{}: no frames while training",
                app_frames.1
            )));
        }
        ms.sort_by(f64::total_cmp);
        Ok(AppRound {
            round,
            cli_steps_per_second: cli,
            app_steps_per_second: app,
            ratio: app / cli,
            frames: ms.len(),
            frame_median_ms: median(&ms),
            frame_p95_ms: crate::median::percentile(&ms, 0.95),
        })
    }
}

/// The frame intervals (ms) of an app's frame log (`at_s,interval_ms,...,activity`, as
/// `wgdiff gui --frame-log` writes it) during `activity`, the first frame left out.
pub fn frame_intervals(csv: &str, name: &str, activity: &str) -> Result<Vec<f64>> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let column = |title: &str| {
        header.iter().position(|h| *h == title).ok_or_else(|| {
            Error::Config(format!(
                "{name}: not a frame log (no `{title}` column; write one with wgdiff gui --frame-log)"
            ))
        })
    };
    let (interval, kind) = (column("interval_ms")?, column("activity")?);
    let mut ms = Vec::new();
    for (i, line) in lines.enumerate().skip(1) {
        let fields: Vec<&str> = line.split(',').collect();
        let bad = || Error::Config(format!("{name}: line {} is malformed: {line:?}", i + 2));
        if fields.get(kind).ok_or_else(bad)? == &activity {
            ms.push(fields[interval].parse().map_err(|_| bad())?);
        }
    }
    Ok(ms)
}

/// The rounds' summary: median app/CLI ratio, median and worst frame 95th percentile.
#[derive(Clone, Debug, Serialize)]
pub struct AppSummary {
    pub rounds: usize,
    pub median_ratio: f64,
    pub median_frame_p95_ms: f64,
    pub max_frame_p95_ms: f64,
}

impl AppSummary {
    pub fn of(rounds: &[AppRound]) -> AppSummary {
        let p95: Vec<f64> = rounds.iter().map(|r| r.frame_p95_ms).collect();
        AppSummary {
            rounds: rounds.len(),
            median_ratio: median(&rounds.iter().map(|r| r.ratio).collect::<Vec<_>>()),
            median_frame_p95_ms: median(&p95),
            max_frame_p95_ms: p95.iter().copied().fold(f64::NAN, f64::max),
        }
    }
}

/// The rounds as a Markdown table and the summary line.
pub fn table(rounds: &[AppRound]) -> String {
    let mut out = String::from(
        "| round | CLI steps/s | app steps/s | app / CLI | frames | frame median (ms) | frame p95 (ms) |\n\
         |---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rounds {
        out += &format!(
            "| {} | {:.2} | {:.2} | {:.2} | {} | {:.1} | {:.1} |\n",
            r.round,
            r.cli_steps_per_second,
            r.app_steps_per_second,
            r.ratio,
            r.frames,
            r.frame_median_ms,
            r.frame_p95_ms
        );
    }
    let s = AppSummary::of(rounds);
    out += &format!(
        "\nmedian app / CLI throughput {:.2} over {} round{}; frame interval 95th percentile: median \
         {:.1} ms, worst {:.1} ms\n",
        s.median_ratio,
        s.rounds,
        if s.rounds == 1 { "" } else { "s" },
        s.median_frame_p95_ms,
        s.max_frame_p95_ms
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_reads_both_step_logs_and_the_training_frames() {
        let steps = |seconds_per_step: f64| {
            let mut csv = String::from("step,loss,seconds,elapsed\n");
            for s in 1..=10 {
                csv += &format!("{s},0.5,{seconds_per_step},{}\n", s as f64 * seconds_per_step);
            }
            csv
        };
        let frames = "at_s,interval_ms,build_ms,previous_frame_ms,activity\n\
                      0.0,0.0,1.0,,idle\n\
                      0.1,50.0,1.0,2.0,training\n\
                      0.2,60.0,1.0,2.0,training\n\
                      0.3,90.0,1.0,2.0,training\n\
                      0.4,10.0,1.0,2.0,idle\n";
        let round = AppRound::from_logs(
            1,
            (&steps(0.1), "cli.csv"),
            (&steps(0.2), "app.csv"),
            (frames, "frames.csv"),
            2,
        )
        .unwrap();
        assert!((round.cli_steps_per_second - 10.0).abs() < 1e-9);
        assert!((round.ratio - 0.5).abs() < 1e-9);
        assert_eq!(round.frames, 3);
        assert_eq!(round.frame_median_ms, 60.0);
        assert_eq!(round.frame_p95_ms, 90.0);
        let error = frame_intervals("step,loss\n", "f.csv", "training")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("f.csv") && error.contains("--frame-log"),
            "{error}"
        );
    }
}
