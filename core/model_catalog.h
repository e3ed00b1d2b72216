// The built-in models as data: Keras model.to_json() files (core/models/*.json),
// embedded in the binary when it is built (core/CMakeLists.txt writes them into a
// generated builtin_model_files.cc), so dtlab finds them from any directory.
// ListModels, IsModelFile and MakeModel (core/model.h) are defined beside them in
// core/model_catalog.cc.
//
// Thread safety: immutable data.
#pragma once

#include <span>
#include <string_view>

namespace dtlab {

/// One embedded model file: its name (the file's, without .json) and its text.
struct EmbeddedModelFile {
  std::string_view name;
  std::string_view json;
};

/// Every core/models/*.json, in file name order (generated).
std::span<const EmbeddedModelFile> EmbeddedModelFiles();

}  // namespace dtlab
