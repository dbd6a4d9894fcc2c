//! 2-D convolution (stride, padding, dilation, groups) and transposed convolution, NCHW/OIHW,
//! with four forward implementations behind one op (naive, im2col+GEMM, tiled implicit GEMM,
//! direct) plus `auto`, and input/weight/bias gradients. Kernels: shaders/conv_*.wgsl.

use super::matmul::BlockShape;
use super::packed::WeightOperand;
use super::{kernel_for, needs_f32_fallback, FLAT_WG};
use crate::gpu::{Cost, SplitAxis, MAX_LOOP_ITERATIONS};
use crate::{shader, DType, Error, Gpu, Result, Tensor};

/// Which forward implementation a convolution uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConvImpl {
    /// One output per invocation: the baseline. Its backward uses the direct kernels.
    Naive,
    /// Explicit column buffer + blocked matmul; backward by matmuls and col2im.
    Im2col,
    /// Implicit GEMM with register tiles (no column buffer); backward as im2col.
    Tiled,
    /// Direct loops sharing weights across a workgroup, for grouped/depthwise and
    /// small-channel convs; backward by gather kernels.
    Direct,
    /// Winograd F(4x4, 3x3) for 3x3 stride-1 undilated convs (36 multiplies per 4x4 outputs
    /// instead of 144), tiled for every other shape; backward: the input gradient the same
    /// way (a stride-1 3x3 conv again), the weight gradient as tiled.
    Winograd,
    /// Fastest of im2col, tiled, direct and (where it applies) Winograd for this shape,
    /// measured once and remembered; without timing (the web,
    /// [`crate::Gpu::set_deterministic`]) the fixed rule [`untimed_conv_impl`]. On a thread
    /// with a live [`use_conv_impl`] guard, the guard's.
    Auto,
}

impl ConvImpl {
    /// All implementations selectable by name.
    pub const ALL: [ConvImpl; 6] = [
        ConvImpl::Naive,
        ConvImpl::Im2col,
        ConvImpl::Tiled,
        ConvImpl::Direct,
        ConvImpl::Winograd,
        ConvImpl::Auto,
    ];

    /// Lower-case name used on the command line and in benchmark rows.
    pub fn name(self) -> &'static str {
        match self {
            ConvImpl::Naive => "naive",
            ConvImpl::Im2col => "im2col",
            ConvImpl::Tiled => "tiled",
            ConvImpl::Direct => "direct",
            ConvImpl::Winograd => "winograd",
            ConvImpl::Auto => "auto",
        }
    }

    /// Parses a name from [`ConvImpl::name`].
    pub fn from_name(name: &str) -> Result<ConvImpl> {
        ConvImpl::ALL
            .into_iter()
            .find(|c| c.name() == name)
            .ok_or_else(|| {
                Error::shape(
                    "conv2d",
                    format!(
                        "unknown conv implementation \"{name}\"; use naive, im2col, tiled, direct, winograd or auto"
                    ),
                )
            })
    }
}

thread_local! {
    static AUTO_REPLACEMENT: std::cell::Cell<ConvImpl> = const { std::cell::Cell::new(ConvImpl::Auto) };
}

/// The guard of [`use_conv_impl`]: while it lives, convolutions on this thread that ask for
/// [`ConvImpl::Auto`] (every layer's default) run its implementation instead; how an experiment
/// switches a whole model's convolutions at run time. Per thread, like [`crate::no_grad`], so
/// other threads sharing the device (tests) are not affected.
pub struct ConvGuard {
    previous: ConvImpl,
}

/// Runs every `auto` convolution on this thread with `imp` until the guard drops (`Auto`:
/// the measured choice again).
pub fn use_conv_impl(imp: ConvImpl) -> ConvGuard {
    let previous = AUTO_REPLACEMENT.with(|r| r.replace(imp));
    ConvGuard { previous }
}

impl Drop for ConvGuard {
    fn drop(&mut self) {
        AUTO_REPLACEMENT.with(|r| r.set(self.previous));
    }
}

/// What `auto` means on this thread now: the implementation of the live [`use_conv_impl`]
/// guard, or `Auto` (measured per shape) without one.
pub fn auto_conv_impl() -> ConvImpl {
    AUTO_REPLACEMENT.with(|r| r.get())
}

/// Stride, padding, dilation (each as (height, width)) and groups of a convolution; build
/// with named settings from the default (stride 1, padding 0, dilation 1, one group):
/// `ConvOptions::default().stride(2).padding(1)`, `.stride_hw(2, 1).padding_hw(1, 0)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvOptions {
    /// Step between output pixels along (height, width).
    pub stride: (usize, usize),
    /// Zeros added on both sides along (height, width).
    pub padding: (usize, usize),
    /// Step between kernel taps along (height, width).
    pub dilation: (usize, usize),
    /// Channel groups: input and output channels split into `groups` independent convs.
    pub groups: usize,
}

impl Default for ConvOptions {
    fn default() -> Self {
        ConvOptions {
            stride: (1, 1),
            padding: (0, 0),
            dilation: (1, 1),
            groups: 1,
        }
    }
}

impl ConvOptions {
    /// The same stride along height and width.
    #[must_use]
    pub fn stride(self, both: usize) -> ConvOptions {
        self.stride_hw(both, both)
    }

    /// Stride `h` along the height and `w` along the width.
    #[must_use]
    pub fn stride_hw(self, h: usize, w: usize) -> ConvOptions {
        ConvOptions {
            stride: (h, w),
            ..self
        }
    }

    /// The same zero padding on all four sides.
    #[must_use]
    pub fn padding(self, both: usize) -> ConvOptions {
        self.padding_hw(both, both)
    }

