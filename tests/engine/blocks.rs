//! Fused blocks against their unfused compositions (forward and every gradient): the ConvNeXt
//! block (plus finite differences of a CPU reference) and the ResBlock norm -> act -> conv chain.

use crate::common::*;
use crate::cpu;
use wgdiff::ops::blocks::{
    convnext_block_fused, convnext_block_unfused, convnext_fused_unsupported, resblock_norm_act_conv_fused,
    resblock_norm_act_conv_unfused, ConvNextParams, CONVNEXT_GELU,
};
use wgdiff::ops::{ConvOptions, Unary};
use wgdiff::{DType, Result, Tensor};

const EPS: f32 = 1e-6;

/// x [N, C, H, W] and the eight ConvNeXt parameters, in `ConvNextParams::tensors` order.
fn convnext_inputs(shape: [usize; 4]) -> Vec<(Vec<usize>, Vec<f64>)> {
    let mut r = rng();
    let c = shape[1];
    let mut normal = |shape: Vec<usize>, mean: f64, std: f64| {
        let v = normal_vec(&mut r, shape.iter().product());
        (shape, v.iter().map(|v| mean + std * v).collect::<Vec<_>>())
    };
    let fan = |k: usize| 1.0 / (k as f64).sqrt();
    vec![
        normal(shape.to_vec(), 0.3, 1.0),
        normal(vec![c, 1, 7, 7], 0.0, fan(49)),
        normal(vec![c], 0.0, 0.2),
        normal(vec![c], 1.0, 0.2),
        normal(vec![c], 0.0, 0.2),
        normal(vec![4 * c, c, 1, 1], 0.0, fan(c)),
        normal(vec![4 * c], 0.0, 0.2),
        normal(vec![c, 4 * c, 1, 1], 0.0, fan(4 * c)),
        normal(vec![c], 0.0, 0.2),
    ]
}

fn params(ts: &[Tensor]) -> ConvNextParams {
    ConvNextParams::from_tensors(std::array::from_fn(|i| ts[i + 1].clone()), EPS)
}

/// The ConvNeXt block in f64 from the CPU references of its ops.
fn cpu_convnext(v: &[Vec<f64>], xs: [usize; 4]) -> Vec<f64> {
    let c = xs[1];
    let s = xs[2] * xs[3];
    let biased = |(y, shape): (Vec<f64>, [usize; 4]), b: &[f64]| {
        let y: Vec<f64> = y
            .iter()
            .enumerate()
            .map(|(i, e)| e + b[(i / s) % b.len()])
            .collect();
        (y, shape)
    };
    let pointwise = ConvOptions::default();
    let (d, _) = biased(
        cpu::conv2d(
            &v[0],
            xs,
            &v[1],
            [c, 1, 7, 7],
            &ConvOptions::default().padding(3).groups(c),
        ),
        &v[2],
    );
    let z = cpu::norm(&d, &xs, 1, true, &v[3], &v[4], EPS as f64);
    let (h, hs) = biased(cpu::conv2d(&z, xs, &v[5], [4 * c, c, 1, 1], &pointwise), &v[6]);
    let a = cpu::unary(Unary::Gelu(CONVNEXT_GELU), &h);
    let (o, _) = biased(cpu::conv2d(&a, hs, &v[7], [c, 4 * c, 1, 1], &pointwise), &v[8]);
    o.iter().zip(&v[0]).map(|(o, x)| o + x).collect()
}

