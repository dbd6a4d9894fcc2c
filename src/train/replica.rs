//! One copy of the network on one device of a data-parallel run: its weights, optimiser
//! state and pruning masks, and the rows of every global batch it trains on.

use crate::compress::ParamMask;
use crate::models::{DiffusionNet, ModelConfig};
use crate::optim::Adam;
use crate::{Gpu, Result, Tensor};
use std::ops::Range;

pub(super) struct Replica {
    pub gpu: Gpu,
    pub net: Box<dyn DiffusionNet>,
    pub params: Vec<(String, Tensor)>,
    pub adam: Adam,
    /// Pruned parameters (from a compressed `--init` checkpoint): zeroed again after every step.
    pub masks: Vec<ParamMask>,
    /// The entries of each global batch this replica trains on.
    pub rows: Range<usize>,
}

impl Replica {
    /// The parameters, in order.
    pub fn tensors(&self) -> Vec<Tensor> {
        self.params.iter().map(|(_, t)| t.clone()).collect()
    }

    /// A copy of this replica on `gpu` (the network `model` built there, then this replica's
    /// weights, buffers, Adam moments and step count, and masks read back and uploaded),
    /// training on `rows`.
    pub async fn copy_to(
        &self,
        gpu: &Gpu,
        model: &ModelConfig,
        seed: u64,
        rows: Range<usize>,
    ) -> Result<Replica> {
        let mut net = model.build(gpu, seed)?;
        net.set_training(true);
        let params = net.named_params();
        for ((_, dst), (_, src)) in params.iter().zip(&self.params) {
            dst.copy_from(&to_device(src, gpu).await?)?;
        }
        for ((_, dst), (_, src)) in net.named_buffers().iter().zip(self.net.named_buffers()) {
            dst.copy_from(&to_device(&src, gpu).await?)?;
        }
        let adam = Adam::new(
            params.iter().map(|(_, t)| t.clone()).collect(),
            self.adam.config.clone(),
        )?;
        for i in 0..params.len() {
            let (m, v) = self.adam.moments_f32(i)?;
            adam.set_moments(i, &to_device(&m, gpu).await?, &to_device(&v, gpu).await?)?;
        }
        let mut adam = adam;
        adam.set_steps(self.adam.steps());
        let mut masks = Vec::with_capacity(self.masks.len());
        for m in &self.masks {
            masks.push(ParamMask {
                index: m.index,
                ones: to_device(&m.ones, gpu).await?,
                bits: m.bits.clone(),
            });
        }
        Ok(Replica {
            gpu: gpu.clone(),
            net,
            params,
            adam,
            masks,
            rows,
        })
    }
}

/// `t`'s values in a new tensor on `gpu` (read back, then uploaded: devices share no buffers).
async fn to_device(t: &Tensor, gpu: &Gpu) -> Result<Tensor> {
    Tensor::from_slice(gpu, t.shape(), &t.to_vec_async().await?, t.dtype())
}
