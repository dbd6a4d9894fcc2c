//! Convolution: every implementation against the direct 7-loop CPU reference on odd sizes,
//! strides, paddings, dilations (square and per axis) and groups; gradients by finite
//! differences; transposed conv in every implementation; the options builder; splitting when
//! the im2col buffer would exceed the binding limit; paced convs run in parts; the bias per
//! sample and the residual a conv adds to its output.

use crate::common::*;
use crate::cpu;
use wgdiff::gpu::{Pacing, Parts};
use wgdiff::ops::matmul::BlockShape;
use wgdiff::ops::{ConvAddends, ConvImpl, ConvOptions};
use wgdiff::{DType, Tensor};

/// (input [N,C,H,W], weight, options)
type ConvCase = ([usize; 4], [usize; 4], ConvOptions);

/// Input [N,C,H,W], weight [Cout,Cin/g,KH,KW], options.
fn cases() -> Vec<ConvCase> {
    let o = ConvOptions::default;
    vec![
        ([2, 4, 7, 9], [6, 4, 3, 3], o().padding(1)),
        ([2, 4, 9, 7], [8, 2, 3, 3], o().stride(2).groups(2)),
        ([1, 8, 11, 10], [8, 2, 5, 5], o().padding(3).dilation(2).groups(4)),
        ([2, 6, 8, 7], [6, 1, 7, 7], o().padding(3).groups(6)),
        // (depthwise7's own kernels: 10 rows, not a multiple of its 4 per invocation; 13 columns)
        ([1, 3, 10, 13], [3, 1, 7, 7], o().padding(3).groups(3)),
        ([2, 5, 5, 6], [7, 5, 1, 1], o()),
        // Inception's factorised kernels: 1x7 / 7x1 (and 1x3 / 3x1) with padding on one axis
        ([1, 4, 9, 8], [5, 4, 1, 7], o().padding_hw(0, 3)),
        ([1, 4, 8, 9], [5, 4, 7, 1], o().padding_hw(3, 0)),
        ([2, 3, 5, 6], [4, 3, 3, 1], o().padding_hw(1, 0)),
        // 3x3 stride 1 (Winograd's own kernel): grouped with padding 2, unpadded and even-sized
        ([2, 4, 6, 5], [6, 2, 3, 3], o().padding(2).groups(2)),
        ([1, 3, 8, 6], [5, 3, 3, 3], o()),
        ([1, 8, 6, 6], [40, 8, 3, 3], o().padding(1)),
    ]
}

/// Different stride, padding and dilation along height and width, through every route of
/// the backward: strided (col2im / gather input gradient), stride 1 (input gradient as a
/// conv with flipped weights and per-axis padding), grouped, and with the axes swapped.
fn rectangular_cases() -> Vec<ConvCase> {
    let o = ConvOptions::default;
    vec![
        (
            [1, 3, 6, 5],
            [4, 3, 3, 2],
            o().stride_hw(2, 1).padding_hw(1, 0).dilation_hw(1, 2),
        ),
        (
            [2, 4, 7, 8],
            [6, 2, 3, 2],
            o().padding_hw(1, 0).dilation_hw(1, 2).groups(2),
        ),
        (
            [1, 2, 5, 9],
            [3, 2, 2, 3],
            o().stride_hw(1, 2).padding_hw(0, 1).dilation_hw(2, 1),
        ),
    ]
}

/// conv2d + bias with `imp` against the CPU reference, forward and finite-difference
/// gradients of input, weight and bias.
fn check_conv(imp: ConvImpl, dtype: DType, (xs, ws, opts): ConvCase) {
    let mut r = rng();
    let x = normal_vec(&mut r, xs.iter().product());
    let w = normal_vec(&mut r, ws.iter().product());
    let b = normal_vec(&mut r, ws[0]);
    check_op(
        &format!("conv2d {} x{xs:?} w{ws:?} {opts:?}", imp.name()),
        dtype,
        &[(xs.to_vec(), x), (ws.to_vec(), w), (vec![ws[0]], b)],
        move |v| {
            let (mut y, [_, c, oh, ow]) = cpu::conv2d(&v[0], xs, &v[1], ws, &opts);
            for (i, y) in y.iter_mut().enumerate() {
                *y += v[2][(i / (oh * ow)) % c];
            }
            y
        },
        |t| t[0].conv2d_with(&t[1], Some(&t[2]), opts, imp),
    );
}

