//! Adam/AdamW, clipping and EMA against a CPU reference.

use crate::common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use wgdiff::optim::{global_grad_norm, Adam, AdamConfig, Ema, LrSchedule, MomentStorage, MIN_INT8_ELEMENTS};
use wgdiff::{DType, Tensor};

/// CPU Adam/AdamW with global-norm clipping, the reference for the GPU optimiser.
fn cpu_adam(params: &mut [Vec<f64>], grads_per_step: &[Vec<Vec<f64>>], c: &AdamConfig) {
    let mut m: Vec<Vec<f64>> = params.iter().map(|p| vec![0.0; p.len()]).collect();
    let mut v = m.clone();
    for (t, grads) in grads_per_step.iter().enumerate() {
        let step = t as u32 + 1;
        let lr = c.lr as f64 * c.schedule.factor(step) as f64;
        let norm = grads.iter().flatten().map(|g| g * g).sum::<f64>().sqrt();
        let clip = c
            .max_grad_norm
            .map_or(1.0, |mx| (mx as f64 / (norm + 1e-6)).min(1.0));
        for (k, p) in params.iter_mut().enumerate() {
            for i in 0..p.len() {
                let mut g = grads[k][i] * clip;
                if c.decoupled {
                    p[i] *= 1.0 - lr * c.weight_decay as f64;
                } else {
                    g += c.weight_decay as f64 * p[i];
                }
                m[k][i] = c.beta1 as f64 * m[k][i] + (1.0 - c.beta1 as f64) * g;
                v[k][i] = c.beta2 as f64 * v[k][i] + (1.0 - c.beta2 as f64) * g * g;
                let mh = m[k][i] / (1.0 - (c.beta1 as f64).powi(step as i32));
                let vh = v[k][i] / (1.0 - (c.beta2 as f64).powi(step as i32));
                p[i] -= lr * mh / (vh.sqrt() + c.eps as f64);
            }
        }
    }
}

