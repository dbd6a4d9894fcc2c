//! Dropout from existing ops: a Philox uniform mask compared with the drop rate, the kept
//! values scaled by 1 / (1 - p), so the expectation is unchanged (training mode only).

use crate::ops::random::Rng;
use crate::ops::Binary;
use crate::{Error, Result, Tensor};

/// Zeroes each element of `x` with probability `p` and scales the rest by 1 / (1 - p);
/// differentiable in `x` (the mask is a constant).
pub fn dropout(x: &Tensor, p: f32, rng: &mut Rng) -> Result<Tensor> {
    if !(0.0..1.0).contains(&p) {
        return Err(Error::shape(
            "dropout",
            format!("drop probability {p} must be in [0, 1)"),
        ));
    }
    if p == 0.0 {
        return Ok(x.clone());
    }
    let gpu = x.gpu();
    let u = rng.uniform(gpu, x.shape(), 0.0, 1.0, x.dtype())?;
    let threshold = Tensor::full(gpu, &[1], p, x.dtype())?;
    // max(u, p) == u exactly where u >= p: 1 keeps the element, 0 drops it.
    let keep = u.maximum(&threshold)?.binary(&u, Binary::Equal)?;
    x.mul(&keep.mul_scalar(1.0 / (1.0 - p))?)
}
