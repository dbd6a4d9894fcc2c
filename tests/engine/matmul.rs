//! Matmul: naive and blocked kernels, odd sizes, batches, transposes, backward.

use crate::common::*;
use crate::cpu;
use wgdiff::ops::matmul::BlockShape;
use wgdiff::ops::{BiasAlong, MatmulKernel};
use wgdiff::DType::F32;

/// (batch dims of A, batch dims of B, M, N, K)
type MatmulCase = (&'static [usize], &'static [usize], usize, usize, usize);

#[test]
fn matmul_kernels_match_cpu_on_odd_and_tile_sized_shapes() {
    let cases: [MatmulCase; 8] = [
        (&[], &[], 1, 1, 1),
        (&[], &[], 3, 5, 7),
        (&[], &[], 17, 33, 9),
        (&[], &[], 64, 128, 64),
        (&[], &[], 37, 131, 20),
        (&[2], &[2], 5, 6, 7),
        (&[3], &[], 9, 4, 12),
        (&[], &[2, 2], 4, 10, 3),
    ];
    let texels = MatmulKernel::TexelsWith(BlockShape::all(gpu())[0]);
    for dtype in dtypes() {
        let mut kernels = vec![MatmulKernel::Naive, MatmulKernel::Blocked];
        if dtype == wgdiff::DType::F32 {
            kernels.push(texels);
        }
        for kernel in kernels {
            for (ba, bb, m, n, k) in cases {
                for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                    let mut sa = ba.to_vec();
                    sa.extend(if ta { [k, m] } else { [m, k] });
                    let mut sb = bb.to_vec();
                    sb.extend(if tb { [n, k] } else { [k, n] });
                    let mut r = rng();
                    let a = normal_vec(&mut r, sa.iter().product());
                    let b = normal_vec(&mut r, sb.iter().product());
                    let (sa2, sb2) = (sa.clone(), sb.clone());
                    check_op(
                        &format!(
                            "{kernel:?} {sa:?}{} x {sb:?}{}",
                            if ta { "^T" } else { "" },
                            if tb { "^T" } else { "" }
                        ),
                        dtype,
                        &[(sa, a), (sb, b)],
                        move |xs| cpu::matmul(&xs[0], &sa2, ta, &xs[1], &sb2, tb),
                        |ts| ts[0].matmul_with(&ts[1], ta, tb, kernel),
                    );
                }
            }
        }
    }
}

#[test]
fn every_blocked_tile_shape_is_correct() {
    let gpu = gpu();
    let plain = BlockShape::CPU_TILES.into_iter().chain(BlockShape::GPU_TILES);
    let split: Vec<BlockShape> = plain.clone().filter_map(|t| t.split_across(gpu)).collect();
    if gpu.fixed_subgroup_size() == Some(8) {
        assert!(
            !split.is_empty(),
            "lavapipe's 8-lane subgroups take the split tiles"
        );
    }
    // (300 x 36 padded: A's 2,700 vec4s fill one row of texels and part of a second)
    for tile in plain.chain(split) {
        for kernel in [MatmulKernel::BlockedWith(tile), MatmulKernel::TexelsWith(tile)] {
            for (m, n, k) in [(37, 131, 20), (70, 36, 9), (300, 131, 33)] {
                let mut r = rng();
                let (a, b) = (normal_vec(&mut r, m * k), normal_vec(&mut r, k * n));
                check_op(
                    &format!("{kernel:?} {m}x{n}x{k}"),
                    wgdiff::DType::F32,
                    &[(vec![m, k], a), (vec![k, n], b)],
                    move |xs| cpu::matmul(&xs[0], &[m, k], false, &xs[1], &[k, n], false),
                    |ts| ts[0].matmul_with(&ts[1], false, false, kernel),
                );
            }
        }
    }
}

/// Texel operands copy into textures the device reuses, keeping at most two idle, whatever the
/// sizes that came before.
#[test]
fn texel_operands_leave_at_most_two_idle_textures() {
    let gpu = gpu();
    let tile = BlockShape::all(gpu)[0];
    let mut r = rng();
    for (m, n, k) in [(300, 131, 33), (9, 8, 4), (700, 64, 96), (40, 40, 40)] {
        let (av, bv) = (normal_vec(&mut r, m * k), normal_vec(&mut r, k * n));
        let (a, b) = (upload(&[m, k], &av, F32), upload(&[k, n], &bv, F32));
        let y = a
            .matmul_with(&b, false, false, MatmulKernel::TexelsWith(tile))
            .unwrap();
        let want = cpu::matmul(&av, &[m, k], false, &bv, &[k, n], false);
        assert_close(&format!("{m}x{n}x{k}"), &download(&y), &want, fwd_tol(F32));
        assert!(
            gpu.idle_texel_textures() <= 2,
            "{} idle textures",
            gpu.idle_texel_textures()
        );
    }
}

/// `x @ w + bias` and `w @ x + bias[:, None]` with the bias added by the blocked kernel as it
/// stores (the Linear layer, the attention's projections), on sizes that are and are not
/// multiples of 4, with a batch dim on one side.
#[test]
fn matmul_with_a_bias_matches_the_reference_with_gradients() {
    for dtype in dtypes() {
        for along in [BiasAlong::Columns, BiasAlong::Rows] {
            for (sa, sb) in [
                (vec![5, 12], vec![12, 16]),
                (vec![3, 4, 7], vec![7, 9]),
                (vec![9, 6], vec![2, 6, 5]),
                (vec![1, 3], vec![3, 1]),
            ] {
                let (m, n) = (sa[sa.len() - 2], sb[sb.len() - 1]);
                let len = if along == BiasAlong::Columns { n } else { m };
                let mut r = rng();
                let a = normal_vec(&mut r, sa.iter().product());
                let b = normal_vec(&mut r, sb.iter().product());
                let bias = normal_vec(&mut r, len);
                let (sa2, sb2) = (sa.clone(), sb.clone());
                check_op(
                    &format!("{sa:?} @ {sb:?} + bias along {along:?}"),
                    dtype,
                    &[(sa.clone(), a), (sb.clone(), b), (vec![len], bias)],
                    move |v| {
                        let y = cpu::matmul(&v[0], &sa2, false, &v[1], &sb2, false);
                        let at = |i: usize| {
                            if along == BiasAlong::Columns {
                                i % n
                            } else {
                                i / n % m
                            }
                        };
                        y.iter().enumerate().map(|(i, y)| y + v[2][at(i)]).collect()
                    },
                    |ts| ts[0].matmul_bias(&ts[1], &ts[2], along),
                );
            }
        }
    }
    let x = upload(&[2, 3], &[1.0; 6], wgdiff::DType::F32);
    let w = upload(&[3, 4], &[1.0; 12], wgdiff::DType::F32);
    let bias = upload(&[3], &[1.0; 3], wgdiff::DType::F32);
    let msg = x
        .matmul_bias(&w, &bias, BiasAlong::Columns)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("bias [3] must be [4], one value per output column"),
        "{msg}"
    );
}

#[test]
fn mismatched_inner_dims_are_reported() {
    let a = upload(&[2, 3], &[1.0; 6], wgdiff::DType::F32);
    let b = upload(&[4, 2], &[1.0; 8], wgdiff::DType::F32);
    let msg = a.matmul(&b).unwrap_err().to_string();
    assert!(msg.contains("[2, 3]") && msg.contains("[4, 2]"), "{msg}");
}
