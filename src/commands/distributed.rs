//! `--devices` and `--distributed mpi` of `wgdiff train` and `wgdiff bench train`: the MPI job
//! this process belongs to (feature `mpi`), and how a failed rank stops the whole job.

use anyhow::Result;
use std::sync::Arc;
use wgdiff::distributed::Collective;

/// How the processes of a multi-process run talk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Distributed {
    /// MPI: start the processes with `mpirun -n P` (a build with `--features mpi`)
    Mpi,
}

/// The job this process belongs to: itself alone, or an MPI job.
pub struct Job {
    #[cfg(feature = "mpi")]
    mpi: Option<Arc<wgdiff::distributed::mpi::MpiCollective>>,
}

impl Job {
    /// Joins the job `distributed` names (None: this process alone).
    pub fn join(distributed: Option<Distributed>) -> Result<Job> {
        match distributed {
            None => Ok(Job {
                #[cfg(feature = "mpi")]
                mpi: None,
            }),
            #[cfg(feature = "mpi")]
            Some(Distributed::Mpi) => Ok(Job {
                mpi: Some(Arc::new(wgdiff::distributed::mpi::MpiCollective::init()?)),
            }),
            #[cfg(not(feature = "mpi"))]
            Some(Distributed::Mpi) => anyhow::bail!(
                "--distributed mpi needs a wgdiff built with MPI: install an MPI library (Debian: \
                 `apt-get install libopenmpi-dev openmpi-bin libclang-dev`), then \
                 `cargo build --release --features mpi` and start it with `mpirun -n 2 target/release/wgdiff train \
                 --distributed mpi ...`"
            ),
        }
    }

    /// What the trainer all-reduces through (None when this process trains alone).
    pub fn collective(&self) -> Option<Arc<dyn Collective>> {
        #[cfg(feature = "mpi")]
        if let Some(mpi) = &self.mpi {
            return Some(mpi.clone() as Arc<dyn Collective>);
        }
        None
    }

    /// (rank, number of processes).
    pub fn place(&self) -> (usize, usize) {
        self.collective().map_or((0, 1), |c| (c.rank(), c.size()))
    }

    /// "rank R of P on HOST (pid N)" in a multi-process job; None alone.
    pub fn describe(&self) -> Option<String> {
        #[cfg(feature = "mpi")]
        if let Some(mpi) = &self.mpi {
            return Some(format!(
                "rank {} of {} on {} (pid {})",
                mpi.rank(),
                mpi.size(),
                mpi.host(),
                std::process::id()
            ));
        }
        None
    }

    /// `result`, except that in a multi-process job an error is printed with this rank's
    /// name and ends every process of the job (the others would otherwise wait for this one
    /// in their next all-reduce forever).
    pub fn finish(&self, result: Result<()>) -> Result<()> {
        #[cfg(feature = "mpi")]
        if let (Err(e), Some(mpi)) = (&result, &self.mpi) {
            if e.downcast_ref::<super::Interrupted>().is_none() && mpi.size() > 1 {
                eprint_line(&format!(
                    "error: {} failed, stopping the job: {e:#}",
                    self.describe().unwrap_or_default()
                ));
                mpi.abort(1);
            }
        }
        result
    }
}

/// Writes `line` and a newline to stderr in one write: mpirun merges its ranks' stderr, and
/// `eprintln!` writes a formatted line in pieces that another rank's output could split.
pub fn eprint_line(line: &str) {
    use std::io::Write;
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}
