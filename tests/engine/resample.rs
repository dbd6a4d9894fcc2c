//! Nearest, bilinear and bicubic resizing (to sizes and by factors) and average pooling (also
//! padded, with and without counting the padding) against the CPU references (forward, and
//! backward by finite differences); max pooling (forward only); border and shape-error checks.

use crate::common::*;
use crate::cpu;
use wgdiff::DType;

fn input(shape: &[usize]) -> Vec<(Vec<usize>, Vec<f64>)> {
    vec![(shape.to_vec(), normal_vec(&mut rng(), shape.iter().product()))]
}

#[test]
fn upsample_nearest_matches_cpu_and_differentiates() {
    // (2, 2) is the U-Net's upsampling.
    let cases = [
        (vec![2, 3, 5, 7], 3, 2),
        (vec![2, 3, 5, 7], 2, 2),
        (vec![1, 1, 1, 1], 2, 2),
        (vec![1, 2, 4, 3], 1, 4),
        (vec![1, 2, 4, 3], 1, 1),
    ];
    for dtype in dtypes() {
        for (shape, fh, fw) in &cases {
            let (s, fh, fw) = (shape.clone(), *fh, *fw);
            check_op(
                &format!("upsample_nearest {shape:?} by {fh}x{fw}"),
                dtype,
                &input(shape),
                move |xs| cpu::resize_nearest(&xs[0], &s, s[2] * fh, s[3] * fw),
                |ts| ts[0].upsample_nearest(fh, fw),
            );
        }
    }
}

#[test]
fn resize_nearest_matches_cpu_and_differentiates() {
    // Sizes that are not multiples (5x7 -> 12x9), shrinking (some inputs get no gradient),
    // one size up and the other down, the identity.
    let cases = [
        (vec![2, 3, 5, 7], 12, 9),
        (vec![1, 2, 11, 9], 3, 2),
        (vec![1, 2, 4, 6], 7, 5),
        (vec![1, 1, 5, 7], 5, 7),
        (vec![1, 1, 1, 1], 3, 2),
    ];
    for dtype in dtypes() {
        for (shape, oh, ow) in &cases {
            let (s, oh, ow) = (shape.clone(), *oh, *ow);
            check_op(
                &format!("resize_nearest {shape:?} -> {oh}x{ow}"),
                dtype,
                &input(shape),
                move |xs| cpu::resize_nearest(&xs[0], &s, oh, ow),
                |ts| ts[0].resize_nearest(oh, ow),
            );
        }
    }
}

#[test]
fn resize_nearest_picks_pytorchs_pixels() {
    // torch.nn.functional.interpolate(torch.arange(5.).view(1, 1, 1, 5), size=(1, 8)):
    // source index floor(dst * 5 / 8).
    let x = upload(&[1, 1, 1, 5], &[0.0, 1.0, 2.0, 3.0, 4.0], DType::F32);
    let got = download(&x.resize_nearest(1, 8).unwrap());
    assert_eq!(got, [0.0, 0.0, 1.0, 1.0, 2.0, 3.0, 3.0, 4.0]);
    let got = download(&x.resize_nearest(1, 2).unwrap());
    assert_eq!(got, [0.0, 2.0]);
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
fn padded_avg_pool2d_matches_cpu_and_differentiates() {
    // (shape, kernel, stride, padding); Inception's branch pools are 3 / 1 / 1.
    let cases = [
        (vec![2, 3, 5, 7], 3, 1, 1),
        (vec![1, 2, 8, 8], 3, 2, 1),
        (vec![1, 2, 7, 6], 4, 3, 2),
        (vec![1, 1, 1, 1], 3, 1, 1),
        (vec![1, 2, 6, 5], 2, 2, 1),
    ];
    for dtype in dtypes() {
        for (shape, k, stride, pad) in &cases {
            for count_pad in [false, true] {
                let (s, k, stride, pad) = (shape.clone(), *k, *stride, *pad);
                check_op(
                    &format!("avg_pool2d {shape:?} k {k} stride {stride} pad {pad} count_pad {count_pad}"),
                    dtype,
                    &input(shape),
                    move |xs| cpu::avg_pool2d_padded(&xs[0], &s, k, stride, pad, count_pad),
                    |ts| ts[0].avg_pool2d_padded(k, stride, pad, count_pad),
                );
            }
        }
    }
}

#[test]
fn max_pool2d_matches_cpu() {
    // (shape, kernel, stride, padding); Inception uses 3 / 2 / 0 and 3 / 1 / 1.
    let cases = [
        (vec![2, 3, 9, 11], 3, 2, 0),
        (vec![2, 3, 5, 7], 3, 1, 1),
        (vec![1, 2, 8, 8], 2, 2, 0),
        (vec![1, 2, 7, 6], 4, 3, 2),
        (vec![1, 1, 1, 1], 3, 1, 1),
        (vec![1, 4, 35, 35], 3, 2, 0),
    ];
    for dtype in dtypes() {
        for (shape, k, stride, pad) in &cases {
            let (s, k, stride, pad) = (shape.clone(), *k, *stride, *pad);
            check_forward(
                &format!("max_pool2d {shape:?} k {k} stride {stride} pad {pad}"),
                dtype,
                &input(shape),
                move |xs| cpu::max_pool2d(&xs[0], &s, k, stride, pad),
                |ts| ts[0].max_pool2d(k, stride, pad),
            );
        }
    }
}

#[test]
fn resize_bilinear_matches_cpu_and_differentiates() {
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
                &format!("resize_bilinear {shape:?} -> {oh}x{ow}"),
                dtype,
                &input(shape),
                move |xs| cpu::resize_bilinear(&xs[0], &s, oh, ow),
                |ts| ts[0].resize_bilinear(oh, ow),
            );
        }
        // pytorch-fid's resize of MNIST and CIFAR images
        for (shape, size) in [(vec![1, 1, 28, 28], 299), (vec![1, 3, 32, 32], 299)] {
            let s = shape.clone();
            check_forward(
                &format!("resize_bilinear {shape:?} -> {size}x{size}"),
                dtype,
                &input(&shape),
                move |xs| cpu::resize_bilinear(&xs[0], &s, size, size),
                |ts| ts[0].resize_bilinear(size, size),
            );
        }
    }
}

