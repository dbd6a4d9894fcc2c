//! Spatial resampling of NCHW tensors: average pooling and nearest, bilinear and bicubic
//! resizing (PyTorch semantics), forward and backward, all as gathers (shaders/resample.wgsl);
//! max pooling forward only (for the Inception feature network).

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

/// How a resize samples its input; ids match `mode` in shaders/resample.wgsl.
#[derive(Clone, Copy)]
enum Interp {
    Nearest = 0,
    Bilinear = 1,
    Bicubic = 2,
}

impl Planes {
    /// Parameters of a pooling window whose sums are multiplied by `mul`.
    fn params(&self, win: Window, mul: f32) -> Vec<u32> {
        self.pack(win, mul, Interp::Nearest)
    }

    /// Parameters of a resize by `mode`.
    fn interp_params(&self, mode: Interp) -> Vec<u32> {
        self.pack(Window::plain(0, 0), 1.0, mode)
    }

    /// The Params of resample.wgsl.
    fn pack(&self, win: Window, mul: f32, mode: Interp) -> Vec<u32> {
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
        p.extend([win.pad as u32, win.count_pad as u32, mode as u32]);
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
/// [N, C, out_hw] tensor: one invocation per output element, or per output row for the
/// [`ROW_ENTRIES`].
fn run_map(entry: &str, params: &[u32], src: &Tensor, out_hw: [usize; 2]) -> Result<Tensor> {
    let gpu = src.gpu();
    let shape = [src.shape()[0], src.shape()[1], out_hw[0], out_hw[1]];
    let out = Tensor::empty(gpu, &shape, src.dtype())?;
    let kernel = kernel_for(gpu, shader!("resample"), entry, src.dtype(), &[], 1, 1);
    let per_invocation = if ROW_ENTRIES.contains(&entry) {
        out_hw[1]
    } else {
        1
    };
    gpu.dispatch(
        &kernel,
        params,
        &[src.buffer()],
        &[out.buffer()],
        gpu.grid(((out.numel() / per_invocation) as u32).div_ceil(FLAT_WG)),
    );
    Ok(out)
}

/// The nearest resize's entry points, forward and backward: a row per invocation, no
/// divisions per element.
const ROW_ENTRIES: [&str; 2] = ["nearest_rows", "nearest_rows_backward"];

impl Resample {
    fn run(&self, entry: &str, src: &Tensor, out_hw: [usize; 2]) -> Result<Tensor> {
        run_map(entry, &self.params, src, out_hw)
    }

    /// Applies the map to `x` and records its transpose as the backward.
    fn apply(self, op: &'static str, x: &Tensor) -> Result<Tensor> {
        let out = self.run(self.map, x, self.planes.output)?;
        Ok(out.with_grad_fn(
            op,
            vec![x.clone()],
            Box::new(move |g| Ok(vec![Some(self.run(self.transpose, g, self.planes.input)?)])),
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
    /// Nearest-neighbour resize to [N, C, out_h, out_w] as PyTorch's
    /// `F.interpolate(x, size=(out_h, out_w), mode="nearest")`: output pixel (y, x) copies
    /// input pixel (floor(y * H / out_h), floor(x * W / out_w)), computed in exact integer
    /// arithmetic (any sizes, up or down). Differentiable (the backward sums the gradients
    /// of every copy).
    pub fn resize_nearest(&self, out_h: usize, out_w: usize) -> Result<Tensor> {
        self.resize("resize_nearest", Interp::Nearest, [out_h, out_w])
    }

    /// Nearest-neighbour upsampling by integer factors: [N, C, H, W] -> [N, C, factor_h H,
    /// factor_w W], each pixel repeated factor_h x factor_w times (PyTorch's
    /// `F.interpolate(x, scale_factor=(factor_h, factor_w), mode="nearest")`).
    pub fn upsample_nearest(&self, factor_h: usize, factor_w: usize) -> Result<Tensor> {
        let size = scaled_size("upsample_nearest", self, [factor_h, factor_w])?;
        self.resize("upsample_nearest", Interp::Nearest, size)
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
        .apply("avg_pool2d", self)
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
    /// `F.interpolate(mode="bilinear", align_corners=False, antialias=False)` (its default
    /// and the resize pytorch-fid applies before Inception): source coordinate
    /// max((dst + 0.5) * in / out - 0.5, 0), the far tap clamped at the border.
    /// Differentiable.
    pub fn resize_bilinear(&self, out_h: usize, out_w: usize) -> Result<Tensor> {
        self.resize("resize_bilinear", Interp::Bilinear, [out_h, out_w])
    }

    /// Bilinear upsampling by integer factors (`F.interpolate(x, scale_factor=(factor_h,
    /// factor_w), mode="bilinear", align_corners=False)`): [N, C, H, W] -> [N, C, factor_h H,
    /// factor_w W]. Differentiable.
    pub fn upsample_bilinear(&self, factor_h: usize, factor_w: usize) -> Result<Tensor> {
        let size = scaled_size("upsample_bilinear", self, [factor_h, factor_w])?;
        self.resize("upsample_bilinear", Interp::Bilinear, size)
    }

    /// Bicubic resize to [N, C, out_h, out_w] as PyTorch's
    /// `F.interpolate(mode="bicubic", align_corners=False)` (A = -0.75, borders clamped).
    /// Differentiable.
    pub fn resize_bicubic(&self, out_h: usize, out_w: usize) -> Result<Tensor> {
        self.resize("resize_bicubic", Interp::Bicubic, [out_h, out_w])
    }

    /// Resizes [N, C, H, W] to [N, C, out[0], out[1]] by `mode` (interp_forward) with the
    /// transpose (interp_backward) as the backward.
    fn resize(&self, op: &'static str, mode: Interp, out: [usize; 2]) -> Result<Tensor> {
        let [n, c, h, w] = nchw(op, self)?;
        // The nearest index arithmetic multiplies input and output sizes in u32.
        let fits = |a: usize, b: usize| (a as u64 + 1) * (b as u64 + 1) <= u32::MAX as u64;
        if out.contains(&0) || h == 0 || w == 0 || !fits(h, out[0]) || !fits(w, out[1]) {
            return Err(Error::shape(
                op,
                format!(
                    "cannot resize {:?} to {}x{} (sizes must be at least 1, and each input size + 1 \
                     times its output size + 1 at most 2^32)",
                    self.shape(),
                    out[0],
                    out[1]
                ),
            ));
        }
        if let Some(r) = with_fallback(self, |t| t.resize(op, mode, out)) {
            return r;
        }
        let planes = Planes {
            planes: n * c,
            input: [h, w],
            output: out,
        };
        Resample {
            planes,
            map: match mode {
                Interp::Nearest => ROW_ENTRIES[0],
                _ => "interp_forward",
            },
            transpose: match mode {
                Interp::Nearest => ROW_ENTRIES[1],
                _ => "interp_backward",
            },
            params: planes.interp_params(mode),
        }
        .apply(op, self)
    }
}

/// The [H, W] of `x` [N, C, H, W] times `factors`, or an error naming the op.
fn scaled_size(op: &'static str, x: &Tensor, factors: [usize; 2]) -> Result<[usize; 2]> {
    let [_, _, h, w] = nchw(op, x)?;
    if factors.contains(&0) {
        return Err(Error::shape(
            op,
            format!(
                "scale factors {}x{} for input {:?} must be at least 1",
                factors[0],
                factors[1],
                x.shape()
            ),
        ));
    }
    Ok([h * factors[0], w * factors[1]])
}
