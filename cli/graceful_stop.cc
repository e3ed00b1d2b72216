#include "cli/graceful_stop.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dtlab::cli {
namespace {

static_assert(std::atomic<int>::is_always_lock_free, "the flag is set from a signal handler");
std::atomic<int> requested{0};
const char* note = "";  // written by the handler with write(2); set before it is installed
std::size_t note_length = 0;

void OnStopSignal(int signal) {
  if (requested.load() != 0) {  // the second one: stop at once, as the signal's default does
    struct sigaction fallback {};
    fallback.sa_handler = SIG_DFL;
    sigemptyset(&fallback.sa_mask);
    sigaction(signal, &fallback, nullptr);
    raise(signal);  // delivered when this handler returns (the signal is blocked in it)
    return;
  }
  requested.store(signal);
  const int saved_errno = errno;
  [[maybe_unused]] const ssize_t written = write(STDERR_FILENO, note, note_length);
  errno = saved_errno;
}

}  // namespace

const std::atomic<int>* InstallGracefulStop(bool terminal) {
  note = terminal ? "\r\033[Kdtlab: stopping after the current step (press Ctrl-C again to stop at once)\n"
                  : "dtlab: stopping after the current step (a second signal stops at once)\n";
  note_length = std::strlen(note);
  struct sigaction action {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  for (const int s : {SIGINT, SIGTERM}) sigaddset(&action.sa_mask, s);  // one handler at a time
  for (const int s : {SIGINT, SIGTERM}) sigaction(s, &action, nullptr);
  return &requested;
}

}  // namespace dtlab::cli
