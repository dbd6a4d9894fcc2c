//! What samplers call: `Denoiser` (one network time for the whole batch), a `DiffusionNet`
//! adapter with optional class labels, classifier-free guidance over any two denoisers, and
//! the interval of noise levels guidance applies in.

use super::Process;
use crate::models::{DeepFeatures, DiffusionNet};
use crate::{DType, Error, Result, Tensor};
use serde::{Deserialize, Serialize};

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
    /// The network times (inclusive) at which guidance applies; the conditional output alone
    /// elsewhere, from one forward pass of N examples (None: at every call). See
    /// [`GuidanceInterval`].
    pub guided_times: Option<(f32, f32)>,
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
            guided_times: None,
            dtype: DType::F32,
        }
    }

    /// A class-conditional network sampled at `labels` without guidance.
    pub fn conditional(net: &'a dyn DiffusionNet, labels: Vec<u32>) -> NetDenoiser<'a> {
        NetDenoiser {
            net,
            labels: Some(labels),
            guidance: None,
            guided_times: None,
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
            guided_times: None,
            dtype: DType::F32,
        }
    }

    /// The same denoiser with the network run in `dtype`.
    pub fn in_dtype(self, dtype: DType) -> NetDenoiser<'a> {
        NetDenoiser { dtype, ..self }
    }

    /// The same denoiser guiding only at network times within `times` (inclusive; None: at
    /// every call).
    pub fn guided_at(self, times: Option<(f32, f32)>) -> NetDenoiser<'a> {
        NetDenoiser {
            guided_times: times,
            ..self
        }
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
        let guides_here = self
            .guided_times
            .is_none_or(|(from, to)| (from..=to).contains(&t));
        let (out, features) = match (&self.labels, self.guidance.filter(|_| guides_here)) {
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

/// The noise levels sigma = std / alpha (a VP marginal's noise-to-signal ratio, EDM's sigma)
/// within which classifier-free guidance applies, both ends included; outside it a guided
/// denoiser returns the conditional output alone, at half the network's batch. *Applying
/// Guidance in a Limited Interval Improves Sample and Distribution Quality in Diffusion Models*
/// (Tuomas Kynkäänniemi, Miika Aittala, Tero Karras, Samuli Laine, Timo Aila and Jaakko
/// Lehtinen) found guidance at the highest noise levels to cost diversity and at the lowest to
/// do little; their ImageNet interval, [`GuidanceInterval::PAPER`], took the main job's MLP from
/// MNIST-FID 17.64 to 15.08 at 1,000 samples (docs/training.md, "Guidance in a limited interval").
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct GuidanceInterval {
    /// The lowest noise level guided.
    pub low: f64,
    /// The highest noise level guided ([`f64::MAX`]: up to pure noise).
    pub high: f64,
}

impl GuidanceInterval {
    /// The paper's interval for EDM2 on ImageNet-512, (0.28, 5.42].
    pub const PAPER: GuidanceInterval = GuidanceInterval {
        low: 0.28,
        high: 5.42,
    };
    /// Every noise level: guidance at every call.
    pub const ALL: GuidanceInterval = GuidanceInterval {
        low: 0.0,
        high: f64::MAX,
    };

    /// Errors unless 0 <= low < high, both finite ([`GuidanceInterval::ALL`] passes).
    pub fn check(&self) -> Result<()> {
        if self.low.is_finite() && self.high.is_finite() && 0.0 <= self.low && self.low < self.high {
            Ok(())
        } else {
            Err(Error::Config(format!(
                "the guidance interval {self} must be two noise levels 0 <= low < high (sigma = std / alpha; \
                 the paper's is 0.28,5.42; `all` guides at every step)"
            )))
        }
    }

    /// The network times of `process` (a VP process: timesteps, noisier later) at which
    /// guidance applies: None for [`GuidanceInterval::ALL`] (every call); an error for other
    /// processes, whose models take no labels.
    pub fn network_times(&self, process: &Process) -> Result<Option<(f32, f32)>> {
        self.check()?;
        if *self == Self::ALL {
            return Ok(None);
        }
        let marginals = process.marginals()?;
        let Some(alpha_bars) = marginals.alpha_bars() else {
            return Err(Error::Config(format!(
                "a guidance interval needs a VP process (its noise levels by timestep); this model's is {}",
                process.name()
            )));
        };
        // sigma^2 = (1 - ab) / ab  =>  log ab = -ln(1 + sigma^2)
        let time = |sigma: f64| alpha_bars.timestep_of_log_alpha_bar(-(sigma * sigma).ln_1p()) as f32;
        let noisiest = alpha_bars.last() as f32;
        let high = if self.high == f64::MAX {
            noisiest
        } else {
            time(self.high)
        };
        Ok(Some((time(self.low), high)))
    }
}

impl std::fmt::Display for GuidanceInterval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if *self == Self::ALL {
            write!(f, "all")
        } else {
            write!(f, "{},{}", self.low, self.high)
        }
    }
}

impl std::str::FromStr for GuidanceInterval {
    type Err = Error;

    /// `LOW,HIGH` (noise levels sigma = std / alpha) or `all`.
    fn from_str(text: &str) -> Result<GuidanceInterval> {
        if text.trim() == "all" {
            return Ok(Self::ALL);
        }
        let bad = || {
            Error::Config(format!(
                "guidance interval `{text}`: give two noise levels LOW,HIGH (sigma = std / alpha, e.g. 0.28,5.42) or `all`"
            ))
        };
        let (low, high) = text.split_once(',').ok_or_else(bad)?;
        let parse = |v: &str| v.trim().parse::<f64>().map_err(|_| bad());
        let interval = GuidanceInterval {
            low: parse(low)?,
            high: parse(high)?,
        };
        interval.check()?;
        Ok(interval)
    }
}
