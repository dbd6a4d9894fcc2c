//! 2-D convolution (stride, padding, dilation, groups) and transposed convolution, NCHW/OIHW:
//! the public entry points (`Tensor::conv2d..`, `conv_transpose2d..`, `conv2d_packed`).
//!
//! Six forward implementations (naive, im2col+GEMM, tiled implicit GEMM, Winograd, direct,
//! depthwise7: the ConvNeXt block's depthwise kernels, `ops::depthwise7`)
//! plus `auto`, and input/weight/bias gradients; kernels in shaders/conv_*.wgsl.
//!
//! Files, each importing only those above it: `options` (`ConvOptions`), `geometry`
//! (`ConvGeometry`), `epilogue` (`ConvAddends`), one per implementation (`direct`: naive and
//! direct, `im2col`, `tiled`, `winograd`), `choice` (`ConvImpl`, `auto`, `conv_forward`),
//! `backward` (input and weight gradients), and this file.

mod backward;
mod choice;
mod direct;
mod epilogue;
mod geometry;
mod im2col;
mod options;
mod tiled;
pub use tiled::pin_conv_tile;
mod winograd;

pub(crate) use backward::{conv_input_grad, conv_weight_grad};
pub use choice::{auto_conv_impl, resolve, untimed_conv_impl, use_conv_impl, ConvGuard, ConvImpl};
pub use epilogue::ConvAddends;
pub use geometry::ConvGeometry;
pub use options::ConvOptions;
pub use winograd::{pin_winograd_gemm, winograd_applies};

use crate::ops::packed::{check_packed_input, Layout, PackedWeights};
use crate::ops::{check_same_dtype, needs_f32_fallback};
use crate::{DType, Error, Result, Tensor};
use choice::conv_forward;
use tiled::padded_input;

impl Tensor {
    /// conv2d(x, w) + bias of x `[N, Cin, H, W]` and w `[Cout, Cin/groups, KH, KW]` (PyTorch's
    /// layout; `bias` `[Cout]` or None), with the `auto` implementation ([`ConvImpl::Auto`]).
    pub fn conv2d(&self, weight: &Tensor, bias: Option<&Tensor>, opts: ConvOptions) -> Result<Tensor> {
        self.conv2d_with(weight, bias, opts, ConvImpl::Auto)
    }

    /// [`Tensor::conv2d`] with the implementation `imp` (benchmarks and tests that pin one);
    /// every implementation handles every stride, padding, dilation and group count.
    pub fn conv2d_with(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        opts: ConvOptions,
        imp: ConvImpl,
    ) -> Result<Tensor> {
        let add = ConvAddends {
            bias,
            ..Default::default()
        };
        self.conv2d_plus(weight, opts, imp, add)
    }

