//! GroupNorm, channel LayerNorm, LayerNorm over the last dim and the fused GroupNorm +
//! scale/shift + SiLU against the CPU references, and the fused op against its unfused composition.

use crate::common::*;
use crate::cpu;
use wgdiff::ops::norm::{pin_norm_kernel, NormKernel, NormRows};
use wgdiff::{DType, Tensor};

const EPS: f32 = 1e-5;

/// Every norm kernel form the shared device runs (the subgroup one where its subgroups have
/// one size, as on lavapipe).
fn forms() -> Vec<NormKernel> {
    let mut forms = vec![NormKernel::Lane, NormKernel::Workgroup];
    if gpu().fixed_subgroup_size().is_some() {
        forms.push(NormKernel::Subgroup);
    }
    forms
}

/// Input x and per-channel gamma, beta (gamma near 1).
fn norm_inputs(shape: &[usize]) -> Vec<(Vec<usize>, Vec<f64>)> {
    affine_inputs(shape, shape[1])
}

/// Input x and gamma, beta of `c` entries (gamma near 1).
fn affine_inputs(shape: &[usize], c: usize) -> Vec<(Vec<usize>, Vec<f64>)> {
    let mut r = rng();
    let n: usize = shape.iter().product();
    let x = normal_vec(&mut r, n).iter().map(|v| 2.0 * v + 0.5).collect();
    let gamma = normal_vec(&mut r, c).iter().map(|v| 1.0 + 0.3 * v).collect();
    let beta = normal_vec(&mut r, c).iter().map(|v| 0.3 * v).collect();
    vec![(shape.to_vec(), x), (vec![c], gamma), (vec![c], beta)]
}

/// Inputs of the fused op: x, gamma, beta, scale [N, C], shift [N, C].
fn film_inputs(shape: &[usize]) -> Vec<(Vec<usize>, Vec<f64>)> {
    let mut r = rng();
    let nc = vec![shape[0], shape[1]];
    let mut inputs = norm_inputs(shape);
    for _ in 0..2 {
        let v = normal_vec(&mut r, nc[0] * nc[1])
            .iter()
            .map(|v| 0.5 * v)
            .collect();
        inputs.push((nc.clone(), v));
    }
    inputs
}

#[test]
fn group_norm_matches_cpu_and_differentiates() {
    let cases = [
        (vec![2, 6, 5, 7], 1),
        (vec![2, 6, 5, 7], 2),
        (vec![2, 6, 5, 7], 3),
        (vec![2, 6, 5, 7], 6),
        (vec![3, 8], 2),
        (vec![2, 4, 9], 4),
        (vec![1, 8, 12, 12], 2),
    ];
    for dtype in dtypes() {
        for (shape, groups) in &cases {
            let (shape, groups) = (shape.clone(), *groups);
            let s = shape.clone();
            check_op(
                &format!("group_norm {shape:?} groups {groups}"),
                dtype,
                &norm_inputs(&shape),
                move |xs| cpu::norm(&xs[0], &s, groups, false, &xs[1], &xs[2], EPS as f64),
                |ts| ts[0].group_norm(groups, &ts[1], &ts[2], EPS),
            );
        }
    }
}

#[test]
fn group_norm_silu_matches_cpu_and_differentiates() {
    for dtype in dtypes() {
        for (shape, groups) in [
            (vec![2, 6, 5, 7], 3),
            (vec![2, 8, 4, 4], 8),
            (vec![1, 8, 12, 12], 2),
        ] {
            let s = shape.clone();
            check_op(
                &format!("group_norm_silu {shape:?} groups {groups}"),
                dtype,
                &norm_inputs(&shape),
                move |xs| {
                    let z = cpu::norm(&xs[0], &s, groups, false, &xs[1], &xs[2], EPS as f64);
                    z.iter().map(|v| v / (1.0 + (-v).exp())).collect()
                },
                |ts| ts[0].group_norm_silu(groups, &ts[1], &ts[2], EPS),
            );
        }
    }
}

