//! Fused network blocks: the ConvNeXt block (three kernels instead of nine: shaders/depthwise7.wgsl, the
//! LayerNorm, shaders/convnext.wgsl) and the DDPM ResBlock's GroupNorm -> FiLM -> SiLU -> 3x3 conv chain,
//! each beside its unfused reference.

use super::conv::{auto_conv_impl, conv_input_grad, conv_weight_grad, resolve, ConvGeometry};
use super::depthwise7::{depthwise7_conv, depthwise7_weight_grad};
use super::{kernel_for, needs_f32_fallback, ConvImpl, ConvOptions, GeluForm};
use crate::gpu::Cost;
use crate::ops::random::Rng;
use crate::{shader, DType, Error, Gpu, Result, Tensor};
use serde::Serialize;

/// Most channels the fused ConvNeXt MLP kernel keeps in registers (C/4 vec4 inputs and as
/// many accumulators per invocation).
pub const CONVNEXT_FUSED_MAX_CHANNELS: usize = 128;

/// The ConvNeXt block's GELU: the tanh form, which the fused kernel computes
/// (`gelu4` in shaders/convnext.wgsl), so fused and unfused blocks agree. (The ConvNeXt paper's
/// `nn.GELU()` is the exact form; the speed ladder keeps the cheaper tanh one.)
pub const CONVNEXT_GELU: GeluForm = GeluForm::Tanh;

/// Parameters of a ConvNeXt block on C channels (PyTorch layouts).
#[derive(Clone)]
pub struct ConvNextParams {
    /// Depthwise 7x7 weight [C, 1, 7, 7] and bias [C].
    pub dw_weight: Tensor,
    pub dw_bias: Tensor,
    /// Channel LayerNorm gamma, beta [C].
    pub gamma: Tensor,
    pub beta: Tensor,
    /// 1x1 expand weight [4C, C, 1, 1] and bias [4C].
    pub w1: Tensor,
    pub b1: Tensor,
    /// 1x1 project weight [C, 4C, 1, 1] and bias [C].
    pub w2: Tensor,
    pub b2: Tensor,
    /// LayerNorm epsilon.
    pub eps: f32,
}

impl ConvNextParams {
    /// Random parameters (fan-in scaled normals, gamma near 1, small biases), eps 1e-6.
    pub fn random(gpu: &Gpu, channels: usize, rng: &mut Rng, dtype: DType) -> Result<ConvNextParams> {
        let c = channels;
        let mut normal = |shape: &[usize], mean: f32, std: f32| rng.normal(gpu, shape, mean, std, dtype);
        Ok(ConvNextParams {
            dw_weight: normal(&[c, 1, 7, 7], 0.0, 1.0 / 7.0)?,
            dw_bias: normal(&[c], 0.0, 0.1)?,
            gamma: normal(&[c], 1.0, 0.1)?,
            beta: normal(&[c], 0.0, 0.1)?,
            w1: normal(&[4 * c, c, 1, 1], 0.0, 1.0 / (c as f32).sqrt())?,
            b1: normal(&[4 * c], 0.0, 0.1)?,
            w2: normal(&[c, 4 * c, 1, 1], 0.0, 0.5 / (c as f32).sqrt())?,
            b2: normal(&[c], 0.0, 0.1)?,
            eps: 1e-6,
        })
    }

    /// The tensors in a fixed order (x's gradient comes first in the fused backward).
    pub fn tensors(&self) -> [&Tensor; 8] {
        [
            &self.dw_weight,
            &self.dw_bias,
            &self.gamma,
            &self.beta,
            &self.w1,
            &self.b1,
            &self.w2,
            &self.b2,
        ]
    }

    /// The same parameters as new tensors from `t` (in [`ConvNextParams::tensors`] order).
    pub fn from_tensors(t: [Tensor; 8], eps: f32) -> ConvNextParams {
        let [dw_weight, dw_bias, gamma, beta, w1, b1, w2, b2] = t;
        ConvNextParams {
            dw_weight,
            dw_bias,
            gamma,
            beta,
            w1,
            b1,
            w2,
            b2,
            eps,
        }
    }

