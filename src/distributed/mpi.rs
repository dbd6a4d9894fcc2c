//! The [`Collective`] of an MPI job (`mpirun -n P wgdiff train --distributed mpi`, feature
//! `mpi`): MPI_Allreduce in place on f32 buckets, rank 0's values broadcast, the job's abort.

use super::Collective;
use crate::{Error, Result};
use mpi::raw::AsRaw;
use mpi::traits::{Communicator, CommunicatorCollectives, Root};
use std::thread::ThreadId;

extern "C" {
    /// `MPI_IN_PLACE` of the MPI library wgdiff links (src/distributed/mpi_in_place.c).
    fn wgdiff_mpi_in_place() -> *mut std::ffi::c_void;
}

/// This process's place in the MPI job (MPI is finalised when it is dropped).
pub struct MpiCollective {
    world: mpi::topology::SimpleCommunicator,
    /// The thread that initialised MPI: the only one that may call it (MPI_THREAD_FUNNELED).
    thread: ThreadId,
    _universe: mpi::environment::Universe,
}

// SAFETY: MPI runs at MPI_THREAD_FUNNELED, where only the initialising thread may call it;
// every method that calls MPI first checks that it runs on that thread (an error otherwise),
// so moving or sharing the handle never lets another thread reach MPI.
unsafe impl Send for MpiCollective {}
unsafe impl Sync for MpiCollective {}

impl MpiCollective {
    /// Initialises MPI (the process must have been started by `mpirun`/`mpiexec`, or be a
    /// one-process job).
    pub fn init() -> Result<MpiCollective> {
        let (universe, _) = mpi::initialize_with_threading(mpi::Threading::Funneled)
            .ok_or_else(|| Error::Distributed("MPI was already initialised in this process".into()))?;
        Ok(MpiCollective {
            world: universe.world(),
            thread: std::thread::current().id(),
            _universe: universe,
        })
    }

    /// The node this rank runs on.
    pub fn host(&self) -> String {
        mpi::environment::processor_name().unwrap_or_else(|_| "an unnamed node".into())
    }

    /// Ends every process of the job with `code` (a failed rank calls this so the others do
    /// not wait for it forever in the next all-reduce).
    pub fn abort(&self, code: i32) -> ! {
        self.world.abort(code)
    }

    fn check_thread(&self) -> Result<()> {
        if std::thread::current().id() == self.thread {
            Ok(())
        } else {
            Err(Error::Distributed(
                "MPI was called from a thread other than the one that initialised it".into(),
            ))
        }
    }
}

impl Collective for MpiCollective {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    fn size(&self) -> usize {
        self.world.size() as usize
    }

    fn all_reduce_sum(&self, values: &mut [f32]) -> Result<()> {
        self.check_thread()?;
        let count = i32::try_from(values.len()).map_err(|_| {
            Error::Distributed(format!(
                "an all-reduce of {} values is too long for MPI",
                values.len()
            ))
        })?;
        // SAFETY: `values` is a live, exclusively borrowed buffer of `count` f32s; MPI_IN_PLACE
        // makes it both send and receive buffer; the communicator is this job's world.
        let code = unsafe {
            mpi::ffi::MPI_Allreduce(
                wgdiff_mpi_in_place(),
                values.as_mut_ptr().cast(),
                count,
                mpi::ffi::RSMPI_FLOAT,
                mpi::ffi::RSMPI_SUM,
                self.world.as_raw(),
            )
        };
        if code != 0 {
            return Err(Error::Distributed(format!(
                "MPI_Allreduce of {count} values failed with MPI error code {code} on rank {}",
                self.rank()
            )));
        }
        Ok(())
    }

    fn broadcast(&self, values: &mut [f32]) -> Result<()> {
        self.check_thread()?;
        self.world.process_at_rank(0).broadcast_into(values);
        Ok(())
    }

    fn barrier(&self) -> Result<()> {
        self.check_thread()?;
        // MPI's own waits poll a core; a non-blocking barrier tested every millisecond sleeps.
        let mut request = self.world.immediate_barrier();
        loop {
            match request.test() {
                Ok(_) => return Ok(()),
                Err(pending) => {
                    request = pending;
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
        }
    }
}
