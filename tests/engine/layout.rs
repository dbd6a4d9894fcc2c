//! Reshape, permute, transpose, broadcast, slice, pad, concat and dtype casts.

use crate::common::*;
use crate::cpu;
use wgdiff::{DType, Tensor};

#[test]
fn permute_matches_cpu_and_differentiates() {
    for dtype in dtypes() {
        for (shape, perm) in [
            (vec![2, 3, 4], vec![2, 0, 1]),
            (vec![3, 5], vec![1, 0]),
            (vec![2, 1, 3, 5], vec![3, 1, 0, 2]),
        ] {
            let x = normal_vec(&mut rng(), shape.iter().product());
            let (s2, p2) = (shape.clone(), perm.clone());
            check_op(
                &format!("permute {shape:?} {perm:?}"),
                dtype,
                &[(shape, x)],
                move |xs| cpu::permute(&xs[0], &s2, &p2),
                |ts| ts[0].permute(&perm),
            );
        }
    }
}

#[test]
fn broadcast_to_sums_gradients_back() {
    for dtype in dtypes() {
        for (from, to) in [
            (vec![3, 1], vec![2, 3, 4]),
            (vec![5], vec![4, 5]),
            (vec![1, 1], vec![3, 7]),
        ] {
            let x = normal_vec(&mut rng(), from.iter().product());
            let (f2, t2) = (from.clone(), to.clone());
            check_op(
                &format!("broadcast {from:?}->{to:?}"),
                dtype,
                &[(from, x)],
                move |xs| {
                    cpu::binary(
                        wgdiff::ops::Binary::Add,
                        &xs[0],
                        &f2,
                        &vec![0.0; t2.iter().product()],
                        &t2,
                        &t2,
                    )
                },
                |ts| ts[0].broadcast_to(&to),
            );
        }
    }
}

fn slice_cpu(x: &[f64], shape: &[usize], axis: usize, start: usize, len: usize) -> Vec<f64> {
    (0..x.len())
        .filter(|&i| {
            let c = cpu::unravel(i, shape)[axis];
            c >= start && c < start + len
        })
        .map(|i| x[i])
        .collect()
}

#[test]
fn slice_pad_and_concat_round_trip_with_gradients() {
    for dtype in dtypes() {
        let shape = vec![3, 5, 4];
        let x = normal_vec(&mut rng(), 60);
        for axis in 0..3 {
            let (start, len) = (1, shape[axis] - 2);
            let s2 = shape.clone();
            check_op(
                &format!("slice axis {axis}"),
                dtype,
                &[(shape.clone(), x.clone())],
                move |xs| slice_cpu(&xs[0], &s2, axis, start, len),
                |ts| ts[0].slice(axis, start, len),
            );
        }
        // pad: the padded tensor sliced back is the input; pad then sum gives the sum.
        let t = upload(&shape, &x, dtype);
        let padded = t.pad_axis(1, 2, 3).unwrap();
        assert_eq!(padded.shape(), &[3, 10, 4]);
        assert_close(
            "pad then slice",
            &download(&padded.slice(1, 2, 5).unwrap()),
            &round_to(&x, dtype),
            0.0,
        );
        let zeros: f64 = download(&padded.slice(1, 0, 2).unwrap())
            .iter()
            .chain(&download(&padded.slice(1, 7, 3).unwrap()))
            .map(|v| v.abs())
            .sum();
        assert_eq!(zeros, 0.0);
        // concat along each axis: compare with CPU, gradients flow to each part.
        for axis in 0..3 {
            let mut sb = shape.clone();
            sb[axis] = 2;
            let y = normal_vec(&mut rng(), sb.iter().product());
            let (sa2, sb2) = (shape.clone(), sb.clone());
            check_op(
                &format!("concat axis {axis}"),
                dtype,
                &[(shape.clone(), x.clone()), (sb.clone(), y)],
                move |xs| {
                    let mut out_shape = sa2.clone();
                    out_shape[axis] += sb2[axis];
                    (0..out_shape.iter().product())
                        .map(|i| {
                            let mut idx = cpu::unravel(i, &out_shape);
                            if idx[axis] < sa2[axis] {
                                xs[0][cpu::broadcast_index(&idx, &sa2)]
                            } else {
                                idx[axis] -= sa2[axis];
                                xs[1][cpu::broadcast_index(&idx, &sb2)]
                            }
                        })
                        .collect()
                },
                |ts| Tensor::concat(ts, axis),
            );
        }
    }
}

