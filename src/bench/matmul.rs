//! `wgdiff bench matmul`: the naive and blocked matmul kernels (blocked f16 where the device
//! has it, blocked on int8/int4 weights) on square and skinny shapes, interleaved in one run.

use super::{run_interleaved_beside, Case, Measurement, Peer};
use crate::ops::matmul::{matmul_flops, BlockShape};
use crate::ops::random::Rng;
use crate::ops::{MatmulKernel, PackedWeights, WeightBits};
use crate::{DType, Gpu, Result, Tensor};

/// The blocked kernel's operands: B as float, or quantised per column and packed.
#[derive(Clone, Copy)]
enum Operand {
    Float(MatmulKernel, DType),
    Packed(WeightBits),
}

/// `b` [K, N] quantised per column to `bits` and packed for the blocked kernel.
fn packed_matmul_weights(b: &Tensor, bits: WeightBits) -> Result<PackedWeights> {
    let s = b.shape();
    let q = crate::checkpoint::compressed::quantize(&b.to_vec()?, s, Some(1), bits);
    PackedWeights::matmul(b.gpu(), bits, s[0], s[1], &q.values, &q.scales)
}

/// (M, N, K) shapes measured by default.
pub const DEFAULT_SHAPES: [(usize, usize, usize); 4] = [
    (256, 256, 256),
    (512, 512, 512),
    (1024, 1024, 1024),
    (4096, 64, 576),
];

/// Runs the matmul benchmark; `variants` filters by name (naive, blocked, blocked-storage,
/// blocked-texels, blocked-f16, blocked-int8, blocked-int4), empty means all. `blocked` is the
/// autotuner's choice; `blocked-storage` and `blocked-texels` the fixed rule's tile reading its
/// operands from storage buffers and as texels. Beside a `peer`, each shape's f32 product
/// there too, in the same rounds.
pub fn run(
    gpu: &Gpu,
    shapes: &[(usize, usize, usize)],
    variants: &[String],
    warmup: usize,
    reps: usize,
    mut peer: Option<&mut dyn Peer>,
) -> Result<Vec<Measurement>> {
    let _g = crate::no_grad();
    let mut rng = Rng::new(1);
    let mut rows = Vec::new();
    for &(m, n, k) in shapes {
        let tile = BlockShape::candidates(gpu, m, n.next_multiple_of(4))[0];
        let mut all = vec![
            ("naive", Operand::Float(MatmulKernel::Naive, DType::F32)),
            ("blocked", Operand::Float(MatmulKernel::Blocked, DType::F32)),
            (
                "blocked-storage",
                Operand::Float(MatmulKernel::BlockedWith(tile), DType::F32),
            ),
            (
                "blocked-texels",
                Operand::Float(MatmulKernel::TexelsWith(tile), DType::F32),
            ),
        ];
        if gpu.has_f16() {
            all.push(("blocked-f16", Operand::Float(MatmulKernel::Blocked, DType::F16)));
        }
        all.push(("blocked-int8", Operand::Packed(WeightBits::Int8)));
        all.push(("blocked-int4", Operand::Packed(WeightBits::Int4)));
        let chosen: Vec<_> = all
            .into_iter()
            .filter(|v| variants.is_empty() || variants.iter().any(|n| n == v.0))
            .collect();
        let mut cases = Vec::new();
        for &(name, operand) in &chosen {
            let dtype = match operand {
                Operand::Float(_, dtype) => dtype,
                Operand::Packed(_) => DType::F32,
            };
            let a = rng.normal(gpu, &[m, k], 0.0, 1.0, dtype)?;
            let b = rng.normal(gpu, &[k, n], 0.0, 1.0, dtype)?;
            let (b_bytes, run): (usize, Box<dyn Fn() -> Result<()>>) = match operand {
                Operand::Float(kernel, _) => (
                    k * n * dtype.size(),
                    Box::new(move || a.matmul_with(&b, false, false, kernel).map(drop)),
                ),
                Operand::Packed(bits) => {
                    let packed = packed_matmul_weights(&b, bits)?;
                    (
                        packed.byte_len() as usize,
                        Box::new(move || a.matmul_packed(&packed, None).map(drop)),
                    )
                }
            };
            cases.push(Case {
                peer: Some(format!("matmul {m} {n} {k}")),
                variant: name.to_string(),
                shape: format!("{m}x{n}x{k}"),
                pass: None,
                flops: matmul_flops(1, m, n, k),
                bytes: ((m * k + m * n) * dtype.size() + b_bytes) as f64,
                run,
            });
        }
        rows.extend(run_interleaved_beside(
            gpu,
            "matmul",
            &cases,
            warmup,
            reps,
            peer.as_mut().map(|p| &mut **p as &mut dyn Peer),
        )?);
    }
    Ok(rows)
}
