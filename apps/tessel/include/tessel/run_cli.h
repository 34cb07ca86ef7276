// The `tessel` command line as a library function.
//
// A program that registers its own models (tessel/compile/model_registry.h)
// and then calls run_cli(argc, argv) is a complete `tessel`: train (with
// meshes, layouts, pipelines, ZeRO, recomputation, checkpoints, resume,
// metrics, dry runs), inspect, plan, bench, launch, report, eval and sample
// all see its models under the names it registered. `tessel`'s own main is
// just this call. Part of the stable API (docs/library.md); link
// Tessel::cli.
#pragma once

namespace tessel {

// Parses argv (argv[0] is the program) and runs one subcommand; returns the
// process exit code. Errors are printed, and under mpirun end every rank.
int run_cli(int argc, char** argv);

}  // namespace tessel
