// A standby job of `tessel launch --standby`: a `tessel train` that has done
// everything a restart would do before its first step (MPI_Init, the
// communicators, the data, the compile, the engine's allocations) and then
// waits, taking no lock and touching no file of the run, until the launcher
// writes its go file.
//
// The go file (written by the launcher atomically: a temporary file, then a
// rename) holds either "go" and on its second line the checkpoint directory
// to resume from (empty: start from step 0, replacing the files the failed
// attempt left in --out), or "quit". Every rank of the
// standby job reads the same file, so all make the same choice. While it
// waits, a rank sleeps (polls every 5 ms) and runs no MPI call. It gives up
// (exit as if told to quit) when the launcher whose pid it was given in
// TESSEL_LAUNCHER_PID has gone, and stops on SIGINT/SIGTERM like a run.
#pragma once

#include <optional>
#include <string>

namespace tessel::cli {

// Blocks until `go_file` exists. Returns the checkpoint to resume from ("":
// none) for "go", nullopt for "quit" (or a launcher that has gone). Throws
// a tessel::Error naming the file if it holds anything else.
std::optional<std::string> wait_for_go(const std::string& go_file);

// The launcher's side: writes `go_file` atomically.
void write_go(const std::string& go_file, const std::string& resume_dir);
void write_quit(const std::string& go_file);

}  // namespace tessel::cli
