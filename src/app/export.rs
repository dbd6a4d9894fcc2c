//! Exports of the denoise view: the samples as a PNG grid, every recorded step's x_t and
//! predicted x_0 grids as PNGs and both as animated GIFs, read back from the device at export.

use super::platform;
use crate::data::{grid_image, GridLayout};
use crate::{Error, Result, Tensor};
use image::codecs::gif::{GifEncoder, Repeat};
use image::{Delay, Frame, RgbaImage};
use std::path::Path;

/// PNG bytes of an RGBA image.
pub fn png_bytes(width: u32, height: u32, rgba: Vec<u8>) -> Result<Vec<u8>> {
    let image = RgbaImage::from_raw(width, height, rgba).ok_or_else(|| {
        Error::shape(
            "png",
            format!("{width}x{height} RGBA needs {} bytes", width * height * 4),
        )
    })?;
    let mut png = Vec::new();
    image
        .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .map_err(|e| Error::Io {
            what: "encoding a PNG".into(),
            reason: e.to_string(),
        })?;
    Ok(png)
}

/// An animated GIF of `frames` (each shown `delay_ms`, looping).
pub fn gif_bytes(frames: Vec<RgbaImage>, delay_ms: u32) -> Result<Vec<u8>> {
    let mut gif = Vec::new();
    {
        let mut encoder = GifEncoder::new_with_speed(&mut gif, 10);
        let io = |e: image::ImageError| Error::Io {
            what: "encoding a GIF".into(),
            reason: e.to_string(),
        };
        encoder.set_repeat(Repeat::Infinite).map_err(io)?;
        let delay = Delay::from_numer_denom_ms(delay_ms, 1);
        encoder
            .encode_frames(frames.into_iter().map(|f| Frame::from_parts(f, 0, 0, delay)))
            .map_err(io)?;
    }
    Ok(gif)
}

/// One recorded step's tensors as a grid picture (upscaled 2x, like `wgdiff sample`).
async fn grid_picture(images: &Tensor, columns: usize) -> Result<RgbaImage> {
    let shape: [usize; 4] = images.shape().try_into().map_err(|_| {
        Error::shape(
            "export",
            format!("expected [N, C, H, W], got {:?}", images.shape()),
        )
    })?;
    let layout = GridLayout {
        columns,
        scale: 2,
        ..GridLayout::default()
    };
    Ok(grid_image(&images.to_vec_async().await?, shape, layout)?.to_rgba8())
}

/// Writes `images` as the PNG grid `wgdiff sample` writes (2x, `columns` wide) to `path` and
/// hands it to the user.
pub async fn save_samples(images: &Tensor, columns: usize, path: &Path) -> Result<()> {
    let picture = grid_picture(images, columns).await?;
    let png = png_bytes(picture.width(), picture.height(), picture.into_raw())?;
    platform::write_file(path, &png)?;
    platform::deliver(path)
}

/// Writes `step_NNNN_xt.png` / `step_NNNN_x0.png` for every step and `xt.gif` / `x0.gif` into
/// `dir`; `progress(done, total)` after each step. Returns the files written.
pub async fn export_frames(
    steps: &[(Tensor, Option<Tensor>)],
    columns: usize,
    dir: &Path,
    mut progress: impl FnMut(usize, usize) -> Result<()>,
) -> Result<usize> {
    let (mut xt_frames, mut x0_frames, mut written) = (Vec::new(), Vec::new(), 0);
    for (i, (xt, x0)) in steps.iter().enumerate() {
        for (tensor, name, frames) in [
            (Some(xt), "xt", &mut xt_frames),
            (x0.as_ref(), "x0", &mut x0_frames),
        ] {
            let Some(tensor) = tensor else { continue };
            let picture = grid_picture(tensor, columns).await?;
            let png = png_bytes(picture.width(), picture.height(), picture.as_raw().clone())?;
            let path = dir.join(format!("step_{i:04}_{name}.png"));
            platform::write_file(&path, &png)?;
            platform::deliver(&path)?;
            frames.push(picture);
            written += 1;
        }
        progress(i + 1, steps.len())?;
    }
    for (frames, name) in [(xt_frames, "xt.gif"), (x0_frames, "x0.gif")] {
        if !frames.is_empty() {
            platform::write_file(&dir.join(name), &gif_bytes(frames, 120)?)?;
            platform::deliver(&dir.join(name))?;
            written += 1;
        }
    }
    Ok(written)
}
