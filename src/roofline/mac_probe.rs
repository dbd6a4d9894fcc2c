//! The multiply-accumulate probes of the device's roof (shaders/mac_probe.wgsl): f32 FMAs, int8
//! words unpacked to f32, `dot4I8Packed`; what `wgdiff bench mac` and the ceilings time.

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
pub struct Probe {
    kernel: Kernel,
    seed: PooledBuffer,
    sums: PooledBuffer,
    workgroups: u32,
}

impl Probe {
    /// The probe `entry` (of [`VARIANTS`]) as timed: [`products_per_run`] products a run.
    pub fn timed(gpu: &Gpu, entry: &str) -> Result<Probe> {
        Probe::new(gpu, entry, &timing_seed(), WORKGROUPS)
    }

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
            texels: 0,
        });
        Ok(Probe {
            kernel,
            seed,
            sums,
            workgroups,
        })
    }

    /// Records one timed run.
    pub fn run(&self, gpu: &Gpu) {
        self.dispatch(gpu, ITERATIONS);
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

/// What one timed run covers, for the table.
pub fn run_shape() -> String {
    format!("{} invocations x {ITERATIONS} x 256", WORKGROUPS * 64)
}

/// Products (multiply-adds) of one timed run.
pub fn products_per_run() -> f64 {
    f64::from(ITERATIONS) * f64::from(WORKGROUPS * 64) * PRODUCTS_PER_ITERATION
}
