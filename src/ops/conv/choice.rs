//! `ConvImpl`: the forward implementations, which one `auto` stands for (measured per shape,
//! the untimed rule, or a thread's `use_conv_impl` guard), and `conv_forward`, which runs one;
//! `packed_forward`, the same choice for packed integer weights.

use super::direct::{conv_forward_direct, conv_forward_naive};
use super::epilogue::ConvAddends;
use super::geometry::ConvGeometry;
use super::im2col::conv_forward_im2col;
use super::tiled::{conv_forward_tiled, tiled_forward};
use super::winograd::{conv_forward_winograd, winograd_applies};
use crate::ops::depthwise7::depthwise7_conv;
use crate::ops::packed::{PackedWeights, WeightOperand};
use crate::{Error, Result, Tensor};

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
    /// way (a stride-1 3x3 conv again), the weight gradient as tiled or, ungrouped, by
    /// Winograd's batched GEMM, whichever measures faster.
    Winograd,
    /// The ConvNeXt block's register-blocked depthwise 7x7 kernels (`ops::depthwise7`: several
    /// output rows per invocation, each input row loaded once) where they apply (7x7, padding
    /// 3, stride 1, one filter per channel: [`ConvGeometry::is_depthwise7`]), direct for every
    /// other shape; backward: the transposed conv (flipped taps) and the weight gradient's
    /// slice sums.
    Depthwise7,
    /// Fastest of im2col, tiled, direct and (where they apply) Winograd and depthwise7 for this shape,
    /// measured once and remembered; without timing (the web,
    /// [`crate::Gpu::set_deterministic`]) the fixed rule [`untimed_conv_impl`]. On a thread
    /// with a live [`use_conv_impl`] guard, the guard's.
    Auto,
}

impl ConvImpl {
    /// All implementations selectable by name.
    pub const ALL: [ConvImpl; 7] = [
        ConvImpl::Naive,
        ConvImpl::Im2col,
        ConvImpl::Tiled,
        ConvImpl::Direct,
        ConvImpl::Winograd,
        ConvImpl::Depthwise7,
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
            ConvImpl::Depthwise7 => "depthwise7",
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
                        "unknown conv implementation \"{name}\"; use naive, im2col, tiled, direct, winograd, depthwise7 or auto"
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

/// What `auto` runs where nothing is timed (the web, [`crate::Gpu::set_deterministic`]):
/// depthwise7 where it applies (3.6x direct's speed on lavapipe, BENCHMARKS.md), direct when
/// Cin/groups x Cout/groups <= 16 (depthwise and tiny convs, where a GEMM has nothing to
/// tile), tiled otherwise.
pub fn untimed_conv_impl(geo: &ConvGeometry) -> ConvImpl {
    if geo.is_depthwise7() {
        ConvImpl::Depthwise7
    } else if geo.cin_g() * geo.cout_g() <= 16 {
        ConvImpl::Direct
    } else {
        ConvImpl::Tiled
    }
}

/// conv(x, w) + `add` with `w` packed: the tiled kernel dequantising in registers, or, where
/// [`winograd_applies`], Winograd, its weight transform dequantising the integers as it reads
/// them (no float copy of the weights), whichever measures faster for the rounded shape (a [`use_conv_impl`] guard of
/// `tiled` or `winograd` decides instead; the tiled kernel when nothing is timed). On lavapipe
/// Winograd ran the 3x3 convs of `bench conv` 1.3-1.4x faster (BENCHMARKS.md).
pub(super) fn packed_forward(
    x: &Tensor,
    w: &PackedWeights,
    add: ConvAddends,
    geo: &ConvGeometry,
) -> Result<Tensor> {
    let gpu = x.gpu();
    let run = |winograd: bool, add: ConvAddends| match winograd {
        true => conv_forward_winograd(x, WeightOperand::Packed(w), add, geo),
        false => tiled_forward(x, WeightOperand::Packed(w), add, geo),
    };
    if !winograd_applies(gpu, geo) {
        return run(false, add);
    }
    let winograd = match auto_conv_impl() {
        ConvImpl::Tiled => false,
        ConvImpl::Winograd => true,
        _ => {
            let labels = ["tiled".to_string(), "winograd".to_string()];
            let key = format!(
                "{}:{} of tiled,winograd",
                geo.tuning_key(x.dtype()),
                w.bits().name()
            );
            let choice = gpu.tuner().choose(gpu, &key, &labels, 0, |c| {
                run(c == 1, ConvAddends::default()).map(drop)
            })?;
            choice == 1
        }
    };
    run(winograd, add)
}

/// The implementation `imp` stands for on these operands: `auto` is the live
/// [`use_conv_impl`] choice, or else resolved by timing im2col, tiled, direct and (where
/// [`winograd_applies`], [`ConvGeometry::is_depthwise7`]) Winograd, depthwise7 once per rounded shape ([`untimed_conv_impl`] where
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
    if geo.is_depthwise7() {
        candidates.push(ConvImpl::Depthwise7);
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
        ConvImpl::Winograd if winograd_applies(x.gpu(), geo) => {
            return conv_forward_winograd(x, WeightOperand::Float(w), add, geo)
        }
        ConvImpl::Tiled | ConvImpl::Winograd => return conv_forward_tiled(x, w, add, geo),
        ConvImpl::Depthwise7 if geo.is_depthwise7() => {
            let y = depthwise7_conv(x, w, add.bias, add.residual, false)?;
            return match add.sample_bias {
                Some(b) => y.add(&b.reshape(&[geo.n, geo.cout, 1, 1])?),
                None => Ok(y),
            };
        }
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

/// y = conv(x, w) with the naive, direct or im2col implementation.
fn conv_forward_unbiased(x: &Tensor, w: &Tensor, geo: &ConvGeometry, imp: ConvImpl) -> Result<Tensor> {
    match imp {
        ConvImpl::Naive => conv_forward_naive(x, w, geo),
        ConvImpl::Direct | ConvImpl::Depthwise7 => conv_forward_direct(x, w, geo),
        ConvImpl::Im2col => conv_forward_im2col(x, w, geo),
        ConvImpl::Tiled | ConvImpl::Winograd | ConvImpl::Auto => Err(Error::shape(
            "conv2d",
            "internal: tiled and winograd run with their epilogue and Auto must be resolved first",
        )),
    }
}