    /// Errors unless every parameter fits x [N, C, H, W] in shape and dtype.
    fn check(&self, x: &Tensor) -> Result<()> {
        const OP: &str = "convnext_block";
        let [_, c, _, _] = <[usize; 4]>::try_from(x.shape())
            .map_err(|_| Error::shape(OP, format!("input {:?} must be [N, C, H, W]", x.shape())))?;
        let want: [&[usize]; 8] = [
            &[c, 1, 7, 7],
            &[c],
            &[c],
            &[c],
            &[4 * c, c, 1, 1],
            &[4 * c],
            &[c, 4 * c, 1, 1],
            &[c],
        ];
        let names = ["dw_weight", "dw_bias", "gamma", "beta", "w1", "b1", "w2", "b2"];
        for ((t, shape), name) in self.tensors().iter().zip(want).zip(names) {
            if t.shape() != shape {
                return Err(Error::shape(
                    OP,
                    format!(
                        "{name} has shape {:?} but input {:?} needs {shape:?}",
                        t.shape(),
                        x.shape()
                    ),
                ));
            }
            super::check_same_dtype(OP, x, t)?;
        }
        Ok(())
    }
}

/// How a ConvNeXt block runs: the rungs of the ladder in "Accelerating Diffusion Model
/// Computations Using CUDA Optimizations" (Li Xiaolong).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConvNextImpl {
    /// Separate ops, the channel LayerNorm itself composed of mean, subtract, square, power,
    /// multiply and add ops (as a first implementation writes it): about ten kernels, not one.
    ComposedNorm,
    /// Separate ops with the LayerNorm kernel: [`convnext_block_unfused`].
    Unfused,
    /// The two fused kernels: [`convnext_block_fused`].
    Fused,
}

/// The ConvNeXt block of [`convnext_block_unfused`] run as `imp` says.
pub fn convnext_block(x: &Tensor, p: &ConvNextParams, imp: ConvNextImpl) -> Result<Tensor> {
    match imp {
        ConvNextImpl::ComposedNorm => convnext_block_composed(x, p, layer_norm_channels_composed),
        ConvNextImpl::Unfused => convnext_block_unfused(x, p),
        ConvNextImpl::Fused => convnext_block_fused(x, p),
    }
}

/// LayerNorm over the channels of NCHW `x` from generic ops: (x - mean) * (var + eps)^-1/2 *
/// gamma + beta, each step its own kernel (the CUDA study's unoptimised `layer_norm`).
fn layer_norm_channels_composed(x: &Tensor, gamma: &Tensor, beta: &Tensor, eps: f32) -> Result<Tensor> {
    let per_channel = |t: &Tensor| t.reshape(&[1, t.numel(), 1, 1]);
    let centred = x.sub(&x.mean(&[1], true)?)?;
    let rstd = centred.square()?.mean(&[1], true)?.add_scalar(eps)?.powf(-0.5)?;
    centred
        .mul(&rstd)?
        .mul(&per_channel(gamma)?)?
        .add(&per_channel(beta)?)
}

/// The ConvNeXt block composed from existing ops (the reference, differentiable op by op):
/// x + conv1x1(gelu(conv1x1(layer_norm_channels(dwconv7x7(x) + b_dw)) + b1)) + b2, the GELU
/// in its [`CONVNEXT_GELU`] (tanh) form.
pub fn convnext_block_unfused(x: &Tensor, p: &ConvNextParams) -> Result<Tensor> {
    convnext_block_composed(x, p, |z, gamma, beta, eps| {
        z.layer_norm_channels(gamma, beta, eps)
    })
}

/// The block's depthwise 7x7 conv on `channels` channels (padding 3 keeps the size).
fn depthwise_7x7(channels: usize) -> ConvOptions {
    ConvOptions::default().padding(3).groups(channels)
}

/// The unfused block with the channel LayerNorm `norm(z, gamma, beta, eps)`.
fn convnext_block_composed(
    x: &Tensor,
    p: &ConvNextParams,
    norm: impl Fn(&Tensor, &Tensor, &Tensor, f32) -> Result<Tensor>,
) -> Result<Tensor> {
    p.check(x)?;
    let c = x.shape()[1];
    let pointwise = ConvOptions::default();
    let z = x.conv2d(&p.dw_weight, Some(&p.dw_bias), depthwise_7x7(c))?;
    norm(&z, &p.gamma, &p.beta, p.eps)?
        .conv2d(&p.w1, Some(&p.b1), pointwise)?
        .gelu(CONVNEXT_GELU)?
        .conv2d(&p.w2, Some(&p.b2), pointwise)?
        .add(x)
}

