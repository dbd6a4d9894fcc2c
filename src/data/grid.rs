//! Image grids: NCHW images in [-1, 1] tiled into one grayscale or RGB picture (`grid_image`,
//! for the GUI and video frames) and saved as a PNG written atomically (`save_grid`).

use crate::{Error, Result};
use image::{DynamicImage, ImageBuffer, ImageFormat, Luma, Rgb};
use std::io::Cursor;
use std::path::Path;

/// How images are tiled: `columns` per row (fewer when there are fewer images), `padding`
/// black pixels between and around them, each image pixel drawn as `scale` x `scale` pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GridLayout {
    pub columns: usize,
    pub padding: usize,
    pub scale: usize,
}

impl Default for GridLayout {
    /// 8 columns, 2 pixels of padding, no upscaling.
    fn default() -> Self {
        GridLayout {
            columns: 8,
            padding: 2,
            scale: 1,
        }
    }
}

/// A value in [-1, 1] as a byte (clamped; NaN becomes 0).
fn to_byte(v: f32) -> u8 {
    ((v + 1.0) * 127.5).round().clamp(0.0, 255.0) as u8
}

/// Tiles `images` of shape [n, c, h, w] (c = 1 gives a grayscale picture, c = 3 an RGB one).
pub fn grid_image(images: &[f32], shape: [usize; 4], layout: GridLayout) -> Result<DynamicImage> {
    let [n, c, h, w] = shape;
    let GridLayout {
        columns,
        padding: pad,
        scale,
    } = layout;
    let problem = if c != 1 && c != 3 {
        Some(format!("images need 1 (grayscale) or 3 (RGB) channels, got {c}"))
    } else if n * h * w == 0 || columns == 0 || scale == 0 {
        Some(format!(
            "images of shape {shape:?} and {layout:?} make an empty grid; every figure must be >= 1"
        ))
    } else if images.len() != n * c * h * w {
        Some(format!(
            "shape {shape:?} needs {} values, got {}",
            n * c * h * w,
            images.len()
        ))
    } else {
        None
    };
    if let Some(msg) = problem {
        return Err(Error::shape("grid_image", msg));
    }
    let cols = columns.min(n);
    let rows = n.div_ceil(cols);
    let (cell_h, cell_w) = (h * scale, w * scale);
    let (width, height) = (cols * (cell_w + pad) + pad, rows * (cell_h + pad) + pad);
    let (Ok(width), Ok(height)) = (u32::try_from(width), u32::try_from(height)) else {
        let msg =
            format!("a grid of {width}x{height} pixels is too large; use fewer images or a smaller scale");
        return Err(Error::shape("grid_image", msg));
    };
    // Offset of the channel-0 value under picture pixel (x, y), or None on padding.
    let source = |x: u32, y: u32| -> Option<usize> {
        let (gx, gy) = ((x as usize).checked_sub(pad)?, (y as usize).checked_sub(pad)?);
        let (col, in_x) = (gx / (cell_w + pad), gx % (cell_w + pad));
        let (row, in_y) = (gy / (cell_h + pad), gy % (cell_h + pad));
        let k = row * cols + col;
        (in_x < cell_w && in_y < cell_h && k < n).then(|| k * c * h * w + (in_y / scale) * w + in_x / scale)
    };
    let value =
        |offset: Option<usize>, channel: usize| offset.map_or(0, |o| to_byte(images[o + channel * h * w]));
    Ok(if c == 1 {
        DynamicImage::ImageLuma8(ImageBuffer::from_fn(width, height, |x, y| {
            Luma([value(source(x, y), 0)])
        }))
    } else {
        DynamicImage::ImageRgb8(ImageBuffer::from_fn(width, height, |x, y| {
            let at = source(x, y);
            Rgb([value(at, 0), value(at, 1), value(at, 2)])
        }))
    })
}

/// Checks, before any work, that a PNG (a grid, a screenshot) may be written to `path`: a
/// `.png` name, and nothing there but an earlier PNG (never a checkpoint, a folder or a device
/// given by mistake).
pub fn check_png_output(path: &Path) -> Result<()> {
    if !path.extension().is_some_and(|e| e.eq_ignore_ascii_case("png")) {
        return Err(Error::Io {
            what: path.display().to_string(),
            reason: "the output is a PNG image: give it a .png name".into(),
        });
    }
    crate::fsio::check_replaceable(path, PNG_SIGNATURE, "a PNG image")
}

/// The first bytes of every PNG file.
const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

/// [`grid_image`] encoded as a PNG file's bytes.
/// Values that are NaN or infinite are refused: no image is made of a model or sampler whose
/// output overflowed (it would come out black).
pub fn grid_png(images: &[f32], shape: [usize; 4], layout: GridLayout) -> Result<Vec<u8>> {
    let broken = images.iter().filter(|v| !v.is_finite()).count();
    if broken > 0 {
        return Err(Error::Io {
            what: "a sample grid".into(),
            reason: format!(
                "{broken} of its {} values are NaN or infinite, so no image was written: the model's weights \
                 diverged or a sampler setting overflowed; sample an earlier checkpoint or use the sampler's \
                 default settings",
                images.len()
            ),
        });
    }
    let mut png = Vec::new();
    grid_image(images, shape, layout)?
        .write_to(&mut Cursor::new(&mut png), ImageFormat::Png)
        .map_err(|e| Error::Io {
            what: "a sample grid".into(),
            reason: format!("cannot encode the PNG: {e}"),
        })?;
    Ok(png)
}

/// Writes [`grid_image`] as a PNG to `path`, creating its folder, atomically (readers never
/// see half a picture); anything but a PNG already there is refused and left as it is.
pub fn save_grid(
    path: impl AsRef<Path>,
    images: &[f32],
    shape: [usize; 4],
    layout: GridLayout,
) -> Result<()> {
    let path = path.as_ref();
    check_png_output(path)?;
    let png = grid_png(images, shape, layout).map_err(|e| match e {
        Error::Io { reason, .. } => Error::Io {
            what: path.display().to_string(),
            reason,
        },
        e => e,
    })?;
    crate::fsio::write_atomic(path, &png)
}

/// Columns of a roughly square grid of `n` images.
pub fn grid_columns(n: usize) -> usize {
    ((n as f64).sqrt().ceil() as usize).max(1)
}
