//! What every PNG plot shares (experiment plots, the compare plot, the roofline), natively and in
//! a page alike: a bitmap whose text ab_glyph draws from the embedded DejaVu Sans Mono (plotters
//! draws text into a bitmap only natively, and a browser's fonts would change the layout), a
//! legend measured with that font, and PNG encoding. The same plot is the same bytes everywhere.

use crate::{Error, Result};
use ab_glyph::{Font, FontRef, ScaleFont};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters_backend::text_anchor::{HPos, Pos, VPos};
use plotters_backend::{BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind};
use std::path::Path;
use std::sync::OnceLock;

/// The family name plots give their text styles; every text is drawn in the embedded font.
pub const FONT: &str = "wgdiff-mono";

/// A plot's drawing area: a bitmap in memory with the embedded font's text.
pub type PlotArea<'a> = DrawingArea<GlyphBackend<'a>, Shift>;

/// The error of making the plot at `path`.
pub fn plot_error(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Io {
        what: format!("the plot {}", path.display()),
        reason: e.to_string(),
    }
}

/// The embedded font, parsed once per process; `path` names the plot in the error.
fn embedded_font(path: &Path) -> Result<FontRef<'static>> {
    static FONT_REF: OnceLock<Option<FontRef<'static>>> = OnceLock::new();
    FONT_REF
        .get_or_init(|| FontRef::try_from_slice(include_bytes!("../assets/fonts/DejaVuSansMono.ttf")).ok())
        .clone()
        .ok_or_else(|| {
            plot_error(
                path,
                "the embedded font assets/fonts/DejaVuSansMono.ttf does not parse",
            )
        })
}

/// plotters' RGB bitmap with every text drawn by ab_glyph in the embedded font: the layout of
/// plotters' own ab_glyph text (advances and kerning; a box `size / 1.24` high, the baseline
/// half a size down), anchored and rotated as plotters anchors and rotates it.
pub struct GlyphBackend<'a> {
    bitmap: BitMapBackend<'a>,
    font: FontRef<'static>,
}

impl GlyphBackend<'_> {
    /// The width and height of `text` at `size` pixels.
    fn layout(&self, text: &str, size: f64) -> (i32, i32) {
        let font = self.font.as_scaled(size as f32);
        let mut width = 0f32;
        let mut previous = None;
        for c in text.chars() {
            let glyph = font.glyph_id(c);
            width += font.h_advance(glyph);
            if let Some(p) = previous {
                width += font.kern(p, glyph);
            }
            previous = Some(glyph);
        }
        (width as i32, (size / 1.24) as i32)
    }
}

type BitmapError<'a> = <BitMapBackend<'a> as DrawingBackend>::ErrorType;

impl<'a> DrawingBackend for GlyphBackend<'a> {
    type ErrorType = BitmapError<'a>;

    fn get_size(&self) -> (u32, u32) {
        self.bitmap.get_size()
    }

    fn ensure_prepared(&mut self) -> std::result::Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.bitmap.ensure_prepared()
    }

    fn present(&mut self) -> std::result::Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.bitmap.present()
    }

    fn draw_pixel(
        &mut self,
        point: BackendCoord,
        color: BackendColor,
    ) -> std::result::Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.bitmap.draw_pixel(point, color)
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> std::result::Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.bitmap.draw_line(from, to, style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> std::result::Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.bitmap.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> std::result::Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.bitmap.draw_path(path, style)
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> std::result::Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.bitmap.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> std::result::Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.bitmap.fill_polygon(vert, style)
    }

    fn draw_text<TStyle: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &TStyle,
        pos: BackendCoord,
    ) -> std::result::Result<(), DrawingErrorKind<Self::ErrorType>> {
        let colour = style.color();
        if colour.alpha == 0.0 {
            return Ok(());
        }
        let size = style.size();
        let (width, height) = self.layout(text, size);
        let dx = match style.anchor().h_pos {
            HPos::Left => 0,
            HPos::Right => -width,
            HPos::Center => -width / 2,
        };
        let dy = match style.anchor().v_pos {
            VPos::Top => 0,
            VPos::Center => -height / 2,
            VPos::Bottom => -height,
        };
        let turn = style.transform();
        let (w, h) = self.get_size();
        let font = self.font.as_scaled(size as f32);
        let mut coverage = Vec::new();
        let mut x_shift = 0f32;
        let mut previous = None;
        for c in text.chars() {
            let glyph_id = font.glyph_id(c);
            if let Some(p) = previous {
                x_shift += font.kern(p, glyph_id);
            }
            previous = Some(glyph_id);
            if let Some(outline) = font.outline_glyph(font.scaled_glyph(c)) {
                let top = (size as f32 / 2.0 + outline.px_bounds().min.y) as i32;
                let left = x_shift as i32;
                outline.draw(|x, y, c| coverage.push((left + x as i32, top + y as i32, c)));
            }
            x_shift += font.h_advance(glyph_id);
        }
        for (x, y, c) in coverage {
            let (x, y) = turn.transform(x + dx, y + dy);
            let (x, y) = (pos.0 + x, pos.1 + y);
            if x >= 0 && x < w as i32 && y >= 0 && y < h as i32 {
                let alpha = colour.alpha * f64::from(c);
                self.bitmap.draw_pixel(
                    (x, y),
                    BackendColor {
                        alpha,
                        rgb: colour.rgb,
                    },
                )?;
            }
        }
        Ok(())
    }

    fn estimate_text_size<TStyle: BackendTextStyle>(
        &self,
        text: &str,
        style: &TStyle,
    ) -> std::result::Result<(u32, u32), DrawingErrorKind<Self::ErrorType>> {
        let (width, height) = self.layout(text, style.size());
        Ok((width.max(0) as u32, height.max(0) as u32))
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> std::result::Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.bitmap.blit_bitmap(pos, size, src)
    }
}

