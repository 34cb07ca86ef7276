#!/usr/bin/env bash
# Times MPI collectives on the GPT benchmark's gradient size (10.8M floats).
# Usage: bench/collectives_bench.sh [build_dir=build] [ranks=2] [floats] [iterations]
set -euo pipefail
build=${1:-build}
ranks=${2:-2}
floats=${3:-10800000}
iterations=${4:-10}
cmake --build "$build" --target tessel_collectives_bench >/dev/null
# One host: shared memory only; yield while waiting (cores may be oversubscribed).
export OMPI_MCA_btl=self,vader OMPI_MCA_mpi_yield_when_idle=1 OMP_NUM_THREADS=1
exec mpirun --allow-run-as-root --oversubscribe -n "$ranks" \
  "$build/tessel_collectives_bench" "$floats" "$iterations"
