// tessel: train, sample, evaluate, benchmark and inspect models; report on runs.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

#include "commands.h"
#include "tessel/base/error.h"

int main(int argc, char** argv) {
  CLI::App app{"Tessel: train deep-learning models across many devices as if they were one"};
  app.require_subcommand(1);
  const std::vector<tessel::cli::Command> commands = {
      tessel::cli::add_train_command(app),   tessel::cli::add_sample_command(app),
      tessel::cli::add_eval_command(app),    tessel::cli::add_bench_command(app),
      tessel::cli::add_inspect_command(app), tessel::cli::add_report_command(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (const tessel::cli::Command& command : commands)
      if (command.app->parsed()) return command.run();
  } catch (const std::exception& e) {
    // Under mpirun every rank reports; say which.
    const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
    std::fprintf(stderr, "tessel: %s%s%serror: %s\n", rank ? "[rank " : "", rank ? rank : "",
                 rank ? "] " : "", e.what());
    return 1;
  }
  return 1;
}