#[test]
fn every_conv_implementation_matches_the_reference_with_gradients() {
    for dtype in dtypes() {
        for case in cases() {
            for imp in ConvImpl::ALL {
                check_conv(imp, dtype, case);
            }
        }
    }
}

#[test]
fn rectangular_stride_padding_and_dilation_work_in_every_implementation() {
    for dtype in dtypes() {
        for case in rectangular_cases() {
            for imp in ConvImpl::ALL {
                check_conv(imp, dtype, case);
            }
        }
    }
}

/// conv2d + a bias per channel + a bias per (sample, channel) + a residual, added in the
/// tiled and Winograd kernels' epilogues and after the other implementations, against the
/// CPU reference with finite-difference gradients of all five operands; and, in the two
/// kernels with an epilogue (each combination of terms is its own pipeline), the U-Net's
/// combinations (conv1: biases; conv2: bias and residual) and a sample bias alone.
#[test]
fn conv_adds_biases_and_a_residual_in_every_implementation() {
    let (xs, ws, opts) = ([2, 4, 7, 9], [6, 4, 3, 3], ConvOptions::default().padding(1));
    let ys = [2, 6, 7, 9];
    // Which of (bias, sample bias, residual) each run adds, in which implementations.
    let all = (ConvImpl::ALL.to_vec(), [true, true, true]);
    let epilogues = [[true, true, false], [true, false, true], [false, true, false]]
        .map(|on| (vec![ConvImpl::Tiled, ConvImpl::Winograd], on));
    for dtype in dtypes() {
        for (imps, on) in std::iter::once(all.clone()).chain(epilogues.clone()) {
            for imp in imps {
                let mut r = rng();
                let x = normal_vec(&mut r, xs.iter().product());
                let w = normal_vec(&mut r, ws.iter().product());
                let term_shapes = [vec![ys[1]], vec![ys[0], ys[1]], ys.to_vec()];
                // The operand index of each present term (x and w come first).
                let mut slot = [None; 3];
                let mut inputs = vec![(xs.to_vec(), x), (ws.to_vec(), w)];
                for (t, shape) in term_shapes.into_iter().enumerate().filter(|&(t, _)| on[t]) {
                    slot[t] = Some(inputs.len());
                    inputs.push((shape.clone(), normal_vec(&mut r, shape.iter().product())));
                }
                check_op(
                    &format!("conv2d_plus {} (bias, sample bias, residual) {on:?}", imp.name()),
                    dtype,
                    &inputs,
                    move |v| {
                        let (mut y, [_, c, oh, ow]) = cpu::conv2d(&v[0], xs, &v[1], ws, &opts);
                        let term = |t: usize, at: usize| slot[t].map_or(0.0, |s| v[s][at]);
                        for (i, y) in y.iter_mut().enumerate() {
                            *y += term(0, (i / (oh * ow)) % c) + term(1, i / (oh * ow)) + term(2, i);
                        }
                        y
                    },
                    |t| {
                        let add = ConvAddends {
                            bias: slot[0].map(|s| &t[s]),
                            sample_bias: slot[1].map(|s| &t[s]),
                            residual: slot[2].map(|s| &t[s]),
                        };
                        t[0].conv2d_plus(&t[1], opts, imp, add)
                    },
                );
            }
        }
    }
}

