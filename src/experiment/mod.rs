//! Experiments that regenerate a published study's tables end to end: the runs, their Markdown
//! report and PNG plots (`wgdiff experiment ...`), and the header, report and plan they share.

// (a page runs comparisons; the other experiments and the PNG plots are native)
#[cfg(not(target_arch = "wasm32"))]
pub mod adaptive_skip;
pub mod compare;
#[cfg(not(target_arch = "wasm32"))]
pub mod compression;
#[cfg(not(target_arch = "wasm32"))]
pub mod lab;
#[cfg(not(target_arch = "wasm32"))]
pub mod ladder;
#[cfg(not(target_arch = "wasm32"))]
pub mod ladder_report;
#[cfg(not(target_arch = "wasm32"))]
pub mod plots;
#[cfg(not(target_arch = "wasm32"))]
pub mod report;
pub mod round_robin;
#[cfg(not(target_arch = "wasm32"))]
pub mod skip_search;
#[cfg(not(target_arch = "wasm32"))]
pub mod skip_search_report;
#[cfg(not(target_arch = "wasm32"))]
pub mod speedrun;
#[cfg(not(target_arch = "wasm32"))]
pub mod step_search;
#[cfg(not(target_arch = "wasm32"))]
pub mod step_search_report;

use crate::Result;
use serde::Serialize;
use std::path::Path;
#[cfg(not(target_arch = "wasm32"))]
use std::time::SystemTime;

/// When, where and by what command a report was made, and how long its experiment took: the
/// first fields of every report's JSON and the line under every report's title.
#[derive(Clone, Debug, Serialize)]
pub struct Header {
    /// When the report was made, RFC 3339 to the second.
    pub date: String,
    /// The device the experiment ran on.
    pub device: String,
    /// The command that made it: `wgdiff` and the process's arguments.
    pub command: String,
    /// Seconds from the experiment's start to its report.
    pub wall_seconds: f64,
}

impl Header {
    /// The header of a report made now by `command`, of an experiment that ran on `device`
    /// from `started`.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn new(device: String, command: String, started: web_time::Instant) -> Header {
        Header {
            date: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
            device,
            command,
            wall_seconds: started.elapsed().as_secs_f64(),
        }
    }

    /// The Markdown line under a report's title: the command, the device, the date and the
    /// wall time.
    pub fn markdown(&self) -> String {
        format!(
            "`{}` on {}, {}; {:.0} s in all.",
            self.command, self.device, self.date, self.wall_seconds
        )
    }
}

/// What `wgdiff experiment` does with every experiment's report.
pub trait ExperimentReport {
    /// The whole report as Markdown: a title, the header's line, the tables.
    fn markdown(&self) -> String;

    /// Writes the report's files into `out` (its Markdown, its JSON, its plots and whatever else
    /// it makes); returns what it wrote.
    fn write_files(&self, out: &Path) -> Result<Vec<String>>;
}

/// How much an experiment measures: a small run for lavapipe (`--quick`) or the full one for a
/// real GPU, which the command's flags then adjust.
pub trait ExperimentPlan: Sized {
    /// The `--quick` run.
    fn quick() -> Self;

    /// The full run.
    fn full() -> Self;

    /// [`quick`](Self::quick) with `--quick`, else [`full`](Self::full).
    fn choose(quick: bool) -> Self {
        if quick {
            Self::quick()
        } else {
            Self::full()
        }
    }
}

/// Writes a report's `<stem>.md` (`markdown`) and `<stem>.json` (`report` serialised) into
/// `out`, creating the folder, each file atomically; the experiments' plots go beside them.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn write_text_report(
    out: &Path,
    stem: &str,
    markdown: &str,
    report: &impl Serialize,
) -> Result<()> {
    std::fs::create_dir_all(out).map_err(|e| crate::Error::Io {
        what: format!("creating the output folder {}", out.display()),
        reason: e.to_string(),
    })?;
    let json = serde_json::to_string_pretty(report).map_err(|e| crate::Error::Io {
        what: format!("the {stem} report as JSON"),
        reason: e.to_string(),
    })?;
    crate::fsio::write_atomic(&out.join(format!("{stem}.md")), markdown.as_bytes())?;
    crate::fsio::write_atomic(&out.join(format!("{stem}.json")), json.as_bytes())
}
