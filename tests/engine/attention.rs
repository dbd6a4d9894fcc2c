//! Multi-head attention (self and cross, explicit scales, head dims up to 256) and the spatial
//! self-attention layer against the CPU references (gradients by finite differences), their
//! errors, and a forward at the 32x32 U-Net size.

use crate::common::*;
use crate::cpu;
use wgdiff::ops::{attention, attention_with, spatial_self_attention, AttentionForm};

/// The forms checked against the CPU: the kernels and the matmul form (`Auto` is one of them).
const FORMS: [AttentionForm; 2] = [AttentionForm::Fused, AttentionForm::Matmul];
use wgdiff::DType;

#[test]
fn attention_matches_cpu_and_differentiates() {
    let shapes = [
        [2, 2, 7, 8],
        [1, 4, 49, 16],
        [3, 1, 1, 4],
        [1, 2, 5, 3],
        [1, 1, 9, 64],
    ];
    for dtype in dtypes() {
        for (shape, form) in shapes.into_iter().flat_map(|s| FORMS.map(|f| (s, f))) {
            let mut r = rng();
            let n: usize = shape.iter().product();
            let inputs: Vec<_> = (0..3).map(|_| (shape.to_vec(), normal_vec(&mut r, n))).collect();
            let (len, d) = (shape[2], shape[3]);
            check_op(
                &format!("attention {shape:?} {form:?}"),
                dtype,
                &inputs,
                move |xs| cpu::attention(&xs[0], &xs[1], &xs[2], cpu::Attn::square(len, d)),
                |ts| attention_with(&ts[0], &ts[1], &ts[2], None, form),
            );
        }
    }
}

/// Cross-attention (Lq != Lkv, dv != d) with explicit and default scales, on the register
/// kernels (d, dv <= 64) and the sliced ones: d = 96 (2 slices), d = 256 (4 slices of 64),
/// ragged slices (d = 65, dv = 130 over 4 slices), rows spanning several workgroups and
/// problems, and key/query counts that are not a multiple of the 32-row blocks.
#[test]
fn cross_attention_with_scale_and_wide_heads_matches_cpu_and_differentiates() {
    // (q shape [B, heads, Lq, d], Lkv, dv, scale)
    let cases: [([usize; 4], usize, usize, Option<f32>); 7] = [
        ([2, 2, 5, 8], 9, 8, Some(0.3)),
        ([1, 3, 7, 16], 3, 24, None),
        ([1, 2, 6, 96], 19, 96, None),
        ([1, 1, 5, 256], 4, 256, Some(0.05)),
        ([1, 1, 3, 256], 17, 40, None),
        ([2, 1, 3, 65], 17, 130, Some(0.2)),
        ([1, 2, 40, 100], 33, 40, None),
    ];
    for dtype in dtypes() {
        for ((q_shape, len_kv, dv, scale), form) in cases.into_iter().flat_map(|c| FORMS.map(|f| (c, f))) {
            let [b, h, len_q, d] = q_shape;
            let shapes = [q_shape.to_vec(), vec![b, h, len_kv, d], vec![b, h, len_kv, dv]];
            let mut r = rng();
            let inputs: Vec<_> = shapes
                .iter()
                .map(|s| (s.clone(), normal_vec(&mut r, s.iter().product())))
                .collect();
            let a = cpu::Attn {
                len_q,
                len_kv,
                d,
                dv,
                scale: scale.map_or(1.0 / (d as f64).sqrt(), f64::from),
            };
            check_op(
                &format!("attention q {q_shape:?} Lkv {len_kv} dv {dv} scale {scale:?} {form:?}"),
                dtype,
                &inputs,
                move |xs| cpu::attention(&xs[0], &xs[1], &xs[2], a),
                |ts| attention_with(&ts[0], &ts[1], &ts[2], scale, form),
            );
        }
    }
}

#[test]
fn spatial_self_attention_matches_cpu_and_differentiates() {
    let (shape, heads) = ([2, 8, 3, 5], 2);
    let c = shape[1];
    for dtype in dtypes() {
        let mut r = rng();
        let mut normal = |n: usize, s: f64| normal_vec(&mut r, n).iter().map(|v| v * s).collect();
        let w = 1.0 / (c as f64).sqrt();
        let inputs = vec![
            (shape.to_vec(), normal(shape.iter().product(), 1.0)),
            (vec![3 * c, c], normal(3 * c * c, w)),
            (vec![3 * c], normal(3 * c, 0.1)),
            (vec![c, c], normal(c * c, w)),
            (vec![c], normal(c, 0.1)),
        ];
        check_op(
            &format!("spatial_self_attention {shape:?} heads {heads}"),
            dtype,
            &inputs,
            move |xs| cpu::spatial_self_attention(&xs[0], &shape, (&xs[1], &xs[2], &xs[3], &xs[4]), heads),
            |ts| spatial_self_attention(&ts[0], &ts[1], &ts[2], &ts[3], &ts[4], heads),
        );
    }
}