/// The tiled forward with each tile whose weight rows are read one per lane and broadcast
/// across the subgroup (lavapipe's 8 lanes), pinned, against the CPU reference: output
/// channels not a multiple of the tile's rows, a bias and a residual in the epilogue.
#[test]
fn tiled_conv_with_weights_split_across_the_subgroup_matches_the_cpu() {
    let g = gpu();
    // (the widest and the narrowest: every split tile is checked in the matmul's tests, and
    // lavapipe takes a while to compile each)
    let split: Vec<BlockShape> = [BlockShape::CPU_TILES[0], BlockShape::CPU_TILES[3]]
        .iter()
        .filter_map(|t| t.split_across(g))
        .collect();
    if g.fixed_subgroup_size() != Some(8) {
        return; // (only adapters with 8-lane subgroups offer these tiles)
    }
    assert!(!split.is_empty());
    let (xs, ws, opts) = ([3, 5, 11, 13], [17, 5, 3, 3], ConvOptions::default().padding(1));
    let ys = [3, 17, 11, 13];
    for tile in split {
        wgdiff::ops::conv::pin_conv_tile(g, &xs, &ws, opts, DType::F32, tile).unwrap();
        let mut r = rng();
        let x = normal_vec(&mut r, xs.iter().product());
        let w = normal_vec(&mut r, ws.iter().product());
        let bias = normal_vec(&mut r, ys[1]);
        let residual = normal_vec(&mut r, ys.iter().product());
        check_op(
            &format!("tiled conv, {tile}"),
            DType::F32,
            &[
                (xs.to_vec(), x),
                (ws.to_vec(), w),
                (vec![ys[1]], bias),
                (ys.to_vec(), residual),
            ],
            move |v| {
                let (mut y, [_, c, oh, ow]) = cpu::conv2d(&v[0], xs, &v[1], ws, &opts);
                for (i, y) in y.iter_mut().enumerate() {
                    *y += v[2][(i / (oh * ow)) % c] + v[3][i];
                }
                y
            },
            |t| {
                let add = ConvAddends {
                    bias: Some(&t[2]),
                    sample_bias: None,
                    residual: Some(&t[3]),
                };
                t[0].conv2d_plus(&t[1], opts, ConvImpl::Tiled, add)
            },
        );
    }
}

/// The Winograd GEMM forms' cases (partial tiles, paddings 0-2, channel counts that are not
/// multiples of 4, batches of one and two), each with its geometry and both GEMM forms pinned
/// for `dtype`; none on an adapter without one fixed subgroup size (it runs the tiled kernel).
fn winograd_gemm_cases(
    dtype: DType,
) -> Vec<(
    [usize; 4],
    [usize; 4],
    ConvOptions,
    wgdiff::ops::conv::ConvGeometry,
)> {
    let o = ConvOptions::default;
    [
        ([2, 5, 11, 13], [7, 5, 3, 3], o().padding(1)),
        ([1, 3, 8, 6], [5, 3, 3, 3], o()),
        ([2, 4, 6, 5], [6, 4, 3, 3], o().padding(2)),
    ]
    .into_iter()
    .map(|(xs, ws, opts)| {
        (
            xs,
            ws,
            opts,
            wgdiff::ops::conv::ConvGeometry::new(&xs, &ws, opts).unwrap(),
        )
    })
    .filter(|(_, _, _, geo)| wgdiff::ops::conv::winograd_applies(gpu(), geo))
    .inspect(|&(xs, ws, opts, _)| wgdiff::ops::conv::pin_winograd_gemm(gpu(), &xs, &ws, opts, dtype).unwrap())
    .collect()
}

/// Winograd's batched-GEMM form (input transform, the blocked matmul over the 36 entries,
/// output transform), pinned, against the CPU reference with finite differences: partial 4x4
/// tiles, output channels not a multiple of 4, paddings 0-2, and the epilogue's bias, sample
/// bias and residual.
#[test]
fn winograd_gemm_form_matches_the_cpu_with_its_epilogue() {
    let g = gpu();
    for dtype in dtypes() {
        for (xs, ws, opts, geo) in winograd_gemm_cases(dtype) {
            let ys = geo.output_shape();
            let mut r = rng();
            let mut inputs = vec![
                (xs.to_vec(), normal_vec(&mut r, xs.iter().product())),
                (ws.to_vec(), normal_vec(&mut r, ws.iter().product())),
            ];
            for shape in [vec![ys[1]], vec![ys[0], ys[1]], ys.to_vec()] {
                inputs.push((shape.clone(), normal_vec(&mut r, shape.iter().product())));
            }
            check_op(
                &format!("winograd gemm x{xs:?} w{ws:?} {opts:?}"),
                dtype,
                &inputs,
                move |v| {
                    let (mut y, [_, c, oh, ow]) = cpu::conv2d(&v[0], xs, &v[1], ws, &opts);
                    for (i, y) in y.iter_mut().enumerate() {
                        *y += v[2][(i / (oh * ow)) % c] + v[3][i / (oh * ow)] + v[4][i];
                    }
                    y
                },
                |t| {
                    let add = ConvAddends {
                        bias: Some(&t[2]),
                        sample_bias: Some(&t[3]),
                        residual: Some(&t[4]),
                    };
                    t[0].conv2d_plus(&t[1], opts, ConvImpl::Winograd, add)
                },
            );
        }
    }
    assert!(wgdiff::ops::conv::pin_winograd_gemm(
        g,
        &[1, 4, 6, 6],
        &[4, 2, 3, 3],
        ConvOptions::default().groups(2),
        DType::F32
    )
    .is_err());
}

