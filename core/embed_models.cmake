# Writes the built-in models' JSON files into a C++ source (core/model_catalog.h,
# EmbeddedModelFiles), so the dtlab binary carries them. Run by core/CMakeLists.txt:
#   cmake -DOUTPUT=file.cc -DMODELS="a.json|b.json" -P embed_models.cmake
string(REPLACE "|" ";" paths "${MODELS}")
set(entries "")
foreach(path ${paths})
  get_filename_component(name ${path} NAME_WE)
  file(READ ${path} text)
  string(FIND "${text}" ")dtlab_model\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${path} holds the raw string's end marker")
  endif()
  string(APPEND entries "    {\"${name}\", R\"dtlab_model(${text})dtlab_model\"},\n")
endforeach()
file(WRITE ${OUTPUT}.tmp "// Generated from core/models/*.json by core/embed_models.cmake; do not edit.
#include \"core/model_catalog.h\"

namespace dtlab {

std::span<const EmbeddedModelFile> EmbeddedModelFiles() {
  static constexpr EmbeddedModelFile kFiles[] = {
${entries}  };
  return kFiles;
}

}  // namespace dtlab
")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUTPUT}.tmp ${OUTPUT})
file(REMOVE ${OUTPUT}.tmp)
