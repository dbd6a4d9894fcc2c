//! The tape: gradient accumulation, no_grad, shared subexpressions, error messages, and
//! what the graph keeps alive (its own device, so the pool's byte counts are this test's).

use crate::common::*;
use wgdiff::{DType, Gpu, Tensor};

#[test]
fn gradients_accumulate_across_backward_calls() {
    let x = upload(&[4], &[1.0, -2.0, 3.0, 0.5], DType::F32).requires_grad();
    for _ in 0..2 {
        let loss = x.square().unwrap().sum_all().unwrap();
        wgdiff::backward(&loss).unwrap();
    }
    assert_close(
        "2 * 2x",
        &download(&x.grad().unwrap()),
        &[4.0, -8.0, 12.0, 2.0],
        1e-6,
    );
    x.zero_grad();
    assert!(x.grad().is_none());
}

#[test]
fn reused_tensor_gets_the_sum_of_its_paths() {
    // y = x*x + x  =>  dy/dx = 2x + 1 (x used three times)
    let x = upload(&[3], &[0.5, 1.5, -2.0], DType::F32).requires_grad();
    let y = x.mul(&x).unwrap().add(&x).unwrap().sum_all().unwrap();
    wgdiff::backward(&y).unwrap();
    assert_close("2x+1", &download(&x.grad().unwrap()), &[2.0, 4.0, -3.0], 1e-6);
}

#[test]
fn no_grad_records_nothing() {
    let x = upload(&[2], &[1.0, 2.0], DType::F32).requires_grad();
    let y = {
        let _g = wgdiff::no_grad();
        x.exp().unwrap().sum_all().unwrap()
    };
    assert!(!y.tracks_grad());
    let err = wgdiff::backward(&y).unwrap_err().to_string();
    assert!(err.contains("no_grad"), "{err}");
}

#[test]
fn backward_needs_a_scalar() {
    let x = upload(&[2], &[1.0, 2.0], DType::F32).requires_grad();
    let y = x.exp().unwrap();
    let err = wgdiff::backward(&y).unwrap_err().to_string();
    assert!(err.contains("one-element"), "{err}");
}

#[test]
fn micro_batches_accumulate_to_the_full_batch_gradient() {
    let mut r = rng();
    let w_init = normal_vec(&mut r, 6);
    let data = normal_vec(&mut r, 8 * 3);
    let loss_of = |w: &Tensor, rows: std::ops::Range<usize>| {
        let x = upload(&[rows.len(), 3], &data[rows.start * 3..rows.end * 3], DType::F32);
        x.matmul(w).unwrap().tanh().unwrap().sum_all().unwrap()
    };
    let full = upload(&[3, 2], &w_init, DType::F32).requires_grad();
    wgdiff::backward(&loss_of(&full, 0..8)).unwrap();
    let micro = upload(&[3, 2], &w_init, DType::F32).requires_grad();
    wgdiff::backward(&loss_of(&micro, 0..4)).unwrap();
    wgdiff::backward(&loss_of(&micro, 4..8)).unwrap();
    assert_close(
        "accumulated",
        &download(&micro.grad().unwrap()),
        &download(&full.grad().unwrap()),
        1e-5,
    );
}

#[test]
fn backward_from_seeds_the_given_output_gradient() {
    let x = upload(&[3], &[1.0, -2.0, 3.0], DType::F32).requires_grad();
    let y = x.square().unwrap();
    let seed = upload(&[3], &[0.5, 2.0, -1.0], DType::F32);
    wgdiff::backward_from(&y, &seed).unwrap();
    assert_close(
        "2x * seed",
        &download(&x.grad().unwrap()),
        &[1.0, -8.0, -6.0],
        1e-6,
    );
    let wrong = upload(&[2], &[1.0, 1.0], DType::F32);
    let err = wgdiff::backward_from(&y, &wrong).unwrap_err().to_string();
    assert!(err.contains("[2]") && err.contains("[3]"), "{err}");
}