/// The Winograd weight gradient's batched-GEMM form, every element of dW against the CPU
/// (the conv is linear in w: dW[j] = sum of dY x the conv of the j-th unit weight): partial
/// tiles, padding 0-2, channel counts that are not multiples of 4, a batch of two.
#[test]
fn winograd_gemm_weight_gradient_matches_the_cpu_everywhere() {
    for dtype in dtypes() {
        for (xs, ws, opts, geo) in winograd_gemm_cases(dtype) {
            let mut r = rng();
            let x = round_to(&normal_vec(&mut r, xs.iter().product()), dtype);
            let w = round_to(&normal_vec(&mut r, ws.iter().product()), dtype);
            let ys = geo.output_shape();
            let dy = round_to(&normal_vec(&mut r, ys.iter().product()), dtype);
            let wt = upload(&ws, &w, dtype).requires_grad();
            let y = upload(&xs, &x, dtype)
                .conv2d_with(&wt, None, opts, ConvImpl::Winograd)
                .unwrap();
            let loss = y.mul(&upload(&ys, &dy, dtype)).unwrap().sum_all().unwrap();
            wgdiff::backward(&loss).unwrap();
            let want: Vec<f64> = (0..w.len())
                .map(|j| {
                    let mut unit = vec![0.0; w.len()];
                    unit[j] = 1.0;
                    let (yj, _) = cpu::conv2d(&x, xs, &unit, ws, &opts);
                    cpu::sum_compensated(yj.iter().zip(&dy).map(|(a, b)| a * b))
                })
                .collect();
            assert_close(
                &format!("winograd gemm weight gradient x{xs:?} w{ws:?} {opts:?} ({dtype:?})"),
                &download(&wt.grad().unwrap()),
                &want,
                match dtype {
                    DType::F32 => 1e-3,
                    DType::F16 => 3e-2,
                },
            );
        }
    }
}

#[test]
fn conv_addends_of_the_wrong_shape_are_refused() {
    let g = gpu();
    let x = Tensor::zeros(g, &[2, 3, 5, 5], DType::F32).unwrap();
    let w = Tensor::zeros(g, &[4, 3, 3, 3], DType::F32).unwrap();
    let opts = ConvOptions::default().padding(1);
    let wrong = Tensor::zeros(g, &[2, 4, 3, 3], DType::F32).unwrap();
    let cases = [
        (0, "conv bias [2, 4, 3, 3] F32 should be [4] F32"),
        (1, "conv sample bias [2, 4, 3, 3] F32 should be [2, 4] F32"),
        (2, "conv residual [2, 4, 3, 3] F32 should be [2, 4, 5, 5] F32"),
    ];
    for (term, want) in cases {
        let add = ConvAddends {
            bias: (term == 0).then_some(&wrong),
            sample_bias: (term == 1).then_some(&wrong),
            residual: (term == 2).then_some(&wrong),
        };
        let err = x
            .conv2d_plus(&w, opts, ConvImpl::Tiled, add)
            .unwrap_err()
            .to_string();
        assert!(err.contains(want), "{err}");
    }
}

#[test]
fn conv_options_builder_sets_each_axis() {
    let square = ConvOptions::default().stride(2).padding(1).dilation(3).groups(4);
    assert_eq!(
        square,
        ConvOptions {
            stride: (2, 2),
            padding: (1, 1),
            dilation: (3, 3),
            groups: 4
        }
    );
    let rect = ConvOptions::default()
        .stride_hw(2, 1)
        .padding_hw(1, 0)
        .dilation_hw(1, 2);
    assert_eq!(
        rect,
        ConvOptions {
            stride: (2, 1),
            padding: (1, 0),
            dilation: (1, 2),
            groups: 1
        }
    );
    // A later setting replaces an earlier one; the others are kept.
    let reset = rect.stride(3).padding_hw(0, 2);
    assert_eq!(
        (reset.stride, reset.padding, reset.dilation),
        ((3, 3), (0, 2), (1, 2))
    );
    // The builder accepts any numbers; the conv names what is wrong with them.
    let x = upload(&[1, 1, 5, 5], &[0.5; 25], DType::F32);
    let w = upload(&[1, 1, 3, 3], &[0.5; 9], DType::F32);
    let msg = x
        .conv2d(&w, None, ConvOptions::default().stride_hw(1, 0))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("conv2d") && msg.contains("stride (1, 0)"), "{msg}");
}

