// A standby job of `tessel launch --standby`: a `tessel train` that has done
// everything a restart would do before its first step (MPI_Init, the
// communicators, the data, the compile, the engine's allocations) and then
// waits, taking no lock and touching no file of the run (it writes only its
// readiness marker, below), until the launcher writes its go file.
//
// The go file (written by the launcher atomically: a temporary file, then a
// rename) is exactly "go\n" followed by the checkpoint directory to resume
// from and "\n" (an empty directory: start from step 0, replacing the files
// the failed attempt left in --out), or exactly "quit\n". Anything else (a
// third line, a missing newline, a NUL byte, more than kMaxGoFileBytes) is
// refused with an error naming the file. Every rank of the standby job reads
// the same file, so all make the same choice. While it waits, a rank sleeps
// (polls every 5 ms) and runs no MPI call. It gives up (exit as if told to
// quit) when the launcher whose pid it was given in TESSEL_LAUNCHER_PID has
// gone, and stops on SIGINT/SIGTERM like a run.
//
// Readiness marker: once every rank has finished its start-up (a one-float
// world all-reduce, before the wait; no MPI call after it), rank 0 writes
// `GO.ready` (ready_file(), "ready\n", atomically), so the launcher can say
// how long a standby took to get ready and a test can order a fault after
// it. The launcher removes it with the go file (a standby whose launcher has
// gone leaves it; the next launch's standby removes it before it starts).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace tessel::cli {

// The largest go file a standby reads: "go\n", a path of PATH_MAX, "\n".
inline constexpr std::size_t kMaxGoFileBytes = 4096 + 4;

// The go file's text for "go" (resume from `resume_dir`, "" for none) or, for
// nullopt, "quit". Throws if `resume_dir` holds a newline or a NUL byte.
std::string go_file_text(const std::optional<std::string>& resume_dir);

// Parses a go file's text; the inverse of go_file_text: returns the resume
// directory for "go" and nullopt for "quit". Throws a tessel::Error naming
// `go_file` and what is wrong for any other text.
std::optional<std::string> parse_go_file(const std::string& go_file, std::string_view text);

// Blocks until `go_file` exists, then reads and parses it. Returns nullopt
// also when the launcher has gone. Throws a tessel::Error naming the file if
// it cannot be read or holds anything but a go file's text.
std::optional<std::string> wait_for_go(const std::string& go_file);

// The readiness marker of the standby waiting for `go_file`: go_file + ".ready".
std::string ready_file(const std::string& go_file);
// The standby's side (rank 0): writes ready_file(go_file) atomically.
void write_ready(const std::string& go_file);

// The launcher's side: writes `go_file` atomically.
void write_go(const std::string& go_file, const std::string& resume_dir);
void write_quit(const std::string& go_file);

}  // namespace tessel::cli
