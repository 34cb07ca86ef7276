// MCA parameters Tessel sets for Open MPI before MPI starts, where the user
// has not set them (an OMPI_MCA_* variable in the environment wins).
//
// coll_libnbc_iallreduce_algorithm = 3 (reduce-scatter then all-gather,
// Rabenseifner's): the non-blocking all-reduce that overlaps the gradient
// buckets with backward (Communicator::start_all_reduce). Left to choose,
// Open MPI 4.1's libnbc takes a binomial tree (reduce to one rank, then
// broadcast) whenever the reduction is in place, as ours is, or the group has
// fewer than 4 ranks: every byte passes through one rank twice. On 2 ranks
// that made the 43 MB gradient all-reduce take 19.9 ms against 8.1 ms
// blocking; with this setting 7.9 ms (bench/collectives_bench.sh,
// docs/performance.md, "Collectives").
//
// Call before MPI_Init (MpiRuntime::init does); after it, it changes
// nothing. Harmless under another MPI (it only sets environment variables).
#pragma once

namespace tessel {

void set_open_mpi_defaults();

}  // namespace tessel
