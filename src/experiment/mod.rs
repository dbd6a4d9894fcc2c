//! Experiments that regenerate a seed paper's tables end to end: the runs, their Markdown
//! report and PNG plots (`wgdiff experiment ...`).

pub mod adaptive_skip;
pub mod ladder;
pub mod ladder_report;
pub mod plots;
pub mod report;
pub mod speedrun;
