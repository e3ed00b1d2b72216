#include "core/safetensors.h"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "core/text.h"

namespace dtlab {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; add byte swapping for this host");

namespace {

using Json = nlohmann::json;

constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;  // 100 MB, as in safetensors
constexpr int kMaxHeaderDepth = 3;
constexpr std::string_view kMetadataKey = "__metadata__";
constexpr std::string_view kDataCrcKey = "dtlab.crc32";
constexpr std::string_view kHeaderCrcKey = "dtlab.header_crc32";

std::uint32_t Crc32(std::string_view bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* data = reinterpret_cast<const Bytef*>(bytes.data());
  std::size_t left = bytes.size();
  while (left > 0) {  // zlib takes uInt lengths: feed large buffers in chunks
    const uInt chunk = static_cast<uInt>(std::min<std::size_t>(left, 1u << 30));
    crc = crc32(crc, data, chunk);
    data += chunk;
    left -= chunk;
  }
  return static_cast<std::uint32_t>(crc);
}

std::string Hex8(std::uint32_t value) {
  char text[9];
  std::snprintf(text, sizeof(text), "%08x", value);
  return text;
}

// Parses exactly 8 hex digits (either case).
bool ParseHex8(const std::string& text, std::uint32_t* value) {
  if (text.size() != 8) return false;
  std::uint32_t result = 0;
  for (char c : text) {
    int digit;
    if (c >= '0' && c <= '9')
      digit = c - '0';
    else if (c >= 'a' && c <= 'f')
      digit = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      digit = c - 'A' + 10;
    else
      return false;
    result = (result << 4) | static_cast<std::uint32_t>(digit);
  }
  *value = result;
  return true;
}

// Whether `text` is well-formed UTF-8 (no overlongs, surrogates or values > U+10FFFF).
bool IsValidUtf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  std::size_t i = 0, n = text.size();
  while (i < n) {
    const unsigned char c = s[i];
    std::size_t extra;
    std::uint32_t code;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if (c >= 0xC2 && c <= 0xDF) {
      extra = 1;
      code = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      extra = 2;
      code = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      extra = 3;
      code = c & 0x07;
    } else
      return false;
    if (i + extra >= n) return false;
    for (std::size_t k = 1; k <= extra; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return false;
      code = (code << 6) | (s[i + k] & 0x3F);
    }
    if ((extra == 2 && code < 0x800) || (extra == 3 && code < 0x10000)) return false;
    if (code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
    i += extra + 1;
  }
  return true;
}

bool DTypeFromName(std::string_view name, DType* dtype) {
  for (DType candidate : {DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kU8}) {
    if (DTypeName(candidate) == name) {
      *dtype = candidate;
      return true;
    }
  }
  return false;
}

std::string DumpCanonical(const Json& json) {
  return json.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

// Element count of `shape` times `element_size`, or false on overflow / negative dims.
bool ByteCount(const Shape& shape, std::size_t element_size, std::uint64_t* bytes) {
  std::uint64_t count = 1;
  for (std::int64_t dim : shape) {
    if (dim < 0) return false;
    if (__builtin_mul_overflow(count, static_cast<std::uint64_t>(dim), &count)) return false;
  }
  return !__builtin_mul_overflow(count, static_cast<std::uint64_t>(element_size), bytes);
}

template <typename T>
TensorEntry MakeEntry(std::string name, DType dtype, std::span<const T> values, Shape shape) {
  TensorEntry entry{std::move(name), dtype, std::move(shape), {}};
  const auto* raw = reinterpret_cast<const std::uint8_t*>(values.data());
  entry.bytes.assign(raw, raw + values.size_bytes());
  return entry;
}

template <typename T>
std::vector<T> CopyElements(const TensorEntry& entry) {
  std::vector<T> values(entry.bytes.size() / sizeof(T));
  if (!values.empty()) std::memcpy(values.data(), entry.bytes.data(), entry.bytes.size());
  return values;
}

}  // namespace

std::size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kF64:
      return 8;
    case DType::kI32:
      return 4;
    case DType::kI64:
      return 8;
    case DType::kU8:
      return 1;
  }
  return 0;
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kF64:
      return "F64";
    case DType::kI32:
      return "I32";
    case DType::kI64:
      return "I64";
    case DType::kU8:
      return "U8";
  }
  return "?";
}