/// Why the fused kernels cannot run a block on C channels, or None when they can.
pub fn convnext_fused_unsupported(channels: usize) -> Option<String> {
    if channels % 4 != 0 || channels > CONVNEXT_FUSED_MAX_CHANNELS {
        Some(format!(
            "the fused ConvNeXt MLP kernel keeps C/4 vec4 registers per pixel and needs C a multiple of 4 and at most {CONVNEXT_FUSED_MAX_CHANNELS}, got C = {channels}"
        ))
    } else {
        None
    }
}

/// The ConvNeXt block of [`convnext_block_unfused`] in three kernels: the depthwise conv +
/// bias (register-blocked, `depthwise7.wgsl`), the channel LayerNorm, then 1x1 expand + bias +
/// GELU (tanh form) + 1x1 project + bias + residual with the 4C hidden activations in
/// registers (also stored when a backward will need them). Shapes the MLP kernel does not take
/// ([`convnext_fused_unsupported`]) run the unfused composition.
pub fn convnext_block_fused(x: &Tensor, p: &ConvNextParams) -> Result<Tensor> {
    p.check(x)?;
    let gpu = x.gpu();
    let [n, c, h, w] = <[usize; 4]>::try_from(x.shape()).expect("checked");
    if convnext_fused_unsupported(c).is_some() {
        return convnext_block_unfused(x, p);
    }
    if needs_f32_fallback(gpu, x.dtype()) {
        let f = |t: &Tensor| t.to_dtype(DType::F32);
        let cast: Vec<Tensor> = p.tensors().into_iter().map(f).collect::<Result<_>>()?;
        let params = ConvNextParams::from_tensors(cast.try_into().expect("eight tensors"), p.eps);
        return convnext_block_fused(&f(x)?, &params)?.to_dtype(DType::F16);
    }
    let dt = x.dtype();
    let pixels = n * h * w;
    let lanes: u32 = if gpu.is_cpu() { 8 } else { 64 };
    let params = [n, c, h, w].map(|v| v as u32);
    let mlp_groups = gpu.grid((pixels as u32).div_ceil(4 * lanes));
    let act_bytes = (x.numel() * dt.size()) as u64;
    let param_bytes = |ts: &[&Tensor]| ts.iter().map(|t| (t.numel() * dt.size()) as u64).sum::<u64>();

    let d = depthwise7_conv(x, &p.dw_weight, Some(&p.dw_bias), None, false)?;
    let z = {
        // (the block's backward differentiates the norm itself, from the saved d)
        let _no_grad = crate::no_grad();
        d.layer_norm_channels(&p.gamma, &p.beta, p.eps)?
    };
    // The backward needs the pre-GELU hidden activations: store them only when it will run.
    let inputs: Vec<Tensor> = std::iter::once(x).chain(p.tensors()).cloned().collect();
    let save = crate::autograd::grad_enabled() && inputs.iter().any(Tensor::tracks_grad);
    let hidden = Tensor::empty(gpu, &if save { vec![n, 4 * c, h, w] } else { vec![1] }, dt)?;
    let defines = [
        ("W", lanes.to_string()),
        ("C", c.to_string()),
        ("C4", (c / 4).to_string()),
        ("SAVE", save.to_string()),
    ];
    let y = Tensor::empty(gpu, x.shape(), dt)?;
    gpu.dispatch_named(
        &kernel_for(gpu, shader!("convnext"), "pointwise_mlp", dt, &defines, 6, 2),
        &params,
        &[
            z.buffer(),
            x.buffer(),
            p.w1.buffer(),
            p.b1.buffer(),
            p.w2.buffer(),
            p.b2.buffer(),
        ],
        &[y.buffer(), hidden.buffer()],
        mlp_groups,
        Cost::new(
            "convnext_pointwise_mlp",
            (pixels * 2 * 2 * 4 * c * c) as f64,
            (3 + 4 * save as u64) * act_bytes + param_bytes(&p.tensors()[4..]),
        ),
    );
    let (eps, conv) = (p.eps, auto_conv_impl());
    Ok(y.with_grad_fn(
        "convnext_block_fused",
        inputs.clone(),
        Box::new(move |g| {
            convnext_fused_backward(
                &inputs,
                &Saved {
                    d: &d,
                    z: &z,
                    hidden: &hidden,
                },
                g,
                eps,
                conv,
            )
        }),
    ))
}

/// What the fused forward keeps for its backward: the depthwise conv's output `d`, the
/// LayerNorm's output `z` and the pre-GELU hidden activations.
struct Saved<'a> {
    d: &'a Tensor,
    z: &'a Tensor,
    hidden: &'a Tensor,
}

