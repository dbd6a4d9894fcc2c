//! Shared test device (poisoned allocations), random inputs, closeness checks and the
//! finite-difference gradient checker.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::cell::OnceCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use wgdiff::{AdapterChoice, DType, Gpu, Result, Tensor};

/// How many devices the tests share. Lavapipe compiles and runs all of one device's work on
/// that device's queue thread, and these tests are bound by compiling kernels: with one device
/// one core compiled while the other idled; with one per core two tests compile at once (on
/// Mesa 25 with an empty shader cache, every test in 1,042 s, where one device had taken
/// 1,380 s for the first 64 of 320; BENCHMARKS.md, "Which lavapipe").
const DEVICES: usize = 2;

/// The devices' lazily created instances and how many running tests use each.
static GPUS: [OnceLock<Gpu>; DEVICES] = [const { OnceLock::new() }; DEVICES];
static USERS: [AtomicUsize; DEVICES] = [const { AtomicUsize::new(0) }; DEVICES];

/// A test thread's device, given back (its user count lowered) when the thread ends.
struct Chosen(usize);

impl Drop for Chosen {
    fn drop(&mut self) {
        USERS[self.0].fetch_sub(1, Ordering::Relaxed);
    }
}

thread_local! {
    static CHOSEN: OnceCell<Chosen> = const { OnceCell::new() };
}

/// The shared device of this test (every test runs on a thread of its own; its first call
/// picks the device fewest running tests use, and later calls return the same); new tensors
/// are filled with NaN first so unwritten outputs fail the comparisons.
pub fn gpu() -> &'static Gpu {
    let index = CHOSEN.with(|chosen| {
        chosen
            .get_or_init(|| {
                let index = (0..DEVICES)
                    .min_by_key(|&i| USERS[i].load(Ordering::Relaxed))
                    .unwrap_or(0);
                USERS[index].fetch_add(1, Ordering::Relaxed);
                Chosen(index)
            })
            .0
    });
    GPUS[index].get_or_init(|| {
        let gpu = own_gpu();
        gpu.set_poison(true);
        gpu
    })
}

/// A device of a test's own, choosing kernels by fixed rules (deterministic mode): timing the
/// candidates of every new shape the tests make took minutes on lavapipe. Every variant is
/// checked by the tests that pin it; the measuring itself by tests/engine/determinism.rs and
/// `kernel_tuning_is_announced_and_sample_measures_only_with_tune`.
pub fn own_gpu() -> Gpu {
    let gpu =
        Gpu::new_blocking(AdapterChoice::default()).expect("a GPU adapter (install mesa-vulkan-drivers)");
    gpu.set_deterministic(true);
    gpu
}

/// The `wgdiff` binary, choosing kernels by fixed rules (`WGDIFF_DETERMINISTIC=1`, as
/// [`own_gpu`] does) unless a test removes that variable.
pub fn wgdiff() -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_wgdiff"));
    command.env("WGDIFF_DETERMINISTIC", "1");
    command
}

/// A fresh RNG (different inputs on every run unless WGDIFF_TEST_SEED is set).
pub fn rng() -> StdRng {
    let seed = std::env::var("WGDIFF_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(fresh_seed);
    StdRng::seed_from_u64(seed)
}

/// A seed no earlier call returned: std's hasher keys are random per process and change with
/// every `RandomState` (the tests need no OS-entropy feature of `rand`, so their build shares
/// the binary's dependency features and `cargo build` after `cargo test` rebuilds nothing).
pub fn fresh_seed() -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(0u64)
}

pub fn normal_vec(rng: &mut StdRng, n: usize) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let (u1, u2): (f64, f64) = (rng.random::<f64>().max(1e-12), rng.random());
            (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
        })
        .collect()
}

/// `n` distinct values in shuffled order, multiples of 1/64 that f16 holds exactly (|x| < 32,
/// so n ≤ 4096): inputs for max, whose gradient is undefined at ties.
pub fn distinct_vec(rng: &mut StdRng, n: usize) -> Vec<f64> {
    assert!(
        n <= 4096,
        "distinct_vec: {n} values do not fit f16 at a 1/64 spacing"
    );
    let mut x: Vec<f64> = (0..n).map(|i| (i as f64 - n as f64 / 2.0) / 64.0).collect();
    x.shuffle(rng);
    x
}

pub fn uniform_vec(rng: &mut StdRng, n: usize, lo: f64, hi: f64) -> Vec<f64> {
    (0..n).map(|_| rng.random_range(lo..hi)).collect()
}

/// Rounds values to what `dtype` can hold.
pub fn round_to(v: &[f64], dtype: DType) -> Vec<f64> {
    match dtype {
        DType::F32 => v.iter().map(|&x| x as f32 as f64).collect(),
        DType::F16 => v.iter().map(|&x| half::f16::from_f64(x).to_f64()).collect(),
    }
}

pub fn upload(shape: &[usize], v: &[f64], dtype: DType) -> Tensor {
    let f: Vec<f32> = v.iter().map(|&x| x as f32).collect();
    Tensor::from_slice(gpu(), shape, &f, dtype).unwrap()
}

