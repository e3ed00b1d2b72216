// Fuzzes the checkpoint directory's pointer file (core/checkpoint_manager.h): any
// contents of `checkpoint` give a latest path or a Status, never a crash, and a
// Save afterwards still works (a malformed pointer is reported, not followed).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "core/checkpoint_manager.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string directory = "/tmp/dtlab-pointer-fuzz-" + std::to_string(::getpid());
  std::filesystem::create_directories(directory);
  std::FILE* file = std::fopen((directory + "/checkpoint").c_str(), "wb");
  if (file == nullptr) return 0;
  std::fwrite(data, 1, size, file);
  std::fclose(file);
  dtlab::CheckpointManager manager(directory, 2);
  (void)manager.LatestPath();
  (void)manager.RestoreLatest();
  return 0;
}
