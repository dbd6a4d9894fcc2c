//! Data-parallel training on two logical devices of one adapter: ten steps give the losses
//! and weights of one device with the same global batch, and a checkpoint of the two-device
//! run resumes on one device and goes on along the same trajectory.

use crate::common::gpu;
use pollster::block_on;
use std::sync::OnceLock;
use wgdiff::checkpoint::Checkpoint;
use wgdiff::distributed::{replica_rows, share};
use wgdiff::gpu::{open_devices, DeviceSet};
use wgdiff::models::{ModelConfig, UNetConfig};
use wgdiff::train::{ResumeChanges, TrainConfig, Trainer};
use wgdiff::{AdapterChoice, Gpu};

/// A second logical device on the tests' adapter (own queue, buffers and pipelines).
fn second_gpu() -> &'static Gpu {
    static GPU: OnceLock<Gpu> = OnceLock::new();
    GPU.get_or_init(|| {
        let gpus = block_on(open_devices(AdapterChoice::default(), &DeviceSet::Count(1))).unwrap();
        gpus[0].set_poison(true);
        gpus[0].clone()
    })
}

/// The tiny U-Net with dropout (so the replicas' dropout masks are checked too), global batch 8.
fn config(out: &str, steps: usize) -> TrainConfig {
    TrainConfig {
        preset: "tiny".into(),
        model: Some(ModelConfig::UNet(UNetConfig {
            dropout: 0.1,
            ..UNetConfig::tiny()
        })),
        steps,
        batch: 8,
        lr: 3e-3,
        warmup: 0,
        out: std::env::temp_dir().join(format!("wgdiff-parallel-{}-{out}", std::process::id())),
        ..TrainConfig::default()
    }
}

/// Losses may differ by float summation order only: the two-device loss is the mean of two
/// half-batch means, the gradients a sum of two halves, so each step's values agree to a few
/// f32 roundings, which Adam's update (lr-sized steps) keeps at that scale over ten steps.
const LOSS_TOLERANCE: f32 = 1e-4;
/// Largest weight difference after ten steps, relative to the largest weight: Adam normalises
/// each update, so a gradient that is nearly zero may get a different lr-sized step on each
/// side (lr 3e-3), bounding the drift by a few lr.
const WEIGHT_TOLERANCE: f32 = 1e-2;

fn assert_losses_close(one: &[f32], two: &[f32]) {
    assert_eq!(one.len(), two.len());
    let worst = one
        .iter()
        .zip(two)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    eprintln!("largest loss difference over {} steps: {worst:e}", one.len());
    for (step, (a, b)) in one.iter().zip(two).enumerate() {
        assert!(
            (a - b).abs() <= LOSS_TOLERANCE * a.abs().max(1.0),
            "step {}: one device {a}, two devices {b} (all: {one:?} vs {two:?})",
            step + 1
        );
    }
}

fn assert_weights_close(one: &Checkpoint, two: &Checkpoint) {
    let mut worst = (0f32, String::new());
    let mut largest = 0f32;
    for (name, a) in one.tensors.iter().filter(|(n, _)| n.starts_with("model.")) {
        let b = &two.tensors[name];
        for (x, y) in a.data.iter().zip(&b.data) {
            largest = largest.max(x.abs());
            if (x - y).abs() > worst.0 {
                worst = ((x - y).abs(), name.clone());
            }
        }
    }
    eprintln!(
        "largest weight difference: {:e} in {} (largest weight {largest})",
        worst.0, worst.1
    );
    assert!(
        worst.0 <= WEIGHT_TOLERANCE * largest,
        "weights differ by {} in {} (largest weight {largest})",
        worst.0,
        worst.1
    );
}

#[test]
fn two_devices_train_like_one_with_the_same_global_batch_and_resume_on_one() {
    let mut one = Trainer::new(gpu(), config("one", 10)).unwrap();
    let mut two = Trainer::new(gpu(), config("two", 10)).unwrap();
    block_on(two.distribute(&[second_gpu().clone()], None)).unwrap();
    assert_eq!(two.replica_count(), 2);
    let (mut one_losses, mut two_losses) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        one_losses.push(block_on(one.step()).unwrap());
        two_losses.push(block_on(two.step()).unwrap());
    }
    let reduce = two.last_reduce().expect("a two-device step all-reduces");
    assert!(reduce.finite && reduce.bytes > 0, "{reduce:?}");
    std::fs::create_dir_all(&two.state.config.out).unwrap();
    let saved = two.state.config.out.join("step5.safetensors");
    block_on(two.save(&saved)).unwrap();
    let mut resumed = Trainer::resume(gpu(), &saved, &ResumeChanges::default()).unwrap();
    let mut resumed_losses = two_losses.clone();
    for _ in 5..10 {
        one_losses.push(block_on(one.step()).unwrap());
        two_losses.push(block_on(two.step()).unwrap());
        resumed_losses.push(block_on(resumed.step()).unwrap());
    }
    assert_losses_close(&one_losses, &two_losses);
    assert_losses_close(&one_losses, &resumed_losses);
    let one_ckpt = block_on(one.capture()).unwrap();
    assert_weights_close(&one_ckpt, &block_on(two.capture()).unwrap());
    assert_weights_close(&one_ckpt, &block_on(resumed.capture()).unwrap());
}

#[test]
fn batches_are_shared_out_evenly_and_a_too_small_batch_is_refused() {
    assert_eq!(replica_rows(8, 0, 1, 2).unwrap(), vec![0..4, 4..8]);
    assert_eq!(replica_rows(8, 1, 2, 2).unwrap(), vec![4..6, 6..8]);
    // 7 over 3: sizes 2, 2, 3, together every row once
    let rows = replica_rows(7, 0, 1, 3).unwrap();
    assert_eq!(rows, vec![0..2, 2..4, 4..7]);
    assert_eq!((0..3).map(|p| share(7, p, 3).len()).sum::<usize>(), 7);
    let err = replica_rows(3, 0, 2, 2).unwrap_err().to_string();
    assert!(err.contains("--batch 4"), "{err}");
    assert!("0".parse::<DeviceSet>().is_err());
    assert_eq!("all".parse::<DeviceSet>().unwrap(), DeviceSet::All);
    assert_eq!(
        "llvmpipe,llvmpipe".parse::<DeviceSet>().unwrap(),
        DeviceSet::Named(vec!["llvmpipe".into(), "llvmpipe".into()])
    );
    let err = block_on(open_devices(
        AdapterChoice::default(),
        &DeviceSet::Named(vec!["no-such-adapter".into()]),
    ))
    .err()
    .expect("no adapter has that name")
    .to_string();
    assert!(
        err.contains("no-such-adapter") && err.contains("wgdiff info"),
        "{err}"
    );
}