#[test]
fn attention_rejects_bad_shapes() {
    let t = |shape: &[usize]| upload(shape, &vec![0.0; shape.iter().product()], DType::F32);
    let q = t(&[1, 2, 4, 8]);
    let msg = |r: wgdiff::Result<wgdiff::Tensor>| r.expect_err("an error").to_string();
    // batch, heads, head dim of k; positions of v; rank and empty sizes
    assert!(msg(attention(&q, &t(&[2, 2, 5, 8]), &t(&[2, 2, 5, 8]), None)).contains("k [2, 2, 5, 8]"));
    assert!(msg(attention(&q, &t(&[1, 3, 5, 8]), &t(&[1, 3, 5, 8]), None)).contains("k [1, 3, 5, 8]"));
    assert!(msg(attention(&q, &t(&[1, 2, 5, 16]), &t(&[1, 2, 5, 8]), None)).contains("d of q [1, 2, 4, 8]"));
    assert!(msg(attention(&q, &t(&[1, 2, 5, 8]), &t(&[1, 2, 6, 8]), None)).contains("v [1, 2, 6, 8]"));
    assert!(msg(attention(&t(&[2, 4, 8]), &q, &q, None))
        .contains("q [2, 4, 8] must be a non-empty [B, heads, L, d]"));
    assert!(msg(attention(&q, &t(&[1, 2, 0, 8]), &t(&[1, 2, 0, 8]), None))
        .contains("k [1, 2, 0, 8] must be a non-empty"));
    // head dims past 256, a scale that is not finite
    let wide = t(&[1, 1, 2, 257]);
    assert!(msg(attention(&wide, &wide, &wide, None)).contains("head dim 257 of q and k exceeds 256"));
    let k = t(&[1, 2, 3, 8]);
    assert!(msg(attention(&q, &k, &t(&[1, 2, 3, 257]), None)).contains("head dim 257 of v exceeds 256"));
    assert!(msg(attention(&q, &k, &k, Some(f32::NAN))).contains("scale NaN must be finite"));
    // more keys than one invocation may loop over (fewer for the sliced kernels)
    let long = t(&[1, 1, 60_001, 1]);
    assert!(msg(attention(&t(&[1, 1, 2, 1]), &long, &long, None)).contains("k has 60001 positions"));
    let long = t(&[1, 1, 30_000, 65]);
    assert!(msg(attention(&t(&[1, 1, 2, 65]), &long, &long, None)).contains("at most 29538"));
    let x = t(&[1, 6, 2, 2]);
    let (w, b) = (t(&[18, 6]), t(&[18]));
    let (wo, bo) = (t(&[6, 6]), t(&[6]));
    assert!(msg(spatial_self_attention(&x, &w, &b, &wo, &bo, 4)).contains("4 heads do not divide"));
    assert!(msg(spatial_self_attention(&x, &wo, &b, &wo, &bo, 2)).contains("qkv_weight has shape [6, 6]"));
}

/// 16 problems (batch * heads) over the 32x32 map (L = 1024), head dim 32: the forward
/// against the CPU on sampled rows (one per problem).
#[test]
fn attention_at_unet_size() {
    let shape = [4, 4, 1024, 32];
    let (len, d) = (shape[2], shape[3]);
    let n: usize = shape.iter().product();
    let mut r = rng();
    let xs: Vec<Vec<f64>> = (0..3)
        .map(|_| round_to(&normal_vec(&mut r, n), DType::F32))
        .collect();
    let [q, k, v] = [0, 1, 2].map(|i| upload(&shape, &xs[i], DType::F32));
    let got = download(&attention(&q, &k, &v, None).unwrap());
    let rows: Vec<usize> = (0..16).map(|p| p * len + (p * 67 + 5) % len).collect();
    let want = cpu::attention_rows(&xs[0], &xs[1], &xs[2], cpu::Attn::square(len, d), &rows);
    let got: Vec<f64> = rows
        .iter()
        .flat_map(|&row| got[row * d..(row + 1) * d].to_vec())
        .collect();
    assert_close("attention [4, 4, 1024, 32]", &got, &want, 1e-4);
}
