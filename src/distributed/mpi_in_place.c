/* MPI_IN_PLACE for Rust: a macro in every MPI's mpi.h (Open MPI: (void *) 1, MPICH: (void *) -1)
   that bindgen cannot translate, so wgdiff's `mpi` feature reads it from this function. */
#include <mpi.h>

void *wgdiff_mpi_in_place(void) { return MPI_IN_PLACE; }
