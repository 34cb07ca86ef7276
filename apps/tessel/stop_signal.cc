#include "stop_signal.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <mutex>

#include "tessel/base/error.h"

namespace tessel::cli {
namespace {

std::atomic<int> g_stop_signal{0};

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// The receiving thread: records the first signal; on the second, unblocks it
// here and sends it to itself with the default action, which ends the process.
extern "C" void* wait_for_stop_signals(void*) {
  pthread_setname_np(pthread_self(), kStopSignalThreadName);
  const sigset_t set = stop_signals();
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    int none = 0;
    if (g_stop_signal.compare_exchange_strong(none, sig)) continue;
    ::signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
    ::raise(sig);
  }
  return nullptr;
}

}  // namespace

void install_stop_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    const sigset_t set = stop_signals();
    if (int rc = pthread_sigmask(SIG_BLOCK, &set, nullptr); rc != 0)
      TS_THROW("cannot block SIGINT/SIGTERM for the stop-signal thread (error ", rc, ")");
    pthread_t thread;
    if (int rc = pthread_create(&thread, nullptr, wait_for_stop_signals, nullptr); rc != 0)
      TS_THROW("cannot start the stop-signal thread (error ", rc, ")");
    pthread_detach(thread);
  });
}

int stop_signal() { return g_stop_signal.load(); }

const char* signal_name(int sig) {
  if (sig == SIGINT) return "SIGINT";
  if (sig == SIGTERM) return "SIGTERM";
  return "a signal";
}

}  // namespace tessel::cli
