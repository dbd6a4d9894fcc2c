//! Compression: int8/int4 quantisation and packing round trips, pruning's exact counts per
//! scope, compressed checkpoints that load, sample (their conv and linear weights in the
//! packed kernels, matching float weights holding the same values) and fine-tune with their
//! masks kept at zero.

use crate::common::{gpu, rng};
use pollster::block_on;
use rand::Rng;
use std::path::Path;
use std::sync::Arc;
use wgdiff::checkpoint::compressed::{channel_of, pack_int4, quantize, unpack_int4};
use wgdiff::checkpoint::compressed::{mask_from_bits, mask_to_bits};
use wgdiff::checkpoint::{Checkpoint, Stored};
use wgdiff::compress::prune::prune_masks;
use wgdiff::compress::{
    compress_checkpoint, in_scope, CompressPlan, PruneMethod, PrunePlan, PruneScope, QuantizePlan,
};
use wgdiff::data::Split;
use wgdiff::ops::WeightBits;
use wgdiff::pipeline::{SampleRequest, TrainedModel};
use wgdiff::profile::{ModelSetup, Workload};
use wgdiff::train::{TrainConfig, Trainer};
use wgdiff::{DType, Tensor};

#[test]
fn quantised_values_int4_pairs_and_mask_bits_round_trip() {
    let mut r = rng();
    let shape = [5, 7, 3];
    let data: Vec<f32> = (0..105).map(|_| r.random_range(-2.0f32..2.0)).collect();
    for bits in [WeightBits::Int8, WeightBits::Int4] {
        for axis in [None, Some(0), Some(1), Some(2)] {
            let q = quantize(&data, &shape, axis, bits);
            assert_eq!(q.scales.len(), axis.map_or(1, |a| shape[a]));
            let back = q.dequantize(&shape);
            for (i, (w, d)) in data.iter().zip(&back).enumerate() {
                let scale = q.scales[channel_of(&shape, axis, i)];
                assert!(
                    (w - d).abs() <= 0.5001 * scale && q.values[i].unsigned_abs() <= bits.max() as u8,
                    "{bits:?} axis {axis:?} element {i}: {w} -> {} x {scale}",
                    q.values[i]
                );
            }
        }
    }
    // every pair of int4 values, and an odd count
    let all: Vec<i8> = (-7..=7)
        .flat_map(|a| (-7..=7).flat_map(move |b| [a, b]))
        .collect();
    assert_eq!(unpack_int4(&pack_int4(&all), all.len()), all);
    assert_eq!(unpack_int4(&pack_int4(&all[..7]), 7), all[..7]);
    let mask: Vec<bool> = (0..21).map(|_| r.random()).collect();
    assert_eq!(mask_from_bits(&mask_to_bits(&mask), 21), mask);
}

#[test]
fn pruning_removes_exactly_the_requested_fraction_pooled_or_per_tensor() {
    let mut r = rng();
    let tensors: Vec<Vec<f32>> = [300, 17, 1000]
        .iter()
        .map(|&n| (0..n).map(|_| r.random_range(-1.0f32..1.0)).collect())
        .collect();
    let slices: Vec<&[f32]> = tensors.iter().map(|t| t.as_slice()).collect();
    let pruned = |m: &[bool]| m.iter().filter(|keep| !**keep).count();
    for method in [PruneMethod::Random, PruneMethod::L1] {
        for amount in [0.1, 0.3, 0.7] {
            let pooled = prune_masks(&slices, method, amount, true, r.random());
            let total: usize = pooled.iter().map(|m| pruned(m)).sum();
            assert_eq!(
                total,
                (amount * 1317.0).round() as usize,
                "{method:?} {amount} pooled"
            );
            let layer = prune_masks(&slices, method, amount, false, r.random());
            for (m, t) in layer.iter().zip(&tensors) {
                assert_eq!(
                    pruned(m),
                    (amount * t.len() as f64).round() as usize,
                    "{method:?} {amount} per tensor"
                );
            }
            if method == PruneMethod::L1 {
                let magnitudes = |keep: bool| {
                    pooled.iter().zip(&tensors).flat_map(move |(m, t)| {
                        m.iter()
                            .zip(t)
                            .filter(move |(k, _)| **k == keep)
                            .map(|(_, w)| w.abs())
                    })
                };
                let largest_pruned = magnitudes(false).fold(0f32, f32::max);
                let smallest_kept = magnitudes(true).fold(f32::INFINITY, f32::min);
                assert!(largest_pruned <= smallest_kept, "L1 prunes the smallest weights");
            }
        }
    }
}

