// A graceful stop on SIGINT or SIGTERM for dtlab train and dtlab run
// (docs/training.md, "Stopping a run").
//
// The first signal only sets a flag (async-signal-safe) and says, on stderr, that
// the run stops after its current step; the training loop reads the flag after
// every step (TrainConfig::stop_request), saves a checkpoint where one is
// configured, and the command exits 130 (SIGINT) or 143 (SIGTERM). A second signal
// stops at once: the default action, re-raised, so the process ends as the signal
// says. A checkpoint being written then is never half-written, because every
// save is an atomic rename (core/file_io.h).
#pragma once

#include <atomic>

namespace dtlab::cli {

/// Installs the handlers for SIGINT and SIGTERM; `terminal`: stderr is a terminal,
/// so the handler's note first clears the progress line. Returns the flag: 0, or the
/// number of the first signal. Call once, in the process that trains.
const std::atomic<int>* InstallGracefulStop(bool terminal);

/// The exit code of a run stopped by `signal`: 128 + signal (130, 143).
inline int ExitCodeForStop(int signal) { return 128 + signal; }

}  // namespace dtlab::cli