#[test]
fn layer_norm_channels_matches_cpu_and_differentiates() {
    for dtype in dtypes() {
        for shape in [vec![2, 6, 5, 7], vec![3, 5], vec![1, 70, 2, 3], vec![2, 3, 4]] {
            let s = shape.clone();
            check_op(
                &format!("layer_norm_channels {shape:?}"),
                dtype,
                &norm_inputs(&shape),
                move |xs| cpu::norm(&xs[0], &s, 1, true, &xs[1], &xs[2], EPS as f64),
                |ts| ts[0].layer_norm_channels(&ts[1], &ts[2], EPS),
            );
        }
    }
}

#[test]
fn layer_norm_over_the_last_dim_matches_cpu_and_differentiates() {
    // Leading dims [2, 3]; rank 1; rows longer than a workgroup (64 lanes) and than 256;
    // each kernel form pinned, then as the autotuner picks.
    let shapes = [vec![2, 3, 40], vec![7], vec![2, 300], vec![3, 1, 1000]];
    let kinds = forms().into_iter().map(Some).chain([None]);
    for kind in kinds {
        for dtype in dtypes() {
            for shape in &shapes {
                let d = *shape.last().unwrap();
                check_op(
                    &format!("layer_norm {shape:?} ({kind:?})"),
                    dtype,
                    &affine_inputs(shape, d),
                    move |xs| cpu::layer_norm(&xs[0], d, &xs[1], &xs[2], EPS as f64),
                    move |ts| {
                        if let Some(kind) = kind {
                            pin_norm_kernel(&ts[0], NormRows::LastAxis, kind)?;
                        }
                        ts[0].layer_norm(&ts[1], &ts[2], EPS)
                    },
                );
            }
        }
    }
}

#[test]
fn group_norm_scale_shift_silu_matches_cpu_and_differentiates() {
    for dtype in dtypes() {
        for (shape, groups) in [(vec![2, 6, 5, 7], 3), (vec![2, 6, 5, 7], 6), (vec![3, 4, 9], 2)] {
            let s = shape.clone();
            check_op(
                &format!("group_norm_scale_shift_silu {shape:?} groups {groups}"),
                dtype,
                &film_inputs(&shape),
                move |xs| {
                    cpu::group_norm_scale_shift_silu(
                        &xs[0], &s, groups, &xs[1], &xs[2], &xs[3], &xs[4], EPS as f64,
                    )
                },
                |ts| ts[0].group_norm_scale_shift_silu(groups, &ts[1], &ts[2], &ts[3], &ts[4], EPS),
            );
        }
    }
}

/// Output and input gradients of sum(op(inputs) * w) on fresh leaves.
fn value_and_grads(
    inputs: &[(Vec<usize>, Vec<f64>)],
    w: &[f64],
    dtype: DType,
    op: impl Fn(&[Tensor]) -> wgdiff::Result<Tensor>,
) -> (Vec<f64>, Vec<Vec<f64>>) {
    let ts: Vec<Tensor> = inputs
        .iter()
        .map(|(s, v)| upload(s, v, dtype).requires_grad())
        .collect();
    let y = op(&ts).unwrap();
    let loss = y.mul(&upload(y.shape(), w, dtype)).unwrap().sum_all().unwrap();
    wgdiff::backward(&loss).unwrap();
    let grads = ts.iter().map(|t| download(&t.grad().unwrap())).collect();
    (download(&y), grads)
}

