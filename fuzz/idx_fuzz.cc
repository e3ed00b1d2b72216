// Fuzzes the IDX reader (core/idx.h) with arbitrary file contents, gzip or plain:
// it must return an array or a Status, never crash, hang or over-allocate.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "core/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = "/tmp/dtlab-idx-fuzz-" + std::to_string(::getpid());
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return 0;
  std::fwrite(data, 1, size, file);
  std::fclose(file);
  auto array = dtlab::ReadIdxFile(path);
  if (array.ok()) {
    std::int64_t count = 1;
    for (const auto d : array->dims) count *= d;
    if (count != static_cast<std::int64_t>(array->values.size())) __builtin_trap();  // the documented contract
  }
  return 0;
}
