// Loading and saving ModelProto files.
#pragma once

#include <string>

#include <onnx/onnx_pb.h>

#include "core/result.h"

namespace dwdeconv::onnx_io {

// Parses a model file. Errors name the file: unreadable, empty, not a ModelProto, no graph.
core::Result<onnx::ModelProto> load_model(const std::string& path);

// Parses a model from bytes; `origin` names the source in errors.
core::Result<onnx::ModelProto> parse_model(const std::string& bytes, const std::string& origin);

// Serializes deterministically (same model, same bytes).
core::Result<std::string> serialize_model(const onnx::ModelProto& model);

// Writes `bytes` to `path` atomically: a temporary file in the target directory, fsync, then rename. On any
// failure the temporary file is removed and `path` is untouched, so `path` may be the input file.
core::Status write_file_atomic(const std::string& path, const std::string& bytes);

// The default-domain ("" or "ai.onnx") opset the model imports; 0 when it imports none.
int64_t default_opset(const onnx::ModelProto& model);

}  // namespace dwdeconv::onnx_io
