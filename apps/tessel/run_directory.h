// The output directory of one `tessel train` run, prepared and guarded
// before any compute.
//
// On the rank that writes (rank 0; the launcher's rank is read from the
// environment, so this runs before MPI starts): creates --out, takes an
// exclusive lock on OUT/.lock for the lifetime of the object (a second run
// into the same directory fails at once, naming the holder's pid), refuses a
// directory that already holds a run (metrics.jsonl or checkpoint/) unless
// `overwrite` (which removes that run's files first) or `resume` (set by a
// later --resume: the run is continued, so nothing is removed), removes stale
// temporaries of interrupted saves (checkpoint.tmp-*, checkpoint.old-*,
// restoring a checkpoint an interrupted swap left only under .old-*), and
// checks that the --trace file can be created. Other ranks do nothing.
#pragma once

#include <string>

namespace tessel::cli {

struct RunDirectoryOptions {
  std::string out;
  std::string trace;  // "" = none
  bool overwrite = false;
  bool resume = false;
};

class RunDirectory {
 public:
  explicit RunDirectory(const RunDirectoryOptions& options);
  ~RunDirectory();
  RunDirectory(const RunDirectory&) = delete;
  RunDirectory& operator=(const RunDirectory&) = delete;

 private:
  int lock_fd_ = -1;
};

// This process's rank as the MPI launcher reports it (0 without one).
int launcher_rank();

}  // namespace tessel::cli