/// A tiny U-Net trained two steps on MNIST, captured.
fn tiny_checkpoint() -> (TrainConfig, Checkpoint) {
    let config = TrainConfig {
        preset: "tiny".into(),
        steps: 2,
        batch: 8,
        lr: 3e-3,
        warmup: 0,
        out: std::env::temp_dir().join(format!("wgdiff-compress-{}", std::process::id())),
        ..TrainConfig::default()
    };
    let mut trainer = Trainer::new(gpu(), config.clone()).unwrap();
    while !trainer.finished() {
        block_on(trainer.step()).unwrap();
    }
    (config, block_on(trainer.capture()).unwrap())
}

fn plan(prune: Option<(PruneMethod, f64, PruneScope)>, quantize: Option<(WeightBits, bool)>) -> CompressPlan {
    CompressPlan {
        prune: prune.map(|(method, amount, scope)| PrunePlan {
            method,
            amount,
            scope,
        }),
        quantize: quantize.map(|(bits, per_channel)| QuantizePlan { bits, per_channel }),
        seed: 3,
    }
}

/// The weights' keep-masks in `ckpt` by weight name (absent: not pruned).
fn masks(ckpt: &Checkpoint, names: &[String]) -> Vec<Option<Vec<bool>>> {
    names
        .iter()
        .map(|n| {
            let key = format!("ema.{n}");
            let count = ckpt.values(&key, "test").unwrap().unwrap().data.len();
            wgdiff::checkpoint::compressed::stored_mask(ckpt, &key, count, "test").unwrap()
        })
        .collect()
}

