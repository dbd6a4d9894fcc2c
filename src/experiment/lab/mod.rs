//! One entry to every experiment for the CLI, the app and the page: which one and how much
//! ([`Setup`], `setup.rs`), run with its progress, table rows and plot points as [`Event`]s
//! (`events.rs`), its report files written. Each experiment's live run is a file here
//! (`adaptive_skip.rs`, `compression.rs`, `ladder.rs`, `skip_search.rs`, `speedrun.rs`,
//! `step_search.rs`); its plan and measurements are `experiment/<name>.rs`, its report
//! `experiment/<name>_report.rs` (`report.rs` for adaptive-skip; compression's and the
//! speed-run's in their own file).

mod adaptive_skip;
mod common;
mod compression;
mod events;
mod ladder;
mod setup;
mod skip_search;
mod speedrun;
mod step_search;

pub use events::{Event, LivePlot, Sink};
pub use setup::{AdaptiveSkipSetup, CompressionSetup, Kind, Plan, Setup, SkipSearchSetup, StepSearchSetup};

use super::{ExperimentReport, Header, Inputs, ReportFile};
use crate::{Gpu, Result};
use web_time::Instant;

/// What a finished experiment made.
pub struct Finished {
    /// The report's Markdown (what `wgdiff experiment` prints).
    pub markdown: String,
    /// The report's files (natively written into the setup's folder; a page keeps them), its
    /// text files first and then its plots.
    pub files: Vec<ReportFile>,
}

impl Finished {
    /// The report files' names.
    pub fn names(&self) -> Vec<&str> {
        self.files.iter().map(|(name, _)| name.as_str()).collect()
    }
}

/// Runs `setup` on `gpu` with its files from `inputs`, telling `on_event` what happens; with
/// inputs from disk then writes its report files into `setup.out` (a page keeps them; the
/// report's header names `command` and the device). The same run for `wgdiff experiment`, the
/// app and the page.
pub async fn run(
    gpu: &Gpu,
    setup: &Setup,
    inputs: &Inputs,
    command: &str,
    on_event: &mut Sink<'_>,
) -> Result<Finished> {
    setup.validate()?;
    let on_disk = matches!(inputs, Inputs::Disk);
    if on_disk {
        crate::fsio::check_writable_dir(&setup.out)?;
    }
    let started = Instant::now();
    let header = || Header::new(crate::gpu::describe(&gpu.info), command.to_string(), started);
    let report: Box<dyn ExperimentReport> = match &setup.plan {
        Plan::AdaptiveSkip(s) => {
            Box::new(adaptive_skip::adaptive_skip_run(gpu, s, inputs, header, on_event).await?)
        }
        Plan::Compression(s) => {
            Box::new(compression::compression_run(gpu, s, inputs, header, on_event).await?)
        }
        Plan::Ladder(p) => Box::new(ladder::ladder_run(gpu, p, inputs, header, on_event).await?),
        Plan::SkipSearch(s) => {
            Box::new(skip_search::skip_search_run(gpu, s, inputs, header, on_event).await?)
        }
        Plan::Speedrun(p) => Box::new(speedrun::speedrun_run(gpu, p, inputs, header, on_event).await?),
        Plan::StepSearch(s) => {
            Box::new(step_search::step_search_run(gpu, s, inputs, header, on_event).await?)
        }
    };
    let files = match on_disk {
        true => super::write_report(report.as_ref(), &setup.out)?,
        false => super::report_files(report.as_ref())?,
    };
    Ok(Finished {
        markdown: report.markdown(),
        files,
    })
}