    /// `h` zero rows above and below, `w` zero columns left and right.
    #[must_use]
    pub fn padding_hw(self, h: usize, w: usize) -> ConvOptions {
        ConvOptions {
            padding: (h, w),
            ..self
        }
    }

    /// The same dilation along height and width.
    #[must_use]
    pub fn dilation(self, both: usize) -> ConvOptions {
        self.dilation_hw(both, both)
    }

    /// Dilation `h` along the height and `w` along the width.
    #[must_use]
    pub fn dilation_hw(self, h: usize, w: usize) -> ConvOptions {
        ConvOptions {
            dilation: (h, w),
            ..self
        }
    }

    /// `groups` channel groups (the channel count for a depthwise conv).
    #[must_use]
    pub fn groups(self, groups: usize) -> ConvOptions {
        ConvOptions { groups, ..self }
    }
}

/// Every size of one convolution, in the order of the WGSL `Conv` struct.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvGeometry {
    pub n: usize,
    pub cin: usize,
    pub h: usize,
    pub w: usize,
    pub cout: usize,
    pub kh: usize,
    pub kw: usize,
    pub opts: ConvOptions,
    pub oh: usize,
    pub ow: usize,
}

/// Index of `slices` in the `Conv` uniform: the weight gradient's split-K slice count.
const SLICES_PARAM: usize = 20;
/// Index of `k4` in the `Conv` uniform: the padded reduction the tiled kernel walks (4-bit
/// packed weights pad it to a multiple of 8).
const K4_PARAM: usize = 19;

impl ConvGeometry {
    /// Geometry of `conv2d(x [N,Cin,H,W], w [Cout,Cin/groups,KH,KW])`, checked.
    pub fn new(x: &[usize], w: &[usize], opts: ConvOptions) -> Result<ConvGeometry> {
        let bad = |msg: String| Error::shape("conv2d", msg);
        let ([n, cin, h, wd], [cout, cin_g, kh, kw]) = (
            <[usize; 4]>::try_from(x).map_err(|_| bad(format!("input must be [N, C, H, W], got {x:?}")))?,
            <[usize; 4]>::try_from(w)
                .map_err(|_| bad(format!("weight must be [Cout, Cin/groups, KH, KW], got {w:?}")))?,
        );
        let g = opts.groups;
        if g == 0 || cin % g != 0 || cout % g != 0 || cin / g != cin_g {
            return Err(bad(format!("input {x:?} and weight {w:?} do not fit groups={g} (need Cin = groups * weight dim 1, Cout divisible by groups)")));
        }
        if opts.stride.0 == 0 || opts.stride.1 == 0 || opts.dilation.0 == 0 || opts.dilation.1 == 0 {
            return Err(bad(format!(
                "stride {:?} and dilation {:?} must be at least 1 along both axes",
                opts.stride, opts.dilation
            )));
        }
        let span = |size: usize, k: usize, s: usize, p: usize, d: usize| {
            let eff = d * (k - 1) + 1;
            (size + 2 * p).checked_sub(eff).map(|v| v / s + 1)
        };
        let (Some(oh), Some(ow)) = (
            span(h, kh, opts.stride.0, opts.padding.0, opts.dilation.0),
            span(wd, kw, opts.stride.1, opts.padding.1, opts.dilation.1),
        ) else {
            return Err(bad(format!(
                "kernel {kh}x{kw} (dilation {:?}) is larger than the padded input {h}x{wd}",
                opts.dilation
            )));
        };
        Ok(ConvGeometry {
            n,
            cin,
            h,
            w: wd,
            cout,
            kh,
            kw,
            opts,
            oh,
            ow,
        })
    }

    pub fn cin_g(&self) -> usize {
        self.cin / self.opts.groups
    }
    pub fn cout_g(&self) -> usize {
        self.cout / self.opts.groups
    }
    /// Reduction length of one output: Cin/groups * KH * KW.
    pub fn k(&self) -> usize {
        self.cin_g() * self.kh * self.kw
    }
    pub fn pixels(&self) -> usize {
        self.oh * self.ow
    }
    pub fn input_shape(&self) -> [usize; 4] {
        [self.n, self.cin, self.h, self.w]
    }
    pub fn weight_shape(&self) -> [usize; 4] {
        [self.cout, self.cin_g(), self.kh, self.kw]
    }
    pub fn output_shape(&self) -> [usize; 4] {
        [self.n, self.cout, self.oh, self.ow]
    }
    /// Reduction length padded to a multiple of 4 (rows of the im2col matrix).
    pub fn k4(&self) -> usize {
        self.k().next_multiple_of(4)
    }
    /// Multiply-adds times two.
    pub fn flops(&self) -> f64 {
        2.0 * (self.n * self.cout * self.pixels()) as f64 * self.k() as f64
    }

    /// The same convolution on `n` images.
    fn with_batch(&self, n: usize) -> ConvGeometry {
        ConvGeometry { n, ..*self }
    }

    /// The kernels' `Conv` uniform (shaders/conv_params.wgsl), `slices` ([`SLICES_PARAM`]) 1,
    /// `part_base` 0.
    fn params(&self) -> [u32; 22] {
        let o = &self.opts;
        [
            self.n,
            self.cin,
            self.h,
            self.w,
            self.cout,
            self.kh,
            self.kw,
            o.stride.0,
            o.stride.1,
            o.padding.0,
            o.padding.1,
            o.dilation.0,
            o.dilation.1,
            o.groups,
            self.oh,
            self.ow,
            self.cin_g(),
            self.cout_g(),
            self.k(),
            self.k4(),
            1,
            0,
        ]
        .map(|v| v as u32)
    }

