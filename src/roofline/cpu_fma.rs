//! The host CPU's own f32 FMA rate (`wgdiff bench mac`'s `cpu-fma-f32` row): on a CPU adapter
//! (lavapipe) a ceiling the adapter's fma-f32 probe cannot pass, measured on the same cores in
//! the same rounds. x86-64 with AVX2 and FMA: one thread per core, each running [`CHAINS`]
//! independent chains `x = x * a + b` of 256-bit FMAs from registers (a chain's next FMA needs
//! its last, so no compiler can fold one away, and twelve chains cover an FMA's latency on two
//! ports).

/// Independent chains per thread, each 8 f32 lanes wide.
pub const CHAINS: usize = 12;
/// Loop iterations per thread and timed run (one FMA per chain each).
pub const ITERATIONS: usize = 1 << 21;
/// The chains' multiplier and addend: |a| < 1, so every lane settles near b / (1 - a) and
/// stays a normal number.
pub const A: f32 = 0.999_9;
pub const B: f32 = 1.0e-3;

/// A chain's 8 lanes at the start: lane l of chain c.
pub fn start(c: usize, l: usize) -> f32 {
    (c * 8 + l) as f32 * 0.01
}

/// True where the host can run the probe (x86-64 with AVX2 and FMA).
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Every chain's lanes after `iterations` FMAs (None without AVX2 and FMA): what a timed run
/// computes on each thread, and what the tests check against `f32::mul_add`.
pub fn chains(iterations: usize) -> Option<[[f32; 8]; CHAINS]> {
    #[cfg(target_arch = "x86_64")]
    if available() {
        // SAFETY: the CPU has AVX2 and FMA (checked just above).
        return Some(unsafe { chains_avx2(iterations) });
    }
    let _ = iterations;
    None
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn chains_avx2(iterations: usize) -> [[f32; 8]; CHAINS] {
    use std::arch::x86_64::{_mm256_fmadd_ps, _mm256_set1_ps, _mm256_setr_ps, _mm256_storeu_ps};
    let a = _mm256_set1_ps(A);
    let b = _mm256_set1_ps(std::hint::black_box(B));
    let mut x: [_; CHAINS] = std::array::from_fn(|c| {
        let s = |l| start(c, l);
        _mm256_setr_ps(s(0), s(1), s(2), s(3), s(4), s(5), s(6), s(7))
    });
    for _ in 0..iterations {
        for v in &mut x {
            *v = _mm256_fmadd_ps(*v, a, b);
        }
    }
    let mut out = [[0.0f32; 8]; CHAINS];
    for (o, v) in out.iter_mut().zip(x) {
        // SAFETY: `o` is 8 f32s, an unaligned store's width.
        unsafe { _mm256_storeu_ps(o.as_mut_ptr(), v) };
    }
    out
}

/// One timed run: [`ITERATIONS`] on each of `threads` threads at once (nothing without AVX2 and
/// FMA: see [`available`]).
pub fn run(threads: usize) {
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| std::hint::black_box(chains(std::hint::black_box(ITERATIONS))));
        }
    });
}

/// Floating-point operations of one timed run on `threads` threads (an FMA counts two).
pub fn flops_per_run(threads: usize) -> f64 {
    (threads * ITERATIONS * CHAINS * 8 * 2) as f64
}

/// The threads a run uses: one per core the process may use.
pub fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