#[test]
fn reshape_shares_data_and_checks_size() {
    let t = upload(&[2, 6], &(0..12).map(f64::from).collect::<Vec<_>>(), DType::F32);
    let r = t.reshape(&[3, 4]).unwrap();
    assert!(r.same_storage(&t));
    assert_eq!(download(&r), (0..12).map(f64::from).collect::<Vec<_>>());
    let err = t.reshape(&[5]).unwrap_err().to_string();
    assert!(err.contains("[2, 6]") && err.contains("[5]"), "{err}");
}

#[test]
fn casts_between_f32_and_f16_round_correctly() {
    for n in [1, 2, 7, 64, 1001] {
        let x = normal_vec(&mut rng(), n);
        let t = upload(&[n], &x, DType::F32);
        let h = t.to_dtype(DType::F16).unwrap();
        assert_eq!(h.dtype(), DType::F16);
        assert_eq!(download(&h), round_to(&x, DType::F16), "f32->f16, n={n}");
        let back = h.to_dtype(DType::F32).unwrap();
        assert_eq!(download(&back), round_to(&x, DType::F16), "f16->f32, n={n}");
    }
}

#[test]
fn long_rows_are_copied_completely() {
    // Lavapipe ends an invocation's loops after 65535 iterations: rows longer than that must
    // not be walked by one invocation.
    let (a, d) = (3, 70_001);
    let x: Vec<f64> = (0..a * 2 * d).map(|i| (i % 1000) as f64).collect();
    let t = upload(&[a, 2, d], &x, DType::F32);
    assert_close(
        "permute long rows",
        &download(&t.permute(&[1, 0, 2]).unwrap()),
        &cpu::permute(&x, &[a, 2, d], &[1, 0, 2]),
        0.0,
    );
}

#[test]
fn multi_axis_pad_matches_cpu_and_differentiates() {
    // The second case's rows (3 elements) are too short for the row kernel on CPU adapters:
    // it runs the one-invocation-per-element form.
    type Pads = Vec<(usize, usize)>;
    let cases: [(Vec<usize>, Pads); 2] = [
        (vec![2, 3, 4, 5], vec![(0, 1), (0, 0), (2, 1), (1, 3)]),
        (vec![3, 2, 2], vec![(1, 0), (0, 2), (0, 1)]),
    ];
    for (shape, pads) in cases {
        let out_shape: Vec<usize> = shape.iter().zip(&pads).map(|(n, (b, a))| n + b + a).collect();
        let x = normal_vec(&mut rng(), shape.iter().product());
        for dtype in dtypes() {
            let (s, o, p) = (shape.clone(), out_shape.clone(), pads.clone());
            check_op(
                &format!("pad {shape:?} by {pads:?}"),
                dtype,
                &[(shape.clone(), x.clone())],
                move |xs| {
                    (0..o.iter().product())
                        .map(|i| {
                            let idx = cpu::unravel(i, &o);
                            let inner: Option<Vec<usize>> = idx
                                .iter()
                                .zip(&p)
                                .zip(&s)
                                .map(|((&j, &(b, _)), &n)| j.checked_sub(b).filter(|&k| k < n))
                                .collect();
                            inner.map_or(0.0, |k| xs[0][cpu::broadcast_index(&k, &s)])
                        })
                        .collect()
                },
                |ts| ts[0].pad(&pads),
            );
        }
    }
    let shape = [2, 3, 4, 5];
    let x = normal_vec(&mut rng(), shape.iter().product());
    let t = upload(&shape, &x, DType::F32);
    let err = t.pad(&[(1, 1)]).unwrap_err().to_string();
    assert!(
        err.contains("1 (before, after) pairs") && err.contains("[2, 3, 4, 5]"),
        "{err}"
    );
}
