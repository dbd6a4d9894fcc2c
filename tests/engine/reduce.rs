//! Sum, mean and max over axis sets, every row-reduction strategy, sum_to_shape.

use crate::common::*;
use crate::cpu;
use rand::Rng;
use wgdiff::ops::reduce::reduce_rows_with;
use wgdiff::ops::{ReduceKernel, ReduceOp};
use wgdiff::{DType, Tensor};

#[test]
fn sum_mean_max_over_axis_sets() {
    let shape = vec![3, 4, 5];
    let axis_sets: [&[usize]; 6] = [&[0], &[1], &[2], &[0, 2], &[1, 2], &[0, 1, 2]];
    for dtype in dtypes() {
        for axes in axis_sets {
            for kind in ["sum", "mean", "max"] {
                for keepdim in [false, true] {
                    let x = distinct_vec(&mut rng(), 60);
                    let s2 = shape.clone();
                    check_op(
                        &format!("{kind} over {axes:?} keepdim={keepdim}"),
                        dtype,
                        &[(shape.clone(), x)],
                        move |xs| cpu::reduce(&xs[0], &s2, axes, kind),
                        |ts| match kind {
                            "sum" => ts[0].sum(axes, keepdim),
                            "mean" => ts[0].mean(axes, keepdim),
                            _ => ts[0].max(axes, keepdim),
                        },
                    );
                }
            }
        }
    }
}

#[test]
fn every_row_strategy_agrees_with_cpu() {
    let gpu = gpu();
    for dtype in dtypes() {
        for (rows, len) in [(1, 1), (3, 7), (5, 64), (2, 1000), (130, 33), (7, 4099)] {
            let x = normal_vec(&mut rng(), rows * len);
            let t = upload(&[rows * len], &x, dtype);
            for how in ReduceKernel::available(gpu, len) {
                for (op, kind) in [(ReduceOp::Sum, "sum"), (ReduceOp::Max, "max")] {
                    let out = Tensor::empty(gpu, &[rows], dtype).unwrap();
                    reduce_rows_with(&t, &out, rows, len, op, 1.0, how);
                    let want = cpu::reduce(&round_to(&x, dtype), &[rows, len], &[1], kind);
                    // f32 sums of thousands of terms, accumulated in different orders
                    let tol = if dtype == DType::F32 { 1e-4 } else { 1e-2 };
                    assert_close(
                        &format!("{how:?} {kind} {rows}x{len} {dtype:?}"),
                        &download(&out),
                        &want,
                        tol,
                    );
                }
            }
        }
    }
}

#[test]
fn sum_to_shape_reduces_broadcast_dims() {
    let x = normal_vec(&mut rng(), 2 * 3 * 4);
    let t = upload(&[2, 3, 4], &x, DType::F32);
    let s = t.sum_to_shape(&[3, 1]).unwrap();
    assert_eq!(s.shape(), &[3, 1]);
    assert_close(
        "sum_to_shape",
        &download(&s),
        &cpu::reduce(&round_to(&x, DType::F32), &[2, 3, 4], &[0, 2], "sum"),
        1e-5,
    );
}

#[test]
fn rows_longer_than_the_loop_budget_reduce_completely() {
    // Sixteenths in [0.5, 1.5): every partial sum (below 2^20) is exact in f32, so the sum
    // must come out exact in any order, and a missed element would be off by at least 0.5.
    let len = 300_001;
    let mut r = rng();
    let x: Vec<f64> = (0..len).map(|_| r.random_range(8..24) as f64 / 16.0).collect();
    let t = upload(&[len], &x, DType::F32);
    let want: f64 = x.iter().sum();
    assert_eq!(download(&t.sum_all().unwrap()), [want], "sum of {len} sixteenths");
}

#[test]
fn leading_axes_reduce_column_by_column() {
    // Shapes with at least a workgroup of columns take the in-place column path (the sum of a
    // split reduction's partial slices, a bias gradient over the batch); the test device's
    // poisoned allocations catch unwritten outputs.
    let cases: [(&[usize], &[usize]); 4] = [
        (&[5, 300], &[0]),
        (&[3, 4, 100], &[0, 1]),
        (&[2, 7, 64], &[0]),
        (&[1, 129], &[0]),
    ];
    for dtype in dtypes() {
        for (shape, axes) in cases {
            for kind in ["sum", "mean", "max"] {
                let x = distinct_vec(&mut rng(), shape.iter().product());
                let s2 = shape.to_vec();
                check_op(
                    &format!("{kind} over {axes:?} of {shape:?}"),
                    dtype,
                    &[(shape.to_vec(), x)],
                    move |xs| cpu::reduce(&xs[0], &s2, axes, kind),
                    |ts| match kind {
                        "sum" => ts[0].sum(axes, false),
                        "mean" => ts[0].mean(axes, false),
                        _ => ts[0].max(axes, false),
                    },
                );
            }
        }
    }
}
