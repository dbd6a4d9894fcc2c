//! Operands read as rgba32float texels: a copy of a storage buffer's vec4s into a 2D texture
//! [`TEXEL_ROW`] texels wide, which a kernel binds as `texture_2d<f32>` and reads with
//! `textureLoad` (shaders/texels.wgsl). Lavapipe's probes load texels several times faster
//! than storage buffers (BENCHMARKS.md, "The adapter's roof besides its FMAs"); the blocked
//! matmul reading its operands so ran 1.5x faster on Mesa 25 and no faster on Mesa 22.3
//! ("Matmul operands as texels"). WebGPU has these textures everywhere, the page included.

use super::Gpu;
use crate::{Error, Result};
use std::sync::Mutex;

/// Texels per texture row; vec4 `e` is texel (e % TEXEL_ROW, e / TEXEL_ROW)
/// (shaders/texels.wgsl's `TEXEL_SHIFT`).
pub const TEXEL_ROW: u32 = 2048;

/// Idle textures kept for reuse: a matmul holds two while it is recorded (a texture per call
/// held every copy of a training step until its submit finished: peak RSS 937 -> 1,598 MB in
/// `bench train`).
const IDLE_TEXTURES: usize = 2;

/// Textures of texels no longer bound by recorded work, reused by later copies (recorded work
/// is ordered, as with pooled buffers).
#[derive(Default)]
pub(crate) struct TexelPool {
    /// (rows, texture), every one [`TEXEL_ROW`] texels wide.
    idle: Mutex<Vec<(u32, wgpu::Texture)>>,
}

impl TexelPool {
    /// The smallest idle texture of at least `rows` rows, or a new one of `rows` rounded up to
    /// an eighth of its power of two (at most `max_rows`).
    fn take(&self, device: &wgpu::Device, rows: u32, max_rows: u32) -> (u32, wgpu::Texture) {
        let mut idle = self.idle.lock().unwrap();
        let best = (0..idle.len())
            .filter(|&i| idle[i].0 >= rows)
            .min_by_key(|&i| idle[i].0);
        if let Some(i) = best {
            return idle.swap_remove(i);
        }
        let eighth = (rows.next_power_of_two() / 8).max(1);
        let rows = rows.next_multiple_of(eighth).min(max_rows);
        let texture = device.create_texture(&wgpu::TextureDescriptor {
            label: Some("wgdiff texels"),
            size: wgpu::Extent3d {
                width: TEXEL_ROW,
                height: rows,
                depth_or_array_layers: 1,
            },
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format: wgpu::TextureFormat::Rgba32Float,
            usage: wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
            view_formats: &[],
        });
        (rows, texture)
    }

    /// Keeps `texture` for reuse, dropping the smallest idle one beyond [`IDLE_TEXTURES`].
    fn give_back(&self, rows: u32, texture: wgpu::Texture) {
        let mut idle = self.idle.lock().unwrap();
        idle.push((rows, texture));
        if idle.len() > IDLE_TEXTURES {
            let smallest = (0..idle.len()).min_by_key(|&i| idle[i].0).unwrap();
            idle.swap_remove(smallest);
        }
    }

    /// How many textures are idle (tests).
    pub(crate) fn idle(&self) -> usize {
        self.idle.lock().unwrap().len()
    }
}

/// A buffer's leading vec4s as texels, for the dispatches recorded while it lives; dropped, its
/// texture goes back to the device's pool.
pub struct Texels {
    gpu: Gpu,
    texture: Option<(u32, wgpu::Texture)>,
    view: wgpu::TextureView,
}

impl Texels {
    pub(crate) fn view(&self) -> &wgpu::TextureView {
        &self.view
    }
}

impl Drop for Texels {
    fn drop(&mut self) {
        if let Some((rows, texture)) = self.texture.take() {
            self.gpu.texel_pool.give_back(rows, texture);
        }
    }
}

impl Gpu {
    /// Whether `vec4s` values fit one texel operand on this device.
    pub fn texels_fit(&self, vec4s: usize) -> bool {
        vec4s > 0 && vec4s.div_ceil(TEXEL_ROW as usize) <= self.limits.max_texture_dimension_2d as usize
    }

    /// The first `vec4s` vec4s of `buffer` as texels, copied in order with the recorded work
    /// (`what` names the operand in the error when it does not fit).
    pub fn texels(&self, buffer: &wgpu::Buffer, vec4s: usize, what: &str) -> Result<Texels> {
        let max_rows = self.limits.max_texture_dimension_2d;
        if !self.texels_fit(vec4s) {
            return Err(Error::TooLarge {
                what: format!("{what} as texels"),
                bytes: 16 * vec4s as u64,
                limit: 16 * u64::from(TEXEL_ROW) * u64::from(max_rows),
            });
        }
        let full_rows = (vec4s / TEXEL_ROW as usize) as u32;
        let rest = (vec4s % TEXEL_ROW as usize) as u32;
        let (rows, texture) = self
            .texel_pool
            .take(&self.device, full_rows + (rest > 0) as u32, max_rows);
        let mut copies = Vec::with_capacity(2);
        if full_rows > 0 {
            copies.push((0, full_rows, TEXEL_ROW));
        }
        if rest > 0 {
            copies.push((full_rows, 1, rest));
        }
        self.batch
            .lock()
            .unwrap()
            .copy_to_texture(&self.device, buffer, &texture, 16 * TEXEL_ROW, &copies);
        Ok(Texels {
            gpu: self.clone(),
            view: texture.create_view(&wgpu::TextureViewDescriptor::default()),
            texture: Some((rows, texture)),
        })
    }

    /// Idle textures of texels the device keeps for reuse (at most a few).
    pub fn idle_texel_textures(&self) -> usize {
        self.texel_pool.idle()
    }
}
