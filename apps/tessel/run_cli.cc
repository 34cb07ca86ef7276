// tessel::run_cli: the subcommands on one CLI11 app, and the error handling
// every `tessel` program shares (apps/tessel/include/tessel/run_cli.h).
#include "tessel/run_cli.h"

#include <exception>
#include <new>
#include <vector>

#include "commands.h"
#include "tessel/comm/fatal.h"

namespace tessel {

int run_cli(int argc, char** argv) {
  CLI::App app{"Tessel: train deep-learning models across many devices as if they were one"};
  app.require_subcommand(1);
  const std::vector<cli::Command> commands = {
      cli::add_train_command(app),     cli::add_sample_command(app),  cli::add_eval_command(app),
      cli::add_bench_command(app),     cli::add_inspect_command(app), cli::add_plan_command(app),
      cli::add_calibrate_command(app), cli::add_launch_command(app),  cli::add_report_command(app),
      cli::add_config_command(app),    cli::add_export_command(app),  cli::add_import_command(app),
      cli::add_tokenize_command(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (const cli::Command& command : commands)
      if (command.app->parsed()) return command.run();
  } catch (const std::bad_alloc&) {
    return report_fatal_error(
        "out of memory (std::bad_alloc): the model, batch or data does not fit in this machine's "
        "memory; `tessel train --dry-run` prints the predicted memory per rank",
        1);
  } catch (const std::exception& e) {
    // Under mpirun this aborts every rank (never a return into MPI_Finalize
    // while the others wait in a collective).
    return report_fatal_error(e.what(), 1);
  }
  return 1;
}

}  // namespace tessel
