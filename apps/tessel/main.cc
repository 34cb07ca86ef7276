// tessel: train, sample, evaluate, benchmark and inspect models; calibrate the machine, plan runs,
// launch with restarts, report on runs. Everything is in the library function run_cli, so a
// user's program with its own registered models is the same CLI (docs/library.md).
#include "openmp_wait.h"
#include "tessel/run_cli.h"

int main(int argc, char** argv) {
  tessel::cli::exec_with_openmp_wait_policy(argv);
  return tessel::run_cli(argc, argv);
}
