#!/usr/bin/env bash
# The main job: install what is missing, build, train a GPT on the fortunes
# text on 4 MPI ranks (data=2 x model=2: data and Megatron tensor
# parallelism), and print a sample. Extra arguments go to `tessel train`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
# One host: shared memory only, yield while waiting (4 ranks share 2 cores).
export OMPI_MCA_btl=self,vader OMPI_MCA_mpi_yield_when_idle=1
mpirun --allow-run-as-root --oversubscribe -n 4 \
  build/tessel train --config examples/gpt-fortunes.json --mesh data=2,model=2 --threads 1 \
  --out runs/gpt-fortunes --overwrite --comm-stats "$@"
