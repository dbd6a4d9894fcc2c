//! Deterministic mode: autotuned choices follow their fixed rule (never timed, never from or to
//! the cache file), and a conv + norm + matmul computation repeats bit for bit on fresh devices.

use crate::common::*;
use wgdiff::gpu::Autotuner;
use wgdiff::ops::conv::{resolve, ConvGeometry};
use wgdiff::ops::{ConvImpl, ConvOptions};
use wgdiff::{DType, Gpu, Tensor};

/// A fresh device in deterministic mode, poisoned.
fn deterministic_gpu() -> Gpu {
    let gpu = own_gpu();
    gpu.set_poison(true);
    assert!(gpu.is_deterministic());
    gpu
}

fn upload_to(gpu: &Gpu, shape: &[usize], v: &[f64]) -> Tensor {
    let f: Vec<f32> = v.iter().map(|&x| x as f32).collect();
    Tensor::from_slice(gpu, shape, &f, DType::F32).unwrap()
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.to_vec().unwrap().iter().map(|v| v.to_bits()).collect()
}

#[test]
fn deterministic_choices_are_the_fallback_without_timing_or_the_cache_file() {
    let dir = std::env::temp_dir().join(format!("wgdiff-deterministic-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("autotune.json");
    let cached = r#"{"test:cached": "fast"}"#;
    std::fs::write(&path, cached).unwrap();
    let labels = vec!["slow".to_string(), "fast".to_string()];
    let untimed = |_: usize| -> wgdiff::Result<()> { panic!("deterministic mode timed a candidate") };

    let tuner = Autotuner::default();
    tuner.use_cache_file(path.clone());
    tuner.set_deterministic(true);
    // The cache file's choice is not used; a key seen twice is the fallback both times.
    for (key, fallback) in [
        ("test:cached", 0),
        ("test:new", 1),
        ("test:new", 1),
        ("test:other", 0),
    ] {
        let chosen = tuner.choose(gpu(), key, &labels, fallback, untimed).unwrap();
        assert_eq!(chosen, fallback, "{key}");
    }
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        cached,
        "deterministic choices were written to the cache file"
    );
    assert!(
        tuner.snapshot().iter().all(|(key, _)| key == "test:cached"),
        "deterministic choices were remembered: {:?}",
        tuner.snapshot()
    );
    // A pinned choice applies in both modes.
    tuner.set("test:pinned", "fast");
    assert_eq!(
        tuner.choose(gpu(), "test:pinned", &labels, 0, untimed).unwrap(),
        1
    );
    // Off again, the cached choice is back (it was loaded, only not consulted).
    tuner.set_deterministic(false);
    assert_eq!(
        tuner.choose(gpu(), "test:cached", &labels, 0, untimed).unwrap(),
        1
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn deterministic_auto_convs_follow_the_documented_rule() {
    let gpu = deterministic_gpu();
    let o = ConvOptions::default;
    // (input, weight, options, the rule's choice: depthwise7 for a depthwise 7x7 with padding 3,
    // direct when Cin/g * Cout/g <= 16, else tiled)
    let cases = [
        (
            [2, 8, 10, 10],
            [8, 1, 3, 3],
            o().padding(1).groups(8),
            ConvImpl::Direct,
        ),
        ([2, 2, 10, 10], [8, 2, 1, 1], o(), ConvImpl::Direct),
        (
            [2, 8, 10, 10],
            [8, 1, 7, 7],
            o().padding(3).groups(8),
            ConvImpl::Depthwise7,
        ),
        ([2, 8, 10, 10], [16, 8, 3, 3], o().padding(1), ConvImpl::Tiled),
        (
            [2, 8, 11, 10],
            [16, 4, 3, 2],
            o().stride_hw(2, 1).groups(2),
            ConvImpl::Tiled,
        ),
    ];
    let mut r = rng();
    for (xs, ws, opts, rule) in cases {
        let x = upload_to(&gpu, &xs, &normal_vec(&mut r, xs.iter().product()));
        let w = upload_to(&gpu, &ws, &normal_vec(&mut r, ws.iter().product()));
        let geo = ConvGeometry::new(&xs, &ws, opts).unwrap();
        for attempt in 0..2 {
            let chosen = resolve(&x, &w, &geo, ConvImpl::Auto).unwrap();
            assert_eq!(chosen, rule, "choice {attempt} for {}", geo.describe());
        }
        // `auto` runs what the rule names, bit for bit.
        let auto = x.conv2d(&w, None, opts).unwrap();
        let pinned = x.conv2d_with(&w, None, opts, rule).unwrap();
        assert_eq!(
            bits(&auto),
            bits(&pinned),
            "auto vs {} for {}",
            rule.name(),
            geo.describe()
        );
    }
    assert_eq!(
        gpu.tuner().snapshot(),
        Vec::<(String, String)>::new(),
        "deterministic mode measured and remembered choices"
    );
}

/// Shapes of the inputs of [`conv_matmul_step`]: x, conv 1 weight and bias, conv 2 weight,
/// the matmul's matrix, the GroupNorm's gamma.
const STEP_SHAPES: [&[usize]; 6] = [
    &[4, 3, 12, 12],
    &[16, 3, 3, 3],
    &[16],
    &[16, 16, 3, 3],
    &[16 * 6 * 6, 10],
    &[16],
];

/// Output, loss and every gradient (as bits) of a small network on `gpu`: conv (auto) ->
/// GroupNorm + SiLU -> strided conv (auto) -> flatten -> matmul -> mean of squares.
fn conv_matmul_step(gpu: &Gpu, data: &[Vec<f64>]) -> Vec<Vec<u32>> {
    let t: Vec<Tensor> = STEP_SHAPES
        .iter()
        .zip(data)
        .map(|(s, v)| upload_to(gpu, s, v).requires_grad())
        .collect();
    let (x, w1, b1, w2, m, gamma) = (&t[0], &t[1], &t[2], &t[3], &t[4], &t[5]);
    let beta = Tensor::zeros(gpu, &[16], DType::F32).unwrap();
    let h = x
        .conv2d(w1, Some(b1), ConvOptions::default().padding(1))
        .unwrap()
        .group_norm_silu(4, gamma, &beta, 1e-5)
        .unwrap()
        .conv2d(w2, None, ConvOptions::default().stride(2).padding(1))
        .unwrap();
    let y = h.reshape(&[4, 16 * 6 * 6]).unwrap().matmul(m).unwrap();
    let loss = y.square().unwrap().mean_all().unwrap();
    wgdiff::backward(&loss).unwrap();
    let mut out = vec![bits(&y), bits(&loss)];
    out.extend(t.iter().map(|t| bits(&t.grad().unwrap())));
    out
}

#[test]
fn deterministic_runs_are_bit_identical() {
    let mut r = rng();
    let data: Vec<Vec<f64>> = STEP_SHAPES
        .iter()
        .map(|s| normal_vec(&mut r, s.iter().product()))
        .collect();
    let first = conv_matmul_step(&deterministic_gpu(), &data);
    let second = conv_matmul_step(&deterministic_gpu(), &data);
    let names = ["y", "loss", "dx", "dw1", "db1", "dw2", "dm", "dgamma"];
    for ((name, a), b) in names.iter().zip(&first).zip(&second) {
        assert!(
            a.iter().all(|v| f32::from_bits(*v).is_finite()),
            "{name} is not finite"
        );
        assert_eq!(a, b, "{name} differs between two deterministic runs");
    }
}

#[test]
fn nothing_is_measured_inside_without_measuring_and_remembered_choices_still_apply() {
    let tuner = Autotuner::default();
    let labels = vec!["a".to_string(), "b".to_string(), "c".to_string()];
    let untimed = |_: usize| -> wgdiff::Result<()> { panic!("a candidate was timed inside the scope") };
    let timed = std::sync::atomic::AtomicUsize::new(0);
    let timing = |i: usize| -> wgdiff::Result<()> {
        timed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // (candidate 2 is the slow one, so the measured winner is not it)
        if i == 2 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Ok(())
    };
    let remembered = tuner
        .choose(gpu(), "test:remembered", &labels, 2, timing)
        .unwrap();
    assert_ne!(remembered, 2);
    wgdiff::gpu::without_measuring(|| {
        // a new shape takes the fixed rule (the fallback), unrecorded; a measured one its choice
        assert_eq!(tuner.choose(gpu(), "test:new", &labels, 2, untimed).unwrap(), 2);
        assert_eq!(
            tuner
                .choose(gpu(), "test:remembered", &labels, 2, untimed)
                .unwrap(),
            remembered
        );
    });
    assert!(
        tuner.snapshot().iter().all(|(key, _)| key == "test:remembered"),
        "{:?}",
        tuner.snapshot()
    );
    let before = timed.load(std::sync::atomic::Ordering::Relaxed);
    tuner.choose(gpu(), "test:new", &labels, 2, timing).unwrap();
    assert!(
        timed.load(std::sync::atomic::Ordering::Relaxed) > before,
        "outside the scope a new shape is timed"
    );
}

#[test]
fn loading_a_checkpoint_times_no_kernel_candidates() {
    // The load's probe (a network call on 2 images) runs on fixed rules: on a fresh lavapipe,
    // timing its shapes' candidates compiled each of them first, for a call that runs once.
    let gpu = Gpu::new_blocking(wgdiff::AdapterChoice::default()).unwrap();
    assert!(!gpu.is_deterministic());
    let measured = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = measured.clone();
    gpu.tuner()
        .on_measure(move |key| log.lock().unwrap().push(key.to_string()));
    wgdiff::pipeline::TrainedModel::load(&gpu, std::path::Path::new(wgdiff::pipeline::DEFAULT_CHECKPOINT))
        .unwrap();
    assert_eq!(*measured.lock().unwrap(), Vec::<String>::new());
}