// ---------------------------------------------------------------------------
// SafetensorsFile

Status SafetensorsFile::CheckNewName(const std::string& name) const {
  if (name.empty()) return Status::InvalidArgument("a tensor name must not be empty");
  if (name == kMetadataKey) {
    return Status::InvalidArgument("\"__metadata__\" is reserved and cannot name a tensor");
  }
  if (!IsValidUtf8(name)) {
    return Status::InvalidArgument("tensor name is not valid UTF-8: '" + name + "'");
  }
  if (index_by_name_.count(name) != 0) {
    return Status::InvalidArgument("duplicate tensor name '" + name + "'");
  }
  return Status::Ok();
}

Status SafetensorsFile::AddEntry(TensorEntry entry) {
  DTLAB_RETURN_IF_ERROR(CheckNewName(entry.name));
  std::uint64_t expected_bytes = 0;
  if (!ByteCount(entry.shape, DTypeSize(entry.dtype), &expected_bytes)) {
    return Status::InvalidArgument("tensor '" + entry.name + "': invalid shape " + ShapeToString(entry.shape));
  }
  if (expected_bytes != entry.bytes.size()) {
    return Status::InvalidArgument("tensor '" + entry.name + "': " + std::to_string(entry.bytes.size()) +
                                   " bytes do not match dtype " + std::string(DTypeName(entry.dtype)) + " and shape " +
                                   ShapeToString(entry.shape) + " (" + std::to_string(expected_bytes) + " bytes)");
  }
  index_by_name_.emplace(entry.name, entries_.size());
  entries_.push_back(std::move(entry));
  return Status::Ok();
}

Status SafetensorsFile::Add(std::string name, const Tensor<float>& tensor) {
  return Add(std::move(name), tensor.span(), tensor.shape());
}
Status SafetensorsFile::Add(std::string name, std::span<const float> values, Shape shape) {
  return AddEntry(MakeEntry(std::move(name), DType::kF32, values, std::move(shape)));
}
Status SafetensorsFile::Add(std::string name, std::span<const double> values, Shape shape) {
  return AddEntry(MakeEntry(std::move(name), DType::kF64, values, std::move(shape)));
}
Status SafetensorsFile::Add(std::string name, std::span<const std::int32_t> values, Shape shape) {
  return AddEntry(MakeEntry(std::move(name), DType::kI32, values, std::move(shape)));
}
Status SafetensorsFile::Add(std::string name, std::span<const std::int64_t> values, Shape shape) {
  return AddEntry(MakeEntry(std::move(name), DType::kI64, values, std::move(shape)));
}
Status SafetensorsFile::Add(std::string name, std::span<const std::uint8_t> values, Shape shape) {
  return AddEntry(MakeEntry(std::move(name), DType::kU8, values, std::move(shape)));
}

const TensorEntry* SafetensorsFile::Find(std::string_view name) const {
  auto it = index_by_name_.find(name);
  return it == index_by_name_.end() ? nullptr : &entries_[it->second];
}

StatusOr<const TensorEntry*> SafetensorsFile::FindTyped(std::string_view name, DType dtype) const {
  const TensorEntry* entry = Find(name);
  if (entry == nullptr) {
    return Status::NotFound("no tensor named '" + std::string(name) + "'");
  }
  if (entry->dtype != dtype) {
    return Status::Corruption("tensor '" + std::string(name) + "' has dtype " + std::string(DTypeName(entry->dtype)) +
                              ", expected " + std::string(DTypeName(dtype)));
  }
  return entry;
}

StatusOr<Tensor<float>> SafetensorsFile::GetF32(std::string_view name) const {
  DTLAB_ASSIGN_OR_RETURN(const TensorEntry* entry, FindTyped(name, DType::kF32));
  Tensor<float> tensor(entry->shape);
  if (!entry->bytes.empty()) std::memcpy(tensor.data(), entry->bytes.data(), entry->bytes.size());
  return tensor;
}

StatusOr<std::vector<double>> SafetensorsFile::GetF64(std::string_view name) const {
  DTLAB_ASSIGN_OR_RETURN(const TensorEntry* entry, FindTyped(name, DType::kF64));
  return CopyElements<double>(*entry);
}

