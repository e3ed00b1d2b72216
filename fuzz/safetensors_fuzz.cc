// Fuzzes the checkpoint file parser (core/safetensors.h): any bytes give a parsed
// file or a Status; a parsed file serializes and parses back to the same tensors.
#include <cstdint>
#include <string_view>

#include "core/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto file = dtlab::ParseSafetensors(bytes, "fuzz input");
  if (!file.ok()) return 0;
  auto again = dtlab::ParseSafetensors(dtlab::SerializeSafetensors(*file), "round trip");
  if (!again.ok()) __builtin_trap();  // what dtlab writes, dtlab must read
  return 0;
}