    /// Readable shape, e.g. "B16 C64->64 32x32 k3 s1 p1 g1".
    pub fn describe(&self) -> String {
        let o = &self.opts;
        let sq = |a: (usize, usize)| {
            if a.0 == a.1 {
                a.0.to_string()
            } else {
                format!("{}x{}", a.0, a.1)
            }
        };
        let k = if self.kh == self.kw {
            self.kh.to_string()
        } else {
            format!("{}x{}", self.kh, self.kw)
        };
        let mut s = format!(
            "B{} C{}->{} {}x{} k{} s{} p{} g{}",
            self.n,
            self.cin,
            self.cout,
            self.h,
            self.w,
            k,
            sq(o.stride),
            sq(o.padding),
            o.groups
        );
        if o.dilation != (1, 1) {
            s += &format!(" d{}", sq(o.dilation));
        }
        s
    }

    /// Key for remembered per-shape choices: sizes rounded up to powers of two.
    fn tuning_key(&self, dtype: DType) -> String {
        let r = |v: usize| v.next_power_of_two();
        let o = &self.opts;
        format!(
            "conv:{dtype:?}:n{}:c{}->{}:{}x{}:k{}x{}:s{:?}:d{:?}:g{}",
            r(self.n),
            r(self.cin),
            r(self.cout),
            r(self.h),
            r(self.w),
            self.kh,
            self.kw,
            o.stride,
            o.dilation,
            if o.groups == 1 {
                "1".to_string()
            } else if o.groups == self.cin {
                "dw".into()
            } else {
                r(o.groups).to_string()
            }
        )
    }
}

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
        super::check_same_dtype("conv2d", self, weight)?;
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
        super::check_same_dtype("conv_transpose2d", self, weight)?;
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

/// What a convolution adds to its output ([`Tensor::conv2d_plus`]).
#[derive(Clone, Copy, Default)]
pub struct ConvAddends<'a> {
    /// `[Cout]`: one bias per output channel (PyTorch's conv bias).
    pub bias: Option<&'a Tensor>,
    /// `[N, Cout]`: one bias per sample and channel (e.g. a projected time embedding).
    pub sample_bias: Option<&'a Tensor>,
    /// A tensor of the output's shape (a residual connection).
    pub residual: Option<&'a Tensor>,
}

