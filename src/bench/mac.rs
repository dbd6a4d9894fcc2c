//! `wgdiff bench mac`: the adapter's multiply-accumulate throughput in f32 FMAs, in int8 words
//! unpacked to f32, and in int8 dot products (`dot4I8Packed`), interleaved: can int8 pay here?

use super::{run_interleaved, Case, Measurement};
use crate::gpu::{Kernel, KernelSpec, PooledBuffer};
use crate::{shader, Gpu, Result};

/// Loop iterations per invocation (8 rounds of 8 accumulations of 4 products each), and
/// workgroups of 64 invocations per timed run: 2^30 products a run.
const ITERATIONS: u32 = 256;
const WORKGROUPS: u32 = 256;
const PRODUCTS_PER_ITERATION: f64 = 256.0;

/// The probes: (variant, entry point in shaders/mac_probe.wgsl).
pub const VARIANTS: [(&str, &str); 3] = [
    ("fma-f32", "fma_f32"),
    ("unpack-i8", "unpack_i8"),
    ("dot4-i8", "dot4_i8"),
];

/// The timed runs' 64 seed words (invocation i starts from `seed[i % 64]`).
fn timing_seed() -> [u32; 64] {
    std::array::from_fn(|i| (i as u32).wrapping_mul(0x9E37_79B9) ^ 0x5BD1_E995)
}

/// A probe's kernel with its seed and sums buffers, ready to dispatch.
struct Probe {
    kernel: Kernel,
    seed: PooledBuffer,
    sums: PooledBuffer,
    workgroups: u32,
}

impl Probe {
    fn new(gpu: &Gpu, entry: &str, seed_words: &[u32; 64], workgroups: u32) -> Result<Probe> {
        let seed = gpu.alloc(4 * 64, "mac probe seed")?;
        gpu.write(seed.raw(), bytemuck::cast_slice(seed_words));
        let sums = gpu.alloc(4 * u64::from(workgroups * 64), "mac probe sums")?;
        let kernel = gpu.kernel(&KernelSpec {
            source: shader!("mac_probe"),
            entry,
            defines: &[],
            inputs: 1,
            outputs: 1,
        });
        Ok(Probe {
            kernel,
            seed,
            sums,
            workgroups,
        })
    }

    fn dispatch(&self, gpu: &Gpu, iterations: u32) {
        gpu.dispatch(
            &self.kernel,
            &[iterations],
            &[self.seed.raw()],
            &[self.sums.raw()],
            [self.workgroups, 1, 1],
        );
    }
}

/// The sums (as stored: f32 bits or i32 bits) of the probe `entry` from `seed` after
/// `iterations` loop iterations (8 rounds each), one per invocation of one workgroup: what the
/// tests check against a CPU reference.
pub async fn probe_sums(gpu: &Gpu, entry: &str, seed: &[u32; 64], iterations: u32) -> Result<Vec<u32>> {
    let probe = Probe::new(gpu, entry, seed, 1)?;
    probe.dispatch(gpu, iterations);
    let bytes = gpu.read(probe.sums.raw(), 4 * 64, "mac probe sums").await?;
    Ok(bytemuck::pod_collect_to_vec(&bytes))
}

/// Products (multiply-adds) of one timed run.
pub fn products_per_run() -> f64 {
    f64::from(ITERATIONS) * f64::from(WORKGROUPS * 64) * PRODUCTS_PER_ITERATION
}

/// Times every probe `reps` times after `warmup` runs, interleaved; a row's GFLOP/s counts a
/// product as two operations (multiply and add) whatever its type.
pub fn run(gpu: &Gpu, warmup: usize, reps: usize) -> Result<Vec<Measurement>> {
    let seed = timing_seed();
    let probes = VARIANTS
        .iter()
        .map(|&(variant, entry)| Ok((variant, Probe::new(gpu, entry, &seed, WORKGROUPS)?)))
        .collect::<Result<Vec<_>>>()?;
    let cases: Vec<Case> = probes
        .iter()
        .map(|(variant, probe)| Case {
            variant: variant.to_string(),
            shape: format!("{} invocations x {ITERATIONS} x 256", WORKGROUPS * 64),
            pass: None,
            flops: 2.0 * products_per_run(),
            bytes: 0.0,
            run: Box::new(move || {
                probe.dispatch(gpu, ITERATIONS);
                Ok(())
            }),
        })
        .collect();
    run_interleaved(gpu, "mac", &cases, warmup, reps)
}