#[test]
fn pruning_a_checkpoint_zeroes_exactly_the_fraction_of_its_scope() {
    let (config, ckpt) = tiny_checkpoint();
    let model = TrainedModel::from_checkpoint(gpu(), &ckpt, "test", None).unwrap();
    let weights = model.net.walk(1).weights;
    let names: Vec<String> = weights.iter().map(|w| w.name.clone()).collect();
    let side = model.image_shape()[1];
    for scope in [
        PruneScope::Global,
        PruneScope::Middle,
        PruneScope::Ends,
        PruneScope::Layer,
    ] {
        let (out, summary) = compress_checkpoint(
            gpu(),
            &ckpt,
            "test",
            &plan(Some((PruneMethod::Random, 0.3, scope)), None),
        )
        .unwrap();
        let masks = masks(&out, &names);
        let mut scope_elements = 0;
        let mut pruned = 0;
        for ((w, mask), name) in weights.iter().zip(&masks).zip(&names) {
            let values = out.values(&format!("ema.{name}"), "test").unwrap().unwrap();
            match (in_scope(w, scope, side), mask) {
                (true, Some(mask)) => {
                    scope_elements += mask.len();
                    let zeros = mask.iter().filter(|k| !**k).count();
                    pruned += zeros;
                    assert!(
                        mask.iter().zip(&values.data).all(|(keep, v)| *keep || *v == 0.0),
                        "{name}: pruned = 0"
                    );
                    if scope == PruneScope::Layer {
                        assert_eq!(zeros, (0.3 * mask.len() as f64).round() as usize, "{name}");
                    }
                }
                (false, None) => {
                    let before = ckpt.values(&format!("ema.{name}"), "test").unwrap().unwrap();
                    assert_eq!(values.data, before.data, "{name} is outside the {scope:?} scope");
                }
                (inside, mask) => panic!("{name}: in scope {inside}, mask {}", mask.is_some()),
            }
        }
        assert!(scope_elements > 0, "{scope:?} holds weights");
        assert_eq!(summary.scope_elements, scope_elements);
        assert_eq!(summary.pruned_elements, pruned);
        if scope != PruneScope::Layer {
            assert_eq!(
                pruned,
                (0.3 * scope_elements as f64).round() as usize,
                "{scope:?}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(config.out);
}

#[test]
fn profile_sample_calls_a_compressed_checkpoints_packed_model() {
    let (_, ckpt) = tiny_checkpoint();
    let (compressed, _) =
        compress_checkpoint(gpu(), &ckpt, "test", &plan(None, Some((WeightBits::Int8, false)))).unwrap();
    let path = std::env::temp_dir().join(format!("wgdiff-profile-int8-{}.safetensors", std::process::id()));
    std::fs::write(&path, compressed.to_bytes().unwrap()).unwrap();
    let setup = ModelSetup {
        preset: "no such preset: the checkpoint's model is called".into(),
        batch: 1,
        checkpoint: Some(path.clone()),
    };
    let profiled = block_on(wgdiff::profile::run(gpu(), Workload::Sample, &setup, 1));
    std::fs::remove_file(&path).unwrap();
    let records = &profiled.unwrap().steps[0].records;
    assert!(records.iter().any(|r| r.name == "conv2d"), "{records:?}");
    assert!(records.iter().all(|r| r.duration_ns >= 0.0));
}

#[test]
fn compressed_checkpoints_load_sample_in_packed_kernels_and_fine_tune_with_their_masks() {
    let (config, ckpt) = tiny_checkpoint();
    let draw = |ckpt: &Checkpoint| {
        let model = TrainedModel::from_checkpoint(gpu(), ckpt, "test", None).unwrap();
        let request = SampleRequest::builder(&model.state.model, &model.state.process)
            .sampler("ddim".parse().unwrap())
            .steps(Some(3))
            .count(2)
            .seed(7)
            .build()
            .unwrap();
        let (images, _) = block_on(model.sampling().sample(gpu(), &request, None)).unwrap();
        // A packed weight keeps no float copy on the device: its resident bytes are its
        // integers and scales alone (a float weight's are its values).
        for (name, w) in &model.net.walk(1).packable {
            let float_bytes = 4 * w.shape().iter().product::<usize>() as u64;
            match model.packed_weights {
                0 => assert_eq!(w.resident_bytes(), float_bytes, "{name}"),
                _ => assert!(
                    w.float().numel() == 0 && w.resident_bytes() < float_bytes,
                    "{name}: {} resident bytes of {float_bytes}",
                    w.resident_bytes()
                ),
            }
        }
        if model.packed_weights > 0 {
            // (with gradients on, a layer would need the float values it no longer has)
            let [c, h, w] = model.image_shape();
            let x = Tensor::zeros(gpu(), &[1, c, h, w], DType::F32).unwrap();
            let Err(err) = model.net.forward(&x, &[10.0], None, 0) else {
                panic!("a packed-only model ran with gradients on");
            };
            let err = err.to_string();
            assert!(
                err.contains("packed integer form") && err.contains("--init"),
                "{err}"
            );
        }
        (model.packed_weights, images.to_vec().unwrap())
    };
    let l1_half = Some((PruneMethod::L1, 0.5, PruneScope::Global));
    for quantize in [(WeightBits::Int8, true), (WeightBits::Int4, false)] {
        let (compressed, summary) =
            compress_checkpoint(gpu(), &ckpt, "test", &plan(l1_half, Some(quantize))).unwrap();
        assert_eq!(summary.quantized_tensors, summary.weight_tensors);
        let bytes = compressed.to_bytes().unwrap();
        let compressed = Checkpoint::from_bytes(&bytes, "compressed").unwrap();
        let again = compress_checkpoint(gpu(), &compressed, "compressed", &plan(l1_half, None));
        let msg = again
            .expect_err("a quantised file is not compressed again")
            .to_string();
        assert!(
            msg.contains("already quantised") && msg.contains("compressed"),
            "{msg}"
        );
        let stored = |s: Stored| compressed.tensors.values().filter(|t| t.stored == s).count();
        assert!(
            stored(Stored::I8) + stored(Stored::U8) > summary.weight_tensors,
            "integers and masks are stored"
        );

        // the same values as float weights: the packed kernels must draw the same images
        let mut float = compressed.clone();
        let names: Vec<String> = compressed.tensors.keys().cloned().collect();
        for name in names.iter().filter_map(|n| n.strip_suffix(".scale")) {
            let values = compressed.values(name, "test").unwrap().unwrap().into_owned();
            for form in [".int8", ".int4", ".scale", ".mask"] {
                float.tensors.remove(&format!("{name}{form}"));
            }
            float.tensors.insert(name.to_string(), values);
        }
        let (packed, images) = draw(&compressed);
        let (none, want) = draw(&float);
        assert!(packed > 0 && none == 0, "{packed} weights ran packed");
        let rms = (want.iter().map(|v| v * v).sum::<f32>() / want.len() as f32).sqrt();
        for (i, (a, b)) in images.iter().zip(&want).enumerate() {
            assert!(
                (a - b).abs() <= 1e-3 * (rms + b.abs()),
                "{quantize:?} pixel {i}: {a} vs {b}"
            );
        }

        // fine-tuning keeps every pruned weight at zero, and the masks in its checkpoint
        let data =
            Arc::new(wgdiff::data::mnist(Path::new(wgdiff::data::DEFAULT_MNIST_DIR), Split::Train).unwrap());
        let fine_tune = TrainConfig {
            init: Some("compressed".into()),
            ..config.clone()
        };
        let mut tuned = Trainer::with_data(gpu(), fine_tune, data, Some(&compressed)).unwrap();
        assert!(tuned.pruned_params() > 0);
        for _ in 0..2 {
            block_on(tuned.step()).unwrap();
        }
        let saved = block_on(tuned.capture()).unwrap();
        // (the checkpoint a run writes, tensor by tensor, is the captured one's encoding)
        let path = std::env::temp_dir().join(format!(
            "wgdiff-tuned-{}-{quantize:?}.safetensors",
            std::process::id()
        ));
        block_on(tuned.save(&path)).unwrap();
        assert!(
            std::fs::read(&path).unwrap() == saved.to_bytes().unwrap(),
            "written as captured"
        );
        std::fs::remove_file(&path).unwrap();
        for name in names.iter().filter_map(|n| n.strip_suffix(".mask")) {
            let weight = name.strip_prefix("ema.").unwrap();
            let count = saved.tensors[&format!("model.{weight}")].data.len();
            let mask = wgdiff::checkpoint::compressed::stored_mask(&compressed, name, count, "test")
                .unwrap()
                .unwrap();
            for prefix in ["model.", "ema."] {
                let key = format!("{prefix}{weight}");
                let values = &saved.tensors[&key].data;
                assert!(
                    mask.iter().zip(values).all(|(keep, v)| *keep || *v == 0.0),
                    "{key} stays pruned"
                );
                assert!(
                    saved.tensors.contains_key(&format!("{key}.mask")),
                    "{key}'s mask is saved"
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(config.out);
}

#[test]
fn weights_of_a_diverged_run_are_refused_before_any_compressed_or_exported_copy() {
    let (_, healthy) = tiny_checkpoint();
    let name = healthy
        .tensors
        .keys()
        .find(|n| n.starts_with("ema.") && n.ends_with("weight"))
        .unwrap()
        .clone();
    for (value, says) in [
        (f32::NAN, "NaN or infinite"),
        (f32::INFINITY, "NaN or infinite"),
        (3e7, "reached |w|"),
    ] {
        let mut broken = healthy.clone();
        broken.tensors.get_mut(&name).unwrap().data[0] = value;
        let export = wgdiff::run_state::sampling_export(&broken, "broken.safetensors")
            .unwrap_err()
            .to_string();
        assert!(
            export.contains(&name) && export.contains(says) && export.contains("diverged"),
            "{export}"
        );
        // an int8 copy would have turned the NaN into an ordinary integer
        let int8 = plan(None, Some((WeightBits::Int8, true)));
        let err = compress_checkpoint(gpu(), &broken, "broken.safetensors", &int8)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains(&name), "{err}");
    }
    assert!(wgdiff::run_state::sampling_export(&healthy, "healthy").is_ok());
}

#[test]
fn quantisation_aware_steps_run_on_the_rounded_weights_and_update_the_float_ones() {
    // Run A fine-tunes the float checkpoint with qat int4; run B fine-tunes the int4 copy that
    // `compress --per-channel` makes of it, without qat. A's forward and backward see B's
    // weights, so the two take the same loss and gradients; A's step then moves the float
    // weights by what B's moves the rounded ones.
    let (config, float) = tiny_checkpoint();
    let int4 = plan(None, Some((WeightBits::Int4, true)));
    let (rounded, _) = compress_checkpoint(gpu(), &float, "test", &int4).unwrap();
    let data =
        Arc::new(wgdiff::data::mnist(Path::new(wgdiff::data::DEFAULT_MNIST_DIR), Split::Train).unwrap());
    let fine_tune = |qat| TrainConfig {
        init: Some("test".into()),
        steps: 2,
        qat,
        ..config.clone()
    };
    let start = |ckpt, qat| Trainer::with_data(gpu(), fine_tune(qat), data.clone(), Some(ckpt)).unwrap();
    let mut a = start(&float, Some(WeightBits::Int4));
    let mut b = start(&rounded, None);
    let mut plain = start(&float, None);
    assert!(a.rounded_params() > 1 && b.rounded_params() == 0);
    // Readbacks (device round trips) of a step on this thread: the quantisation-aware one reads
    // every rounded weight back in one.
    let readbacks = |step: &mut dyn FnMut() -> f32| {
        let before = wgdiff::gpu::readbacks_on_this_thread();
        let loss = step();
        (loss, wgdiff::gpu::readbacks_on_this_thread() - before)
    };
    let (la, qat_reads) = readbacks(&mut || block_on(a.step()).unwrap());
    let lb = block_on(b.step()).unwrap();
    let (lp, plain_reads) = readbacks(&mut || block_on(plain.step()).unwrap());
    assert!(
        qat_reads == plain_reads + 1,
        "a qat step took {qat_reads} readbacks, a plain one {plain_reads} ({} weights rounded)",
        a.rounded_params()
    );
    assert_eq!(
        la.to_bits(),
        lb.to_bits(),
        "qat loss {la} vs the int4 copy's {lb}"
    );
    assert_ne!(la.to_bits(), lp.to_bits(), "the float weights give another loss");
    let (after_a, after_b) = (block_on(a.capture()).unwrap(), block_on(b.capture()).unwrap());
    let mut moved = 0;
    for (name, t) in float.tensors.iter().filter(|(n, _)| n.starts_with("ema.")) {
        let weight = name.strip_prefix("ema.").unwrap();
        let rounded_start = rounded.values(name, "rounded").unwrap().unwrap();
        let (a_now, b_now) = (
            &after_a.tensors[&format!("model.{weight}")].data,
            &after_b.tensors[&format!("model.{weight}")].data,
        );
        for i in 0..t.data.len() {
            let (step_a, step_b) = (a_now[i] - t.data[i], b_now[i] - rounded_start.data[i]);
            assert!(
                (step_a - step_b).abs() <= 1e-6,
                "{weight}[{i}]: {step_a} vs {step_b}"
            );
            moved += (step_a != 0.0) as usize;
        }
        if rounded_start.data != t.data {
            // the float weights stay off the int4 grid: restored after every backward
            assert!(
                a_now
                    .iter()
                    .zip(&rounded_start.data)
                    .any(|(x, r)| (x - r).abs() > 1e-3),
                "{weight}"
            );
        }
    }
    assert!(moved > 0, "the steps moved the weights");
}