/// Device bytes the pool lends out now.
fn live_bytes(gpu: &Gpu) -> u64 {
    gpu.pool().stats().live_bytes
}

#[test]
fn the_graph_keeps_only_what_backward_needs_and_frees_it_as_it_runs() {
    let gpu = own_gpu();
    let n = 4096;
    let mut r = rng();
    let mut values = || {
        normal_vec(&mut r, n)
            .into_iter()
            .map(|v| v as f32)
            .collect::<Vec<f32>>()
    };
    let w = Tensor::from_f32(&gpu, &[n], &values()).unwrap().requires_grad();
    let c = Tensor::from_f32(&gpu, &[n], &values()).unwrap();
    let before = live_bytes(&gpu);
    let one_tensor = live_bytes(&gpu) / 2; // w and c, one size class each

    // Sums need no inputs in their backward: a chain of ten holds its output alone.
    let mut h = w.add(&c).unwrap();
    for _ in 0..9 {
        h = h.add(&c).unwrap();
    }
    assert_eq!(
        live_bytes(&gpu) - before,
        one_tensor,
        "a chain of adds kept its intermediates"
    );

    // exp saves its input (the product, an intermediate): alive until the backward has run.
    let loss = w
        .mul(&c)
        .unwrap()
        .exp()
        .unwrap()
        .add(&h)
        .unwrap()
        .sum_all()
        .unwrap();
    let with_graph = live_bytes(&gpu);
    assert!(
        with_graph - before >= 2 * one_tensor,
        "the product saved for exp's backward"
    );
    wgdiff::backward(&loss).unwrap();
    w.zero_grad();
    drop(h);
    let after = live_bytes(&gpu);
    assert!(
        after - before < one_tensor,
        "after the backward the graph still holds {} bytes (the loss is {} bytes)",
        after - before,
        loss.byte_len()
    );

    // The saved tensors are gone, so the same graph cannot be back-propagated again.
    let err = wgdiff::backward(&loss).unwrap_err().to_string();
    assert!(err.contains("run the forward again"), "{err}");
}

#[test]
fn backward_observed_reports_each_leaf_once_when_its_gradient_is_final() {
    let gpu = gpu();
    let w = Tensor::from_f32(gpu, &[3], &[1.0, 2.0, 3.0])
        .unwrap()
        .requires_grad();
    let b = Tensor::from_f32(gpu, &[3], &[0.5, -1.0, 2.0])
        .unwrap()
        .requires_grad();
    // w is used twice (late and early), b once: each is reported after all its uses.
    let y = w
        .mul(&w)
        .unwrap()
        .add(&b)
        .unwrap()
        .mul(&w)
        .unwrap()
        .sum_all()
        .unwrap();
    let mut seen: Vec<(usize, Vec<f32>)> = Vec::new();
    wgdiff::autograd::backward_observed(&y, &mut |leaf| {
        let t = if leaf == wgdiff::autograd::leaf_id(&w) {
            &w
        } else {
            &b
        };
        seen.push((leaf, t.grad().unwrap().to_vec()?));
        Ok(())
    })
    .unwrap();
    let ids: Vec<usize> = seen.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids.len(), 2, "each leaf once");
    assert!(ids.contains(&wgdiff::autograd::leaf_id(&w)) && ids.contains(&wgdiff::autograd::leaf_id(&b)));
    for (id, at_report) in &seen {
        let t = if *id == wgdiff::autograd::leaf_id(&w) {
            &w
        } else {
            &b
        };
        assert_eq!(
            at_report,
            &t.grad().unwrap().to_vec().unwrap(),
            "final when reported"
        );
    }
    // d/dw (w^3 + b w) = 3 w^2 + b; d/db = w
    assert_eq!(w.grad().unwrap().to_vec().unwrap(), vec![3.5, 11.0, 29.0]);
    assert_eq!(b.grad().unwrap().to_vec().unwrap(), vec![1.0, 2.0, 3.0]);
}
