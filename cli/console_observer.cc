#include "cli/console_observer.h"

#include <algorithm>
#include <cmath>

#include "cli/mpi_launch.h"
#include "cli/terminal.h"

namespace dtlab::cli {
namespace {

// One line: what a resumed run carried over from its checkpoint and what changed,
// e.g. "Carried over: the weights (8 variables), the adam slots m, v (16 variables)
// and iteration count 30, step 30, epoch 1 after 3840 of 60000 examples; changed:
// replicas 4 -> 3".
std::string DescribeResume(const ResumeReport& r) {
  auto n = [](std::int64_t v) { return std::to_string(v); };
  std::string line = "Carried over: the weights (" + n(r.model_variables) + " variables), ";
  if (r.optimizer_slots.empty()) {
    line += "the optimizer's iteration count " + n(r.optimizer_iterations) + " (it has no slots)";
  } else {
    std::string slots;
    for (const auto& slot : r.optimizer_slots) slots += (slots.empty() ? "" : ", ") + slot;
    line += "the optimizer's slots " + slots + " (" + n(r.optimizer_slot_variables) +
            " variables) and iteration count " + n(r.optimizer_iterations);
  }
  line += ", step " + n(r.step) + ", epoch " + n(r.epoch) + " after " + n(r.position.examples_consumed) + " of " +
          n(r.epoch_examples) + " examples";
  if (r.global_batch != r.checkpoint_global_batch) {
    line += " (batch " + n(r.checkpoint_step_in_epoch) + " at global batch " + n(r.checkpoint_global_batch) +
            ", now batch " + n(r.position.step_in_epoch) + " at " + n(r.global_batch);
    if (r.position.examples_skipped > 0)
      line += "; " + n(r.position.examples_skipped) + " examples of this epoch left out, none repeated";
    line += ")";
  }
  line += "; changed: ";
  if (r.changes.empty()) line += "nothing the checkpoint records";
  for (std::size_t i = 0; i < r.changes.size(); ++i) {
    std::string setting = r.changes[i].setting;
    std::replace(setting.begin(), setting.end(), '_', ' ');
    line += (i ? ", " : "") + setting + " " + r.changes[i].checkpoint + " -> " + r.changes[i].run;
  }
  if (!r.layout_recorded) line += " (exact mode does not record the strategy, replicas or workers)";
  if (r.data_order_changed)
    line += "; the data order changed, so the rest of epoch " + n(r.epoch) +
            " is not what the checkpoint's run would have seen";
  return line;
}

}  // namespace

std::string FormatTimeLeft(double seconds) {
  const auto s = static_cast<long long>(std::llround(std::clamp(seconds, 0.0, 3.6e8)));
  char text[32];
  if (s < 60)
    std::snprintf(text, sizeof text, "%llds", s);
  else if (s < 3600)
    std::snprintf(text, sizeof text, "%lldm%02llds", s / 60, s % 60);
  else
    std::snprintf(text, sizeof text, "%lldh%02lldm", s / 3600, s / 60 % 60);
  return text;
}

void ConsoleObserver::ClearLine() const {
  if (progress_bar_) std::fputs("\r\033[K", stderr);
}

void ConsoleObserver::OnStart(const std::string& summary, std::int64_t resumed_from_step) {
  run_step_ = std::max<std::int64_t>(resumed_from_step, 0);
  std::fputs(summary.c_str(), out_);
  if (resumed_from_step >= 0)
    std::fprintf(out_, "Resuming from the checkpoint at step %lld\n", static_cast<long long>(resumed_from_step));
  std::fflush(out_);
}

void ConsoleObserver::OnResume(const ResumeReport& resume) {
  std::fprintf(out_, "%s\n", DescribeResume(resume).c_str());
  std::fflush(out_);
}

void ConsoleObserver::OnInput(const std::string& description) {
  std::fprintf(out_, "Input: %s\n", description.c_str());
  std::fflush(out_);
}

void ConsoleObserver::OnEpochBegin(std::int64_t epoch, float learning_rate, std::int64_t) {
  epoch_ = epoch;
  epoch_first_step_ = -1;
  epoch_start_ = last_draw_ = Clock::now();
  std::fprintf(out_, "Learning rate for epoch %lld is %g\n", static_cast<long long>(epoch), learning_rate);
  std::fflush(out_);
}

void ConsoleObserver::OnStep(std::int64_t step, std::int64_t steps, float loss, float accuracy) {
  ++run_step_;
  if (epoch_first_step_ < 0) epoch_first_step_ = step - 1;  // a resumed epoch starts part-way
  if (!progress_bar_) return;
  const bool by_steps = last_step_ > 0;
  const std::int64_t done = by_steps ? run_step_ : step, total = by_steps ? last_step_ : steps;
  const auto now = Clock::now();
  if (done != total && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  constexpr int kWidth = 12;  // the whole line is about 75 columns
  const int filled = static_cast<int>(kWidth * std::min(done, total) / std::max<std::int64_t>(total, 1));
  std::string bar(static_cast<std::size_t>(filled), '=');
  if (filled < kWidth) bar += '>';
  bar.resize(kWidth, ' ');
  const double seconds = std::chrono::duration<double>(now - epoch_start_).count();
  const double rate = seconds > 0 ? static_cast<double>(step - epoch_first_step_) / seconds : 0.0;
  char where[48];
  if (by_steps)
    std::snprintf(where, sizeof where, "Step %lld/%lld [%s]", static_cast<long long>(done),
                  static_cast<long long>(total), bar.c_str());
  else
    std::snprintf(where, sizeof where, "Epoch %lld/%lld [%s] %lld/%lld", static_cast<long long>(epoch_),
                  static_cast<long long>(epochs_), bar.c_str(), static_cast<long long>(done),
                  static_cast<long long>(total));
  const std::string place = where + step_unit_;
  std::string speed;
  if (rate > 0) {
    char text[48];
    std::snprintf(text, sizeof text, " %.*f step/s ETA %s", rate < 10 ? 1 : 0, rate,
                  FormatTimeLeft(static_cast<double>(std::max<std::int64_t>(total - done, 0)) / rate).c_str());
    speed = text;
  }
  char line[256];
  std::snprintf(line, sizeof line, "%s loss %.4f acc %.2f%%%s", place.c_str(), loss, accuracy * 100.0f, speed.c_str());
  // Never wider than the terminal, cut at a space: a wrapped line is not redrawn in place.
  std::fprintf(stderr, "\r%s\033[K", FitLine(line, TerminalColumns() - 1).c_str());
  std::fflush(stderr);
}

void ConsoleObserver::OnEvaluating() {
  if (!progress_bar_) return;  // in place of the progress line, which may hold no more
  std::fprintf(stderr, "\rEpoch %lld/%lld: evaluating on the test set...\033[K", static_cast<long long>(epoch_),
               static_cast<long long>(epochs_));
  std::fflush(stderr);
}

void ConsoleObserver::OnEpochEnd(const EpochReport& r) {
  ClearLine();
  std::fprintf(out_, "Epoch %lld, Loss: %.4f, Accuracy: %.2f, Test Loss: %.4f, Test Accuracy: %.2f  (%.1f s)\n",
               static_cast<long long>(r.epoch), r.train_loss, r.train_accuracy * 100.0f, r.test_loss,
               r.test_accuracy * 100.0f, r.seconds);
  if (r.loss_scale > 0)
    std::fprintf(
        out_, "  loss scale %g at the epoch's last step; %lld of its %lld steps skipped (a gradient overflowed)\n",
        static_cast<double>(r.loss_scale), static_cast<long long>(r.skipped_steps), static_cast<long long>(r.steps));
  std::fflush(out_);
}

void ConsoleObserver::OnReferenceFailure(const StepCheck& check) {
  if (reported_failure_) return;
  reported_failure_ = true;
  ClearLine();
  std::fprintf(out_, "Reference check FAILED at step %lld: %s\n", static_cast<long long>(check.step),
               check.explanation.c_str());
  std::fflush(out_);
}

void ConsoleObserver::OnTrainStep(const StepRecord& record) { ReportCompletedSteps(record.step); }

void ConsoleObserver::OnCheckpoint(const std::string& path) {
  ClearLine();
  std::fprintf(out_, "Saved checkpoint %s\n", path.c_str());
  std::fflush(out_);
}

}  // namespace dtlab::cli
