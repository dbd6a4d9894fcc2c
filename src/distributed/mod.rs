//! Data-parallel training: how a global batch is shared out, what the processes of a
//! multi-process run do together ([`Collective`]; MPI with the `mpi` feature), and the
//! bucketed gradient all-reduce over a process's replicas and the processes.

pub mod allreduce;
#[cfg(feature = "mpi")]
pub mod mpi;

pub use allreduce::{backward_and_all_reduce, ReduceStats, ReplicaGradients, BUCKET_BYTES};

use crate::{Error, Result};
use std::ops::Range;

/// What the processes of one multi-process run do together (one process per MPI rank). Every
/// process calls each method in the same order, as MPI collectives require.
pub trait Collective: Send + Sync {
    /// This process's rank, 0..size; rank 0 writes checkpoints, grids and logs.
    fn rank(&self) -> usize;
    /// Number of processes.
    fn size(&self) -> usize;
    /// Sums `values` element-wise over every process, in place: each process ends with the sums.
    fn all_reduce_sum(&self, values: &mut [f32]) -> Result<()>;
    /// Replaces `values` on every process with rank 0's.
    fn broadcast(&self, values: &mut [f32]) -> Result<()>;
    /// Waits until every process has called it, sleeping rather than spinning while it waits:
    /// the other ranks wait here while rank 0 works alone (a checkpoint, a grid, a benchmark's
    /// one-device baseline), leaving it the machine's cores.
    fn barrier(&self) -> Result<()>;
    /// For each flag, whether any process passed it true (stops that all must make at the same
    /// step), in one all-reduce.
    fn any(&self, flags: &[bool]) -> Result<Vec<bool>> {
        let mut votes: Vec<f32> = flags.iter().map(|&f| f32::from(u8::from(f))).collect();
        self.all_reduce_sum(&mut votes)?;
        Ok(votes.iter().map(|&v| v > 0.0).collect())
    }
}

/// The rows of a batch of `batch` that part `part` of `parts` trains on: contiguous, in part
/// order, sizes differing by at most one.
pub fn share(batch: usize, part: usize, parts: usize) -> Range<usize> {
    part * batch / parts..(part + 1) * batch / parts
}

/// The rows of a global batch of `batch` that each of a process's `replicas` devices trains on,
/// when the process is `rank` of `ranks`; an error when some replica would get none.
pub fn replica_rows(batch: usize, rank: usize, ranks: usize, replicas: usize) -> Result<Vec<Range<usize>>> {
    let parts = ranks * replicas;
    if batch < parts {
        return Err(Error::Distributed(format!(
            "a global batch of {batch} cannot give every one of {parts} replicas ({ranks} process(es) x {replicas} \
             device(s)) an image; use --batch {parts} or more, or fewer devices"
        )));
    }
    let mine = share(batch, rank, ranks);
    Ok((0..replicas)
        .map(|d| {
            let rows = share(mine.len(), d, replicas);
            mine.start + rows.start..mine.start + rows.end
        })
        .collect())
}