#[test]
fn conv_transpose_matches_the_reference_in_every_implementation_with_gradients() {
    let o = ConvOptions::default;
    // (input, weight [Cin,Cout/g,KH,KW], options, output padding)
    let cases: [(ConvCase, (usize, usize)); 6] = [
        (([2, 4, 5, 6], [4, 3, 3, 3], o().stride(2).padding(1)), (1, 1)),
        (
            ([1, 6, 4, 5], [6, 2, 4, 4], o().stride(2).padding(1).groups(2)),
            (0, 0),
        ),
        (([2, 3, 5, 5], [3, 5, 3, 3], o().dilation(2)), (0, 0)),
        (
            ([1, 4, 3, 4], [4, 1, 3, 3], o().stride(3).padding(1).groups(4)),
            (2, 1),
        ),
        // rectangular: strided, and stride 1 (its backward conv runs the forward kernels)
        (
            (
                [1, 3, 4, 5],
                [3, 2, 3, 2],
                o().stride_hw(2, 1).padding_hw(1, 0).dilation_hw(1, 2),
            ),
            (1, 1),
        ),
        (
            (
                [1, 4, 5, 4],
                [4, 3, 2, 3],
                o().padding_hw(1, 0).dilation_hw(1, 2).groups(2),
            ),
            (0, 1),
        ),
    ];
    for dtype in dtypes() {
        for ((xs, ws, opts), op) in cases {
            for imp in ConvImpl::ALL {
                let mut r = rng();
                let x = normal_vec(&mut r, xs.iter().product());
                let w = normal_vec(&mut r, ws.iter().product());
                check_op(
                    &format!(
                        "conv_transpose2d {} x{xs:?} w{ws:?} {opts:?} out_pad {op:?}",
                        imp.name()
                    ),
                    dtype,
                    &[(xs.to_vec(), x), (ws.to_vec(), w)],
                    move |v| cpu::conv_transpose2d(&v[0], xs, &v[1], ws, &opts, op).0,
                    |t| t[0].conv_transpose2d_with(&t[1], None, opts, op, imp),
                );
            }
        }
    }
}

#[test]
fn bad_conv_shapes_are_reported() {
    let x = upload(&[1, 4, 5, 5], &[0.5; 100], DType::F32);
    let w = upload(&[6, 3, 3, 3], &[0.5; 162], DType::F32);
    let msg = x
        .conv2d(&w, None, ConvOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("[1, 4, 5, 5]") && msg.contains("[6, 3, 3, 3]"),
        "{msg}"
    );
    let big = upload(&[6, 4, 7, 7], &[0.5; 6 * 4 * 49], DType::F32);
    let msg = x
        .conv2d(&big, None, ConvOptions::default())
        .unwrap_err()
        .to_string();
    assert!(msg.contains("larger than the padded input"), "{msg}");
}

#[test]
fn im2col_larger_than_a_binding_is_split_over_the_batch() {
    // 5 images whose im2col buffers total > 128 MiB (lavapipe's binding limit): each image
    // needs 1 * 27 * 512*512 * 4 B = 27 MiB of columns, 5 need 135 MiB.
    let gpu = gpu();
    let (n, h) = (5, 512);
    let per_image = 27 * h * h * 4;
    assert!((n * per_image) as u64 > gpu.max_binding_bytes() || gpu.max_binding_bytes() > 1 << 30);
    let mut r = rng();
    let x = normal_vec(&mut r, n * 3 * h * h);
    let w = normal_vec(&mut r, 2 * 3 * 9);
    let opts = ConvOptions::default().padding(1);
    let xt = Tensor::from_slice(
        gpu,
        &[n, 3, h, h],
        &x.iter().map(|&v| v as f32).collect::<Vec<_>>(),
        DType::F32,
    )
    .unwrap();
    let wt = Tensor::from_slice(
        gpu,
        &[2, 3, 3, 3],
        &w.iter().map(|&v| v as f32).collect::<Vec<_>>(),
        DType::F32,
    )
    .unwrap();
    let y = xt.conv2d_with(&wt, None, opts, ConvImpl::Im2col).unwrap();
    let want = cpu::conv2d(
        &round_to(&x, DType::F32),
        [n, 3, h, h],
        &round_to(&w, DType::F32),
        [2, 3, 3, 3],
        &opts,
    )
    .0;
    assert_close("chunked im2col conv", &download(&y), &want, 1e-4);
}

