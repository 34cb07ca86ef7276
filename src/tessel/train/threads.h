// Intra-op (OpenMP) threads per rank when the config does not set 'threads':
// the rank's share of its host's cores, so N ranks launched on one host by
// mpirun do not each start one thread per core.
#pragma once

namespace tessel {

// max(1, cores / local_ranks); local_ranks < 1 counts as 1.
int default_threads(int cores, int local_ranks);

// Ranks of this job on this host: OMPI_COMM_WORLD_LOCAL_SIZE (set by
// mpirun), else 1.
int local_rank_count();

// The thread count apply_threads sets, without setting it: `configured` if
// positive; else OMP_NUM_THREADS's choice if that is set; else
// default_threads(the host's cores, local_rank_count()), at most the cores
// this process may run on. Programs are compiled for it (their per-thread
// scratch, CompileOptions::threads), so a dry run predicts a run's memory
// exactly where it resolves the same count (`threads` set, or the same
// host and mpirun launch).
int resolve_threads(int configured);

// Sets OpenMP's thread count for this process to resolve_threads(configured)
// and returns it.
int apply_threads(int configured);

}  // namespace tessel
