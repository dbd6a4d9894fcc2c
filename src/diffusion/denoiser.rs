//! What samplers call: `Denoiser` (one network time for the whole batch), a `DiffusionNet`
//! adapter with optional class labels, and classifier-free guidance over any two denoisers.

use crate::models::{DeepFeatures, DiffusionNet};
use crate::{DType, Result, Tensor};

/// A network as the samplers see it: the raw output (in the process's parameterisation) for
/// a batch `x` at one network time input `t`, skipping the `skip` deepest levels.
pub trait Denoiser {
    fn predict(&self, x: &Tensor, t: f32, skip: usize) -> Result<Tensor>;
    /// [`Denoiser::predict`] with the deep features captured or reused as `deep` says
    /// ([`DiffusionNet::forward_deep`]); only networks with levels take more than
    /// [`DeepFeatures::None`].
    fn predict_deep(
        &self,
        x: &Tensor,
        t: f32,
        skip: usize,
        deep: DeepFeatures,
    ) -> Result<(Tensor, Option<Tensor>)> {
        match deep {
            DeepFeatures::None => Ok((self.predict(x, t, skip)?, None)),
            _ => Err(crate::Error::Config(
                "deep-feature caching needs one network with levels (a U-Net), not this denoiser".into(),
            )),
        }
    }
    /// Levels that adaptive skipping can drop (N in k(t)); 1 when it cannot skip.
    fn levels(&self) -> usize {
        1
    }
}

/// Any `Fn(x, t, skip)` is a denoiser without skippable levels.
impl<F: Fn(&Tensor, f32, usize) -> Result<Tensor>> Denoiser for F {
    fn predict(&self, x: &Tensor, t: f32, skip: usize) -> Result<Tensor> {
        self(x, t, skip)
    }
}

/// A [`DiffusionNet`] as a denoiser, optionally class-conditional.
///
/// Null-class convention: a network trained with `classes` classes takes the class id
/// `classes` as "no label" (training drops labels to it, e.g. 10% of the time; that dropout
/// is the training loop's job). [`NetDenoiser::guided`] runs the labelled and the null-class
/// batch in one forward pass of 2N examples.
pub struct NetDenoiser<'a> {
    pub net: &'a dyn DiffusionNet,
    /// One class id per example, or `None` for an unconditional network.
    pub labels: Option<Vec<u32>>,
    /// Classifier-free guidance: (scale w, null class id).
    pub guidance: Option<(f32, u32)>,
    /// The dtype the network runs in (f16: the batch is cast to it and the output back to f32).
    pub dtype: DType,
}

impl<'a> NetDenoiser<'a> {
    /// An unconditional network.
    pub fn new(net: &'a dyn DiffusionNet) -> NetDenoiser<'a> {
        NetDenoiser {
            net,
            labels: None,
            guidance: None,
            dtype: DType::F32,
        }
    }

    /// A class-conditional network sampled at `labels` without guidance.
    pub fn conditional(net: &'a dyn DiffusionNet, labels: Vec<u32>) -> NetDenoiser<'a> {
        NetDenoiser {
            net,
            labels: Some(labels),
            guidance: None,
            dtype: DType::F32,
        }
    }

    /// A class-conditional network with classifier-free guidance of scale `w` (0 =
    /// unconditional, 1 = conditional, > 1 = stronger); `classes` is the null class id.
    pub fn guided(net: &'a dyn DiffusionNet, labels: Vec<u32>, w: f32, classes: u32) -> NetDenoiser<'a> {
        NetDenoiser {
            net,
            labels: Some(labels),
            guidance: Some((w, classes)),
            dtype: DType::F32,
        }
    }

    /// The same denoiser with the network run in `dtype`.
    pub fn in_dtype(self, dtype: DType) -> NetDenoiser<'a> {
        NetDenoiser { dtype, ..self }
    }
}

impl Denoiser for NetDenoiser<'_> {
    fn predict(&self, x: &Tensor, t: f32, skip: usize) -> Result<Tensor> {
        Ok(self.predict_deep(x, t, skip, DeepFeatures::None)?.0)
    }

    fn predict_deep(
        &self,
        x: &Tensor,
        t: f32,
        skip: usize,
        deep: DeepFeatures,
    ) -> Result<(Tensor, Option<Tensor>)> {
        let x = &x.to_dtype(self.dtype)?;
        let n = x.shape().first().copied().unwrap_or(1);
        let (out, features) = match (&self.labels, self.guidance) {
            (Some(labels), Some((w, null))) => {
                // the kept features are of the 2N batch, so a guided run reuses them as they are
                let both = Tensor::concat(&[x.clone(), x.clone()], 0)?;
                let mut both_labels = labels.clone();
                both_labels.extend(std::iter::repeat_n(null, n));
                let (out, features) =
                    self.net
                        .forward_deep(&both, &vec![t; 2 * n], Some(&both_labels), skip, deep)?;
                Ok((guide(&out.slice(0, n, n)?, &out.slice(0, 0, n)?, w)?, features))
            }
            (labels, _) => self
                .net
                .forward_deep(x, &vec![t; n], labels.as_deref(), skip, deep),
        }?;
        Ok((out.to_dtype(DType::F32)?, features))
    }

    fn levels(&self) -> usize {
        self.net.levels()
    }
}

/// Classifier-free guidance over two denoisers (conditional and unconditional views of one
/// network, or any pair): out = u + w (c - u). Raw outputs combine linearly in every
/// parameterisation (eps, x0, v, score), so every sampler can use it.
pub struct Guided<C, U> {
    pub conditional: C,
    pub unconditional: U,
    pub scale: f32,
}

impl<C: Denoiser, U: Denoiser> Denoiser for Guided<C, U> {
    fn predict(&self, x: &Tensor, t: f32, skip: usize) -> Result<Tensor> {
        let u = self.unconditional.predict(x, t, skip)?;
        let c = self.conditional.predict(x, t, skip)?;
        guide(&u, &c, self.scale)
    }

    fn levels(&self) -> usize {
        self.conditional.levels().min(self.unconditional.levels())
    }
}

/// u + w (c - u).
pub fn guide(unconditional: &Tensor, conditional: &Tensor, w: f32) -> Result<Tensor> {
    unconditional.add(&conditional.sub(unconditional)?.mul_scalar(w)?)
}