StatusOr<std::vector<std::int32_t>> SafetensorsFile::GetI32(std::string_view name) const {
  DTLAB_ASSIGN_OR_RETURN(const TensorEntry* entry, FindTyped(name, DType::kI32));
  return CopyElements<std::int32_t>(*entry);
}

StatusOr<std::vector<std::int64_t>> SafetensorsFile::GetI64(std::string_view name) const {
  DTLAB_ASSIGN_OR_RETURN(const TensorEntry* entry, FindTyped(name, DType::kI64));
  return CopyElements<std::int64_t>(*entry);
}

StatusOr<std::vector<std::uint8_t>> SafetensorsFile::GetU8(std::string_view name) const {
  DTLAB_ASSIGN_OR_RETURN(const TensorEntry* entry, FindTyped(name, DType::kU8));
  return entry->bytes;
}

// ---------------------------------------------------------------------------
// Serialization

std::string SerializeSafetensors(const SafetensorsFile& file) {
  Json header = Json::object();
  std::size_t data_size = 0;
  for (const TensorEntry& entry : file.entries()) data_size += entry.bytes.size();
  std::string data;
  data.reserve(data_size);
  for (const TensorEntry& entry : file.entries()) {
    const std::uint64_t begin = data.size();
    data.append(reinterpret_cast<const char*>(entry.bytes.data()), entry.bytes.size());
    Json description = Json::object();
    description["dtype"] = std::string(DTypeName(entry.dtype));
    description["shape"] = entry.shape;
    description["data_offsets"] = Json::array({begin, static_cast<std::uint64_t>(data.size())});
    header[entry.name] = std::move(description);
  }

  Json metadata = Json::object();
  for (const auto& [key, value] : file.metadata) metadata[key] = value;
  metadata[std::string(kDataCrcKey)] = Hex8(Crc32(data));
  metadata.erase(std::string(kHeaderCrcKey));
  header[std::string(kMetadataKey)] = std::move(metadata);
  // The header checksum covers the canonical header without itself.
  const std::uint32_t header_crc = Crc32(DumpCanonical(header));
  header[std::string(kMetadataKey)][std::string(kHeaderCrcKey)] = Hex8(header_crc);

  std::string header_text = DumpCanonical(header);
  header_text.append((8 - header_text.size() % 8) % 8, ' ');  // 8 + N aligned to 8

  std::string out;
  out.reserve(8 + header_text.size() + data.size());
  std::uint64_t header_length = header_text.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((header_length >> (8 * i)) & 0xFF));
  out += header_text;
  out += data;
  return out;
}

// ---------------------------------------------------------------------------
// Parsing