    /// `conv2d(x, w) + add.bias + add.sample_bias + add.residual` with the implementation
    /// `imp`: the tiled and Winograd kernels add them as they store their output (a
    /// ResBlock's time embedding and skip connection cost no pass of their own); the other
    /// implementations add them after.
    pub fn conv2d_plus(
        &self,
        weight: &Tensor,
        opts: ConvOptions,
        imp: ConvImpl,
        add: ConvAddends,
    ) -> Result<Tensor> {
        let geo = ConvGeometry::new(self.shape(), weight.shape(), opts)?;
        check_same_dtype("conv2d", self, weight)?;
        if needs_f32_fallback(self.gpu(), self.dtype()) {
            let f32 = |t: &Tensor| t.to_dtype(DType::F32);
            let (x, w) = (f32(self)?, f32(weight)?);
            let bias = add.bias.map(f32).transpose()?;
            let sample_bias = add.sample_bias.map(f32).transpose()?;
            let residual = add.residual.map(f32).transpose()?;
            let add = ConvAddends {
                bias: bias.as_ref(),
                sample_bias: sample_bias.as_ref(),
                residual: residual.as_ref(),
            };
            return x.conv2d_plus(&w, opts, imp, add)?.to_dtype(DType::F16);
        }
        add.check(&geo, self.dtype())?;
        let imp = resolve(self, weight, &geo, imp)?;
        // The tiled kernels read a zero-padded input: pad once here, and keep the padded input
        // for the weight gradient. (The Winograd kernel pads as it reads.)
        let (x, x_geo, y) = {
            let _g = crate::no_grad();
            let (x, x_geo) = match imp {
                ConvImpl::Tiled => padded_input(self, &geo)?,
                _ => (self.clone(), geo),
            };
            let y = conv_forward(&x, weight, add, &x_geo, imp)?;
            (x, x_geo, y)
        };
        let w = weight.clone();
        let x_tracks_grad = self.tracks_grad();
        let mut inputs = vec![self.clone(), weight.clone()];
        inputs.extend(add.bias.cloned());
        inputs.extend(add.sample_bias.cloned());
        inputs.extend(add.residual.cloned());
        let tracks = |t: Option<&Tensor>| t.map(Tensor::tracks_grad);
        let (bias_grad, sample_bias_grad, residual_grad) =
            (tracks(add.bias), tracks(add.sample_bias), tracks(add.residual));
        Ok(y.with_grad_fn(
            "conv2d",
            inputs,
            Box::new(move |g| {
                let dx = x_tracks_grad
                    .then(|| conv_input_grad(g, &w, &geo, imp))
                    .transpose()?;
                let dw = w
                    .tracks_grad()
                    .then(|| conv_weight_grad(&x, g, &x_geo, imp))
                    .transpose()?;
                let mut grads = vec![dx, dw];
                if let Some(wanted) = bias_grad {
                    grads.push(wanted.then(|| g.sum(&[0, 2, 3], false)).transpose()?);
                }
                if let Some(wanted) = sample_bias_grad {
                    grads.push(wanted.then(|| g.sum(&[2, 3], false)).transpose()?);
                }
                if let Some(wanted) = residual_grad {
                    grads.push(wanted.then(|| g.clone()));
                }
                Ok(grads)
            }),
        ))
    }

