//! Sample grids and per-step frames as PNG files (native): what `wgdiff sample`, `train` and
//! the experiments write.

use crate::data::{grid_columns, save_grid, GridLayout};
use crate::diffusion::Step;
use crate::{Error, Result, Tensor};
use std::path::Path;

/// Writes `step`'s x_t and predicted x_0 as `step_NNNN_xt.png` / `step_NNNN_x0.png` grids into
/// `dir` (what `wgdiff sample --frames` does after every step).
pub fn save_step_frames(dir: &Path, step: &Step) -> Result<()> {
    write_grid(&dir.join(format!("step_{:04}_xt.png", step.index)), step.x, 1)?;
    if let Some(x0) = step.x0 {
        write_grid(&dir.join(format!("step_{:04}_x0.png", step.index)), x0, 1)?;
    }
    Ok(())
}

/// Writes `images` [N, C, H, W] in [-1, 1] as a PNG grid, upscaled `scale` times.
pub fn write_grid(path: &Path, images: &Tensor, scale: usize) -> Result<()> {
    let shape: [usize; 4] = images.shape().try_into().map_err(|_| {
        Error::shape(
            "write_grid",
            format!("images must be [N, C, H, W], got {:?}", images.shape()),
        )
    })?;
    save_grid_of(path, &images.to_vec()?, shape, scale)
}

/// [`write_grid`] of images already on the host (`shape` = [N, C, H, W]).
pub fn save_grid_of(path: &Path, images: &[f32], shape: [usize; 4], scale: usize) -> Result<()> {
    let layout = GridLayout {
        columns: grid_columns(shape[0]),
        scale,
        ..GridLayout::default()
    };
    save_grid(path, images, shape, layout)
}
