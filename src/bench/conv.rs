//! `wgdiff bench conv`: every conv implementation, forward and forward+backward, and tiled,
//! Winograd and auto on int8/int4 weights (forward), on the conv shapes of a 32x32 U-Net
//! (batch 16), interleaved in one run, beside a matmul of the same GEMM size.

use super::{run_interleaved_beside, Case, Measurement, Peer};
use crate::ops::conv::{conv_input_grad, conv_weight_grad, use_conv_impl, ConvGeometry};
use crate::ops::random::Rng;
use crate::ops::{ConvAddends, ConvImpl, ConvOptions, PackedWeights, WeightBits};
use crate::{DType, Gpu, Result, Tensor};

/// What a row runs: an implementation on float weights, or one of those packed integer weights
/// run (tiled, Winograd on the weights dequantised for the call, or auto: the faster of the
/// two) with a scale per output channel (forward only: packed weights are for inference).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvVariant {
    Float(ConvImpl),
    Packed(ConvImpl, WeightBits),
}

/// The implementations packed weights can run.
const PACKED_IMPLS: [ConvImpl; 3] = [ConvImpl::Tiled, ConvImpl::Winograd, ConvImpl::Auto];

impl ConvVariant {
    /// Every implementation, then those of packed int8 and int4 weights.
    pub fn all() -> Vec<ConvVariant> {
        let packed = [WeightBits::Int8, WeightBits::Int4]
            .into_iter()
            .flat_map(|bits| PACKED_IMPLS.map(|imp| ConvVariant::Packed(imp, bits)));
        ConvImpl::ALL
            .map(ConvVariant::Float)
            .into_iter()
            .chain(packed)
            .collect()
    }

    pub fn from_name(name: &str) -> Result<ConvVariant> {
        let Some((imp, bits)) = name.split_once("-int") else {
            return Ok(ConvVariant::Float(ConvImpl::from_name(name)?));
        };
        let imp = ConvImpl::from_name(imp)?;
        if !PACKED_IMPLS.contains(&imp) {
            return Err(crate::Error::Config(format!(
                "conv variant \"{name}\": packed weights run tiled, winograd or auto (e.g. tiled-int8)"
            )));
        }
        Ok(ConvVariant::Packed(imp, format!("int{bits}").parse()?))
    }

    pub fn name(self) -> String {
        match self {
            ConvVariant::Float(imp) => imp.name().into(),
            ConvVariant::Packed(imp, bits) => format!("{}-{}", imp.name(), bits.name()),
        }
    }
}

/// `w` [Cout, ..] quantised per output channel to `bits` and packed for the tiled kernel.
fn packed_conv_weights(w: &Tensor, bits: WeightBits) -> Result<PackedWeights> {
    let s = w.shape();
    let q = crate::checkpoint::compressed::quantize(&w.to_vec()?, s, Some(0), bits);
    PackedWeights::conv(w.gpu(), bits, [s[0], s[1], s[2], s[3]], &q.values, &q.scales)
}

/// (input shape, weight shape, options) of the default shapes.
pub fn default_shapes() -> Vec<([usize; 4], [usize; 4], ConvOptions)> {
    vec![
        (
            [16, 64, 32, 32],
            [64, 64, 3, 3],
            ConvOptions::default().padding(1),
        ),
        (
            [16, 128, 16, 16],
            [128, 128, 3, 3],
            ConvOptions::default().padding(1),
        ),
        ([16, 128, 16, 16], [256, 128, 1, 1], ConvOptions::default()),
        (
            [16, 64, 32, 32],
            [64, 1, 7, 7],
            ConvOptions::default().padding(3).groups(64),
        ),
    ]
}

/// A pass `bench conv` times: the forward conv, either backward pass alone, or the forward
/// and both backward passes with the bias's gradient (what a training step runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvPass {
    Forward,
    InputGrad,
    WeightGrad,
    ForwardBackward,
}

impl ConvPass {
    /// Every pass, in table order.
    pub const ALL: [ConvPass; 4] = [
        ConvPass::Forward,
        ConvPass::InputGrad,
        ConvPass::WeightGrad,
        ConvPass::ForwardBackward,
    ];

    /// The pass's name in the table, in `--pass` and in the peer's workload line.
    pub fn name(self) -> &'static str {
        match self {
            ConvPass::Forward => "forward",
            ConvPass::InputGrad => "input-grad",
            ConvPass::WeightGrad => "weight-grad",
            ConvPass::ForwardBackward => "forward+backward",
        }
    }

    /// The passes `--pass` names: forward, input-grad, weight-grad, forward+backward (or
    /// backward), both (forward and forward+backward) or all, comma-separated.
    pub fn parse_list(text: &str) -> Result<Vec<ConvPass>> {
        let mut wanted = [false; ConvPass::ALL.len()];
        for word in text.split(',').map(str::trim) {
            let named = match word {
                "both" => vec![ConvPass::Forward, ConvPass::ForwardBackward],
                "all" => ConvPass::ALL.to_vec(),
                "backward" => vec![ConvPass::ForwardBackward],
                _ => match ConvPass::ALL.into_iter().find(|p| p.name() == word) {
                    Some(pass) => vec![pass],
                    None => {
                        return Err(crate::Error::Config(format!(
                            "--pass {word}: use forward, input-grad, weight-grad, forward+backward (or \
                             backward), both (forward and forward+backward) or all, comma-separated"
                        )))
                    }
                },
            };
            for pass in named {
                wanted[pass as usize] = true;
            }
        }
        Ok(ConvPass::ALL
            .into_iter()
            .filter(|&p| wanted[p as usize])
            .collect())
    }

    /// FLOPs of the pass: a backward pass alone costs what the forward does.
    fn flops(self, geo: &ConvGeometry) -> f64 {
        match self {
            ConvPass::ForwardBackward => 3.0 * geo.flops(),
            _ => geo.flops(),
        }
    }
}

