//! `Weight`: a `Conv2d` or `Linear` layer's weight, the float parameter plus the packed integer
//! form a compressed checkpoint attaches (`pipeline`'s model loading), which inference runs.

use crate::ops::PackedWeights;
use crate::{DType, Error, Result, Tensor};
use std::sync::{Arc, OnceLock};

/// The weight of a `Conv2d` or `Linear`: the float tensor (the parameter: trained, saved, cast
/// for f16 inputs) and, once [`Weight::attach_packed`] has given it one, its integer form, which
/// the layer runs where [`Weight::packed_for`] says. Clones share both, as tensor handles share
/// their data: the handle a model's layer walk hands out attaches to the layer's own weight.
#[derive(Clone)]
pub struct Weight {
    float: Tensor,
    packed: Arc<OnceLock<PackedWeights>>,
}

impl From<Tensor> for Weight {
    fn from(float: Tensor) -> Weight {
        Weight {
            float,
            packed: Default::default(),
        }
    }
}

impl Weight {
    /// The float tensor (the trainable parameter).
    pub fn float(&self) -> &Tensor {
        &self.float
    }

    /// The integer form attached by [`Weight::attach_packed`] when the layer runs it on `x`:
    /// inference (gradients off) on f32.
    pub fn packed_for(&self, x: &Tensor) -> Option<&PackedWeights> {
        self.packed
            .get()
            .filter(|_| x.dtype() == DType::F32 && !crate::autograd::grad_enabled())
    }

    /// Attaches `packed`, the integer form of this weight, which the layer then runs for
    /// inference; the float values stay (training and f16 use them). Errors when the shapes
    /// differ or a form is already attached.
    pub fn attach_packed(&self, packed: PackedWeights) -> Result<()> {
        if packed.shape() != self.float.shape() {
            return Err(Error::shape(
                "attach_packed",
                format!(
                    "packed weights of shape {:?} for a weight of shape {:?}",
                    packed.shape(),
                    self.float.shape()
                ),
            ));
        }
        self.packed
            .set(packed)
            .map_err(|_| Error::shape("attach_packed", "this weight already has packed weights"))
    }
}
