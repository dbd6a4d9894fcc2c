//! What every PNG plot shares (experiment plots, the roofline): the embedded DejaVu Sans Mono
//! registered with plotters once per process, so plots need no system fonts.

use crate::{Error, Result};
use plotters::style::FontStyle;
use std::path::Path;
use std::sync::OnceLock;

/// The family name the embedded font is registered under.
pub const FONT: &str = "wgdiff-mono";

/// The error of writing the plot at `path`.
pub fn plot_error(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Io {
        what: format!("the plot {}", path.display()),
        reason: e.to_string(),
    }
}

/// Registers the embedded font with plotters (once per process); `path` names the plot in the
/// error.
pub fn register_font(path: &Path) -> Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        let bytes: &'static [u8] = include_bytes!("../assets/fonts/DejaVuSansMono.ttf");
        plotters::style::register_font(FONT, FontStyle::Normal, bytes).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(plot_error(
            path,
            "the embedded font assets/fonts/DejaVuSansMono.ttf does not parse",
        ))
    }
}
