//! What every PNG plot shares (experiment plots, the roofline): the embedded DejaVu Sans Mono
//! registered with plotters once per process (no system fonts), and rendering to PNG bytes or a file.

use crate::{Error, Result};
use plotters::coord::Shift;
use plotters::prelude::{BitMapBackend, DrawingArea, IntoDrawingArea, WHITE};
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

/// Draws a `size` (width, height) picture with `draw` on a white-filled area in memory and
/// writes it as a PNG to `path` (atomically, through `fsio`); registers the font first.
pub fn render_png(
    path: &Path,
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<BitMapBackend<'_>, Shift>) -> Result<()>,
) -> Result<()> {
    crate::fsio::write_atomic(path, &png_bytes(path, size, draw)?)
}

/// [`render_png`]'s PNG bytes, written nowhere (a page offers them as a download); `path`
/// names the plot in errors.
pub fn png_bytes(
    path: &Path,
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<BitMapBackend<'_>, Shift>) -> Result<()>,
) -> Result<Vec<u8>> {
    register_font(path)?;
    let mut pixels = vec![0u8; (size.0 * size.1 * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, size).into_drawing_area();
        root.fill(&WHITE).map_err(|e| plot_error(path, e))?;
        draw(&root)?;
        root.present().map_err(|e| plot_error(path, e))?;
    }
    let image = image::RgbImage::from_raw(size.0, size.1, pixels)
        .ok_or_else(|| plot_error(path, "the rendered buffer has the wrong size"))?;
    let mut png = Vec::new();
    image
        .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .map_err(|e| plot_error(path, format!("cannot encode the PNG: {e}")))?;
    Ok(png)
}