impl ConvAddends<'_> {
    /// Errors unless the bias is `[Cout]`, the sample bias `[N, Cout]` and the residual the
    /// output's shape, all in the input's dtype (the kernels read them as `T`).
    fn check(&self, geo: &ConvGeometry, dtype: DType) -> Result<()> {
        let terms = [
            ("conv bias", self.bias, vec![geo.cout]),
            ("conv sample bias", self.sample_bias, vec![geo.n, geo.cout]),
            ("conv residual", self.residual, geo.output_shape().to_vec()),
        ];
        for (what, term, shape) in terms {
            if let Some(t) = term.filter(|t| t.shape() != shape.as_slice() || t.dtype() != dtype) {
                return Err(Error::shape(
                    what,
                    format!(
                        "{what} {:?} {:?} should be {shape:?} {dtype:?} (the input's dtype; cast it with to_dtype)",
                        t.shape(),
                        t.dtype(),
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// What `auto` runs where nothing is timed (the web, [`crate::Gpu::set_deterministic`]):
/// direct when Cin/groups x Cout/groups <= 16 (depthwise and tiny convs, where a GEMM has
/// nothing to tile), tiled otherwise.
pub fn untimed_conv_impl(geo: &ConvGeometry) -> ConvImpl {
    if geo.cin_g() * geo.cout_g() <= 16 {
        ConvImpl::Direct
    } else {
        ConvImpl::Tiled
    }
}

/// The implementation `imp` stands for on these operands: `auto` is the live
/// [`use_conv_impl`] choice, or else resolved by timing im2col, tiled, direct and (where
/// [`winograd_applies`]) Winograd once per rounded shape ([`untimed_conv_impl`] where
/// nothing is timed).
pub fn resolve(x: &Tensor, w: &Tensor, geo: &ConvGeometry, imp: ConvImpl) -> Result<ConvImpl> {
    let imp = match imp {
        ConvImpl::Auto => auto_conv_impl(),
        chosen => chosen,
    };
    if imp != ConvImpl::Auto {
        return Ok(imp);
    }
    let gpu = x.gpu();
    let mut candidates = vec![ConvImpl::Im2col, ConvImpl::Tiled, ConvImpl::Direct];
    if winograd_applies(gpu, geo) {
        candidates.push(ConvImpl::Winograd);
    }
    let labels: Vec<String> = candidates.iter().map(|c| c.name().to_string()).collect();
    // The candidates are part of the key, so a choice cached before a candidate existed is
    // measured again.
    let key = format!("{}:of {}", geo.tuning_key(x.dtype()), labels.join(","));
    let untimed = untimed_conv_impl(geo);
    let fallback = candidates
        .iter()
        .position(|&c| c == untimed)
        .expect("a candidate");
    let _g = crate::no_grad();
    let choice = gpu.tuner().choose(gpu, &key, &labels, fallback, |c| {
        conv_forward(x, w, ConvAddends::default(), geo, candidates[c]).map(drop)
    })?;
    Ok(candidates[choice])
}

fn flat_groups(gpu: &Gpu, n: usize) -> [u32; 3] {
    gpu.grid((n as u32).div_ceil(FLAT_WG))
}

/// y = conv(x, w) + `add` (inside the tiled kernel, else separate adds), with implementation
/// `imp` (never Auto); records no graph.
pub(crate) fn conv_forward(
    x: &Tensor,
    w: &Tensor,
    add: ConvAddends,
    geo: &ConvGeometry,
    imp: ConvImpl,
) -> Result<Tensor> {
    match imp {
        ConvImpl::Winograd if winograd_applies(x.gpu(), geo) => return conv_forward_winograd(x, w, add, geo),
        ConvImpl::Tiled | ConvImpl::Winograd => return conv_forward_tiled(x, w, add, geo),
        _ => {}
    }
    let mut y = conv_forward_unbiased(x, w, geo, imp)?;
    if let Some(b) = add.bias {
        y = y.add(&b.reshape(&[1, geo.cout, 1, 1])?)?;
    }
    if let Some(b) = add.sample_bias {
        y = y.add(&b.reshape(&[geo.n, geo.cout, 1, 1])?)?;
    }
    match add.residual {
        Some(r) => y.add(r),
        None => Ok(y),
    }
}

/// `x` zero-padded by the conv's padding, and the geometry of the same conv on it (padding 0):
/// the implicit-GEMM kernels then gather without bounds checks.
fn padded_input(x: &Tensor, geo: &ConvGeometry) -> Result<(Tensor, ConvGeometry)> {
    let (ph, pw) = geo.opts.padding;
    let x = x.pad(&[(0, 0), (0, 0), (ph, ph), (pw, pw)])?;
    let opts = ConvOptions {
        padding: (0, 0),
        ..geo.opts
    };
    let geo = ConvGeometry::new(x.shape(), &geo.weight_shape(), opts)?;
    Ok((x, geo))
}

/// The implicit-GEMM forward of float weights (rows padded to K4 here).
fn conv_forward_tiled(x: &Tensor, w: &Tensor, add: ConvAddends, geo: &ConvGeometry) -> Result<Tensor> {
    let k = geo.k();
    let w4 = w.reshape(&[geo.cout, k])?.pad_axis(1, 0, geo.k4() - k)?;
    tiled_forward(x, WeightOperand::Float(&w4), add, geo)
}

/// The implicit-GEMM forward on the zero-padded input; the bias (zeros when None) and the
/// residual are added by the kernel. Float weights have their tile autotuned per shape;
/// packed weights take the largest tile that fits, untimed (see [`WeightOperand`]).
pub(crate) fn tiled_forward(
    x: &Tensor,
    weights: WeightOperand,
    add: ConvAddends,
    geo: &ConvGeometry,
) -> Result<Tensor> {
    let (gpu, dt) = (x.gpu(), x.dtype());
    add.check(geo, dt)?;
    let (x, geo) = &padded_input(x, geo)?;
    let epilogue = &Epilogue::new(add, dt, gpu)?;
    let tiles = BlockShape::candidates(gpu, geo.cout_g(), geo.n * geo.pixels());
    let labels: Vec<String> = tiles.iter().map(|t| t.to_string()).collect();
    let key = format!("{}:tile", geo.tuning_key(dt));
    let choice = match weights {
        WeightOperand::Float(_) => gpu.tuner().choose(gpu, &key, &labels, 0, |c| {
            let scratch = Tensor::empty(gpu, &geo.output_shape(), dt)?;
            dispatch_tiled(x, weights, epilogue, &scratch, geo, tiles[c]);
            Ok(())
        })?,
        WeightOperand::Packed(_) => 0,
    };
    let y = Tensor::empty(gpu, &geo.output_shape(), dt)?;
    dispatch_tiled(x, weights, epilogue, &y, geo, tiles[choice]);
    Ok(y)
}

/// y = conv(x, w) with the naive, direct or im2col implementation.
fn conv_forward_unbiased(x: &Tensor, w: &Tensor, geo: &ConvGeometry, imp: ConvImpl) -> Result<Tensor> {
    let gpu = x.gpu();
    let dt = x.dtype();
    match imp {
        ConvImpl::Naive => {
            let y = Tensor::empty(gpu, &geo.output_shape(), dt)?;
            let kernel = kernel_for(gpu, shader!("conv_naive"), "conv_forward_naive", dt, &[], 2, 1);
            gpu.dispatch_named(
                &kernel,
                &geo.params(),
                &[x.buffer(), w.buffer()],
                &[y.buffer()],
                flat_groups(gpu, y.numel()),
                Cost::new("conv2d", geo.flops(), x.byte_len() + w.byte_len() + y.byte_len()),
            );
            Ok(y)
        }
        ConvImpl::Direct => {
            let y = Tensor::empty(gpu, &geo.output_shape(), dt)?;
            let rows = geo.n * geo.cout;
            if rows > gpu.limits.max_compute_workgroups_per_dimension as usize {
                return conv_forward_unbiased(x, w, geo, ConvImpl::Naive);
            }
            let kernel = kernel_for(gpu, shader!("conv_direct"), "conv_forward_direct", dt, &[], 2, 1);
            let groups = [geo.pixels().div_ceil(4 * FLAT_WG as usize) as u32, rows as u32, 1];
            gpu.dispatch_named(
                &kernel,
                &geo.params(),
                &[x.buffer(), w.buffer()],
                &[y.buffer()],
                groups,
                Cost::new("conv2d", geo.flops(), x.byte_len() + w.byte_len() + y.byte_len()),
            );
            Ok(y)
        }
        ConvImpl::Im2col => in_batch_chunks(geo, dt, gpu, x, |xc, gc| {
            let col = im2col(xc, gc)?; // [G, K4, N*P]
            let y = grouped_weights(w, gc)?.matmul(&col)?; // [G, Cout_g, N*P]
            y.reshape(&[gc.opts.groups, gc.cout_g(), gc.n, gc.pixels()])?
                .permute(&[2, 0, 1, 3])?
                .reshape(&gc.output_shape())
        }),
        ConvImpl::Tiled | ConvImpl::Winograd | ConvImpl::Auto => Err(Error::shape(
            "conv2d",
            "internal: tiled and winograd run with their epilogue and Auto must be resolved first",
        )),
    }
}

/// The tiled and Winograd forwards' output terms, each a tensor or (when absent) a
/// one-element placeholder the kernel does not read: the bias `[Cout]`, the sample bias
/// `[N, Cout]`, the residual. Which are present is a template constant, so each combination
/// is its own pipeline and a plain conv's epilogue pays for none of them.
struct Epilogue {
    terms: [(Tensor, bool); 3],
}

impl Epilogue {
    fn new(add: ConvAddends, dt: DType, gpu: &Gpu) -> Result<Epilogue> {
        let term = |t: Option<&Tensor>| -> Result<(Tensor, bool)> {
            Ok(match t {
                Some(t) => (t.clone(), true),
                None => (Tensor::empty(gpu, &[1], dt)?, false),
            })
        };
        Ok(Epilogue {
            terms: [term(add.bias)?, term(add.sample_bias)?, term(add.residual)?],
        })
    }

    /// The template constants choosing the kernel's variant.
    fn defines(&self) -> [(&'static str, String); 3] {
        let on = |i: usize| self.terms[i].1.to_string();
        [("BIAS", on(0)), ("SAMPLE_BIAS", on(1)), ("RESIDUAL", on(2))]
    }

    /// The terms' buffers, bound after the input and the weights.
    fn buffers(&self) -> [&wgpu::Buffer; 3] {
        self.terms.each_ref().map(|(t, _)| t.buffer())
    }
}

/// One tiled forward dispatch: y = conv(x, weights) + the epilogue's terms.
fn dispatch_tiled(
    x: &Tensor,
    weights: WeightOperand,
    epilogue: &Epilogue,
    y: &Tensor,
    geo: &ConvGeometry,
    tile: BlockShape,
) {
    let gpu = x.gpu();
    let mut defines = vec![
        ("R", tile.rows.to_string()),
        ("C4", tile.col4.to_string()),
        ("C", (4 * tile.col4).to_string()),
        ("W", tile.lanes.to_string()),
    ];
    defines.extend(epilogue.defines());
    defines.extend(weights.defines());
    let kernel = kernel_for(
        gpu,
        shader!("conv_tiled"),
        "conv_forward_tiled",
        x.dtype(),
        &defines,
        5,
        1,
    );
    let cols = geo.n * geo.pixels();
    let groups = [
        cols.div_ceil((4 * tile.col4 * tile.lanes) as usize) as u32,
        geo.cout_g().div_ceil(tile.rows as usize) as u32,
        geo.opts.groups as u32,
    ];
    let mut params = geo.params();
    params[K4_PARAM] = weights.padded_k(geo.k()) as u32;
    gpu.dispatch_parts(
        &kernel,
        &params,
        &[&[x.buffer(), weights.buffer()], &epilogue.buffers()[..]].concat(),
        &[y.buffer()],
        groups,
        SplitAxis::X,
        Cost::new(
            "conv2d",
            geo.flops(),
            x.byte_len() + weights.byte_len() + y.byte_len(),
        ),
    );
}

/// Whether [`ConvImpl::Winograd`] computes this conv with its own kernel (3x3, stride 1,
/// dilation 1, any padding and groups) rather than the tiled one: the kernel also needs
/// subgroups of one fixed size (a workgroup is one subgroup sharing its weight loads), and
/// one workgroup per subgroup-sized run of 4x4 tiles must fit the dispatch limit.
pub fn winograd_applies(gpu: &Gpu, geo: &ConvGeometry) -> bool {
    let max_groups = gpu.limits.max_compute_workgroups_per_dimension as usize;
    (geo.kh, geo.kw) == (3, 3)
        && geo.opts.stride == (1, 1)
        && geo.opts.dilation == (1, 1)
        && gpu
            .fixed_subgroup_size()
            .is_some_and(|lanes| winograd_tiles(geo).div_ceil(lanes as usize) <= max_groups)
}

/// The 4x4 output tiles of a Winograd conv (the last rows or columns of a size that is not a
/// multiple of 4 are part of a tile).
fn winograd_tiles(geo: &ConvGeometry) -> usize {
    geo.n * geo.oh.div_ceil(4) * geo.ow.div_ceil(4)
}

/// A Winograd kernel's register tile: quads of output channels x 4x4 output tiles per
/// invocation (36 sums of four channels per quad and tile), invocations per workgroup (one
/// subgroup).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct WinogradTile {
    quads: u32,
    tiles: u32,
    lanes: u32,
}

impl WinogradTile {
    /// Tiles worth measuring for `cout_g` output channels and `tiles` 4x4 output tiles with
    /// `lanes` invocations (the subgroup size): on CPU adapters 8..32 channels x 1 tile (2
    /// tiles ran ~3% faster on lavapipe, but compiling their unrolled code raised the peak RSS
    /// of `bench train` by 76 MB), on GPUs fewer sums per invocation.
    fn candidates(gpu: &Gpu, lanes: u32, cout_g: usize, tiles: usize) -> Vec<WinogradTile> {
        // (quads of output channels, tiles per invocation)
        let shapes: &[(u32, u32)] = if gpu.is_cpu() {
            &[(4, 1), (8, 1), (2, 1)]
        } else {
            &[(1, 1), (2, 1), (1, 2)]
        };
        let all: Vec<WinogradTile> = shapes
            .iter()
            .map(|&(quads, tiles)| WinogradTile { quads, tiles, lanes })
            .collect();
        let fits = |t: &&WinogradTile| {
            4 * t.quads as usize <= 2 * cout_g.max(4) && (t.tiles * t.lanes) as usize <= 2 * tiles.max(16)
        };
        let kept: Vec<WinogradTile> = all.iter().filter(fits).copied().collect();
        if kept.is_empty() {
            vec![*all.last().expect("a tile")]
        } else {
            kept
        }
    }
}

impl std::fmt::Display for WinogradTile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} channels x {} 4x4 tiles per invocation, {} invocations",
            4 * self.quads,
            self.tiles,
            self.lanes
        )
    }
}

/// The Winograd F(4x4, 3x3) forward (shaders/conv_winograd.wgsl), padding as it reads the
/// input: the weights transformed once (`[Cin/g, quads of Cout, 6x6, 4]` f32), the register
/// tile autotuned per shape, the epilogue's terms added by the kernel.
fn conv_forward_winograd(x: &Tensor, w: &Tensor, add: ConvAddends, geo: &ConvGeometry) -> Result<Tensor> {
    let (gpu, dt) = (x.gpu(), x.dtype());
    let quads = geo.opts.groups * geo.cout_g().div_ceil(4);
    let u = Tensor::empty(gpu, &[geo.cin_g(), quads, 36, 4], DType::F32)?;
    let kernel = kernel_for(gpu, shader!("conv_weights"), "winograd_weights", dt, &[], 1, 1);
    gpu.dispatch_named(
        &kernel,
        &geo.params(),
        &[w.buffer()],
        &[u.buffer()],
        flat_groups(gpu, geo.cin_g() * quads * 4),
        Cost::memory("winograd_weights", w.byte_len() + u.byte_len()),
    );
    let epilogue = &Epilogue::new(add, dt, gpu)?;
    let lanes = gpu
        .fixed_subgroup_size()
        .expect("winograd_applies checked the subgroups");
    let shapes = WinogradTile::candidates(gpu, lanes, geo.cout_g(), winograd_tiles(geo));
    let labels: Vec<String> = shapes.iter().map(|t| t.to_string()).collect();
    let key = format!("{}:winograd", geo.tuning_key(dt));
    let choice = gpu.tuner().choose(gpu, &key, &labels, 0, |c| {
        let scratch = Tensor::empty(gpu, &geo.output_shape(), dt)?;
        dispatch_winograd(x, &u, epilogue, &scratch, geo, shapes[c]);
        Ok(())
    })?;
    let y = Tensor::empty(gpu, &geo.output_shape(), dt)?;
    dispatch_winograd(x, &u, epilogue, &y, geo, shapes[choice]);
    Ok(y)
}

/// One Winograd forward dispatch: y = conv(x, w) + the epilogue's terms, `u` the transformed
/// weights.
fn dispatch_winograd(
    x: &Tensor,
    u: &Tensor,
    epilogue: &Epilogue,
    y: &Tensor,
    geo: &ConvGeometry,
    shape: WinogradTile,
) {
    let gpu = x.gpu();
    let mut defines = vec![
        ("QUADS", shape.quads.to_string()),
        ("LOADS", (36 * shape.quads).div_ceil(shape.lanes).to_string()),
        ("TILES", shape.tiles.to_string()),
        ("W", shape.lanes.to_string()),
    ];
    defines.extend(epilogue.defines());
    let kernel = kernel_for(
        gpu,
        shader!("conv_winograd"),
        "conv_forward_winograd",
        x.dtype(),
        &defines,
        5,
        1,
    );
    let groups = [
        winograd_tiles(geo).div_ceil((shape.tiles * shape.lanes) as usize) as u32,
        geo.cout_g().div_ceil(4 * shape.quads as usize) as u32,
        geo.opts.groups as u32,
    ];
    gpu.dispatch_parts(
        &kernel,
        &geo.params(),
        &[&[x.buffer(), u.buffer()], &epilogue.buffers()[..]].concat(),
        &[y.buffer()],
        groups,
        SplitAxis::X,
        Cost::new("conv2d", geo.flops(), x.byte_len() + u.byte_len() + y.byte_len()),
    );
}

/// dw by the implicit-GEMM kernel: no column matrix; the pixel reduction is split in slices
/// (enough workgroups for every core, each slice under the loop budget) summed afterwards.
/// On CPU adapters each invocation owns 24 kernel offsets x 32 output channels (measured
/// best of 8..32 x 16..64 with `wgdiff profile`; about the forward's GFLOP/s); where a
/// workgroup is one subgroup, its lanes share the dY reads (`SHARE`, subgroupBroadcast).
fn weight_grad_tiled(x: &Tensor, dy: &Tensor, geo: &ConvGeometry) -> Result<Tensor> {
    let gpu = x.gpu();
    let (x, geo) = &padded_input(x, geo)?;
    let (rows, cols, lanes) = if gpu.is_cpu() { (24, 32, 8) } else { (4, 4, 64) };
    let share = gpu.fixed_subgroup_size() == Some(lanes as u32) && cols % lanes == 0;
    let groups_xy = geo.k4().div_ceil(rows * lanes) * geo.cout_g().div_ceil(cols) * geo.opts.groups;
    let reduction = geo.n * geo.pixels();
    let slices = (reduction / 4)
        .div_ceil(MAX_LOOP_ITERATIONS / 2)
        .max(16usize.div_ceil(groups_xy))
        .min(reduction.div_ceil(256))
        .max(1);
    let kernel = kernel_for(
        gpu,
        shader!("conv_wgrad_tiled"),
        "conv_weight_grad_tiled",
        x.dtype(),
        &[
            ("R", rows.to_string()),
            ("C", cols.to_string()),
            ("W", lanes.to_string()),
            ("C4", "1".into()),
            ("SHARE", u8::from(share).to_string()),
            ("UNSHARED", u8::from(!share).to_string()),
            ("CH", (cols / lanes).to_string()),
        ],
        2,
        1,
    );
    let partial = Tensor::empty(gpu, &[slices, geo.cout, geo.k4()], DType::F32)?;
    let groups = [
        geo.k4().div_ceil(rows * lanes) as u32,
        geo.cout_g().div_ceil(cols) as u32,
        (geo.opts.groups * slices) as u32,
    ];
    let mut params = geo.params();
    params[SLICES_PARAM] = slices as u32;
    gpu.dispatch_parts(
        &kernel,
        &params,
        &[x.buffer(), dy.buffer()],
        &[partial.buffer()],
        groups,
        SplitAxis::Z,
        Cost::new(
            "conv2d_weight_grad",
            geo.flops(),
            x.byte_len() + dy.byte_len() + partial.byte_len(),
        ),
    );
    partial
        .sum(&[0], false)?
        .slice(1, 0, geo.k())?
        .reshape(&geo.weight_shape())?
        .to_dtype(x.dtype())
}

/// Images per im2col chunk: the column matrix [G, K4, N*P] (and the matmul's output, and
/// its padding of N*P to a multiple of 4) must fit one storage binding.
fn images_per_chunk(geo: &ConvGeometry, dt: DType, gpu: &Gpu) -> Result<usize> {
    let per_image = (geo.opts.groups * geo.k4().max(geo.cout_g()) * (geo.pixels() + 3) * dt.size()) as u64;
    let fit = (gpu.max_binding_bytes() / per_image) as usize;
    if fit == 0 {
        return Err(Error::TooLarge {
            what: format!("the im2col buffer of one image of conv {}", geo.describe()),
            bytes: per_image,
            limit: gpu.max_binding_bytes(),
        });
    }
    // im2col dispatches one workgroup per (image, column-matrix row).
    let max_groups = gpu.limits.max_compute_workgroups_per_dimension as usize;
    if geo.opts.groups * geo.k4() > max_groups {
        return Err(Error::shape(
            "conv2d",
            format!(
                "im2col of {} has too many columns for one dispatch; use the tiled or direct implementation",
                geo.describe()
            ),
        ));
    }
    Ok(fit.min(geo.n).min(max_groups))
}

/// Runs `f` on slices of the batch small enough for [`images_per_chunk`] and concatenates the
/// results along the batch.
fn in_batch_chunks(
    geo: &ConvGeometry,
    dt: DType,
    gpu: &Gpu,
    x: &Tensor,
    f: impl Fn(&Tensor, &ConvGeometry) -> Result<Tensor>,
) -> Result<Tensor> {
    let fit = images_per_chunk(geo, dt, gpu)?;
    if fit >= geo.n {
        return f(x, geo);
    }
    let parts = (0..geo.n)
        .step_by(fit)
        .map(|start| {
            let len = fit.min(geo.n - start);
            f(&x.slice(0, start, len)?, &geo.with_batch(len))
        })
        .collect::<Result<Vec<_>>>()?;
    Tensor::concat(&parts, 0)
}

/// Weights as per-group matrices [G, Cout_g, K4] (zero-padded along k).
fn grouped_weights(w: &Tensor, geo: &ConvGeometry) -> Result<Tensor> {
    w.reshape(&[geo.opts.groups, geo.cout_g(), geo.k()])?
        .pad_axis(2, 0, geo.k4() - geo.k())
}

fn im2col(x: &Tensor, geo: &ConvGeometry) -> Result<Tensor> {
    let gpu = x.gpu();
    let col = Tensor::empty(gpu, &[geo.opts.groups, geo.k4(), geo.n * geo.pixels()], x.dtype())?;
    let kernel = kernel_for(gpu, shader!("conv_im2col"), "im2col", x.dtype(), &[], 1, 1);
    gpu.dispatch_named(
        &kernel,
        &geo.params(),
        &[x.buffer()],
        &[col.buffer()],
        [1, geo.n as u32, (geo.opts.groups * geo.k4()) as u32],
        Cost::memory("im2col", x.byte_len() + col.byte_len()),
    );
    Ok(col)
}

/// dy [N, Cout, OH, OW] as per-group matrices [G, Cout_g, N*P].
fn grouped_rows(dy: &Tensor, geo: &ConvGeometry) -> Result<Tensor> {
    dy.reshape(&[geo.n, geo.opts.groups, geo.cout_g(), geo.pixels()])?
        .permute(&[1, 2, 0, 3])?
        .reshape(&[geo.opts.groups, geo.cout_g(), geo.n * geo.pixels()])
}

/// dx of conv(x, w) given dy. For stride 1 this is itself a forward conv of dy with flipped,
/// channel-swapped weights (so it runs on the same kernels as the forward); otherwise
/// im2col's matmul + col2im, or the direct gather kernel (also naive's backward).
pub(crate) fn conv_input_grad(dy: &Tensor, w: &Tensor, geo: &ConvGeometry, imp: ConvImpl) -> Result<Tensor> {
    let gpu = dy.gpu();
    let dt = dy.dtype();
    let o = &geo.opts;
    let as_conv = o.stride == (1, 1)
        && o.dilation.0 * (geo.kh - 1) >= o.padding.0
        && o.dilation.1 * (geo.kw - 1) >= o.padding.1
        && matches!(
            imp,
            ConvImpl::Im2col | ConvImpl::Tiled | ConvImpl::Direct | ConvImpl::Winograd
        );
    match imp {
        _ if as_conv => {
            let flipped = Tensor::empty(gpu, &[geo.cin, geo.cout_g(), geo.kh, geo.kw], dt)?;
            let kernel = kernel_for(gpu, shader!("conv_weights"), "flip_transpose", dt, &[], 1, 1);
            gpu.dispatch_named(
                &kernel,
                &geo.params(),
                &[w.buffer()],
                &[flipped.buffer()],
                flat_groups(gpu, flipped.numel()),
                Cost::memory("conv_weight_flip", 2 * w.byte_len()),
            );
            let back = ConvOptions {
                stride: (1, 1),
                padding: (
                    o.dilation.0 * (geo.kh - 1) - o.padding.0,
                    o.dilation.1 * (geo.kw - 1) - o.padding.1,
                ),
                dilation: o.dilation,
                groups: o.groups,
            };
            let back_geo = ConvGeometry::new(dy.shape(), flipped.shape(), back)?;
            conv_forward(dy, &flipped, ConvAddends::default(), &back_geo, imp)
        }
        ConvImpl::Naive | ConvImpl::Direct => {
            let dx = Tensor::empty(gpu, &geo.input_shape(), dt)?;
            let kernel = kernel_for(
                gpu,
                shader!("conv_direct"),
                "conv_input_grad_direct",
                dt,
                &[],
                2,
                1,
            );
            gpu.dispatch_named(
                &kernel,
                &geo.params(),
                &[dy.buffer(), w.buffer()],
                &[dx.buffer()],
                flat_groups(gpu, dx.numel()),
                Cost::new(
                    "conv2d_input_grad",
                    geo.flops(),
                    dy.byte_len() + w.byte_len() + dx.byte_len(),
                ),
            );
            Ok(dx)
        }
        _ => in_batch_chunks(geo, dt, gpu, dy, |dyc, gc| {
            let dcol = grouped_weights(w, gc)?.matmul_t(&grouped_rows(dyc, gc)?, true, false)?; // [G, K4, N*P]
            let dx = Tensor::empty(gpu, &gc.input_shape(), dt)?;
            let kernel = kernel_for(gpu, shader!("conv_im2col"), "col2im", dt, &[], 1, 1);
            gpu.dispatch_named(
                &kernel,
                &gc.params(),
                &[dcol.buffer()],
                &[dx.buffer()],
                flat_groups(gpu, dx.numel()),
                Cost::memory("col2im", dcol.byte_len() + dx.byte_len()),
            );
            Ok(dx)
        }),
    }
}

/// dw of conv(x, w) given dy.
pub(crate) fn conv_weight_grad(x: &Tensor, dy: &Tensor, geo: &ConvGeometry, imp: ConvImpl) -> Result<Tensor> {
    let gpu = x.gpu();
    let dt = x.dtype();
    match imp {
        ConvImpl::Naive | ConvImpl::Direct => {
            // Each invocation loops over images x output pixels: keep that under the loop budget
            // by summing over batch slices (or use the GEMM route when one image is too big).
            let per_image = geo.oh * (geo.ow + 1) + 1;
            let images = MAX_LOOP_ITERATIONS / per_image;
            if images == 0 {
                return conv_weight_grad(x, dy, geo, ConvImpl::Im2col);
            }
            let kernel = kernel_for(
                gpu,
                shader!("conv_direct"),
                "conv_weight_grad_direct",
                dt,
                &[],
                2,
                1,
            );
            let mut total: Option<Tensor> = None;
            for start in (0..geo.n).step_by(images) {
                let len = images.min(geo.n - start);
                let gc = geo.with_batch(len);
                let (xc, dyc) = (x.slice(0, start, len)?, dy.slice(0, start, len)?);
                let dw = Tensor::empty(gpu, &geo.weight_shape(), dt)?;
                gpu.dispatch_named(
                    &kernel,
                    &gc.params(),
                    &[xc.buffer(), dyc.buffer()],
                    &[dw.buffer()],
                    flat_groups(gpu, dw.numel()),
                    Cost::new(
                        "conv2d_weight_grad",
                        gc.flops(),
                        xc.byte_len() + dyc.byte_len() + dw.byte_len(),
                    ),
                );
                total = Some(match total {
                    Some(t) => t.add(&dw)?,
                    None => dw,
                });
            }
            Ok(total.expect("batch of at least one image"))
        }
        ConvImpl::Tiled | ConvImpl::Winograd => weight_grad_tiled(x, dy, geo),
        _ => {
            let fit = images_per_chunk(geo, dt, gpu)?;
            let mut total: Option<Tensor> = None;
            for start in (0..geo.n).step_by(fit) {
                let len = fit.min(geo.n - start);
                let gc = geo.with_batch(len);
                let col = im2col(&x.slice(0, start, len)?, &gc)?;
                // dW^T = col [K4, N*P] x dy^T: transposing dy is cheaper than transposing col.
                let part = col.matmul_t(&grouped_rows(&dy.slice(0, start, len)?, &gc)?, false, true)?; // [G, K4, Cout_g]
                total = Some(match total {
                    Some(t) => t.add(&part)?,
                    None => part,
                });
            }
            total
                .expect("batch of at least one image")
                .slice(1, 0, geo.k())?
                .permute(&[0, 2, 1])?
                .reshape(&geo.weight_shape())
        }
    }
}