/// How a legend row shows its series: a line of this width, or a filled dot of this radius.
#[derive(Clone, Copy, Debug)]
pub enum Mark {
    Line(u32),
    Dot(u32),
}

/// One row of a [`draw_legend`] box.
pub struct LegendEntry {
    pub name: String,
    pub colour: RGBAColor,
    pub mark: Mark,
}

/// Where in the plotting area a legend sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Corner {
    UpperLeft,
    UpperRight,
    MiddleRight,
    LowerRight,
}

/// A legend box in `corner` of `area` (a chart's plotting area without its coordinates), its
/// rows measured with the embedded font (plotters' own legend asks the platform's font).
pub fn draw_legend(
    path: &Path,
    area: &PlotArea,
    entries: &[LegendEntry],
    corner: Corner,
    font_size: u32,
) -> Result<()> {
    if entries.is_empty() {
        return Ok(());
    }
    let err = |e: &dyn std::fmt::Display| plot_error(path, e);
    const PAD: i32 = 8;
    const MARK_PX: i32 = 22;
    const MARGIN: i32 = 10;
    let font = TextStyle::from((FONT, font_size).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    let mut text_width = 0;
    let mut row_height = 0;
    for entry in entries {
        let (w, h) = area.estimate_text_size(&entry.name, &font).map_err(|e| err(&e))?;
        text_width = text_width.max(w as i32);
        row_height = row_height.max(h as i32 + 6);
    }
    let width = PAD + MARK_PX + 6 + text_width + PAD;
    let height = PAD + row_height * entries.len() as i32 + PAD - 6;
    let (area_w, area_h) = area.dim_in_pixel();
    let (area_w, area_h) = (area_w as i32, area_h as i32);
    let left = match corner {
        Corner::UpperLeft => MARGIN,
        _ => area_w - width - MARGIN,
    };
    let top = match corner {
        Corner::UpperLeft | Corner::UpperRight => MARGIN,
        Corner::MiddleRight => (area_h - height) / 2,
        Corner::LowerRight => area_h - height - MARGIN,
    };
    let frame = [(left, top), (left + width, top + height)];
    area.draw(&Rectangle::new(frame, WHITE.mix(0.85).filled()))
        .map_err(|e| err(&e))?;
    area.draw(&Rectangle::new(frame, BLACK)).map_err(|e| err(&e))?;
    for (i, entry) in entries.iter().enumerate() {
        let middle = top + PAD + row_height * i as i32 + (row_height - 6) / 2;
        let x = left + PAD;
        match entry.mark {
            Mark::Line(w) => area.draw(&PathElement::new(
                vec![(x, middle), (x + MARK_PX, middle)],
                Color::stroke_width(&entry.colour, w),
            )),
            Mark::Dot(r) => area.draw(&Circle::new((x + MARK_PX / 2, middle), r, entry.colour.filled())),
        }
        .map_err(|e| err(&e))?;
        area.draw(&Text::new(
            entry.name.clone(),
            (x + MARK_PX + 6, middle),
            font.clone(),
        ))
        .map_err(|e| err(&e))?;
    }
    Ok(())
}

/// Draws a `size` (width, height) picture with `draw` on a white-filled area in memory and
/// returns it as PNG bytes (written by the caller: a file natively, a download in a page);
/// `path` names the plot in errors.
pub fn png_bytes(
    path: &Path,
    size: (u32, u32),
    draw: impl FnOnce(&PlotArea<'_>) -> Result<()>,
) -> Result<Vec<u8>> {
    let font = embedded_font(path)?;
    let mut pixels = vec![0u8; (size.0 * size.1 * 3) as usize];
    {
        let backend = GlyphBackend {
            bitmap: BitMapBackend::with_buffer(&mut pixels, size),
            font,
        };
        let root = backend.into_drawing_area();
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