#[test]
fn fused_group_norm_scale_shift_silu_equals_unfused() {
    let shape = [2, 6, 5, 7];
    for dtype in dtypes() {
        let tol = match dtype {
            DType::F32 => 1e-4,
            DType::F16 => 2e-2,
        };
        for groups in [1, 2, 3, 6] {
            let inputs: Vec<_> = film_inputs(&shape)
                .into_iter()
                .map(|(s, v)| (s, round_to(&v, dtype)))
                .collect();
            let w = round_to(&uniform_vec(&mut rng(), shape.iter().product(), 0.5, 1.5), dtype);
            let (fused, fused_grads) = value_and_grads(&inputs, &w, dtype, |ts| {
                ts[0].group_norm_scale_shift_silu(groups, &ts[1], &ts[2], &ts[3], &ts[4], EPS)
            });
            let (unfused, unfused_grads) = value_and_grads(&inputs, &w, dtype, |ts| {
                let nc11 = [shape[0], shape[1], 1, 1];
                ts[0]
                    .group_norm(groups, &ts[1], &ts[2], EPS)?
                    .mul(&ts[3].reshape(&nc11)?.add_scalar(1.0)?)?
                    .add(&ts[4].reshape(&nc11)?)?
                    .silu()
            });
            assert_close(
                &format!("fused vs unfused groups {groups} ({dtype:?})"),
                &fused,
                &unfused,
                tol,
            );
            for (i, (f, u)) in fused_grads.iter().zip(&unfused_grads).enumerate() {
                assert_close(
                    &format!("fused vs unfused gradient of input {i}, groups {groups} ({dtype:?})"),
                    f,
                    u,
                    tol,
                );
            }
        }
    }
}

#[test]
fn norm_shape_errors_name_the_shapes() {
    let x = upload(&[2, 6, 5], &[0.0; 60], DType::F32);
    let g = upload(&[6], &[1.0; 6], DType::F32);
    let bad = upload(&[4], &[1.0; 4], DType::F32);
    let err = x.group_norm(4, &g, &g, EPS).unwrap_err().to_string();
    assert!(err.contains("4 groups") && err.contains("[2, 6, 5]"), "{err}");
    let err = x.layer_norm_channels(&bad, &g, EPS).unwrap_err().to_string();
    assert!(err.contains("[4]") && err.contains("[6]"), "{err}");
    let g5 = upload(&[5], &[1.0; 5], DType::F32);
    let err = x.layer_norm(&g5, &bad, EPS).unwrap_err().to_string();
    assert!(
        err.contains("layer_norm")
            && err.contains("beta")
            && err.contains("[2, 6, 5]")
            && err.contains("[5]"),
        "{err}"
    );
    let scalar = upload(&[], &[1.0], DType::F32);
    let err = scalar.layer_norm(&g5, &g5, EPS).unwrap_err().to_string();
    assert!(err.contains("layer_norm") && err.contains("last dim"), "{err}");
    let err = x
        .group_norm_scale_shift_silu(2, &g, &g, &g, &g, EPS)
        .unwrap_err()
        .to_string();
    assert!(err.contains("scale") && err.contains("[2, 6]"), "{err}");
}

