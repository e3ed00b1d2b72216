// Fuzzes the checkpoint file parser (core/safetensors.h): any bytes give a parsed
// file or a Status; a parsed file serializes and parses back to the same tensors.
// Each input is tried twice: as a whole file, and as the JSON header of a file
// whose length field is right, so that the mutations reach the header parser
// (deep nesting, huge numbers, unknown keys) instead of failing the length check.
#include <cstdint>
#include <string>
#include <string_view>

#include "core/safetensors.h"

namespace {

void ParseAndRoundTrip(std::string_view bytes) {
  auto file = dtlab::ParseSafetensors(bytes, "fuzz input");
  if (!file.ok()) return;
  auto again = dtlab::ParseSafetensors(dtlab::SerializeSafetensors(*file), "round trip");
  if (!again.ok()) __builtin_trap();  // what dtlab writes, dtlab must read
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  ParseAndRoundTrip(bytes);
  std::string as_header(8, '\0');
  for (int i = 0; i < 8; ++i) as_header[static_cast<std::size_t>(i)] = static_cast<char>((size >> (8 * i)) & 0xffu);
  as_header.append(bytes);
  ParseAndRoundTrip(as_header);
  return 0;
}
