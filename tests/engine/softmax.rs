//! Softmax over the last axis.

use crate::common::*;
use crate::cpu;

#[test]
fn softmax_matches_cpu_and_differentiates() {
    for dtype in dtypes() {
        for shape in [vec![1, 1], vec![4, 7], vec![2, 3, 33], vec![65, 5]] {
            let len = *shape.last().unwrap();
            let x: Vec<f64> = normal_vec(&mut rng(), shape.iter().product())
                .iter()
                .map(|v| 3.0 * v)
                .collect();
            check_op(
                &format!("softmax {shape:?}"),
                dtype,
                &[(shape, x)],
                move |xs| cpu::softmax(&xs[0], len),
                |ts| ts[0].softmax(),
            );
        }
    }
}