#[test]
fn every_norm_kernel_form_matches_cpu_and_differentiates() {
    // Rows longer than a workgroup's 64 lanes, positions not a multiple of 4, several
    // channels per row, and channel LayerNorm rows longer than 64 channels.
    // GroupNorm over 20 and 12 positions reads vec4s (S a multiple of 4), the others scalars.
    let cases: [(Vec<usize>, usize, bool); 6] = [
        (vec![2, 6, 9, 10], 2, false),
        (vec![2, 6, 4, 5], 3, false),
        (vec![3, 8, 12], 8, false),
        (vec![3, 4, 7], 4, false),
        (vec![1, 70, 2, 3], 1, true),
        (vec![2, 5, 3, 3], 1, true),
    ];
    for kind in forms() {
        for dtype in dtypes() {
            for (shape, groups, per_position) in &cases {
                let (s, groups, per_position) = (shape.clone(), *groups, *per_position);
                let rows = if per_position {
                    NormRows::ChannelsPerPosition
                } else {
                    NormRows::Groups(groups)
                };
                let pin = move |x: &Tensor| pin_norm_kernel(x, rows, kind);
                check_op(
                    &format!("{kind:?} norm {shape:?} groups {groups} per position {per_position}"),
                    dtype,
                    &norm_inputs(shape),
                    move |xs| {
                        let z = cpu::norm(&xs[0], &s, groups, per_position, &xs[1], &xs[2], EPS as f64);
                        z.iter().map(|v| v / (1.0 + (-v).exp())).collect()
                    },
                    move |ts| {
                        pin(&ts[0])?;
                        if per_position {
                            ts[0].layer_norm_channels(&ts[1], &ts[2], EPS)?.silu()
                        } else {
                            ts[0].group_norm_silu(groups, &ts[1], &ts[2], EPS)
                        }
                    },
                );
            }
            for shape in [vec![2, 6, 9, 10], vec![2, 6, 4, 6]] {
                let s = shape.clone();
                check_op(
                    &format!("{kind:?} group_norm_scale_shift_silu {shape:?}"),
                    dtype,
                    &film_inputs(&shape),
                    move |xs| {
                        cpu::group_norm_scale_shift_silu(
                            &xs[0], &s, 3, &xs[1], &xs[2], &xs[3], &xs[4], EPS as f64,
                        )
                    },
                    move |ts| {
                        pin_norm_kernel(&ts[0], NormRows::Groups(3), kind)?;
                        ts[0].group_norm_scale_shift_silu(3, &ts[1], &ts[2], &ts[3], &ts[4], EPS)
                    },
                );
            }
        }
    }
}

/// The statistics come from one pass of sums of x - shift and (x - shift)^2: rows whose mean
/// is 1000 standard deviations from 0 keep their precision in f32 in both kernel forms
/// (unshifted sums of x and x^2 would lose the variance to cancellation).
#[test]
fn norm_statistics_keep_their_precision_far_from_zero() {
    let shape = [2, 4, 6, 10];
    let mut r = rng();
    let n: usize = shape.iter().product();
    let x: Vec<f64> = normal_vec(&mut r, n).iter().map(|v| 1000.0 + v).collect();
    let (gamma, beta) = (vec![1.0; 4], vec![0.0; 4]);
    let want = cpu::norm(&x, &shape, 2, false, &gamma, &beta, EPS as f64);
    for kind in forms() {
        let xt = upload(&shape, &x, DType::F32);
        pin_norm_kernel(&xt, NormRows::Groups(2), kind).unwrap();
        let y = xt
            .group_norm(
                2,
                &upload(&[4], &gamma, DType::F32),
                &upload(&[4], &beta, DType::F32),
                EPS,
            )
            .unwrap();
        assert_close(
            &format!("{kind:?} group_norm of x ~ 1000 + N(0, 1)"),
            &download(&y),
            &want,
            1e-3,
        );
    }
}

#[test]
fn norm_kernel_forms_respect_the_loop_budget() {
    // The forward walks each row three times: a lane holds rows up to 20 000 elements, a
    // subgroup of 8 lanes 8 x 20 000, a workgroup 64 x 20 000.
    use NormKernel::{Lane, Subgroup, Workgroup};
    assert_eq!(
        NormKernel::available(20_000, 3, 0, Some(8)),
        [Lane, Subgroup, Workgroup]
    );
    assert_eq!(NormKernel::available(20_000, 3, 0, None), [Lane, Workgroup]);
    assert_eq!(
        NormKernel::available(20_001, 3, 0, Some(8)),
        [Subgroup, Workgroup]
    );
    assert_eq!(NormKernel::available(8 * 20_001, 3, 0, Some(8)), [Workgroup]);
    assert!(NormKernel::available(64 * 20_001, 3, 0, Some(64)).is_empty());
    // A GroupNorm row's input gradient first loops over its channels in every invocation.
    assert_eq!(NormKernel::available(40_000, 1, 30_000, None), [Workgroup]);
    assert!(NormKernel::available(64_000, 1, 59_001, Some(8)).is_empty());
}
