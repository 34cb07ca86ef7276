// ComputeScope (bindings.h): the stop signals blocked around Tessel's compute.
#include <pthread.h>

#include "bindings.h"

namespace tessel::python {

ComputeScope::BlockedStopSignals::BlockedStopSignals() {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, &previous);
}

ComputeScope::BlockedStopSignals::~BlockedStopSignals() {
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

}  // namespace tessel::python
