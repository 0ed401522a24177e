#include "interrupt.h"

#include <signal.h>

#include <csignal>

namespace examples {

namespace {
volatile std::sig_atomic_t g_interrupted = 0;

void on_sigint(int) { g_interrupted = 1; }
}  // namespace

void install_interrupt_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  // SA_RESETHAND: the handler runs once and the default action (terminate) is back for a second Ctrl-C.
  // SA_RESTART: system calls under way (file writes, waits) resume instead of failing with EINTR.
  sa.sa_flags = SA_RESETHAND | SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
}

bool interrupt_requested() { return g_interrupted != 0; }

}  // namespace examples
