//! `wgdiff bench train --devices N` (and, under `mpirun`, `--distributed mpi`): training steps
//! on one replica against all replicas, interleaved, with the scaling efficiency and the share
//! of a step the gradient all-reduce takes.

use crate::data::Dataset;
use crate::distributed::Collective;
use crate::median::median;
use crate::train::{TrainConfig, Trainer};
use crate::{Gpu, Result};
use serde::Serialize;
use std::sync::Arc;

/// The timings of one side (one replica, or all).
#[derive(Clone, Debug, Serialize)]
pub struct ScalingRow {
    pub replicas: usize,
    pub median_ms: f64,
    pub img_per_s: f64,
    /// Median all-reduce time per step (None for one replica, which has none).
    pub reduce_ms: Option<f64>,
}

/// One replica against all, measured in one interleaved run on rank 0.
#[derive(Clone, Debug, Serialize)]
pub struct Scaling {
    pub preset: String,
    pub batch: usize,
    pub reps: usize,
    pub one: ScalingRow,
    pub all: ScalingRow,
    /// img/s with all replicas / (replicas x img/s with one).
    pub efficiency: f64,
    /// Median all-reduce time / median step time with all replicas.
    pub reduce_share: f64,
}

/// Times `reps` training steps of `config` (after `warmup`) on `devices[0]` alone and spread
/// over all `devices` and the processes of `collective`, alternating one step of each. Every
/// process must call it; only rank 0 times the one-replica run (the others wait for it in the
/// next all-reduce) and gets the result.
pub async fn run(
    config: TrainConfig,
    data: Arc<Dataset>,
    devices: &[Gpu],
    collective: Option<Arc<dyn Collective>>,
    warmup: usize,
    reps: usize,
) -> Result<Option<Scaling>> {
    let config = TrainConfig {
        steps: warmup + reps + 1,
        max_minutes: 0.0,
        ..config
    };
    let leader = collective.as_ref().is_none_or(|c| c.rank() == 0);
    let mut one = match leader {
        true => Some(Trainer::with_data(
            &devices[0],
            config.clone(),
            data.clone(),
            None,
        )?),
        false => None,
    };
    let mut all = Trainer::with_data(&devices[0], config.clone(), data, None)?;
    all.distribute(&devices[1..], collective).await?;
    let (mut one_ms, mut all_ms, mut reduce_ms) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..warmup + reps {
        if let Some(one) = &mut one {
            let started = web_time::Instant::now();
            one.step().await?;
            one.finish().await?;
            if rep >= warmup {
                one_ms.push(started.elapsed().as_secs_f64() * 1e3);
            }
        }
        // The other ranks sleep through rank 0's one-device step.
        all.barrier()?;
        let started = web_time::Instant::now();
        all.step().await?;
        all.finish().await?;
        if rep >= warmup {
            all_ms.push(started.elapsed().as_secs_f64() * 1e3);
            reduce_ms.push(all.last_reduce().map_or(0.0, |r| r.seconds * 1e3));
        }
    }
    if !leader {
        return Ok(None);
    }
    let row = |replicas: usize, ms: &[f64], reduce: Option<f64>| ScalingRow {
        replicas,
        median_ms: median(ms),
        img_per_s: config.batch as f64 * 1e3 / median(ms),
        reduce_ms: reduce,
    };
    let one = row(1, &one_ms, None);
    let replicas = all.replica_count();
    let all = row(replicas, &all_ms, Some(median(&reduce_ms)));
    Ok(Some(Scaling {
        preset: config.preset,
        batch: config.batch,
        reps,
        efficiency: all.img_per_s / (replicas as f64 * one.img_per_s),
        reduce_share: median(&reduce_ms) / all.median_ms,
        one,
        all,
    }))
}
