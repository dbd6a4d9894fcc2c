//! The ResBlock's 3x3 convolution: optionally grouped, and optionally factorised InceptionNet
//! style into a 1x1 conv to a narrower width, the 3x3 conv at that width, a 1x1 conv back out.

use super::Conv2d;
use crate::ops::random::Rng;
use crate::{Error, Gpu, Result, Tensor};
use serde::{Deserialize, Serialize};

/// Channel groups of a convolution, resolved per layer from its channel counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConvGroups {
    /// At most this many groups: the largest count <= it that divides both channel counts
    /// (so a layer with one input or output channel stays dense).
    Fixed(usize),
    /// As many groups as the layer allows: gcd(Cin, Cout) (min(Cin, Cout) for powers of two).
    Max,
}

impl Default for ConvGroups {
    fn default() -> Self {
        ConvGroups::Fixed(1)
    }
}

impl std::str::FromStr for ConvGroups {
    type Err = crate::Error;

    /// `max` or a count of at least 1.
    fn from_str(text: &str) -> crate::Result<ConvGroups> {
        match text {
            "max" => Ok(ConvGroups::Max),
            _ => match text.parse::<usize>() {
                Ok(g) if g >= 1 => Ok(ConvGroups::Fixed(g)),
                _ => Err(crate::Error::Config(format!(
                    "conv groups `{text}`: give a count of at least 1 or max"
                ))),
            },
        }
    }
}

impl ConvGroups {
    /// Groups of a convolution from `cin` to `cout` channels.
    pub fn resolve(self, cin: usize, cout: usize) -> usize {
        let gcd = gcd(cin, cout);
        match self {
            ConvGroups::Fixed(limit) => (1..=limit.min(gcd)).rev().find(|g| gcd % g == 0).unwrap_or(1),
            ConvGroups::Max => gcd.max(1),
        }
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// A 3x3 convolution `cin` -> `cout` (stride 1, padding 1): one conv, or with a bottleneck
/// of width `cout / factor` the chain 1x1 (cin -> width), 3x3 (width -> width),
/// 1x1 (width -> cout), with no norm or activation in between (a low-rank factorisation).
pub struct SpatialConv {
    /// `[conv]`, or `[reduce, conv, restore]` with a bottleneck.
    pub layers: Vec<Conv2d>,
}

impl SpatialConv {
    pub fn new(
        gpu: &Gpu,
        rng: &mut Rng,
        cin: usize,
        cout: usize,
        groups: ConvGroups,
        bottleneck: Option<usize>,
    ) -> Result<SpatialConv> {
        let layers = match bottleneck {
            None => vec![Conv2d::new(
                gpu,
                rng,
                cin,
                cout,
                3,
                1,
                1,
                groups.resolve(cin, cout),
            )?],
            Some(factor) => {
                let width = cout / factor.max(1);
                if factor == 0 || width == 0 || cout % factor != 0 {
                    return Err(Error::Config(format!(
                        "bottleneck factor {factor} must divide the {cout} output channels of a 3x3 conv"
                    )));
                }
                vec![
                    Conv2d::new(gpu, rng, cin, width, 1, 1, 0, 1)?,
                    Conv2d::new(gpu, rng, width, width, 3, 1, 1, groups.resolve(width, width))?,
                    Conv2d::new(gpu, rng, width, cout, 1, 1, 0, 1)?,
                ]
            }
        };
        Ok(SpatialConv { layers })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.forward_plus(x, None, None)
    }

    /// `forward(x)` + `sample_bias` ([N, Cout]) + `residual`, added by the last convolution
    /// as it stores its output (see [`Conv2d::forward_plus`]).
    pub fn forward_plus(
        &self,
        x: &Tensor,
        sample_bias: Option<&Tensor>,
        residual: Option<&Tensor>,
    ) -> Result<Tensor> {
        let (last, first) = self.layers.split_last().expect("a SpatialConv has a layer");
        let h = first.iter().try_fold(x.clone(), |h, conv| conv.forward(&h))?;
        last.forward_plus(&h, sample_bias, residual)
    }

    pub fn params(&self) -> Vec<Tensor> {
        self.layers.iter().flat_map(Conv2d::params).collect()
    }
}
