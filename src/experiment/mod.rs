//! Experiments that regenerate a seed paper's tables end to end: the runs, their Markdown
//! report and PNG plots (`wgdiff experiment ...`).

pub mod adaptive_skip;
pub mod compression;
pub mod ladder;
pub mod ladder_report;
pub mod plots;
pub mod report;
pub mod round_robin;
pub mod skip_search;
pub mod skip_search_report;
pub mod speedrun;

use crate::{Error, Result};
use std::path::Path;

/// Writes a report's `<stem>.md` (`markdown`) and `<stem>.json` (`report` serialised) into
/// `out`, creating the folder, each file atomically; the experiments' plots go beside them.
pub(crate) fn write_text_report(
    out: &Path,
    stem: &str,
    markdown: &str,
    report: &impl serde::Serialize,
) -> Result<()> {
    std::fs::create_dir_all(out).map_err(|e| Error::Io {
        what: format!("creating the output folder {}", out.display()),
        reason: e.to_string(),
    })?;
    let json = serde_json::to_string_pretty(report).map_err(|e| Error::Io {
        what: format!("the {stem} report as JSON"),
        reason: e.to_string(),
    })?;
    crate::checkpoint::write_atomic(&out.join(format!("{stem}.md")), markdown.as_bytes())?;
    crate::checkpoint::write_atomic(&out.join(format!("{stem}.json")), json.as_bytes())
}