pub fn download(t: &Tensor) -> Vec<f64> {
    t.to_vec().unwrap().into_iter().map(f64::from).collect()
}

/// Asserts |got - want| <= rtol * (|want| + scale) elementwise, where scale is the RMS
/// of `want` (so near-zero entries are judged against the data's magnitude).
pub fn assert_close(what: &str, got: &[f64], want: &[f64], rtol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let rms = (want.iter().map(|w| w * w).sum::<f64>() / want.len().max(1) as f64)
        .sqrt()
        .max(1e-30);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let err = (g - w).abs();
        assert!(
            err <= rtol * (w.abs() + rms) && g.is_finite(),
            "{what}: element {i}: got {g}, want {w} (rel err {:.2e}, rtol {rtol:.0e})",
            err / (w.abs() + rms)
        );
    }
}

/// Default tolerance of forward results per dtype.
pub fn fwd_tol(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => 1e-4,
        DType::F16 => 1e-2,
    }
}

/// Checks an op end to end: forward against `cpu` on random-ish `inputs`, and the gradient
/// of sum(out * w) (random w) against central finite differences of `cpu` in f64.
pub fn check_op(
    what: &str,
    dtype: DType,
    inputs: &[(Vec<usize>, Vec<f64>)],
    cpu: impl Fn(&[Vec<f64>]) -> Vec<f64>,
    op: impl Fn(&[Tensor]) -> Result<Tensor>,
) {
    let grad_tol = match dtype {
        DType::F32 => 1e-3,
        // f16 gradients sum many f16-rounded products
        DType::F16 => 3e-2,
    };
    let xs: Vec<Vec<f64>> = inputs.iter().map(|(_, v)| round_to(v, dtype)).collect();
    let tensors: Vec<Tensor> = inputs
        .iter()
        .zip(&xs)
        .map(|((s, _), v)| upload(s, v, dtype).requires_grad())
        .collect();
    let out = op(&tensors).unwrap();
    let want = cpu(&xs);
    assert_close(
        &format!("{what} forward ({dtype:?})"),
        &download(&out),
        &want,
        fwd_tol(dtype),
    );

    let mut r = rng();
    let w = round_to(&uniform_vec(&mut r, out.numel(), 0.5, 1.5), dtype);
    let loss = out
        .mul(&upload(out.shape(), &w, dtype))
        .unwrap()
        .sum_all()
        .unwrap();
    wgdiff::backward(&loss).unwrap();
    let objective = |xs: &[Vec<f64>]| crate::cpu::sum_compensated(cpu(xs).iter().zip(&w).map(|(a, b)| a * b));
    for (i, t) in tensors.iter().enumerate() {
        let grad = download(
            &t.grad()
                .unwrap_or_else(|| panic!("{what}: input {i} got no gradient")),
        );
        // Finite differences on (at most) 40 random elements keep big shapes cheap.
        let picks: Vec<usize> = if xs[i].len() <= 40 {
            (0..xs[i].len()).collect()
        } else {
            (0..40).map(|_| r.random_range(0..xs[i].len())).collect()
        };
        let got: Vec<f64> = picks.iter().map(|&j| grad[j]).collect();
        let mut fd = vec![0.0; picks.len()];
        for (&j, d) in picks.iter().zip(fd.iter_mut()) {
            let h = 1e-6 * xs[i][j].abs().max(1.0);
            let mut plus = xs.to_vec();
            plus[i][j] += h;
            let mut minus = xs.to_vec();
            minus[i][j] -= h;
            *d = (objective(&plus) - objective(&minus)) / (2.0 * h);
        }
        assert_close(
            &format!("{what} gradient of input {i} ({dtype:?})"),
            &got,
            &fd,
            grad_tol,
        );
    }
}

/// Checks the forward of an op without a backward against `cpu` on `inputs` (outputs are
/// poisoned, so unwritten elements fail).
pub fn check_forward(
    what: &str,
    dtype: DType,
    inputs: &[(Vec<usize>, Vec<f64>)],
    cpu: impl Fn(&[Vec<f64>]) -> Vec<f64>,
    op: impl Fn(&[Tensor]) -> Result<Tensor>,
) {
    let xs: Vec<Vec<f64>> = inputs.iter().map(|(_, v)| round_to(v, dtype)).collect();
    let tensors: Vec<Tensor> = inputs
        .iter()
        .zip(&xs)
        .map(|((s, _), v)| upload(s, v, dtype))
        .collect();
    let out = op(&tensors).unwrap();
    assert_close(
        &format!("{what} forward ({dtype:?})"),
        &download(&out),
        &cpu(&xs),
        fwd_tol(dtype),
    );
}

/// The dtypes this device can run natively.
pub fn dtypes() -> Vec<DType> {
    if gpu().has_f16() {
        vec![DType::F32, DType::F16]
    } else {
        vec![DType::F32]
    }
}
