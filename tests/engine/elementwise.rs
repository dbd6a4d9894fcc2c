//! Unary and broadcasting binary ops: forward vs CPU, backward vs finite differences.

use crate::common::*;
use crate::cpu;
use wgdiff::ops::elementwise::broadcast_shape;
use wgdiff::ops::{Binary, GeluForm, Unary};
use wgdiff::DType;

/// Inputs on which `op` is smooth and well-conditioned.
fn sample_input(op: Unary, n: usize) -> Vec<f64> {
    let mut r = rng();
    match op {
        Unary::Log | Unary::Sqrt | Unary::Pow(_) | Unary::Reciprocal(_) => uniform_vec(&mut r, n, 0.5, 2.0),
        // keep clear of the kinks at 0 / the clamp edges
        Unary::Relu | Unary::Abs => uniform_vec(&mut r, n, 0.1, 2.0)
            .into_iter()
            .enumerate()
            .map(|(i, v)| if i % 2 == 0 { v } else { -v })
            .collect(),
        Unary::Clamp(..) => uniform_vec(&mut r, n, -1.0, 1.0)
            .into_iter()
            .map(|v| {
                if v.abs() > 0.45 && v.abs() < 0.55 {
                    v * 0.5
                } else {
                    v
                }
            })
            .collect(),
        _ => normal_vec(&mut r, n),
    }
}

const UNARY: [Unary; 18] = [
    Unary::Neg,
    Unary::Exp,
    Unary::Log,
    Unary::Sqrt,
    Unary::Relu,
    Unary::Silu,
    Unary::Gelu(GeluForm::Exact),
    Unary::Gelu(GeluForm::Tanh),
    Unary::Sigmoid,
    Unary::Tanh,
    Unary::Clamp(-0.5, 0.5),
    Unary::Pow(1.7),
    Unary::Affine(-1.5, 0.25),
    Unary::Reciprocal(2.0),
    Unary::Abs,
    Unary::Square,
    Unary::Sin,
    Unary::Cos,
];

#[test]
fn unary_ops_match_cpu_and_finite_differences() {
    for dtype in dtypes() {
        for op in UNARY {
            // vec4 kernels: sizes that are not multiples of 4, one over two workgroups of 1024
            for shape in [vec![1], vec![7, 13], vec![3, 67], vec![5, 411]] {
                let n = shape.iter().product();
                let x = sample_input(op, n);
                check_op(
                    &format!("{op:?} {shape:?}"),
                    dtype,
                    &[(shape.clone(), x)],
                    |xs| cpu::unary(op, &xs[0]),
                    |ts| ts[0].unary(op),
                );
            }
        }
    }
}

#[test]
fn gelu_forms_match_pytorch_values() {
    // torch.nn.functional.gelu(x) and gelu(x, approximate="tanh") in float64
    let x = upload(&[2], &[1.0, -0.5], DType::F32);
    let exact = download(&x.gelu(GeluForm::Exact).unwrap());
    let tanh = download(&x.gelu(GeluForm::Tanh).unwrap());
    for (what, got, want) in [
        ("exact gelu(1)", exact[0], 0.8413447460685429),
        ("exact gelu(-0.5)", exact[1], -0.15426876936299344),
        ("tanh gelu(1)", tanh[0], 0.8411919906082768),
        ("tanh gelu(-0.5)", tanh[1], -0.15428599017485606),
    ] {
        assert!((got - want).abs() <= 1e-6, "{what}: got {got}, want {want}");
    }
}

