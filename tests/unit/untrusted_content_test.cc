// Issue 19: text from files is escaped before a terminal sees it (core/text.h),
// JSON is refused before it nests deep enough to exhaust the stack, and a
// checkpoint's counters are held to what a training run can write
// (core/training_state.h).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/optimizer.h"
#include "core/text.h"
#include "core/training_state.h"

namespace dtlab {
namespace {

TEST(EscapeControl, KeepsPrintableUtf8AsItIs) {
  for (const std::string text :
       {"plain ASCII ~!", "accents: \xc3\xa9\xc3\xa8, CJK: \xe4\xb8\xad, emoji: \xf0\x9f\x98\x80", ""}) {
    EXPECT_EQ(EscapeControl(text), text);
    EXPECT_TRUE(IsTerminalSafe(text));
  }
}

TEST(EscapeControl, EscapesC0DelAndC1) {
  EXPECT_EQ(EscapeControl(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(EscapeControl("\x1b[31mred\x07"), "\\x1b[31mred\\x07");
  EXPECT_EQ(EscapeControl("cr\rdel\x7f"), "cr\\x0ddel\\x7f");
  EXPECT_EQ(EscapeControl("c1 \xc2\x9b"), "c1 \\u009b");  // CSI as a C1 character
  EXPECT_FALSE(IsTerminalSafe("\x1b"));
}

TEST(EscapeControl, LineBreaksOnlyWhenAsked) {
  EXPECT_EQ(EscapeControl("a\nb\tc"), "a\\x0ab\\x09c");
  EXPECT_EQ(EscapeControl("a\nb\tc", /*keep_line_breaks=*/true), "a\nb\tc");
  EXPECT_EQ(EscapeControl("a\r\n", /*keep_line_breaks=*/true), "a\\x0d\n");
}

TEST(EscapeControl, EscapesBidirectionalControlsAndSeparators) {
  EXPECT_EQ(EscapeControl("x\xe2\x80\xaey"), "x\\u202ey");  // RIGHT-TO-LEFT OVERRIDE
  EXPECT_EQ(EscapeControl("\xe2\x81\xa6\xe2\x80\x8f"), "\\u2066\\u200f");
  EXPECT_EQ(EscapeControl("\xe2\x80\xa8\xef\xbb\xbf"), "\\u2028\\ufeff");
}

TEST(EscapeControl, EscapesBytesThatAreNotUtf8) {
  EXPECT_EQ(EscapeControl("ck_\xff"), "ck_\\xff");
  EXPECT_EQ(EscapeControl("\xc0\xaf"), "\\xc0\\xaf");                    // overlong '/'
  EXPECT_EQ(EscapeControl("\xed\xa0\x80"), "\\xed\\xa0\\x80");           // a surrogate
  EXPECT_EQ(EscapeControl("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
  EXPECT_EQ(EscapeControl("cut \xe4\xb8"), "cut \\xe4\\xb8");            // truncated at the end
}

TEST(Printable, CutsAtACharacterBoundary) {
  EXPECT_EQ(Printable("short"), "short");
  EXPECT_EQ(Printable(std::string(70, 'a'), 60), std::string(60, 'a') + "...");
  // 'a' then 30 two-byte characters: a cut at byte 60 would split one.
  std::string text = "a";
  for (int i = 0; i < 30; ++i) text += "\xc3\xa9";
  const std::string shown = Printable(text, 60);
  EXPECT_EQ(shown.substr(0, 59), text.substr(0, 59));
  EXPECT_EQ(shown.substr(59), "...");
  EXPECT_EQ(Printable("\x1b"), "\\x1b");
}

// Replica ids in a message: runs as ranges, and past a dozen ranges a count, so that
// 4096 replicas make one line, not 20,000 characters.
TEST(IdRangesText, RunsAsRangesAndACountPastTheLimit) {
  const std::vector<std::int32_t> some = {0, 1, 2, 5, 7, 8};
  EXPECT_EQ(IdRangesText(some), "0-2, 5, 7, 8");
  EXPECT_EQ(IdRangesText(std::vector<std::int32_t>{}), "");
  EXPECT_EQ(IdRangesText(std::vector<std::int32_t>{3}), "3");
  std::vector<std::int32_t> run(4096);
  std::iota(run.begin(), run.end(), 0);
  EXPECT_EQ(IdRangesText(run), "0-4095");
  std::vector<std::int32_t> even;
  for (std::int32_t k = 0; k < 100; k += 2) even.push_back(k);
  EXPECT_EQ(IdRangesText(even, 3), "0, 2, 4, ... and 47 more (50 in all)");
  EXPECT_EQ(IdRangesText(even, 50), IdRangesText(even, 60));  // exactly the limit: no count
}

TEST(JsonNestingError, CountsBracketsOutsideStrings) {
  EXPECT_EQ(JsonNestingError(R"({"a": {"b": [1, 2]}})", 3), "");
  EXPECT_NE(JsonNestingError(R"({"a": {"b": [[1]]}})", 3), "");
  EXPECT_EQ(JsonNestingError(R"({"a": "[[[[[[{{{{", "b": "\"[[[["})", 1), "");  // brackets in strings
  EXPECT_EQ(JsonNestingError(std::string(100000, '[') + std::string(100000, ']'), 3),
            "nests deeper than 3 levels (at byte 3)");
  EXPECT_EQ(JsonNestingError("]]]]][[[", 3), "");  // unbalanced: the parser's to refuse
}

class RestoredCounters : public ::testing::Test {
 protected:
  void SetUp() override {
    auto made = MakeModel<float>("linear", {28, 28, 1}, 10);
    ASSERT_TRUE(made.ok());
    model_ = std::move(*made);
    state_ = Fresh();
    state_.step = 5;
    state_.epoch = 1;
    state_.step_in_epoch = 2;
    state_.train_loss_total = 4.5f;
    state_.train_batches = 2.0f;
  }
  TrainingState Fresh() const {
    TrainingState state;
    auto optimizer = MakeOptimizer("adam", {});
    EXPECT_TRUE(optimizer.ok());
    state.optimizer = std::move(*optimizer);
    state.params = model_->InitialParameters(1);
    state.optimizer->Build(state.params);
    return state;
  }
  // Restores the checkpoint of state_ after `lie` changed it.
  template <typename Lie>
  Status RestoreAfter(Lie lie) {
    SafetensorsFile checkpoint = MakeCheckpoint(*model_, state_, {});
    lie(checkpoint);
    TrainingState restored = Fresh();
    return RestoreCheckpoint(checkpoint, *model_, restored);
  }
  static void SetI64(SafetensorsFile& file, const std::string& name, std::int64_t value) {
    SafetensorsFile copy;
    copy.metadata = file.metadata;
    for (const auto& entry : file.entries()) {
      if (entry.name == name)
        ASSERT_TRUE(copy.Add(name, std::span<const std::int64_t>(&value, 1), {}).ok());
      else
        ASSERT_TRUE(copy.AddEntry(entry).ok());
    }
    file = std::move(copy);
  }
  static void SetF32(SafetensorsFile& file, const std::string& name, float value) {
    SafetensorsFile copy;
    copy.metadata = file.metadata;
    for (const auto& entry : file.entries()) {
      if (entry.name == name)
        ASSERT_TRUE(copy.Add(name, std::span<const float>(&value, 1), {}).ok());
      else
        ASSERT_TRUE(copy.AddEntry(entry).ok());
    }
    file = std::move(copy);
  }
  std::unique_ptr<Sequential<float>> model_;
  TrainingState state_;
};

TEST_F(RestoredCounters, AnHonestCheckpointRestores) {
  EXPECT_TRUE(RestoreAfter([](SafetensorsFile&) {}).ok());
}

TEST_F(RestoredCounters, IntegerCountersOutOfRangeAreCorruption) {
  const struct {
    const char* name;
    std::int64_t value;
  } lies[] = {{"optimizer/iterations", -100},
              {"optimizer/iterations", kMaxRestoredSteps + 1},
              {"progress/step", -1},
              {"progress/step", std::numeric_limits<std::int64_t>::max()},
              {"progress/step_in_epoch", -1},
              {"progress/epoch", -1},
              {"progress/epoch", kMaxRestoredEpochs + 1},
              {"progress/epoch", 6}};  // 6 epochs in 5 steps
  for (const auto& lie : lies) {
    const Status status = RestoreAfter([&](SafetensorsFile& f) { SetI64(f, lie.name, lie.value); });
    EXPECT_EQ(status.code(), Status::Code::kCorruption) << lie.name << " = " << lie.value;
    EXPECT_NE(status.message().find(lie.name), std::string::npos) << status.message();
  }
}

TEST_F(RestoredCounters, RunningMetricsMustBeFiniteSums) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const struct {
    const char* name;
    float value;
  } lies[] = {{"metrics/train_batches", nan},         {"metrics/train_batches", 1.5f},
              {"metrics/train_batches", -1.0f},       {"metrics/train_batches", inf},
              {"metrics/train_loss_total", inf},      {"metrics/train_loss_total", -2.0f},
              {"metrics/train_loss_total", nan},      {"metrics/train_accuracy_total", -1.0f},
              {"metrics/train_accuracy_total", 1e9f}, {"metrics/train_accuracy_count", nan}};
  for (const auto& lie : lies) {
    const Status status = RestoreAfter([&](SafetensorsFile& f) { SetF32(f, lie.name, lie.value); });
    EXPECT_EQ(status.code(), Status::Code::kCorruption) << lie.name << " = " << lie.value;
  }
  // A loss without batches to average it over.
  const Status status = RestoreAfter([&](SafetensorsFile& f) { SetF32(f, "metrics/train_batches", 0.0f); });
  EXPECT_EQ(status.code(), Status::Code::kCorruption);
}

}  // namespace
}  // namespace dtlab
