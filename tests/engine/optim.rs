//! Adam/AdamW, clipping and EMA against a CPU reference.

use crate::common::*;
use wgdiff::optim::{Adam, AdamConfig, Ema, LrSchedule};
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
        let shapes = [vec![3, 5], vec![7]];
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
    let x = vec![1.0, 2.0, -3.0];
    let p = upload(&[3], &x, DType::F32).requires_grad();
    let ema = Ema::new(std::slice::from_ref(&p), 0.9).unwrap();
    p.copy_from(&upload(&[3], &[0.0, 0.0, 0.0], DType::F32)).unwrap();
    ema.update(std::slice::from_ref(&p));
    ema.update(std::slice::from_ref(&p));
    let want: Vec<f64> = x.iter().map(|v| v * 0.81).collect();
    assert_close("ema", &download(&ema.shadow()[0]), &want, 1e-6);
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
