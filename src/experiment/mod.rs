//! Experiments that regenerate a published study's tables end to end: the runs, their Markdown
//! report and PNG plots (`wgdiff experiment ...`), and the header, report and plan they share.

pub mod adaptive_skip;
pub mod compare;
pub mod compression;
pub mod inputs;
pub mod lab;
pub mod ladder;
pub mod ladder_report;
pub mod plots;
pub mod report;
pub mod round_robin;
pub mod skip_search;
pub mod skip_search_report;
pub mod speedrun;
pub mod step_search;
pub mod step_search_report;

pub use inputs::Inputs;

use crate::Result;
use serde::Serialize;

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
    pub fn new(device: String, command: String, started: web_time::Instant) -> Header {
        Header {
            date: now_rfc3339(),
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

/// Now in UTC, RFC 3339 to the second (`2026-11-28T09:30:00Z`), natively and in a page.
/// (web_time reads the clock in a page too; std's `SystemTime` only holds the instant there)
fn now_rfc3339() -> String {
    let since_1970 = web_time::SystemTime::now()
        .duration_since(web_time::UNIX_EPOCH)
        .unwrap_or_default();
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + since_1970).to_string()
}

/// One file of a report: its name in the report's folder and its bytes.
pub type ReportFile = (String, Vec<u8>);

/// What `wgdiff experiment` (and the app) does with every experiment's report.
pub trait ExperimentReport {
    /// The whole report as Markdown: a title, the header's line, the tables.
    fn markdown(&self) -> String;

    /// The report's files but its plots: its Markdown, its JSON and whatever else it makes
    /// (schedule files).
    fn files(&self) -> Result<Vec<ReportFile>>;

    /// The report's PNG plots (the same bytes natively and in a page).
    fn plots(&self) -> Result<Vec<ReportFile>>;
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

/// `report`'s files and plots, names and bytes, its text files first.
pub fn report_files(report: &dyn ExperimentReport) -> Result<Vec<ReportFile>> {
    let mut files = report.files()?;
    files.extend(report.plots()?);
    Ok(files)
}

/// Writes `report`'s files and plots into `out`, all or none (a full disk half-way leaves the
/// earlier report whole); returns them, names and bytes, its text files first.
pub fn write_report(report: &dyn ExperimentReport, out: &std::path::Path) -> Result<Vec<ReportFile>> {
    let files = report_files(report)?;
    crate::fsio::write_all_or_none(out, |staging| {
        for (name, bytes) in &files {
            crate::fsio::write_atomic(&staging.join(name), bytes)?;
        }
        Ok(Vec::new())
    })?;
    Ok(files)
}

/// A report's `<stem>.md` (`markdown`) and `<stem>.json` (`report` serialised).
pub(crate) fn text_files(stem: &str, markdown: &str, report: &impl Serialize) -> Result<Vec<ReportFile>> {
    let json = serde_json::to_string_pretty(report).map_err(|e| crate::Error::Io {
        what: format!("the {stem} report as JSON"),
        reason: e.to_string(),
    })?;
    Ok(vec![
        (format!("{stem}.md"), markdown.as_bytes().to_vec()),
        (format!("{stem}.json"), json.into_bytes()),
    ])
}