namespace {

// A tensor's place in the data buffer while validating.
struct Placement {
  std::uint64_t begin;
  std::uint64_t end;
  std::size_t entry_index;
};

// Parses one tensor's description into `entry` (without bytes) and `placement`.
// Returns an error message, empty on success.
std::string ParseTensorDescription(const std::string& name, const Json& description, TensorEntry* entry,
                                   std::uint64_t* begin, std::uint64_t* end) {
  const std::string what = "tensor '" + name + "': ";
  if (!description.is_object()) return what + "description is not a JSON object";
  for (const auto& [key, value] : description.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      return what + "unknown key \"" + Printable(key) +
             "\" (a tensor description holds dtype, shape and "
             "data_offsets only)";
  }
  auto dtype_it = description.find("dtype");
  auto shape_it = description.find("shape");
  auto offsets_it = description.find("data_offsets");
  if (dtype_it == description.end()) return what + "missing \"dtype\"";
  if (shape_it == description.end()) return what + "missing \"shape\"";
  if (offsets_it == description.end()) return what + "missing \"data_offsets\"";

  if (!dtype_it->is_string()) return what + "\"dtype\" is not a string";
  const auto& dtype_name = dtype_it->get_ref<const std::string&>();
  if (!DTypeFromName(dtype_name, &entry->dtype)) {
    return what + "unknown dtype \"" + dtype_name + "\" (dtlab reads F32, F64, I32, I64, U8)";
  }

  if (!shape_it->is_array()) return what + "\"shape\" is not an array";
  entry->shape.clear();
  for (const Json& dim : *shape_it) {
    if (dim.is_number_unsigned()) {
      const auto value = dim.get<std::uint64_t>();
      if (value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        return what + "dimension " + std::to_string(value) + " is too large";
      }
      entry->shape.push_back(static_cast<std::int64_t>(value));
    } else if (dim.is_number_integer()) {
      return what + "negative dimension " + std::to_string(dim.get<std::int64_t>());
    } else {
      return what + "\"shape\" holds a value that is not an integer";
    }
  }

  if (!offsets_it->is_array() || offsets_it->size() != 2 || !(*offsets_it)[0].is_number_unsigned() ||
      !(*offsets_it)[1].is_number_unsigned()) {
    return what + "\"data_offsets\" is not a pair of non-negative integers";
  }
  *begin = (*offsets_it)[0].get<std::uint64_t>();
  *end = (*offsets_it)[1].get<std::uint64_t>();
  if (*begin > *end) {
    return what + "data_offsets [" + std::to_string(*begin) + ", " + std::to_string(*end) + "] end before they begin";
  }
  std::uint64_t expected_bytes = 0;
  if (!ByteCount(entry->shape, DTypeSize(entry->dtype), &expected_bytes)) {
    return what + "shape " + ShapeToString(entry->shape) + " is too large";
  }
  if (*end - *begin != expected_bytes) {
    return what + "data_offsets [" + std::to_string(*begin) + ", " + std::to_string(*end) + "] span " +
           std::to_string(*end - *begin) + " bytes, but dtype " + dtype_name + " and shape " +
           ShapeToString(entry->shape) + " need " + std::to_string(expected_bytes);
  }
  return {};
}

// Verifies the optional checksum `key` in `metadata` against `computed`.
std::string CheckCrc(const std::map<std::string, std::string>& metadata, std::string_view key, std::uint32_t computed,
                     const char* what) {
  auto it = metadata.find(std::string(key));
  if (it == metadata.end()) return {};
  std::uint32_t stored = 0;
  if (!ParseHex8(it->second, &stored)) {
    return "malformed \"" + std::string(key) + "\" metadata \"" + it->second + "\" (expected 8 hex digits)";
  }
  if (stored != computed) {
    return std::string(what) + "checksum mismatch: the file is corrupted (stored crc32 " + it->second + ", computed " +
           Hex8(computed) + ")";
  }
  return {};
}

}  // namespace