/// A conv workload in the words of `scripts/torch_bench.py`.
fn peer_line(geo: &ConvGeometry, pass: ConvPass) -> String {
    let o = geo.opts;
    format!(
        "conv {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}",
        geo.n,
        geo.cin,
        geo.h,
        geo.w,
        geo.cout,
        geo.kh,
        geo.kw,
        o.stride.0,
        o.stride.1,
        o.padding.0,
        o.padding.1,
        o.dilation.0,
        o.dilation.1,
        o.groups,
        pass.name(),
    )
}

/// Runs the conv benchmark for `variants` and `passes` (plus a same-size matmul row per shape
/// beside the forward). Beside a `peer`, each shape's float conv there too, every pass, in the
/// same rounds.
pub fn run(
    gpu: &Gpu,
    shapes: &[([usize; 4], [usize; 4], ConvOptions)],
    variants: &[ConvVariant],
    passes: &[ConvPass],
    warmup: usize,
    reps: usize,
    mut peer: Option<&mut dyn Peer>,
) -> Result<Vec<Measurement>> {
    let _g = crate::no_grad();
    let mut rng = Rng::new(2);
    let mut rows = Vec::new();
    for &(xs, ws, opts) in shapes {
        let geo = ConvGeometry::new(&xs, &ws, opts)?;
        let x = rng.normal(gpu, &xs, 0.0, 1.0, DType::F32)?;
        let w = rng.normal(gpu, &ws, 0.0, 0.1, DType::F32)?;
        let dy = rng.normal(gpu, &geo.output_shape(), 0.0, 1.0, DType::F32)?;
        let shape = geo.describe();
        let bytes = ((x.numel() + w.numel() + dy.numel()) * 4) as f64;
        let mut cases = Vec::new();
        let forward = passes.contains(&ConvPass::Forward);
        for &variant in variants {
            let imp = match variant {
                ConvVariant::Float(imp) => imp,
                ConvVariant::Packed(imp, bits) => {
                    if forward {
                        let (x, packed) = (x.clone(), packed_conv_weights(&w, bits)?);
                        cases.push(Case {
                            peer: Some(peer_line(&geo, ConvPass::Forward)),
                            variant: variant.name(),
                            shape: shape.clone(),
                            pass: Some("forward".into()),
                            flops: geo.flops(),
                            bytes: ((x.numel() + dy.numel()) * 4) as f64 + packed.byte_len() as f64,
                            run: Box::new(move || {
                                let _imp = use_conv_impl(imp);
                                x.conv2d_packed(&packed, opts, ConvAddends::default()).map(drop)
                            }),
                        });
                    }
                    continue;
                }
            };
            for &pass in passes {
                let (x, w, dy) = (x.clone(), w.clone(), dy.clone());
                let run: Box<dyn Fn() -> Result<()>> = match pass {
                    ConvPass::Forward => Box::new(move || x.conv2d_with(&w, None, opts, imp).map(drop)),
                    ConvPass::InputGrad => Box::new(move || {
                        let resolved = crate::ops::conv::resolve(&x, &w, &geo, imp)?;
                        conv_input_grad(&dy, &w, &geo, resolved).map(drop)
                    }),
                    ConvPass::WeightGrad => Box::new(move || {
                        let resolved = crate::ops::conv::resolve(&x, &w, &geo, imp)?;
                        conv_weight_grad(&x, &dy, &geo, resolved).map(drop)
                    }),
                    ConvPass::ForwardBackward => Box::new(move || {
                        let y = x.conv2d_with(&w, None, opts, imp)?;
                        let resolved = crate::ops::conv::resolve(&x, &w, &geo, imp)?;
                        conv_input_grad(&dy, &w, &geo, resolved)?;
                        conv_weight_grad(&x, &dy, &geo, resolved)?;
                        dy.sum(&[0, 2, 3], false)?;
                        drop(y);
                        Ok(())
                    }),
                };
                cases.push(Case {
                    peer: Some(peer_line(&geo, pass)),
                    variant: imp.name().into(),
                    shape: shape.clone(),
                    pass: Some(pass.name().into()),
                    flops: pass.flops(&geo),
                    bytes: if pass == ConvPass::ForwardBackward {
                        3.0 * bytes
                    } else {
                        bytes
                    },
                    run,
                });
            }
        }
        if opts.groups == 1 && forward {
            // The GEMM this conv is: [Cout, K] x [K, N*P].
            let a = rng.normal(gpu, &[geo.cout, geo.k()], 0.0, 1.0, DType::F32)?;
            let b = rng.normal(gpu, &[geo.k(), geo.n * geo.pixels()], 0.0, 1.0, DType::F32)?;
            cases.push(Case {
                peer: None,
                variant: "matmul".into(),
                shape: shape.clone(),
                pass: Some("forward".into()),
                flops: geo.flops(),
                bytes: ((a.numel() + b.numel() + geo.cout * geo.n * geo.pixels()) * 4) as f64,
                run: Box::new(move || a.matmul(&b).map(drop)),
            });
        }
        rows.extend(run_interleaved_beside(
            gpu,
            "conv",
            &cases,
            warmup,
            reps,
            peer.as_mut().map(|p| &mut **p as &mut dyn Peer),
        )?);
    }
    Ok(rows)
}