/// Gradients of the fused block from what its forward saved: the two 1x1 convs' gradients
/// directly (no forward recomputed, the convolutions in `conv`, what `auto` meant when the
/// forward ran), GELU' and the LayerNorm through autograd (the norm recomputed from `d`, one
/// kernel), and the depthwise conv's with its own kernels (`depthwise7.wgsl`: the transposed
/// conv adds the residual's gradient as it stores).
fn convnext_fused_backward(
    inputs: &[Tensor],
    saved: &Saved,
    g: &Tensor,
    eps: f32,
    conv: ConvImpl,
) -> Result<Vec<Option<Tensor>>> {
    let [x, dw_weight, _, gamma, beta, w1, _, w2, _] = inputs else {
        unreachable!("the block has nine inputs")
    };
    let pointwise_grads = |input: &Tensor, weight: &Tensor, dy: &Tensor| -> Result<(Tensor, Tensor)> {
        let geo = ConvGeometry::new(input.shape(), weight.shape(), ConvOptions::default())?;
        let imp = resolve(input, weight, &geo, conv)?;
        Ok((
            conv_input_grad(dy, weight, &geo, imp)?,
            conv_weight_grad(input, dy, &geo, imp)?,
        ))
    };
    let _grad = crate::autograd::enable_grad();
    let pre = saved.hidden.detach().requires_grad();
    let act = pre.gelu(CONVNEXT_GELU)?;
    let (d_act, d_w2) = pointwise_grads(&act.detach(), w2, g)?;
    crate::backward_from(&act, &d_act)?;
    let d_pre = pre.grad().expect("gelu input is a tracked leaf");
    let (d_z, d_w1) = pointwise_grads(saved.z, w1, &d_pre)?;
    let leaves: Vec<Tensor> = [saved.d, gamma, beta]
        .iter()
        .map(|t| t.detach().requires_grad())
        .collect();
    let z_again = leaves[0].layer_norm_channels(&leaves[1], &leaves[2], eps)?;
    crate::backward_from(&z_again, &d_z)?;
    let _no_grad = crate::no_grad();
    let d_d = leaves[0].grad().expect("tracked leaf");
    let dx = depthwise7_conv(&d_d, dw_weight, None, Some(g), true)?;
    let (d_dw_weight, d_dw_bias) = depthwise7_weight_grad(x, &d_d)?;
    Ok(vec![
        Some(dx),
        Some(d_dw_weight),
        Some(d_dw_bias),
        leaves[1].grad(),
        leaves[2].grad(),
        Some(d_w1),
        Some(d_pre.sum(&[0, 2, 3], false)?),
        Some(d_w2),
        Some(g.sum(&[0, 2, 3], false)?),
    ])
}

/// The DDPM ResBlock chain as separate ops (the reference):
/// conv2d(silu(group_norm(x) * (1 + scale) + shift)) with `scale`, `shift` [N, C].
#[allow(clippy::too_many_arguments)]
pub fn resblock_norm_act_conv_unfused(
    x: &Tensor,
    groups: usize,
    (gamma, beta): (&Tensor, &Tensor),
    (scale, shift): (&Tensor, &Tensor),
    weight: &Tensor,
    bias: Option<&Tensor>,
    opts: ConvOptions,
    eps: f32,
) -> Result<Tensor> {
    let nc11 = |t: &Tensor| {
        let s = t.shape();
        if s.len() != 2 {
            return Err(Error::shape(
                "resblock_norm_act_conv",
                format!("scale/shift {s:?} must be [N, C]"),
            ));
        }
        t.reshape(&[s[0], s[1], 1, 1])
    };
    x.group_norm(groups, gamma, beta, eps)?
        .mul(&nc11(scale)?.add_scalar(1.0)?)?
        .add(&nc11(shift)?)?
        .silu()?
        .conv2d(weight, bias, opts)
}

/// [`resblock_norm_act_conv_unfused`] with GroupNorm + FiLM + SiLU as the one fused kernel
/// [`Tensor::group_norm_scale_shift_silu`] followed by conv2d (auto).
#[allow(clippy::too_many_arguments)]
pub fn resblock_norm_act_conv_fused(
    x: &Tensor,
    groups: usize,
    (gamma, beta): (&Tensor, &Tensor),
    (scale, shift): (&Tensor, &Tensor),
    weight: &Tensor,
    bias: Option<&Tensor>,
    opts: ConvOptions,
    eps: f32,
) -> Result<Tensor> {
    x.group_norm_scale_shift_silu(groups, gamma, beta, scale, shift, eps)?
        .conv2d(weight, bias, opts)
}
