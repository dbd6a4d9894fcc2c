//! Spatial resampling of NCHW tensors: nearest 2x upsampling, average pooling and bicubic
//! resizing (PyTorch semantics), forward and backward, all as gathers (shaders/resample.wgsl).

use super::{kernel_for, needs_f32_fallback, FLAT_WG};
use crate::{shader, DType, Error, Result, Tensor};

/// The planes a resample map goes between: `planes` pairs of [H, W] `input` -> `output`
/// (the transpose entry points map output -> input).
#[derive(Clone, Copy)]
struct Planes {
    planes: usize,
    input: [usize; 2],
    output: [usize; 2],
}

impl Planes {
    fn params(&self, k: usize, stride: usize, mul: f32) -> Vec<u32> {
        let scale = |d: usize| (self.input[d] as f32 / self.output[d] as f32).to_bits();
        let mut p: Vec<u32> = [
            self.planes,
            self.input[0],
            self.input[1],
            self.output[0],
            self.output[1],
            k,
            stride,
        ]
        .iter()
        .map(|&v| v as u32)
        .collect();
        p.extend([mul.to_bits(), scale(0), scale(1)]);
        p
    }
}

/// A linear map between planes (an entry point of resample.wgsl) and its transpose.
struct Resample {
    planes: Planes,
    map: &'static str,
    transpose: &'static str,
    params: Vec<u32>,
}

impl Resample {
    /// Runs `entry` on `src` ([N, C, ..]) into a new [N, C, out_hw] tensor.
    fn run(&self, entry: &str, src: &Tensor, out_hw: [usize; 2]) -> Result<Tensor> {
        let gpu = src.gpu();
        let shape = [src.shape()[0], src.shape()[1], out_hw[0], out_hw[1]];
        let out = Tensor::empty(gpu, &shape, src.dtype())?;
        let kernel = kernel_for(gpu, shader!("resample"), entry, src.dtype(), &[], 1, 1);
        gpu.dispatch(
            &kernel,
            &self.params,
            &[src.buffer()],
            &[out.buffer()],
            gpu.grid((out.numel() as u32).div_ceil(FLAT_WG)),
        );
        Ok(out)
    }

    /// Applies the map (or, with `transposed`, its transpose) to `x` and records the other
    /// one as the backward.
    fn apply(self, op: &'static str, x: &Tensor, transposed: bool) -> Result<Tensor> {
        let (input, output) = (self.planes.input, self.planes.output);
        let (fwd, bwd, out_hw, in_hw) = if transposed {
            (self.transpose, self.map, input, output)
        } else {
            (self.map, self.transpose, output, input)
        };
        let out = self.run(fwd, x, out_hw)?;
        Ok(out.with_grad_fn(
            op,
            vec![x.clone()],
            Box::new(move |g| Ok(vec![Some(self.run(bwd, g, in_hw)?)])),
        ))
    }
}

/// [N, C, H, W] dims of `x`, or an error naming the op.
fn nchw(op: &'static str, x: &Tensor) -> Result<[usize; 4]> {
    match *x.shape() {
        [n, c, h, w] => Ok([n, c, h, w]),
        _ => Err(Error::shape(
            op,
            format!("input {:?} must be [N, C, H, W]", x.shape()),
        )),
    }
}

/// Runs `f` in f32 when `t` is f16 and the device has no f16 support.
fn with_fallback(t: &Tensor, f: impl Fn(&Tensor) -> Result<Tensor>) -> Option<Result<Tensor>> {
    needs_f32_fallback(t.gpu(), t.dtype()).then(|| f(&t.to_dtype(DType::F32)?)?.to_dtype(DType::F16))
}

impl Tensor {
    /// Nearest-neighbour upsampling by 2: [N, C, H, W] -> [N, C, 2H, 2W].
    pub fn upsample_nearest2x(&self) -> Result<Tensor> {
        let [n, c, h, w] = nchw("upsample_nearest2x", self)?;
        if let Some(r) = with_fallback(self, |t| t.upsample_nearest2x()) {
            return r;
        }
        let planes = Planes {
            planes: n * c,
            input: [2 * h, 2 * w],
            output: [h, w],
        };
        Resample {
            planes,
            map: "window_sum",
            transpose: "window_spread",
            params: planes.params(2, 2, 1.0),
        }
        .apply("upsample_nearest2x", self, true)
    }

    /// Average pooling over `kernel` x `kernel` windows every `stride` pixels, no padding:
    /// [N, C, H, W] -> [N, C, (H - kernel) / stride + 1, (W - kernel) / stride + 1].
    pub fn avg_pool2d(&self, kernel: usize, stride: usize) -> Result<Tensor> {
        let [n, c, h, w] = nchw("avg_pool2d", self)?;
        if kernel == 0 || stride == 0 || kernel > h || kernel > w {
            return Err(Error::shape(
                "avg_pool2d",
                format!(
                    "kernel {kernel}, stride {stride} do not fit input {:?} (need 1 <= kernel <= H, W and stride >= 1)",
                    self.shape()
                ),
            ));
        }
        if let Some(r) = with_fallback(self, |t| t.avg_pool2d(kernel, stride)) {
            return r;
        }
        let planes = Planes {
            planes: n * c,
            input: [h, w],
            output: [(h - kernel) / stride + 1, (w - kernel) / stride + 1],
        };
        Resample {
            planes,
            map: "window_sum",
            transpose: "window_spread",
            params: planes.params(kernel, stride, 1.0 / (kernel * kernel) as f32),
        }
        .apply("avg_pool2d", self, false)
    }

    /// Bicubic resize to [N, C, out_h, out_w] as PyTorch's
    /// `F.interpolate(mode="bicubic", align_corners=False)` (A = -0.75, borders clamped).
    pub fn resize_bicubic(&self, out_h: usize, out_w: usize) -> Result<Tensor> {
        let [n, c, h, w] = nchw("resize_bicubic", self)?;
        if out_h == 0 || out_w == 0 || h == 0 || w == 0 {
            return Err(Error::shape(
                "resize_bicubic",
                format!("cannot resize {:?} to {out_h}x{out_w}", self.shape()),
            ));
        }
        if let Some(r) = with_fallback(self, |t| t.resize_bicubic(out_h, out_w)) {
            return r;
        }
        let planes = Planes {
            planes: n * c,
            input: [h, w],
            output: [out_h, out_w],
        };
        Resample {
            planes,
            map: "bicubic_forward",
            transpose: "bicubic_backward",
            params: planes.params(0, 0, 1.0),
        }
        .apply("resize_bicubic", self, false)
    }
}
