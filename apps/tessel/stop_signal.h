// SIGINT / SIGTERM during `tessel train`: the first one asks the training
// loop to stop after the current step (it then saves the checkpoint and
// exits non-zero with a clear line); a second one ends the process at once
// (the default action is restored by the first).
#pragma once

namespace tessel::cli {

// Installs the handlers (idempotent).
void install_stop_handlers();
// The signal received since install (0 if none).
int stop_signal();
// "SIGINT", "SIGTERM" or "signal N".
const char* signal_name(int sig);

}  // namespace tessel::cli
