//! What an experiment tells its shell while it runs: [`Event`]s (notes, progress, table rows,
//! plot points on a [`LivePlot`]'s axes) into a [`Sink`].

use crate::classifier::mnist_fid_label;
use crate::Result;

/// The axes of a plot an experiment draws live, and whether a series' points are joined in
/// the order they come (a curve over time) or stand alone (one point per setting).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LivePlot {
    pub title: &'static str,
    pub x: &'static str,
    /// The y axis; an MNIST-FID axis says over how many images it was scored.
    pub y: String,
    pub joined: bool,
}

impl LivePlot {
    pub(super) fn new(title: &'static str, x: &'static str, y: &str, joined: bool) -> LivePlot {
        LivePlot {
            title,
            x,
            y: y.to_string(),
            joined,
        }
    }

    /// A plot whose y axis is MNIST-FID over `samples` images.
    pub(super) fn mnist_fid(title: &'static str, x: &'static str, samples: usize, joined: bool) -> LivePlot {
        LivePlot::new(title, x, &mnist_fid_label(samples), joined)
    }
}

/// A table's column headings.
pub(super) fn headings(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

/// What an experiment reports while it runs (owned, so a job can send it on as it is).
pub enum Event {
    /// A phase started or something worth a line happened.
    Note(String),
    /// `done` of `total` `unit` of the current phase; `what` is running.
    Progress {
        done: usize,
        total: usize,
        unit: &'static str,
        what: String,
    },
    /// A row of one of the experiment's tables is measured; a row with a `key` seen before
    /// replaces that row (a compression row gets its time once its model's rows are timed).
    Row {
        table: &'static str,
        columns: Vec<String>,
        key: String,
        cells: Vec<String>,
    },
    /// A point of one of the experiment's plots, on the line of `series`.
    Point {
        plot: LivePlot,
        series: String,
        x: f64,
        y: f64,
    },
}

/// Where events go; an error it returns (the app's Cancel) stops the experiment.
pub type Sink<'a> = dyn FnMut(Event) -> Result<()> + 'a;