    /// Transposed convolution: x [N, Cin, H, W], w [Cin, Cout/groups, KH, KW] (PyTorch layout);
    /// output size (H-1)*stride - 2*padding + dilation*(KH-1) + output_padding + 1 along each
    /// axis, `output_padding` as (height, width). Implementation `auto`: see
    /// [`Tensor::conv_transpose2d_with`].
    pub fn conv_transpose2d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        opts: ConvOptions,
        output_padding: (usize, usize),
    ) -> Result<Tensor> {
        self.conv_transpose2d_with(weight, bias, opts, output_padding, ConvImpl::Auto)
    }

    /// [`Tensor::conv_transpose2d`] with the implementation `imp`, which runs the transposed
    /// conv as the input gradient of a conv (and its backward as that conv's forward and
    /// weight gradient). `Auto` is the live [`use_conv_impl`] guard's implementation, else a
    /// fixed rule (never timed): direct when Cin/groups x Cout/groups <= 16, else im2col.
    pub fn conv_transpose2d_with(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        opts: ConvOptions,
        output_padding: (usize, usize),
        imp: ConvImpl,
    ) -> Result<Tensor> {
        check_same_dtype("conv_transpose2d", self, weight)?;
        if needs_f32_fallback(self.gpu(), self.dtype()) {
            let (x, w) = (self.to_dtype(DType::F32)?, weight.to_dtype(DType::F32)?);
            let b = bias.map(|b| b.to_dtype(DType::F32)).transpose()?;
            return x
                .conv_transpose2d_with(&w, b.as_ref(), opts, output_padding, imp)?
                .to_dtype(DType::F16);
        }
        let bad = |msg: String| Error::shape("conv_transpose2d", msg);
        let (x, w) = (self.shape(), weight.shape());
        if x.len() != 4 || w.len() != 4 || w[0] != x[1] {
            return Err(bad(format!(
                "input {x:?} and weight {w:?}: need [N, Cin, H, W] and [Cin, Cout/groups, KH, KW]"
            )));
        }
        if output_padding.0 >= opts.stride.0.max(opts.dilation.0)
            || output_padding.1 >= opts.stride.1.max(opts.dilation.1)
        {
            return Err(bad(format!(
                "output_padding {output_padding:?} must be smaller than stride or dilation"
            )));
        }
        let size = |i: usize, k: usize, s: usize, p: usize, d: usize, op: usize| {
            ((i - 1) * s + d * (k - 1) + op + 1)
                .checked_sub(2 * p)
                .filter(|&v| v > 0)
        };
        let (Some(oh), Some(ow)) = (
            size(
                x[2],
                w[2],
                opts.stride.0,
                opts.padding.0,
                opts.dilation.0,
                output_padding.0,
            ),
            size(
                x[3],
                w[3],
                opts.stride.1,
                opts.padding.1,
                opts.dilation.1,
                output_padding.1,
            ),
        ) else {
            return Err(bad(format!(
                "padding {:?} leaves no output for input {x:?}",
                opts.padding
            )));
        };
        // The transposed conv is the input gradient of conv2d(out -> x) with weight w. An output
        // padding of a stride or more (allowed below the dilation) makes that conv's output
        // longer than x: x gets that many zero rows/columns at the end, which add nothing.
        let extra = (output_padding.0 / opts.stride.0, output_padding.1 / opts.stride.1);
        let x_in = match extra {
            (0, 0) => self.clone(),
            (eh, ew) => self.pad(&[(0, 0), (0, 0), (0, eh), (0, ew)])?,
        };
        let geo = ConvGeometry::new(&[x[0], w[1] * opts.groups, oh, ow], w, opts)?;
        if (geo.oh, geo.ow) != (x[2] + extra.0, x[3] + extra.1) {
            return Err(bad(format!("internal size mismatch for input {x:?}")));
        }
        let imp = match (imp, auto_conv_impl()) {
            (ConvImpl::Auto, ConvImpl::Auto) if geo.cin_g() * geo.cout_g() <= 16 => ConvImpl::Direct,
            (ConvImpl::Auto, ConvImpl::Auto) => ConvImpl::Im2col,
            (ConvImpl::Auto, guarded) => guarded,
            (chosen, _) => chosen,
        };
        let y = {
            let _g = crate::no_grad();
            conv_input_grad(&x_in, weight, &geo, imp)?
        };
        let (xt, wt) = (x_in.clone(), weight.clone());
        let y = y.with_grad_fn(
            "conv_transpose2d",
            vec![x_in, weight.clone()],
            Box::new(move |g| {
                let dx = xt
                    .tracks_grad()
                    .then(|| conv_forward(g, &wt, ConvAddends::default(), &geo, imp))
                    .transpose()?;
                let dw = wt
                    .tracks_grad()
                    .then(|| conv_weight_grad(g, &xt, &geo, imp))
                    .transpose()?;
                Ok(vec![dx, dw])
            }),
        );
        add_bias(y, bias)
    }

    /// conv2d(x, w) + `add` with `w` packed: the tiled kernel dequantising in registers, or
    /// for a 3x3 stride-1 conv Winograd on the weights dequantised for the call, whichever
    /// measures faster (a `use_conv_impl` guard of `tiled` or `winograd` decides). Inference
    /// only (no graph is recorded; an input that tracks gradients is an error) and f32 only
    /// (the browser has no f16, and packed weights exist to run there too).
    pub fn conv2d_packed(&self, w: &PackedWeights, opts: ConvOptions, add: ConvAddends) -> Result<Tensor> {
        let Layout::Conv { shape } = w.layout() else {
            return Err(Error::shape(
                "conv2d_packed",
                "these packed weights are a matmul's, not a conv's",
            ));
        };
        let geo = ConvGeometry::new(self.shape(), shape, opts)?;
        check_packed_input(self, "conv2d_packed")?;
        choice::packed_forward(self, w, add, &geo)
    }
}

/// Errors unless `bias` (when given) is [cout] of the input's dtype (the kernels read it as `T`).
fn check_bias(bias: Option<&Tensor>, cout: usize, dtype: DType) -> Result<()> {
    match bias {
        Some(b) if b.shape() != [cout] || b.dtype() != dtype => Err(Error::shape(
            "conv bias",
            format!(
                "bias {:?} {:?} should be [{cout}] {dtype:?} like the input (cast it with to_dtype)",
                b.shape(),
                b.dtype()
            ),
        )),
        _ => Ok(()),
    }
}

/// y + bias (per output channel), differentiable.
fn add_bias(y: Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    let c = y.shape()[1];
    check_bias(bias, c, y.dtype())?;
    match bias {
        None => Ok(y),
        Some(b) => y.add(&b.reshape(&[1, c, 1, 1])?),
    }
}