#[test]
fn exact_gelu_and_its_gradient_are_float32_accurate_everywhere() {
    // Every 1/128 over [-12, 12]: both erf branches, the erfc tail (where exact and tanh GELU
    // differ by up to 4.7e-4) and past the point where exp(-x^2) underflows. Errors are
    // judged against f64 per element, relative to max(1, |x|), the scale of a float32
    // rounding of x * Phi(x) (lavapipe: ~0.9e-7 and ~1.0e-7).
    let x: Vec<f64> = (-1536..=1536).map(|i| i as f64 / 128.0).collect();
    let t = upload(&[x.len()], &x, DType::F32).requires_grad();
    let y = t.gelu(GeluForm::Exact).unwrap();
    wgdiff::backward(&y.sum_all().unwrap()).unwrap();
    let (y, dy) = (download(&y), download(&t.grad().unwrap()));
    let want_y = cpu::unary(Unary::Gelu(GeluForm::Exact), &x);
    let normal_pdf = |v: f64| (-0.5 * v * v).exp() / (2.0 * std::f64::consts::PI).sqrt();
    for (i, &v) in x.iter().enumerate() {
        let want_dy = 0.5 * libm::erfc(-v / std::f64::consts::SQRT_2) + v * normal_pdf(v);
        let scale = v.abs().max(1.0);
        assert!(
            (y[i] - want_y[i]).abs() <= 2e-7 * scale,
            "gelu({v}) = {}, want {} (error {:.2e})",
            y[i],
            want_y[i],
            (y[i] - want_y[i]).abs()
        );
        assert!(
            (dy[i] - want_dy).abs() <= 5e-7 * scale,
            "gelu'({v}) = {}, want {want_dy} (error {:.2e})",
            dy[i],
            (dy[i] - want_dy).abs()
        );
        // The lower tail comes from erfc, not 1 + erf, so it is accurate relative to its tiny
        // values (down to 1e-32 at -12); exp(-x^2 / 2) of a rounded x^2 bounds that by
        // ~x^2 float32 epsilons (lavapipe: 1.6e-7 x^2).
        let rel = (y[i] - want_y[i]).abs() / want_y[i].abs();
        assert!(
            v >= -1.5 || rel <= 4e-7 * v * v,
            "gelu({v}) = {:e}, want {:e} (relative error {rel:.2e})",
            y[i],
            want_y[i]
        );
    }
}

#[test]
fn scalar_helpers_are_the_right_affine_maps() {
    let x = vec![0.5, -1.25, 2.0];
    let t = upload(&[3], &x, wgdiff::DType::F32);
    let cases: Vec<(&str, wgdiff::Tensor, Vec<f64>)> = vec![
        (
            "add_scalar",
            t.add_scalar(2.0).unwrap(),
            x.iter().map(|v| v + 2.0).collect(),
        ),
        (
            "sub_scalar",
            t.sub_scalar(2.0).unwrap(),
            x.iter().map(|v| v - 2.0).collect(),
        ),
        (
            "mul_scalar",
            t.mul_scalar(3.0).unwrap(),
            x.iter().map(|v| v * 3.0).collect(),
        ),
        (
            "div_scalar",
            t.div_scalar(4.0).unwrap(),
            x.iter().map(|v| v / 4.0).collect(),
        ),
        (
            "rsub_scalar",
            t.rsub_scalar(1.0).unwrap(),
            x.iter().map(|v| 1.0 - v).collect(),
        ),
        (
            "rdiv_scalar",
            t.rdiv_scalar(1.0).unwrap(),
            x.iter().map(|v| 1.0 / v).collect(),
        ),
    ];
    for (name, got, want) in cases {
        assert_close(name, &download(&got), &want, 1e-6);
    }
}

/// Values (2i + parity) / 16 for random i in -24..24.
fn sixteenths(r: &mut rand::rngs::StdRng, n: usize, parity: i32) -> Vec<f64> {
    use rand::Rng;
    (0..n)
        .map(|_| (2 * r.random_range(-24..24) + parity) as f64 / 16.0)
        .collect()
}

