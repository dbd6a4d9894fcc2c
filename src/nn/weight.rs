//! `Weight`: a `Conv2d` or `Linear` layer's weight, the float parameter plus the packed integer
//! form a compressed checkpoint attaches (`pipeline`'s model loading), which inference runs;
//! a model loaded for sampling then drops the float values (`Weight::release_float`).

use crate::ops::PackedWeights;
use crate::{DType, Error, Result, Tensor};
use std::sync::{Arc, OnceLock, RwLock};

/// The weight of a `Conv2d` or `Linear`: the float tensor (the parameter: trained, saved, cast
/// for f16 inputs) and, once [`Weight::attach_packed`] has given it one, its integer form, which
/// the layer runs where [`Weight::packed_for`] says. Clones share both, as tensor handles share
/// their data: the handle a model's layer walk hands out attaches to (and releases) the layer's
/// own weight.
#[derive(Clone)]
pub struct Weight {
    /// The float values; after [`Weight::release_float`], an empty placeholder.
    float: Arc<RwLock<Tensor>>,
    packed: Arc<OnceLock<PackedWeights>>,
    shape: Vec<usize>,
}

impl From<Tensor> for Weight {
    fn from(float: Tensor) -> Weight {
        Weight {
            shape: float.shape().to_vec(),
            float: Arc::new(RwLock::new(float)),
            packed: Default::default(),
        }
    }
}

impl Weight {
    /// The float tensor (the trainable parameter); after [`Weight::release_float`] an empty
    /// placeholder of shape [0], as a sampling-only layer has no trainable values.
    pub fn float(&self) -> Tensor {
        self.float.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The float values a layer computes with; an error naming the fix once they were released.
    pub fn values(&self) -> Result<Tensor> {
        let float = self.float();
        if float.shape() != self.shape.as_slice() {
            return Err(Error::shape(
                "weight",
                format!(
                    "this {:?} weight keeps only its packed integer form (the model was loaded for \
                     sampling): run it without gradients on f32 inputs, or train from the checkpoint \
                     with `wgdiff train --init`",
                    self.shape
                ),
            ));
        }
        Ok(float)
    }

    /// The weight's shape (also once the float values are released).
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The integer form attached by [`Weight::attach_packed`] when the layer runs it on `x`:
    /// inference (gradients off) on f32.
    pub fn packed_for(&self, x: &Tensor) -> Option<&PackedWeights> {
        self.packed
            .get()
            .filter(|_| x.dtype() == DType::F32 && !crate::autograd::grad_enabled())
    }

    /// Attaches `packed`, the integer form of this weight, which the layer then runs for
    /// inference; the float values stay (training and f16 use them) until
    /// [`Weight::release_float`]. Errors when the shapes differ or a form is already attached.
    pub fn attach_packed(&self, packed: PackedWeights) -> Result<()> {
        if packed.shape() != self.shape.as_slice() {
            return Err(Error::shape(
                "attach_packed",
                format!(
                    "packed weights of shape {:?} for a weight of shape {:?}",
                    packed.shape(),
                    self.shape
                ),
            ));
        }
        self.packed
            .set(packed)
            .map_err(|_| Error::shape("attach_packed", "this weight already has packed weights"))
    }

    /// Drops the float values of a weight whose packed form is attached, here and in every
    /// clone: a model loaded for sampling keeps only its integers on the device. Errors when
    /// no packed form is attached.
    pub fn release_float(&self) -> Result<()> {
        if self.packed.get().is_none() {
            return Err(Error::shape(
                "release_float",
                "this weight has no packed form to run instead of its float values",
            ));
        }
        let mut float = self.float.write().unwrap_or_else(|e| e.into_inner());
        *float = Tensor::empty(float.gpu(), &[0], float.dtype())?;
        Ok(())
    }

    /// Bytes this weight holds on the device: its float values (until released) and its
    /// packed form.
    pub fn resident_bytes(&self) -> u64 {
        self.float().byte_len() + self.packed.get().map_or(0, PackedWeights::byte_len)
    }
}
