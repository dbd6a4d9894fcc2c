//! Device behaviour: pool reuse, limits, poisoning, and the fallback paths of a device
//! opened without SHADER_F16 and SUBGROUP.

use crate::common::*;
use crate::cpu;
use wgdiff::ops::Unary;
use wgdiff::{AdapterChoice, DType, Error, Gpu, Tensor};

#[test]
fn pool_reuses_freed_buffers() {
    let gpu = gpu();
    let shape = [12_345];
    drop(Tensor::zeros(gpu, &shape, DType::F32).unwrap());
    let before = gpu.pool().stats();
    drop(Tensor::zeros(gpu, &shape, DType::F32).unwrap());
    let after = gpu.pool().stats();
    assert!(after.reused > before.reused, "{before:?} -> {after:?}");
}

#[test]
fn buffers_over_the_binding_limit_are_a_clear_error() {
    let gpu = gpu();
    let too_many = (gpu.max_binding_bytes() / 4 + 1) as usize;
    match Tensor::empty(gpu, &[too_many], DType::F32) {
        Err(Error::TooLarge { what, .. }) => assert!(what.contains(&too_many.to_string())),
        other => panic!("expected TooLarge, got {other:?}"),
    }
}

#[test]
fn poison_marks_new_tensors_as_nan() {
    let t = Tensor::empty(gpu(), &[5], DType::F32).unwrap();
    assert!(t.to_vec().unwrap().iter().all(|v| v.is_nan()));
}

#[test]
fn device_without_f16_or_subgroups_still_runs_f16_ops() {
    let gpu = Gpu::new_blocking(AdapterChoice {
        without: wgpu::Features::SHADER_F16 | wgpu::Features::SUBGROUP,
        ..Default::default()
    })
    .unwrap();
    gpu.set_poison(true);
    assert!(!gpu.has_f16() && !gpu.has_subgroups());
    let x = normal_vec(&mut rng(), 37);
    let xr = round_to(&x, DType::F16);
    let f: Vec<f32> = xr.iter().map(|&v| v as f32).collect();
    let t = Tensor::from_slice(&gpu, &[37], &f, DType::F16)
        .unwrap()
        .requires_grad();
    let y = t.unary(Unary::Silu).unwrap();
    assert_eq!(y.dtype(), DType::F16);
    assert_close(
        "silu f16 fallback",
        &download(&y),
        &cpu::unary(Unary::Silu, &xr),
        1e-2,
    );
    let s = y.sum_all().unwrap();
    assert_close(
        "sum fallback",
        &download(&s),
        &[cpu::unary(Unary::Silu, &xr).iter().sum()],
        1e-2,
    );
    wgdiff::backward(&s).unwrap();
    assert_eq!(t.grad().unwrap().dtype(), DType::F16);
    let m = t
        .reshape(&[1, 37])
        .unwrap()
        .matmul(&t.reshape(&[37, 1]).unwrap())
        .unwrap();
    assert_close(
        "matmul fallback",
        &download(&m),
        &[xr.iter().map(|v| v * v).sum()],
        1e-2,
    );
}
