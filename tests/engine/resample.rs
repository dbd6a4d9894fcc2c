//! Nearest 2x upsampling, average pooling and bicubic resizing against the CPU references
//! (forward, and backward by finite differences), plus bicubic border and shape-error checks.

use crate::common::*;
use crate::cpu;
use wgdiff::DType;

fn input(shape: &[usize]) -> Vec<(Vec<usize>, Vec<f64>)> {
    vec![(shape.to_vec(), normal_vec(&mut rng(), shape.iter().product()))]
}

#[test]
fn upsample_nearest2x_matches_cpu_and_differentiates() {
    for dtype in dtypes() {
        for shape in [vec![2, 3, 5, 7], vec![1, 1, 1, 1], vec![1, 2, 4, 3]] {
            let s = shape.clone();
            check_op(
                &format!("upsample_nearest2x {shape:?}"),
                dtype,
                &input(&shape),
                move |xs| cpu::upsample_nearest2x(&xs[0], &s),
                |ts| ts[0].upsample_nearest2x(),
            );
        }
    }
}

#[test]
fn avg_pool2d_matches_cpu_and_differentiates() {
    let cases = [
        (vec![2, 3, 5, 7], 2, 2),
        (vec![2, 3, 5, 7], 3, 1),
        (vec![2, 3, 5, 7], 3, 2),
        (vec![1, 2, 8, 8], 4, 4),
        (vec![1, 2, 7, 8], 2, 3),
    ];
    for dtype in dtypes() {
        for (shape, k, stride) in &cases {
            let (s, k, stride) = (shape.clone(), *k, *stride);
            check_op(
                &format!("avg_pool2d {shape:?} k {k} stride {stride}"),
                dtype,
                &input(shape),
                move |xs| cpu::avg_pool2d(&xs[0], &s, k, stride),
                |ts| ts[0].avg_pool2d(k, stride),
            );
        }
    }
}

#[test]
fn resize_bicubic_matches_cpu_and_differentiates() {
    let cases = [
        (vec![2, 3, 5, 7], 9, 4),
        (vec![2, 3, 5, 7], 5, 7),
        (vec![2, 3, 5, 7], 2, 3),
        (vec![1, 2, 4, 4], 16, 13),
        (vec![1, 1, 11, 9], 3, 2),
        (vec![1, 1, 1, 1], 3, 3),
        (vec![1, 1, 5, 5], 1, 1),
    ];
    for dtype in dtypes() {
        for (shape, oh, ow) in &cases {
            let (s, oh, ow) = (shape.clone(), *oh, *ow);
            check_op(
                &format!("resize_bicubic {shape:?} -> {oh}x{ow}"),
                dtype,
                &input(shape),
                move |xs| cpu::resize_bicubic(&xs[0], &s, oh, ow),
                |ts| ts[0].resize_bicubic(oh, ow),
            );
        }
    }
}

#[test]
fn bicubic_keeps_constants_up_to_the_borders() {
    // The four tap weights sum to one, and clamped border taps keep that.
    let t = upload(&[1, 2, 3, 5], &[2.5; 30], DType::F32);
    for (oh, ow) in [(7, 11), (2, 2), (3, 5)] {
        let y = download(&t.resize_bicubic(oh, ow).unwrap());
        assert_close(
            &format!("bicubic of a constant to {oh}x{ow}"),
            &y,
            &vec![2.5; 2 * oh * ow],
            1e-6,
        );
    }
}

#[test]
fn resample_shape_errors_name_the_shapes() {
    let x = upload(&[2, 3, 4], &[0.0; 24], DType::F32);
    let err = x.upsample_nearest2x().unwrap_err().to_string();
    assert!(err.contains("[2, 3, 4]"), "{err}");
    let x = upload(&[1, 1, 3, 3], &[0.0; 9], DType::F32);
    let err = x.avg_pool2d(4, 1).unwrap_err().to_string();
    assert!(err.contains("kernel 4") && err.contains("[1, 1, 3, 3]"), "{err}");
}