/// Output and input gradients of sum(op(inputs) * w) on fresh leaves.
fn value_and_grads(
    inputs: &[(Vec<usize>, Vec<f64>)],
    w: &[f64],
    dtype: DType,
    op: impl Fn(&[Tensor]) -> Result<Tensor>,
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

/// Runs `fused` and `unfused` on the same rounded inputs and compares outputs and gradients.
fn assert_fused_equals_unfused(
    what: &str,
    inputs: Vec<(Vec<usize>, Vec<f64>)>,
    out_len: usize,
    fused: impl Fn(&[Tensor]) -> Result<Tensor>,
    unfused: impl Fn(&[Tensor]) -> Result<Tensor>,
) {
    for dtype in dtypes() {
        let tol = match dtype {
            DType::F32 => 1e-4,
            DType::F16 => 2e-2,
        };
        let inputs: Vec<_> = inputs
            .iter()
            .map(|(s, v)| (s.clone(), round_to(v, dtype)))
            .collect();
        let w = round_to(&uniform_vec(&mut rng(), out_len, 0.5, 1.5), dtype);
        let (f, f_grads) = value_and_grads(&inputs, &w, dtype, &fused);
        let (u, u_grads) = value_and_grads(&inputs, &w, dtype, &unfused);
        assert_close(&format!("{what} fused vs unfused ({dtype:?})"), &f, &u, tol);
        for (i, (f, u)) in f_grads.iter().zip(&u_grads).enumerate() {
            assert_close(
                &format!("{what} fused vs unfused gradient of input {i} ({dtype:?})"),
                f,
                u,
                tol,
            );
        }
    }
}

#[test]
fn convnext_fused_equals_unfused() {
    // C = 6 is not a multiple of 4: the fused op falls back to the composition.
    assert!(convnext_fused_unsupported(6).is_some() && convnext_fused_unsupported(64).is_none());
    for shape in [[2, 8, 7, 9], [2, 16, 5, 6], [1, 6, 4, 5]] {
        assert_fused_equals_unfused(
            &format!("convnext {shape:?}"),
            convnext_inputs(shape),
            shape.iter().product(),
            |ts| convnext_block_fused(&ts[0], &params(ts)),
            |ts| convnext_block_unfused(&ts[0], &params(ts)),
        );
    }
}

#[test]
fn convnext_fused_matches_cpu_and_differentiates() {
    let shape = [1, 4, 3, 5];
    for dtype in dtypes() {
        check_op(
            &format!("convnext_block_fused {shape:?}"),
            dtype,
            &convnext_inputs(shape),
            move |v| cpu_convnext(v, shape),
            |ts| convnext_block_fused(&ts[0], &params(ts)),
        );
    }
}

#[test]
fn convnext_shape_errors_name_the_shapes() {
    let inputs = convnext_inputs([1, 8, 3, 3]);
    let mut ts: Vec<Tensor> = inputs.iter().map(|(s, v)| upload(s, v, DType::F32)).collect();
    ts[5] = upload(&[16, 8, 1, 1], &[0.0; 128], DType::F32);
    let err = convnext_block_fused(&ts[0], &params(&ts))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("w1") && err.contains("[16, 8, 1, 1]") && err.contains("[32, 8, 1, 1]"),
        "{err}"
    );
}

#[test]
fn resblock_fused_equals_unfused() {
    let (shape, groups, cout) = ([2, 8, 7, 9], 4, 12);
    let mut r = rng();
    let mut normal = |shape: Vec<usize>, mean: f64, std: f64| {
        let v = normal_vec(&mut r, shape.iter().product());
        (shape, v.iter().map(|v| mean + std * v).collect::<Vec<_>>())
    };
    let (n, c) = (shape[0], shape[1]);
    let inputs = vec![
        normal(shape.to_vec(), 0.5, 2.0),
        normal(vec![c], 1.0, 0.3),
        normal(vec![c], 0.0, 0.3),
        normal(vec![n, c], 0.0, 0.5),
        normal(vec![n, c], 0.0, 0.5),
        normal(vec![cout, c, 3, 3], 0.0, 0.2),
        normal(vec![cout], 0.0, 0.2),
    ];
    let opts = ConvOptions::default().padding(1);
    let args = |ts: &[Tensor]| (ts[1].clone(), ts[2].clone(), ts[3].clone(), ts[4].clone());
    assert_fused_equals_unfused(
        "resblock norm-act-conv",
        inputs,
        n * cout * shape[2] * shape[3],
        |ts| {
            let (g, b, sc, sh) = args(ts);
            resblock_norm_act_conv_fused(
                &ts[0],
                groups,
                (&g, &b),
                (&sc, &sh),
                &ts[5],
                Some(&ts[6]),
                opts,
                1e-5,
            )
        },
        |ts| {
            let (g, b, sc, sh) = args(ts);
            resblock_norm_act_conv_unfused(
                &ts[0],
                groups,
                (&g, &b),
                (&sc, &sh),
                &ts[5],
                Some(&ts[6]),
                opts,
                1e-5,
            )
        },
    );
}

