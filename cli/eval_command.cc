// dtlab eval: restore the latest checkpoint and evaluate it on the test set.
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/checkpoint_manager.h"
#include "core/safetensors.h"
#include "sim/training/trainer.h"

namespace dtlab::cli {

namespace po = boost::program_options;

int EvalCommand(const std::vector<std::string>& args) {
  std::string checkpoint_dir, dataset;
  std::int64_t batch = 0;
  int threads = 0;
  po::options_description options("Options");
  options.add_options()("checkpoint-dir", po::value(&checkpoint_dir)->required(),
                        "directory written by 'dtlab train --checkpoint-dir'")(
      "dataset", po::value(&dataset), "fashion-mnist, mnist or a directory (default: the one the run trained on)")(
      "batch", po::value(&batch)->default_value(0), "evaluation batch size (default: the run's batch)")(
      "threads", po::value(&threads)->default_value(0), "worker threads, 0 for all cores")(
      "json", "print one JSON summary on stdout");
  po::variables_map values;
  const int parsed =
      ParseOptions("eval", "--checkpoint-dir DIR [options]",
                   "Restores the latest checkpoint in DIR and reports the test loss and accuracy.", options, args,
                   values, nullptr, nullptr,
                   "  Train with checkpoints, then evaluate the latest one:\n"
                   "    dtlab train --epochs 2 --checkpoint-dir ckpt && dtlab eval --checkpoint-dir ckpt\n");
  if (parsed >= 0) return parsed;
  if (!ApplyThreadCount(threads)) return 2;
  if (batch < 0) return ReportError("eval", Status::InvalidArgument("--batch must be positive"));

  if (dataset.empty()) {
    // The data set the run trained on, from the checkpoint's metadata.
    CheckpointManager manager(checkpoint_dir, 0);
    auto checkpoint = manager.RestoreLatest();
    if (!checkpoint.ok()) return ReportError("eval", checkpoint.status());
    auto it = checkpoint->metadata.find("dtlab.dataset");
    dataset = it == checkpoint->metadata.end() ? "fashion-mnist" : it->second;
  }
  auto data = LoadMnistStyleDataset(dataset);
  if (!data.ok()) return ReportError("eval", data.status());
  auto report = EvaluateCheckpoint(checkpoint_dir, *data, batch);
  if (!report.ok()) return ReportError("eval", report.status());
  if (values.count("json")) {
    PrintJson({{"checkpoint", report->checkpoint},
               {"model", report->model},
               {"step", report->step},
               {"test_loss", report->test_loss},
               {"test_accuracy", report->test_accuracy},
               {"examples", report->examples}});
  } else {
    std::printf("Checkpoint %s (%s, step %lld)\nTest Loss: %.4f, Test Accuracy: %.2f  (%lld examples)\n",
                report->checkpoint.c_str(), report->model.c_str(), static_cast<long long>(report->step),
                report->test_loss, report->test_accuracy * 100.0f, static_cast<long long>(report->examples));
  }
  return 0;
}

}  // namespace dtlab::cli
