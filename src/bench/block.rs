//! `wgdiff bench block`: the ConvNeXt block fused (three kernels) vs unfused (composed ops),
//! forward and forward+backward, interleaved in one run per shape (by default the speed ladder's).

use super::{run_interleaved, Case, Measurement};
use crate::ops::blocks::{convnext_block_fused, convnext_block_unfused, ConvNextParams};
use crate::ops::random::Rng;
use crate::{DType, Gpu, Result, Tensor};

/// A ConvNeXt block forward (fused or unfused).
type Block = fn(&Tensor, &ConvNextParams) -> Result<Tensor>;

/// Input shapes [B, C, H, W] of the default run: the blocks of the speed ladder's ConvNeXt net
/// (`ConvNextNetConfig::mnist`: 32 channels at 28x28, 64 at 14x14) at batch 32.
pub const DEFAULT_SHAPES: [[usize; 4]; 2] = [[32, 32, 28, 28], [32, 64, 14, 14]];

/// Readable shape string, e.g. "B16 C64 32x32".
pub fn describe(shape: [usize; 4]) -> String {
    let [b, c, h, w] = shape;
    format!("B{b} C{c} {h}x{w}")
}

/// FLOPs of one block forward: depthwise 7x7 plus the two 1x1 convs (norm, GELU and adds
/// not counted).
pub fn forward_flops(shape: [usize; 4]) -> f64 {
    let [b, c, h, w] = shape;
    (b * h * w) as f64 * (2.0 * 49.0 * c as f64 + 2.0 * 2.0 * (4 * c * c) as f64)
}

/// Times fused and unfused, forward and forward+backward, for every shape.
pub fn run(gpu: &Gpu, shapes: &[[usize; 4]], warmup: usize, reps: usize) -> Result<Vec<Measurement>> {
    let mut rng = Rng::new(3);
    let mut rows = Vec::new();
    for &shape in shapes {
        let c = shape[1];
        let x = rng.normal(gpu, &shape, 0.0, 1.0, DType::F32)?;
        let dy = rng.normal(gpu, &shape, 0.0, 1.0, DType::F32)?;
        let p = ConvNextParams::random(gpu, c, &mut rng, DType::F32)?;
        // Parameters that collect gradients, for the forward+backward cases.
        let leaves: Vec<Tensor> = std::iter::once(&x)
            .chain(p.tensors())
            .map(|t| t.detach().requires_grad())
            .collect();
        let tracked = ConvNextParams::from_tensors(std::array::from_fn(|i| leaves[i + 1].clone()), p.eps);
        let flops = forward_flops(shape);
        let bytes = (2 * x.numel() * 4) as f64;
        let variants: [(&str, Block); 2] = [
            ("fused", convnext_block_fused),
            ("unfused", convnext_block_unfused),
        ];
        let mut cases = Vec::new();
        for (name, block) in variants {
            let (x, p) = (x.clone(), p.clone());
            cases.push(Case {
                peer: None,
                variant: name.into(),
                shape: describe(shape),
                pass: Some("forward".into()),
                flops,
                bytes,
                run: Box::new(move || {
                    let _g = crate::no_grad();
                    block(&x, &p).map(drop)
                }),
            });
        }
        for (name, block) in variants {
            let (leaves, tracked, dy) = (leaves.clone(), tracked.clone(), dy.clone());
            cases.push(Case {
                peer: None,
                variant: name.into(),
                shape: describe(shape),
                pass: Some("forward+backward".into()),
                flops: 3.0 * flops,
                bytes: 3.0 * bytes,
                run: Box::new(move || {
                    leaves.iter().for_each(|t| t.set_grad(None));
                    let y = block(&leaves[0], &tracked)?;
                    crate::backward(&y.mul(&dy)?.sum_all()?)
                }),
            });
        }
        rows.extend(run_interleaved(gpu, "block", &cases, warmup, reps)?);
    }
    Ok(rows)
}
