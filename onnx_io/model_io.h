// Loading and saving ModelProto files.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/result.h"

namespace dwdeconv::onnx_io {

// A model read from disk, with the names of the tensors whose data lived in external files (now inline).
struct LoadedModel {
  onnx::ModelProto model;
  std::set<std::string> external_tensors;
};

// Parses a model file, streaming from the file (no second copy of its bytes in memory), and reads its external
// data (see external_data.h). Errors name the file: unreadable, empty, not a ModelProto, no graph, bad external
// data.
core::Result<LoadedModel> load_model_with_external_data(const std::string& path);

// load_model_with_external_data for callers that do not write the model back.
core::Result<onnx::ModelProto> load_model(const std::string& path);

// Parses a model from bytes; `origin` names the source in errors.
core::Result<onnx::ModelProto> parse_model(const std::string& bytes, const std::string& origin);

// Serializes deterministically (same model, same bytes).
core::Result<std::string> serialize_model(const onnx::ModelProto& model);

// Writes `path` atomically: `fill` writes to a temporary file in the target directory (by its descriptor), then
// fsync and rename. On any failure the temporary file is removed and `path` is untouched, so `path` may be the
// input file. `fill` returns false on error (with errno set) or an Error.
core::Status write_file_atomic(const std::string& path, const std::function<core::Status(int fd)>& fill);

// One file of write_files_atomic: its final path and what writes it.
struct PendingFile {
  std::string path;
  std::function<core::Status(int fd)> fill;
};

// Writes several files that belong together: every one goes to a temporary file in its target directory
// first; only when all are written and synced are they renamed, in the order given. On failure no temporary
// file is left behind.
core::Status write_files_atomic(const std::vector<PendingFile>& files);

// Serializes `model` deterministically to an open file descriptor.
core::Status serialize_to_fd(const onnx::ModelProto& model, int fd);

// write_file_atomic for bytes already in memory.
core::Status write_file_atomic(const std::string& path, const std::string& bytes);

// Serializes deterministically straight into `path`, atomically (no in-memory copy of the bytes).
core::Status save_model(const onnx::ModelProto& model, const std::string& path);

// The default-domain ("" or "ai.onnx") opset the model imports; 0 when it imports none.
int64_t default_opset(const onnx::ModelProto& model);

}  // namespace dwdeconv::onnx_io
