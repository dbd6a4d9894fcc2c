//! `wgdiff bench matmul`: the naive and blocked matmul kernels (and blocked f16 where the
//! device has it) on square and skinny shapes, interleaved in one run.

use super::{run_interleaved, Case, Measurement};
use crate::ops::matmul::matmul_flops;
use crate::ops::random::Rng;
use crate::ops::MatmulKernel;
use crate::{DType, Gpu, Result};

/// (M, N, K) shapes measured by default.
pub const DEFAULT_SHAPES: [(usize, usize, usize); 4] = [
    (256, 256, 256),
    (512, 512, 512),
    (1024, 1024, 1024),
    (4096, 64, 576),
];

/// Runs the matmul benchmark; `variants` filters by name (naive, blocked, blocked-f16),
/// empty means all.
pub fn run(
    gpu: &Gpu,
    shapes: &[(usize, usize, usize)],
    variants: &[String],
    warmup: usize,
    reps: usize,
) -> Result<Vec<Measurement>> {
    let _g = crate::no_grad();
    let mut rng = Rng::new(1);
    let mut all = vec![
        ("naive", MatmulKernel::Naive, DType::F32),
        ("blocked", MatmulKernel::Blocked, DType::F32),
    ];
    if gpu.has_f16() {
        all.push(("blocked-f16", MatmulKernel::Blocked, DType::F16));
    }
    let chosen: Vec<_> = all
        .into_iter()
        .filter(|v| variants.is_empty() || variants.iter().any(|n| n == v.0))
        .collect();
    let mut rows = Vec::new();
    for &(m, n, k) in shapes {
        let mut cases = Vec::new();
        for &(name, kernel, dtype) in &chosen {
            let a = rng.normal(gpu, &[m, k], 0.0, 1.0, dtype)?;
            let b = rng.normal(gpu, &[k, n], 0.0, 1.0, dtype)?;
            cases.push(Case {
                variant: name.to_string(),
                shape: format!("{m}x{n}x{k}"),
                pass: None,
                flops: matmul_flops(1, m, n, k),
                bytes: ((m * k + k * n + m * n) * dtype.size()) as f64,
                run: Box::new(move || a.matmul_with(&b, false, false, kernel).map(drop)),
            });
        }
        rows.extend(run_interleaved(gpu, "matmul", &cases, warmup, reps)?);
    }
    Ok(rows)
}