#[test]
fn binary_ops_broadcast_and_differentiate() {
    let shapes: [(&[usize], &[usize]); 5] = [
        (&[5, 7], &[5, 7]),
        (&[2, 3, 5], &[5]),
        (&[4, 1, 3], &[1, 5, 1]),
        (&[3, 1], &[1]),
        (&[6], &[2, 3, 6]),
    ];
    let ops = [
        Binary::Add,
        Binary::Sub,
        Binary::Mul,
        Binary::Div,
        Binary::Pow,
        Binary::Maximum,
        Binary::Minimum,
    ];
    for dtype in dtypes() {
        for op in ops {
            for (sa, sb) in shapes {
                let out = broadcast_shape(sa, sb).unwrap();
                let mut r = rng();
                let na: usize = sa.iter().product();
                let nb: usize = sb.iter().product();
                let (a, b) = match op {
                    Binary::Pow => (
                        uniform_vec(&mut r, na, 0.5, 2.0),
                        uniform_vec(&mut r, nb, -1.5, 1.5),
                    ),
                    Binary::Div => (normal_vec(&mut r, na), uniform_vec(&mut r, nb, 0.5, 2.0)),
                    // odd vs even sixteenths: exact in f16 and never equal, so no ties
                    Binary::Maximum | Binary::Minimum => {
                        (sixteenths(&mut r, na, 1), sixteenths(&mut r, nb, 0))
                    }
                    _ => (normal_vec(&mut r, na), normal_vec(&mut r, nb)),
                };
                let (sa2, sb2, out2) = (sa.to_vec(), sb.to_vec(), out.clone());
                check_op(
                    &format!("{op:?} {sa:?} x {sb:?}"),
                    dtype,
                    &[(sa.to_vec(), a), (sb.to_vec(), b)],
                    move |xs| cpu::binary(op, &xs[0], &sa2, &xs[1], &sb2, &out2),
                    |ts| ts[0].binary(&ts[1], op),
                );
            }
        }
    }
}

#[test]
fn broadcasts_over_many_workgroups_match_cpu_and_differentiate() {
    // Each invocation handles 16 elements 64 apart and follows rows with a cursor: rows
    // shorter and longer than 64, merged dims of rank 1, 2 and 3, scalar broadcast, sizes
    // that are not a multiple of a workgroup's 1024 elements; same shapes take the vec4
    // kernel (4 vec4s 64 apart), here with a partial last vec4.
    let shapes: [(&[usize], &[usize]); 7] = [
        (&[41, 1001], &[41, 1001]),
        (&[3, 5, 7, 50], &[1, 5, 1, 1]),
        (&[2, 37, 30], &[37, 1]),
        (&[1000, 3], &[3]),
        (&[70, 130], &[70, 1]),
        (&[4100], &[1]),
        (&[3, 1, 700], &[1, 4, 1]),
    ];
    for dtype in dtypes() {
        for op in [Binary::Add, Binary::Mul] {
            for (sa, sb) in shapes {
                let out = broadcast_shape(sa, sb).unwrap();
                let mut r = rng();
                let a = normal_vec(&mut r, sa.iter().product());
                let b = normal_vec(&mut r, sb.iter().product());
                let (sa2, sb2) = (sa.to_vec(), sb.to_vec());
                check_op(
                    &format!("{op:?} {sa:?} x {sb:?}"),
                    dtype,
                    &[(sa.to_vec(), a), (sb.to_vec(), b)],
                    move |xs| cpu::binary(op, &xs[0], &sa2, &xs[1], &sb2, &out),
                    |ts| ts[0].binary(&ts[1], op),
                );
            }
        }
        let x = sample_input(Unary::Silu, 5000);
        check_op(
            "Silu [5000]",
            dtype,
            &[(vec![5000], x)],
            |xs| cpu::unary(Unary::Silu, &xs[0]),
            |ts| ts[0].silu(),
        );
    }
}

#[test]
fn incompatible_shapes_give_a_clear_error() {
    let a = upload(&[2, 3], &[0.0; 6], wgdiff::DType::F32);
    let b = upload(&[4], &[0.0; 4], wgdiff::DType::F32);
    let msg = a.add(&b).unwrap_err().to_string();
    assert!(
        msg.contains("[2, 3]") && msg.contains("[4]") && msg.contains("broadcast"),
        "{msg}"
    );
}
