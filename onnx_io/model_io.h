// Loading and saving ModelProto files.
#pragma once

#include <functional>
#include <string>

#include <onnx/onnx_pb.h>

#include "core/result.h"

namespace dwdeconv::onnx_io {

// Parses a model file, streaming from the file (no second copy of its bytes in memory). Errors name the
// file: unreadable, empty, not a ModelProto, no graph.
core::Result<onnx::ModelProto> load_model(const std::string& path);

// Parses a model from bytes; `origin` names the source in errors.
core::Result<onnx::ModelProto> parse_model(const std::string& bytes, const std::string& origin);

// Serializes deterministically (same model, same bytes).
core::Result<std::string> serialize_model(const onnx::ModelProto& model);

// Writes `path` atomically: `fill` writes to a temporary file in the target directory (by its descriptor), then
// fsync and rename. On any failure the temporary file is removed and `path` is untouched, so `path` may be the
// input file. `fill` returns false on error (with errno set) or an Error.
core::Status write_file_atomic(const std::string& path, const std::function<core::Status(int fd)>& fill);

// write_file_atomic for bytes already in memory.
core::Status write_file_atomic(const std::string& path, const std::string& bytes);

// Serializes deterministically straight into `path`, atomically (no in-memory copy of the bytes).
core::Status save_model(const onnx::ModelProto& model, const std::string& path);

// The default-domain ("" or "ai.onnx") opset the model imports; 0 when it imports none.
int64_t default_opset(const onnx::ModelProto& model);

}  // namespace dwdeconv::onnx_io
