//! The DDPM U-Net's residual block: GroupNorm -> SiLU -> 3x3 conv, + a linear projection of
//! the time embedding, GroupNorm -> SiLU -> 3x3 conv, + the input (1x1 conv when channels change).

use super::{Conv2d, GroupNorm, Linear};
use crate::ops::random::Rng;
use crate::{Gpu, Result, Tensor};

/// A residual block with time-embedding injection.
pub struct ResBlock {
    pub norm1: GroupNorm,
    pub conv1: Conv2d,
    pub time: Linear,
    pub norm2: GroupNorm,
    pub conv2: Conv2d,
    pub skip: Option<Conv2d>,
}

impl ResBlock {
    pub fn new(
        gpu: &Gpu,
        rng: &mut Rng,
        cin: usize,
        cout: usize,
        temb: usize,
        groups: usize,
    ) -> Result<ResBlock> {
        Ok(ResBlock {
            norm1: GroupNorm::new(gpu, groups, cin)?,
            conv1: Conv2d::new(gpu, rng, cin, cout, 3, 1, 1, 1)?,
            time: Linear::new(gpu, rng, temb, cout)?,
            norm2: GroupNorm::new(gpu, groups, cout)?,
            conv2: Conv2d::new(gpu, rng, cout, cout, 3, 1, 1, 1)?,
            skip: (cin != cout)
                .then(|| Conv2d::new(gpu, rng, cin, cout, 1, 1, 0, 1))
                .transpose()?,
        })
    }

    /// `x` [N, Cin, H, W], `temb` [N, temb] -> [N, Cout, H, W].
    pub fn forward(&self, x: &Tensor, temb: &Tensor) -> Result<Tensor> {
        let h = self.conv1.forward(&self.norm1.forward(x)?.silu()?)?;
        let t = self.time.forward(&temb.silu()?)?;
        let h = h.add(&t.reshape(&[t.shape()[0], t.shape()[1], 1, 1])?)?;
        let h = self.conv2.forward(&self.norm2.forward(&h)?.silu()?)?;
        let skip = match &self.skip {
            Some(c) => c.forward(x)?,
            None => x.clone(),
        };
        h.add(&skip)
    }

    pub fn params(&self) -> Vec<Tensor> {
        let mut p = self.norm1.params();
        p.extend(self.conv1.params());
        p.extend([self.time.weight.clone(), self.time.bias.clone()]);
        p.extend(self.norm2.params());
        p.extend(self.conv2.params());
        if let Some(s) = &self.skip {
            p.extend(s.params());
        }
        p
    }
}
