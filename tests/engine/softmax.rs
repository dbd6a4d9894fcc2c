//! Softmax over the last axis: short rows (one pass) and long rows (chunked passes), against
//! the CPU reference with finite-difference gradients.

use crate::common::*;
use crate::cpu;
use wgdiff::ops::softmax::SINGLE_PASS_MAX_LEN;

/// Checks softmax on `shape` with inputs `spread` times standard normals.
fn check_softmax(shape: &[usize], spread: f64) {
    let len = *shape.last().unwrap();
    for dtype in dtypes() {
        let x: Vec<f64> = normal_vec(&mut rng(), shape.iter().product())
            .iter()
            .map(|v| spread * v)
            .collect();
        check_op(
            &format!("softmax {shape:?}"),
            dtype,
            &[(shape.to_vec(), x)],
            move |xs| cpu::softmax(&xs[0], len),
            |ts| ts[0].softmax(),
        );
    }
}

#[test]
fn softmax_matches_cpu_and_differentiates() {
    for shape in [vec![1, 1], vec![4, 7], vec![2, 3, 33], vec![65, 5]] {
        check_softmax(&shape, 3.0);
    }
}

/// Rows at the one-pass limit (20,000: the old maximum), just past it (chunked, a short last chunk)
/// and well past it. Inputs are unit normals: over 50,000 elements wider logits would leave
/// most probabilities below what f16 holds to the tested precision.
#[test]
fn long_softmax_rows_match_cpu_and_differentiate() {
    let limit = SINGLE_PASS_MAX_LEN;
    for shape in [vec![1, limit], vec![3, limit + 1], vec![2, 50_000]] {
        check_softmax(&shape, 1.0);
    }
}