#[test]
fn adam_and_adamw_match_cpu_reference() {
    let configs = [
        AdamConfig {
            lr: 1e-2,
            ..Default::default()
        },
        AdamConfig {
            lr: 5e-3,
            weight_decay: 0.1,
            decoupled: true,
            ..Default::default()
        },
        AdamConfig {
            lr: 5e-3,
            weight_decay: 0.05,
            decoupled: false,
            ..Default::default()
        },
        AdamConfig {
            lr: 1e-2,
            max_grad_norm: Some(0.5),
            schedule: LrSchedule::Warmup { warmup: 3 },
            weight_decay: 0.01,
            ..Default::default()
        },
    ];
    for cfg in configs {
        let mut r = rng();
        // Sizes that are not multiples of the kernels' vec4, one longer than a workgroup's
        // 64 x 4 elements (the norm kernel loops, Adam spans several workgroups).
        let shapes = [vec![3, 5], vec![7], vec![1027]];
        let mut cpu_params: Vec<Vec<f64>> = shapes
            .iter()
            .map(|s| round_to(&normal_vec(&mut r, s.iter().product()), DType::F32))
            .collect();
        let params: Vec<Tensor> = shapes
            .iter()
            .zip(&cpu_params)
            .map(|(s, p)| upload(s, p, DType::F32).requires_grad())
            .collect();
        let mut opt = Adam::new(params.clone(), cfg.clone()).unwrap();
        let mut all_grads = Vec::new();
        for _ in 0..5 {
            let grads: Vec<Vec<f64>> = shapes
                .iter()
                .map(|s| round_to(&normal_vec(&mut r, s.iter().product()), DType::F32))
                .collect();
            for (p, (s, g)) in params.iter().zip(shapes.iter().zip(&grads)) {
                p.set_grad(Some(upload(s, g, DType::F32)));
            }
            opt.step().unwrap();
            all_grads.push(grads);
        }
        cpu_adam(&mut cpu_params, &all_grads, &cfg);
        for (p, want) in params.iter().zip(&cpu_params) {
            let got = download(p);
            for (g, w) in got.iter().zip(want) {
                assert!(
                    (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                    "{cfg:?}: got {g}, want {w}"
                );
            }
        }
    }
}

#[test]
fn ema_tracks_parameters() {
    let mut r = rng();
    for n in [3, 1031] {
        let x = round_to(&normal_vec(&mut r, n), DType::F32);
        let y = round_to(&normal_vec(&mut r, n), DType::F32);
        let p = upload(&[n], &x, DType::F32).requires_grad();
        let ema = Ema::new(std::slice::from_ref(&p), 0.9).unwrap();
        p.copy_from(&upload(&[n], &y, DType::F32)).unwrap();
        ema.update(std::slice::from_ref(&p));
        ema.update(std::slice::from_ref(&p));
        let want: Vec<f64> = x.iter().zip(&y).map(|(x, y)| 0.81 * x + 0.19 * y).collect();
        assert_close("ema", &download(&ema.shadow()[0]), &want, 1e-6);
    }
}

#[test]
fn global_grad_norm_matches_cpu_and_skips_parameters_without_gradients() {
    let mut r = rng();
    let sizes = [5, 1, 1027, 300];
    let params: Vec<Tensor> = sizes
        .iter()
        .map(|&n| upload(&[n], &vec![0.0; n], DType::F32).requires_grad())
        .collect();
    let mut want = 0.0;
    for (k, (p, &n)) in params.iter().zip(&sizes).enumerate() {
        if k == 1 {
            continue;
        }
        let g = round_to(&normal_vec(&mut r, n), DType::F32);
        want += g.iter().map(|v| v * v).sum::<f64>();
        p.set_grad(Some(upload(&[n], &g, DType::F32)));
    }
    let norm = global_grad_norm(&params).unwrap().expect("three gradients");
    assert_close("norm", &download(&norm), &[want.sqrt()], 1e-5);
    assert!(global_grad_norm(&params[1..2]).unwrap().is_none());
}

#[test]
fn adam_rejects_f16_or_non_leaf_parameters() {
    let t = upload(&[2], &[1.0, 2.0], DType::F32);
    let err = Adam::new(vec![t], AdamConfig::default())
        .err()
        .expect("non-grad parameter rejected")
        .to_string();
    assert!(err.contains("requires_grad"), "{err}");
}

/// Elements of `shape`-sized parameters with moments at very different scales per block.
fn spread_moments(n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut r = rng();
    let z = normal_vec(&mut r, 2 * n);
    let m = (0..n)
        .map(|i| z[i] * 10f64.powf(z[n + i].clamp(-2.0, 2.0)))
        .collect();
    let v: Vec<f64> = (0..n)
        .map(|i| (z[i] * z[i]) * 10f64.powf(2.0 * z[n + i].clamp(-2.0, 2.0)))
        .collect();
    (m, v)
}

#[test]
fn eight_bit_moments_round_trip_within_a_code_step_in_a_quarter_of_the_bytes() {
    // 5000 elements: 19 full blocks of 256 and a partial one; a small tensor keeps f32 moments.
    let n = 5000;
    let small = MIN_INT8_ELEMENTS - 1;
    let p = upload(&[n], &vec![0.0; n], DType::F32).requires_grad();
    let bias = upload(&[small], &vec![0.0; small], DType::F32).requires_grad();
    let config = AdamConfig {
        moments: MomentStorage::Int8,
        ..Default::default()
    };
    let opt = Adam::new(vec![p, bias], config).unwrap();
    let (m, v) = spread_moments(n);
    opt.set_moments(0, &upload(&[n], &m, DType::F32), &upload(&[n], &v, DType::F32))
        .unwrap();
    let (gm, gv) = opt.moments_f32(0).unwrap();
    let (gm, gv) = (download(&gm), download(&gv));
    // Codes step by 2^(1/8) (9%): rounding to the nearest is within 4.5%; values below the
    // smallest code of their block (2^-15.75 of its max for m, 2^-31.75 for v) become 0 or it.
    for (want, got, floor) in [(&m, &gm, 2f64.powf(-15.75)), (&v, &gv, 2f64.powf(-31.75))] {
        for (block, (w, g)) in want.chunks(256).zip(got.chunks(256)).enumerate() {
            let peak = w.iter().fold(0f64, |a, x| a.max(x.abs()));
            for (i, (w, g)) in w.iter().zip(g).enumerate() {
                let ok = if w.abs() < peak * floor {
                    g.abs() <= 1.001 * peak * floor
                } else {
                    (g - w).abs() <= 0.045 * w.abs() && g.signum() == w.signum()
                };
                assert!(
                    ok,
                    "block {block} element {i}: decoded {g}, stored {w} (block max {peak})"
                );
            }
        }
    }
    let blocks = n.div_ceil(256) as u64;
    let f32_bytes = (8 * small) as u64;
    assert_eq!(opt.state_bytes(), blocks * (2 * 256 + 8) + f32_bytes);
    assert!((opt.state_bytes() - f32_bytes) as f64 <= 0.3 * (8 * n) as f64);
}

/// Loss after `steps` of Adam (f32 or 8-bit moments) on a badly conditioned quadratic with
/// noisy gradients, sum_i c_i (w_i - t_i)^2 with c_i from 0.01 to 100 (the same noise for both).
fn quadratic_losses(moments: MomentStorage, steps: usize, seed: u64) -> Vec<f64> {
    let n = 5000; // over MIN_INT8_ELEMENTS: 8-bit moments
    let mut r = StdRng::seed_from_u64(seed);
    let target = normal_vec(&mut r, n);
    let curvature: Vec<f64> = (0..n)
        .map(|i| 10f64.powf(4.0 * i as f64 / n as f64 - 2.0))
        .collect();
    let p = upload(&[n], &vec![0.0; n], DType::F32).requires_grad();
    let config = AdamConfig {
        lr: 1e-2,
        moments,
        ..Default::default()
    };
    let mut opt = Adam::new(vec![p.clone()], config).unwrap();
    let mut losses = Vec::new();
    for _ in 0..steps {
        let w = download(&p);
        let noise = normal_vec(&mut r, n);
        let loss: f64 = (0..n).map(|i| curvature[i] * (w[i] - target[i]).powi(2)).sum();
        losses.push(loss);
        let grad: Vec<f64> = (0..n)
            .map(|i| 2.0 * curvature[i] * (w[i] - target[i]) + 0.1 * curvature[i].sqrt() * noise[i])
            .collect();
        p.set_grad(Some(upload(&[n], &grad, DType::F32)));
        opt.step().unwrap();
    }
    losses
}

#[test]
fn adam8bit_tracks_f32_adam_on_a_noisy_quadratic() {
    let steps = 300;
    let seed = rng().random();
    let full = quadratic_losses(MomentStorage::F32, steps, seed);
    let eight = quadratic_losses(MomentStorage::Int8, steps, seed);
    // Both descend (the start is ~ sum c_i t_i^2, about 2,200 x the end), and 8-bit Adam's
    // loss stays within 5% of f32 Adam's along the way (measured: within 1.3%).
    for t in [50, 100, 200, steps - 1] {
        assert!(
            (eight[t] - full[t]).abs() <= 0.05 * full[t],
            "step {t}: 8-bit Adam's loss {} vs f32 Adam's {}",
            eight[t],
            full[t]
        );
    }
    for losses in [&full, &eight] {
        assert!(
            losses[steps - 1] < losses[0] / 10.0,
            "{} -> {}",
            losses[0],
            losses[steps - 1]
        );
    }
}
