// mixer-trainer: the `tessel` command line with one more model, "mixer".
//
//   mixer-trainer train --config mixer.json [--mesh data=2,model=2 under mpirun] ...
//   mixer-trainer inspect --config mixer.json --mesh data=2,model=2
//   mixer-trainer plan --config mixer.json --ranks 4
// Every subcommand and option of `tessel` is here (tessel::run_cli).
#include <tessel/run_cli.h>

#include "mixer.h"

int main(int argc, char** argv) {
  mixer::register_mixer();
  return tessel::run_cli(argc, argv);
}
