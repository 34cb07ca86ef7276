// Where a run's checkpoints live under its output directory, and which one
// `--resume auto` picks.
//
//   OUT/checkpoint/            the final checkpoint (written at the end)
//   OUT/checkpoints/step-N/    periodic checkpoints (--checkpoint-every), each
//                              complete before it is renamed into place
//   OUT/checkpoints/latest     the name of the newest periodic one ("step-N"),
//                              replaced atomically (temporary file + rename)
//                              after that directory exists
//
// Invariant: at every moment there is a complete checkpoint to resume from
// (once the first has been written): a new step directory appears whole,
// `latest` moves to it only afterwards, and older ones are pruned last, never
// the one `latest` names.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessel {

std::string periodic_checkpoint_dir(const std::string& out, int64_t step);

// After periodic_checkpoint_dir(out, step) is complete: points `latest` at
// it, then removes all but the newest `keep` step directories (and stale
// temporaries of earlier saves).
void publish_periodic_checkpoint(const std::string& out, int64_t step, int keep);

// The newest complete checkpoint under `out`: the one `latest` names (if it
// exists), else the highest complete step directory, else OUT/checkpoint if
// complete; "" if none.
std::string newest_checkpoint(const std::string& out);

// Reads what a resume reads first and throws naming the file at fault: the
// manifest, and the header and size of every tensor file (a truncated or
// damaged file fails here, not halfway through loading).
void check_checkpoint_files(const std::string& dir);

// `--resume` resolved: anything but "auto" is a checkpoint directory. "auto"
// is the newest complete checkpoint under `out` (newest_checkpoint's order:
// `latest`, the step directories, the final one) that passes
// check_checkpoint_files; each damaged one passed over is appended to
// `skipped` ("'DIR': why"). Throws naming `out` if there is no complete
// checkpoint, and each one tried if none validates.
std::string resolve_resume(const std::string& resume, const std::string& out,
                           std::vector<std::string>* skipped = nullptr);

}  // namespace tessel
