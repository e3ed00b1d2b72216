#include "cli/mpi_launch.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "core/checked_number.h"

namespace dtlab::cli {
namespace {

// Shared between supervisor and worker (an anonymous shared page made before fork).
struct SharedProgress {
  std::atomic<std::int64_t> completed_steps{-1};
};
SharedProgress* progress = nullptr;
volatile sig_atomic_t worker_pid = 0;
volatile sig_atomic_t forwarded = 0;  // a signal the supervisor was sent and passed on

int EnvInt(const char* name, int fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  auto parsed = ParseInteger<int>(value, name, 0, std::numeric_limits<int>::max());  // no atoi overflow
  return parsed.ok() ? *parsed : fallback;
}

void Forward(int signal, siginfo_t* info, void*) {
  if (signal != SIGCONT && signal != SIGTSTP) forwarded = signal;
  // A signal from the terminal (Ctrl-C) reached the whole process group, the
  // worker too: passing it on would make one Ctrl-C two, and the second stops
  // the worker at once instead of after its step (cli/graceful_stop.h).
  if (info != nullptr && info->si_code == SI_KERNEL) return;
  if (worker_pid > 0) kill(static_cast<pid_t>(worker_pid), signal);
}

}  // namespace

bool LaunchedByMpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr ||
         std::getenv("PMI_SIZE") != nullptr;
}

int LauncherRank() { return EnvInt("OMPI_COMM_WORLD_RANK", EnvInt("PMIX_RANK", EnvInt("PMI_RANK", 0))); }

int LauncherLocalSize() { return EnvInt("OMPI_COMM_WORLD_LOCAL_SIZE", 1); }

int SuperviseWorker() {
  void* page = mmap(nullptr, sizeof(SharedProgress), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page != MAP_FAILED) progress = new (page) SharedProgress();
  std::fflush(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    std::fprintf(stderr, "dtlab train: rank %d: cannot start its worker process: %s\n", LauncherRank(),
                 std::strerror(errno));
    return 3;
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // the worker never outlives its supervisor
    if (getppid() != parent) _exit(3);
    return -1;
  }
  worker_pid = pid;
  struct sigaction forward {};
  forward.sa_sigaction = Forward;
  forward.sa_flags = SA_SIGINFO;
  sigemptyset(&forward.sa_mask);
  for (const int s : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCONT, SIGTSTP})
    sigaction(s, &forward, nullptr);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return 3;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  const int signal = WTERMSIG(status);
  // Stopped on purpose (mpirun stopping the job, Ctrl-C): the signal's usual status.
  if (forwarded != 0 && signal == forwarded) return 128 + signal;
  const std::int64_t steps = progress != nullptr ? progress->completed_steps.load() : -1;
  const int rank = LauncherRank();
  char after[96];
  if (steps >= 0)
    std::snprintf(after, sizeof after, "after completing step %lld, during step %lld", static_cast<long long>(steps),
                  static_cast<long long>(steps + 1));
  else
    std::snprintf(after, sizeof after, "before its first step");
  std::fprintf(stderr,
               "dtlab train: rank %d (worker %d) died: killed by signal %d (%s) %s; the job stops. Run the same "
               "command again to resume from the latest complete checkpoint.\n",
               rank, rank, signal, strsignal(signal), after);
  std::fflush(stderr);
  return 3;
}

void ReportCompletedSteps(std::int64_t steps) {
  if (progress != nullptr) progress->completed_steps.store(steps);
}

}  // namespace dtlab::cli
