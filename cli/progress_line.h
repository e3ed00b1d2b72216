// ProgressLine: "run 2/3 exact: step 4/10" on stderr while a scenario runs (dtlab
// run, dtlab replay), redrawn in place, on a terminal only.
#pragma once

#include <chrono>
#include <cstdio>

#include "scenarios/scenario_runner.h"

namespace dtlab::cli {

class ProgressLine final : public ScenarioObserver {
 public:
  explicit ProgressLine(bool enabled) : enabled_(enabled) {}
  ~ProgressLine() override { Clear(); }
  void OnRunStart(const ScenarioRun& run, std::size_t index, std::size_t count) override {
    index_ = index, count_ = count;
    Draw(run, 0, run.config.max_steps);
  }
  void OnStep(const ScenarioRun& run, std::int64_t step, std::int64_t total) override {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    Draw(run, step, total);
  }
  void Clear() {
    if (enabled_) std::fputs("\r\033[K", stderr), std::fflush(stderr);
  }

 private:
  void Draw(const ScenarioRun& run, std::int64_t step, std::int64_t total) {
    if (!enabled_) return;
    char of_total[32] = "";
    if (total > 0) std::snprintf(of_total, sizeof of_total, "/%lld", static_cast<long long>(total));
    std::fprintf(stderr, "\r\033[Krun %zu/%zu %s: step %lld%s", index_ + 1, count_, run.name.c_str(),
                 static_cast<long long>(step), of_total);
    std::fflush(stderr);
  }
  bool enabled_;
  std::size_t index_ = 0, count_ = 0;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace dtlab::cli