#[test]
fn direct_weight_gradient_over_many_pixels_is_complete() {
    // 3 images x 160x160 output pixels = 76800 > the per-invocation loop budget.
    let (xs, ws, opts) = ([3, 1, 160, 160], [2, 1, 3, 3], ConvOptions::default().padding(1));
    let mut r = rng();
    let (x, w) = (normal_vec(&mut r, 3 * 160 * 160), normal_vec(&mut r, 18));
    let xt = upload(&xs, &x, DType::F32);
    let wt = upload(&ws, &w, DType::F32).requires_grad();
    let y = xt.conv2d_with(&wt, None, opts, ConvImpl::Direct).unwrap();
    wgdiff::backward(&y.sum_all().unwrap()).unwrap();
    // d sum(y) / d w[co, 0, r, c] = sum over images and pixels of the shifted input
    let xr = round_to(&x, DType::F32);
    let mut want = vec![0.0; 18];
    for (i, wv) in want.iter_mut().enumerate() {
        let mut one = vec![0.0; 18];
        one[i] = 1.0;
        *wv = cpu::conv2d(&xr, xs, &one, ws, &opts).0.iter().sum();
    }
    assert_close("direct dW", &download(&wt.grad().unwrap()), &want, 1e-4);
}

#[test]
fn paced_tiled_and_winograd_convs_run_in_parts_with_the_same_results() {
    // Pacing with a tiny FLOP budget splits the tiled and Winograd forwards (over pixel tiles) and weight
    // gradient (over groups x slices) into as many dispatches as they have workgroups along
    // the split axis; every part must land where the whole dispatch would have written.
    let gpu = gpu();
    let cases: [ConvCase; 2] = [
        ([3, 8, 12, 12], [16, 8, 3, 3], ConvOptions::default().padding(1)),
        (
            [2, 8, 9, 7],
            [8, 2, 3, 3],
            ConvOptions::default().stride(2).groups(4),
        ),
    ];
    for ((xs, ws, opts), imp) in cases
        .into_iter()
        .flat_map(|case| [(case, ConvImpl::Tiled), (case, ConvImpl::Winograd)])
    {
        let mut r = rng();
        let x = normal_vec(&mut r, xs.iter().product());
        let w = normal_vec(&mut r, ws.iter().product());
        let run = || {
            let xt = upload(&xs, &x, DType::F32).requires_grad();
            let wt = upload(&ws, &w, DType::F32).requires_grad();
            let y = xt.conv2d_with(&wt, None, opts, imp).unwrap();
            wgdiff::backward(&y.square().unwrap().sum_all().unwrap()).unwrap();
            [y, xt.grad().unwrap(), wt.grad().unwrap()].map(|t| download(&t))
        };
        let whole = run();
        gpu.set_pacing(Some(Pacing {
            slice_seconds: 1e-4,
            parts: Parts::Flops(1e3),
        }));
        let parts = run();
        gpu.set_pacing(None);
        for (name, (a, b)) in ["y", "dx", "dw"].iter().zip(whole.iter().zip(&parts)) {
            assert_eq!(
                a,
                b,
                "{name} of {} conv x{xs:?} w{ws:?} differs when run in parts",
                imp.name()
            );
        }
        let want = cpu::conv2d(
            &round_to(&x, DType::F32),
            xs,
            &round_to(&w, DType::F32),
            ws,
            &opts,
        )
        .0;
        assert_close("conv in parts vs reference", &parts[0], &want, 1e-4);
    }
}
