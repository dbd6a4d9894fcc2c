//! Adam/AdamW, clipping and EMA against a CPU reference.

use crate::common::*;
use wgdiff::optim::{global_grad_norm, Adam, AdamConfig, Ema, LrSchedule};
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