/// The depthwise 7x7 weight and bias gradients in f64: sums over the batch and the image of
/// x at each tap's offset times `dout`.
fn cpu_depthwise7_weight_grad(x: &[f64], dout: &[f64], [n, c, h, w]: [usize; 4]) -> (Vec<f64>, Vec<f64>) {
    let (mut dw, mut db) = (vec![0.0; c * 49], vec![0.0; c]);
    for b in 0..n {
        for ch in 0..c {
            let plane = (b * c + ch) * h * w;
            for i in 0..h {
                for j in 0..w {
                    let d = dout[plane + i * w + j];
                    db[ch] += d;
                    for (tap, sum) in dw[ch * 49..(ch + 1) * 49].iter_mut().enumerate() {
                        let (ih, iw) = ((i + tap / 7) as isize - 3, (j + tap % 7) as isize - 3);
                        if ih >= 0 && ih < h as isize && iw >= 0 && iw < w as isize {
                            *sum += x[plane + ih as usize * w + iw as usize] * d;
                        }
                    }
                }
            }
        }
    }
    (dw, db)
}

#[test]
fn depthwise7_kernels_match_the_cpu_conv_its_transpose_and_its_weight_gradient() {
    use wgdiff::ops::depthwise7::{depthwise7_conv, depthwise7_weight_grad, pin_depthwise7_rows};
    let mut r = rng();
    // (17 columns: a last segment of 1; 4x5: smaller than the filter; 12x8: one whole segment;
    // 9 rows: a last group of 1 row of 4; each with 1 and 4 output rows per invocation)
    for (xs, rows) in [[2, 3, 9, 17], [1, 2, 4, 5], [3, 4, 12, 8]]
        .into_iter()
        .flat_map(|xs| [(xs, 1), (xs, 4)])
    {
        let [_, c, _, _] = xs;
        let numel: usize = xs.iter().product();
        let inputs = [numel, numel, numel, c * 49, c].map(|len| normal_vec(&mut r, len));
        let opts = ConvOptions::default().padding(3).groups(c);
        let plane = xs[2] * xs[3];
        for dtype in dtypes() {
            let tol = match dtype {
                DType::F32 => 1e-5,
                DType::F16 => 1e-2,
            };
            pin_depthwise7_rows(gpu(), xs, dtype, rows).unwrap();
            let [x, dout, residual, weight, bias] = inputs.clone().map(|v| round_to(&v, dtype));
            let (conv, _) = cpu::conv2d(&x, xs, &weight, [c, 1, 7, 7], &opts);
            let want: Vec<f64> = conv
                .iter()
                .enumerate()
                .map(|(i, v)| v + bias[(i / plane) % c] + residual[i])
                .collect();
            let (transposed, _) = cpu::conv_transpose2d(&dout, xs, &weight, [c, 1, 7, 7], &opts, (0, 0));
            let (dw, db) = cpu_depthwise7_weight_grad(&x, &dout, xs);
            let up = |shape: &[usize], v: &[f64]| upload(shape, v, dtype);
            let (xt, dt, wt) = (up(&xs, &x), up(&xs, &dout), up(&[c, 1, 7, 7], &weight));
            let what = format!("depthwise7 {xs:?} ({dtype:?}, {rows} rows)");
            let y =
                depthwise7_conv(&xt, &wt, Some(&up(&[c], &bias)), Some(&up(&xs, &residual)), false).unwrap();
            assert_close(
                &format!("{what} forward + bias + residual"),
                &download(&y),
                &want,
                tol,
            );
            let dx = depthwise7_conv(&dt, &wt, None, None, true).unwrap();
            assert_close(&format!("{what} transposed"), &download(&dx), &transposed, tol);
            let (gw, gb) = depthwise7_weight_grad(&xt, &dt).unwrap();
            assert_eq!(gw.shape(), [c, 1, 7, 7]);
            assert_close(&format!("{what} weight gradient"), &download(&gw), &dw, tol);
            assert_close(&format!("{what} bias gradient"), &download(&gb), &db, tol);
        }
    }
}

#[test]
fn depthwise7_refuses_operands_of_the_wrong_shape_by_name() {
    use wgdiff::ops::depthwise7::depthwise7_conv;
    let x = upload(&[1, 2, 5, 5], &[0.0; 50], DType::F32);
    let w = upload(&[2, 1, 7, 7], &[0.0; 98], DType::F32);
    let bias = upload(&[3], &[0.0; 3], DType::F32);
    let err = depthwise7_conv(&x, &w, Some(&bias), None, false)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("bias") && err.contains("[3]") && err.contains("[2]"),
        "{err}"
    );
    let err = depthwise7_conv(&x, &bias, None, None, false)
        .unwrap_err()
        .to_string();
    assert!(err.contains("weight") && err.contains("[2, 1, 7, 7]"), "{err}");
}
