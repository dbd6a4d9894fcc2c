//! Spatial resampling of NCHW tensors: nearest 2x upsampling, average pooling and bicubic
//! resizing (PyTorch semantics), forward and backward, all as gathers (shaders/resample.wgsl);
//! max pooling and bilinear resizing forward only (for the Inception feature network).

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

/// A pooling window: `k` x `k` pixels every `stride`, the plane zero-padded by `pad` on each
/// side; `count_pad`: averages divide by k * k (padding counted) rather than by the pixels
/// inside the plane.
#[derive(Clone, Copy)]
struct Window {
    k: usize,
    stride: usize,
    pad: usize,
    count_pad: bool,
}

impl Window {
    /// A window that does not pad.
    fn plain(k: usize, stride: usize) -> Window {
        Window {
            k,
            stride,
            pad: 0,
            count_pad: true,
        }
    }
}

impl Planes {
    fn params(&self, win: Window, mul: f32) -> Vec<u32> {
        let scale = |d: usize| (self.input[d] as f32 / self.output[d] as f32).to_bits();
        let mut p: Vec<u32> = [
            self.planes,
            self.input[0],
            self.input[1],
            self.output[0],
            self.output[1],
            win.k,
            win.stride,
        ]
        .iter()
        .map(|&v| v as u32)
        .collect();
        p.extend([mul.to_bits(), scale(0), scale(1)]);
        p.extend([win.pad as u32, win.count_pad as u32]);
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

/// Runs the resample.wgsl entry point `entry` with `params` on `src` ([N, C, ..]) into a new
/// [N, C, out_hw] tensor.
fn run_map(entry: &str, params: &[u32], src: &Tensor, out_hw: [usize; 2]) -> Result<Tensor> {
    let gpu = src.gpu();
    let shape = [src.shape()[0], src.shape()[1], out_hw[0], out_hw[1]];
    let out = Tensor::empty(gpu, &shape, src.dtype())?;
    let kernel = kernel_for(gpu, shader!("resample"), entry, src.dtype(), &[], 1, 1);
    gpu.dispatch(
        &kernel,
        params,
        &[src.buffer()],
        &[out.buffer()],
        gpu.grid((out.numel() as u32).div_ceil(FLAT_WG)),
    );
    Ok(out)
}

impl Resample {
    fn run(&self, entry: &str, src: &Tensor, out_hw: [usize; 2]) -> Result<Tensor> {
        run_map(entry, &self.params, src, out_hw)
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

/// N, C and the pooled [H, W] of pooling `x` with `win`, or an error naming the op.
fn pooled(op: &'static str, x: &Tensor, win: Window) -> Result<(usize, usize, [usize; 2])> {
    let [n, c, h, w] = nchw(op, x)?;
    let Window { k, stride, pad, .. } = win;
    if k == 0 || stride == 0 || 2 * pad > k || k > h + 2 * pad || k > w + 2 * pad {
        return Err(Error::shape(
            op,
            format!(
                "kernel {k}, stride {stride}, padding {pad} do not fit input {:?} (need 1 <= kernel <= H, W \
                 plus twice the padding, stride >= 1, padding <= kernel / 2)",
                x.shape()
            ),
        ));
    }
    let size = |d: usize| (d + 2 * pad - k) / stride + 1;
    Ok((n, c, [size(h), size(w)]))
}

/// Errors when `x` would need a gradient through `op`, which has no backward.
fn forward_only(op: &'static str, x: &Tensor) -> Result<()> {
    if x.tracks_grad() && crate::autograd::grad_enabled() {
        return Err(Error::shape(
            op,
            format!(
                "has no backward (forward only, for feature networks) but input {:?} tracks \
                 gradients; run it under `no_grad()` or on `detach()`ed input",
                x.shape()
            ),
        ));
    }
    Ok(())
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
            params: planes.params(Window::plain(2, 2), 1.0),
        }
        .apply("upsample_nearest2x", self, true)
    }

    /// Average pooling over `kernel` x `kernel` windows every `stride` pixels, no padding:
    /// [N, C, H, W] -> [N, C, (H - kernel) / stride + 1, (W - kernel) / stride + 1].
    pub fn avg_pool2d(&self, kernel: usize, stride: usize) -> Result<Tensor> {
        self.avg_pool2d_padded(kernel, stride, 0, true)
    }

    /// Average pooling as PyTorch's `F.avg_pool2d(x, kernel, stride, padding,
    /// count_include_pad)`: the input is zero-padded by `padding` on every side (at most
    /// kernel / 2); each window's sum is divided by kernel^2 when `count_include_pad`, else by
    /// the number of its pixels inside the input. [N, C, H, W] -> [N, C, (H + 2 padding -
    /// kernel) / stride + 1, (W + 2 padding - kernel) / stride + 1]. Differentiable.
    pub fn avg_pool2d_padded(
        &self,
        kernel: usize,
        stride: usize,
        padding: usize,
        count_include_pad: bool,
    ) -> Result<Tensor> {
        let win = Window {
            k: kernel,
            stride,
            pad: padding,
            count_pad: count_include_pad,
        };
        let (n, c, out) = pooled("avg_pool2d", self, win)?;
        if let Some(r) = with_fallback(self, |t| {
            t.avg_pool2d_padded(kernel, stride, padding, count_include_pad)
        }) {
            return r;
        }
        let planes = Planes {
            planes: n * c,
            input: [self.shape()[2], self.shape()[3]],
            output: out,
        };
        Resample {
            planes,
            map: "window_sum",
            transpose: "window_spread",
            params: planes.params(win, 1.0 / (kernel * kernel) as f32),
        }
        .apply("avg_pool2d", self, false)
    }

    /// Max pooling as PyTorch's `F.max_pool2d(x, kernel, stride, padding)` (padding is never
    /// the maximum; at most kernel / 2): [N, C, H, W] -> [N, C, (H + 2 padding - kernel) /
    /// stride + 1, ..]. Forward only (used by the Inception feature network): an input that
    /// tracks gradients is an error.
    pub fn max_pool2d(&self, kernel: usize, stride: usize, padding: usize) -> Result<Tensor> {
        let win = Window {
            k: kernel,
            stride,
            pad: padding,
            count_pad: true,
        };
        let (n, c, out) = pooled("max_pool2d", self, win)?;
        forward_only("max_pool2d", self)?;
        if let Some(r) = with_fallback(self, |t| t.max_pool2d(kernel, stride, padding)) {
            return r;
        }
        let planes = Planes {
            planes: n * c,
            input: [self.shape()[2], self.shape()[3]],
            output: out,
        };
        run_map("window_max", &planes.params(win, 1.0), self, out)
    }

    /// Bilinear resize to [N, C, out_h, out_w] as PyTorch's
    /// `F.interpolate(mode="bilinear", align_corners=False, antialias=False)` (the resize
    /// pytorch-fid applies before Inception). Forward only (used by the Inception feature
    /// network): an input that tracks gradients is an error.
    pub fn resize_bilinear(&self, out_h: usize, out_w: usize) -> Result<Tensor> {
        let [n, c, h, w] = nchw("resize_bilinear", self)?;
        if out_h == 0 || out_w == 0 || h == 0 || w == 0 {
            return Err(Error::shape(
                "resize_bilinear",
                format!("cannot resize {:?} to {out_h}x{out_w}", self.shape()),
            ));
        }
        forward_only("resize_bilinear", self)?;
        if let Some(r) = with_fallback(self, |t| t.resize_bilinear(out_h, out_w)) {
            return r;
        }
        let planes = Planes {
            planes: n * c,
            input: [h, w],
            output: [out_h, out_w],
        };
        let params = planes.params(Window::plain(0, 0), 1.0);
        run_map("bilinear_forward", &params, self, [out_h, out_w])
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
            params: planes.params(Window::plain(0, 0), 1.0),
        }
        .apply("resize_bicubic", self, false)
    }
}
