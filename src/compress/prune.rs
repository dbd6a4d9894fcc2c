//! Unstructured pruning: masks that zero a fraction of a set of weights, chosen at random or
//! by smallest magnitude (L1), ranked over the whole set at once or tensor by tensor.

use crate::{Error, Result};
use rand::seq::SliceRandom;
use rand::SeedableRng;

/// How the pruned elements are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PruneMethod {
    /// A uniformly random subset.
    Random,
    /// The smallest |w| (PyTorch's l1_unstructured).
    L1,
}

/// Which weights are pruned, and whether they are ranked together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PruneScope {
    /// Every conv and linear weight, ranked together.
    Global,
    /// The layers working at a quarter of the image's side or less (the bottom of the U),
    /// ranked together.
    Middle,
    /// The layers of the U's outer levels (above a quarter of the image's side), ranked together.
    Ends,
    /// Every conv and linear weight, each tensor pruned by the amount on its own.
    Layer,
}

impl std::str::FromStr for PruneMethod {
    type Err = Error;

    fn from_str(name: &str) -> Result<PruneMethod> {
        match name {
            "random" => Ok(PruneMethod::Random),
            "l1" => Ok(PruneMethod::L1),
            _ => Err(Error::Config(format!(
                "unknown pruning method `{name}`; choose random or l1"
            ))),
        }
    }
}

impl std::str::FromStr for PruneScope {
    type Err = Error;

    fn from_str(name: &str) -> Result<PruneScope> {
        match name {
            "global" => Ok(PruneScope::Global),
            "middle" => Ok(PruneScope::Middle),
            "ends" => Ok(PruneScope::Ends),
            "layer" => Ok(PruneScope::Layer),
            _ => Err(Error::Config(format!(
                "unknown pruning scope `{name}`; choose global, middle, ends or layer"
            ))),
        }
    }
}

/// Keep-masks for `weights` that prune round(`amount` x their elements): over all of them
/// at once (`pooled`) or round(`amount` x each tensor's elements) per tensor. Random choices
/// follow `seed`; L1 ties go to the earlier element.
pub fn prune_masks(
    weights: &[&[f32]],
    method: PruneMethod,
    amount: f64,
    pooled: bool,
    seed: u64,
) -> Vec<Vec<bool>> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut rank = |values: &[(usize, usize, f32)]| -> Vec<usize> {
        let mut order: Vec<usize> = (0..values.len()).collect();
        match method {
            PruneMethod::Random => order.shuffle(&mut rng),
            PruneMethod::L1 => order.sort_by(|&a, &b| values[a].2.abs().total_cmp(&values[b].2.abs())),
        }
        let pruned = (amount * values.len() as f64).round() as usize;
        order.truncate(pruned.min(values.len()));
        order
    };
    let mut masks: Vec<Vec<bool>> = weights.iter().map(|w| vec![true; w.len()]).collect();
    let groups: Vec<Vec<usize>> = if pooled {
        vec![(0..weights.len()).collect()]
    } else {
        (0..weights.len()).map(|i| vec![i]).collect()
    };
    for group in groups {
        let values: Vec<(usize, usize, f32)> = group
            .iter()
            .flat_map(|&t| weights[t].iter().enumerate().map(move |(i, &w)| (t, i, w)))
            .collect();
        for v in rank(&values) {
            let (t, i, _) = values[v];
            masks[t][i] = false;
        }
    }
    masks
}