#[test]
fn upsample_bilinear_matches_cpu_and_differentiates() {
    let cases = [
        (vec![2, 3, 5, 7], 3, 3),
        (vec![1, 2, 4, 3], 2, 3),
        (vec![1, 1, 1, 1], 3, 3),
        (vec![1, 2, 3, 4], 1, 2),
    ];
    for dtype in dtypes() {
        for (shape, fh, fw) in &cases {
            let (s, fh, fw) = (shape.clone(), *fh, *fw);
            check_op(
                &format!("upsample_bilinear {shape:?} by {fh}x{fw}"),
                dtype,
                &input(shape),
                move |xs| cpu::resize_bilinear(&xs[0], &s, s[2] * fh, s[3] * fw),
                |ts| ts[0].upsample_bilinear(fh, fw),
            );
        }
    }
}

#[test]
fn max_pool2d_refuses_inputs_that_need_gradients() {
    let x = upload(&[1, 1, 4, 4], &[0.5; 16], DType::F32).requires_grad();
    let err = x.max_pool2d(3, 1, 1).unwrap_err().to_string();
    assert!(err.contains("no backward") && err.contains("no_grad"), "{err}");
    let _g = wgdiff::no_grad();
    assert!(x.max_pool2d(3, 1, 1).is_ok());
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
fn bicubic_and_bilinear_keep_constants_up_to_the_borders() {
    // The tap weights sum to one, and clamped border taps keep that.
    let t = upload(&[1, 2, 3, 5], &[2.5; 30], DType::F32);
    for (oh, ow) in [(7, 11), (2, 2), (3, 5)] {
        for (name, y) in [
            ("bicubic", t.resize_bicubic(oh, ow).unwrap()),
            ("bilinear", t.resize_bilinear(oh, ow).unwrap()),
        ] {
            assert_close(
                &format!("{name} of a constant to {oh}x{ow}"),
                &download(&y),
                &vec![2.5; 2 * oh * ow],
                1e-6,
            );
        }
    }
}

#[test]
fn resample_shape_errors_name_the_shapes() {
    let x = upload(&[2, 3, 4], &[0.0; 24], DType::F32);
    let err = x.upsample_nearest(2, 2).unwrap_err().to_string();
    assert!(
        err.contains("upsample_nearest") && err.contains("[2, 3, 4]"),
        "{err}"
    );
    let x = upload(&[1, 1, 3, 3], &[0.0; 9], DType::F32);
    let err = x.upsample_bilinear(0, 2).unwrap_err().to_string();
    assert!(err.contains("0x2") && err.contains("at least 1"), "{err}");
    let err = x.resize_nearest(4, 0).unwrap_err().to_string();
    assert!(err.contains("4x0") && err.contains("[1, 1, 3, 3]"), "{err}");
    let err = x.avg_pool2d(4, 1).unwrap_err().to_string();
    assert!(err.contains("kernel 4") && err.contains("[1, 1, 3, 3]"), "{err}");
    // PyTorch's rule: padding at most half the kernel.
    let err = x.avg_pool2d_padded(3, 1, 2, false).unwrap_err().to_string();
    assert!(err.contains("padding 2") && err.contains("kernel / 2"), "{err}");
    let err = x.max_pool2d(2, 1, 2).unwrap_err().to_string();
    assert!(err.contains("padding 2") && err.contains("[1, 1, 3, 3]"), "{err}");
    let err = x.resize_bilinear(0, 4).unwrap_err().to_string();
    assert!(err.contains("0x4") && err.contains("[1, 1, 3, 3]"), "{err}");
}