StatusOr<SafetensorsFile> ParseSafetensors(std::string_view bytes, const std::string& origin_for_messages) {
  auto corrupt = [&](const std::string& message) { return Status::Corruption(origin_for_messages + ": " + message); };
  if (bytes.size() < 8) {
    return corrupt("file is " + std::to_string(bytes.size()) +
                   " bytes, too short for the 8-byte safetensors header length");
  }
  std::uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i) {
    header_length = (header_length << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  }
  if (header_length > kMaxHeaderBytes) {
    return corrupt("header length " + std::to_string(header_length) +
                   " exceeds the 100 MB limit (not a safetensors file?)");
  }
  if (header_length > bytes.size() - 8) {
    return corrupt("header length " + std::to_string(header_length) + " exceeds the " +
                   std::to_string(bytes.size() - 8) + " bytes after the length field (truncated?)");
  }
  const std::string_view header_text = bytes.substr(8, header_length);
  const std::string_view data = bytes.substr(8 + header_length);

  // A safetensors header nests three levels: the header, a tensor's description,
  // its shape. Deeper text is refused before the parser sees it (its values copy
  // recursively: 100 000 '[' overflowed the stack before the CRC was checked).
  if (const std::string error = JsonNestingError(header_text, kMaxHeaderDepth); !error.empty())
    return corrupt("header " + error +
                   "; a safetensors header is an object of tensor descriptions whose "
                   "shape and data_offsets are flat lists");
  // Parse, rejecting duplicate keys (nlohmann would silently keep the last one).
  std::vector<std::set<std::string>> keys_by_depth;
  std::string duplicate_key;
  auto on_event = [&](int depth, Json::parse_event_t event, Json& parsed) {
    const auto level = static_cast<std::size_t>(depth);
    if (event == Json::parse_event_t::object_start) {
      if (keys_by_depth.size() <= level + 1) keys_by_depth.resize(level + 2);
      keys_by_depth[level + 1].clear();
    } else if (event == Json::parse_event_t::key && parsed.is_string()) {
      if (keys_by_depth.size() <= level) keys_by_depth.resize(level + 1);
      if (!keys_by_depth[level].insert(parsed.get<std::string>()).second && duplicate_key.empty()) {
        duplicate_key = parsed.get<std::string>();
      }
    }
    return true;
  };
  Json header = Json::parse(header_text.begin(), header_text.end(), on_event,
                            /*allow_exceptions=*/false);
  if (header.is_discarded()) return corrupt("header is not valid JSON");
  if (!duplicate_key.empty()) return corrupt("header repeats the key \"" + duplicate_key + "\"");
  if (!header.is_object()) return corrupt("header is not a JSON object");

  SafetensorsFile parsed_file;
  std::vector<TensorEntry> entries;
  std::vector<Placement> placements;
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      if (!value.is_object()) return corrupt("\"__metadata__\" is not a JSON object");
      for (const auto& [meta_key, meta_value] : value.items()) {
        if (!meta_value.is_string()) {
          return corrupt("metadata \"" + meta_key + "\" is not a string");
        }
        parsed_file.metadata[meta_key] = meta_value.get<std::string>();
      }
      continue;
    }
    TensorEntry entry;
    entry.name = key;
    Placement placement{0, 0, entries.size()};
    const std::string error = ParseTensorDescription(key, value, &entry, &placement.begin, &placement.end);
    if (!error.empty()) return corrupt(error);
    if (placement.end > data.size()) {
      return corrupt("tensor '" + key + "': data_offsets end at " + std::to_string(placement.end) + ", beyond the " +
                     std::to_string(data.size()) + "-byte data buffer");
    }
    entries.push_back(std::move(entry));
    placements.push_back(placement);
  }

  // Tensors must tile the data buffer exactly: no overlap, no gap, nothing after.
  std::sort(placements.begin(), placements.end(), [&](const Placement& a, const Placement& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return entries[a.entry_index].name < entries[b.entry_index].name;
  });
  std::uint64_t position = 0;
  const std::string* previous_name = nullptr;
  for (const Placement& placement : placements) {
    const std::string& name = entries[placement.entry_index].name;
    if (placement.begin < position) {
      return corrupt("tensor '" + name + "' overlaps tensor '" + *previous_name + "'");
    }
    if (placement.begin > position) {
      return corrupt("gap of " + std::to_string(placement.begin - position) +
                     " unused bytes in the data buffer before tensor '" + name + "'");
    }
    position = placement.end;
    previous_name = &name;
  }
  if (position != data.size()) {
    return corrupt(std::to_string(data.size() - position) +
                   " unused bytes at the end of the data buffer (truncated header or extra data)");
  }

  // Checksums, when the writer recorded them.
  if (parsed_file.metadata.count(std::string(kHeaderCrcKey)) != 0) {
    Json canonical = header;
    canonical[std::string(kMetadataKey)].erase(std::string(kHeaderCrcKey));
    const std::string error = CheckCrc(parsed_file.metadata, kHeaderCrcKey, Crc32(DumpCanonical(canonical)), "header ");
    if (!error.empty()) return corrupt(error);
  }
  {
    const std::string error = CheckCrc(parsed_file.metadata, kDataCrcKey, Crc32(data), "");
    if (!error.empty()) return corrupt(error);
  }

  for (const Placement& placement : placements) {
    TensorEntry& entry = entries[placement.entry_index];
    const auto* first = reinterpret_cast<const std::uint8_t*>(data.data()) + placement.begin;
    entry.bytes.assign(first, first + (placement.end - placement.begin));
    Status status = parsed_file.AddEntry(std::move(entry));
    if (!status.ok()) return corrupt(status.message());
  }
  return parsed_file;
}

// ---------------------------------------------------------------------------
// Files

StatusOr<SafetensorsFile> ReadSafetensorsFile(const std::string& path) {
  DTLAB_ASSIGN_OR_RETURN(const std::string bytes, ReadRegularFile(path, kMaxCheckpointBytes, "checkpoint"));
  return ParseSafetensors(bytes, path);
}

}  // namespace dtlab
