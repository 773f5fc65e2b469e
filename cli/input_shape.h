// --input-shape in the spellings of the neighbouring tools: NAME:1,3,256,256 (onnxsim, onnx2tf),
// NAME:[1,3,256,256] (Polygraphy), NAME=1x3x256x256 (this tool's first form), and a bare shape for a model
// with one input.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/result.h"

namespace dwdeconv::cli {

// One parsed --input-shape; `name` is empty for a bare shape, which names the model's only graph input.
struct InputShapeArg {
  std::string text;  // as given, for messages
  std::string name;
  std::vector<int64_t> dims;
};

// Parses one --input-shape. The name ends at the last ':' or '=' (TensorFlow-style names such as "input:0"
// keep their colon); the dims are separated by ',' or 'x', optionally inside [ ]. A usage error names the
// argument and what is wrong (an empty, 0, non-numeric or too large dim; mixed separators).
core::Result<InputShapeArg> parse_input_shape_arg(const std::string& text);

// The shapes by name for `model`: a bare shape becomes its single graph input's (initializers are not inputs
// here). A usage error when a bare shape meets a model with another number of inputs, or names one input twice.
// Right after loading, before any rewrite or run: the usage error of an --input-shape that resolve_input_shapes
// refuses, or whose name is neither a graph input nor the output of a node of the main graph (a typo). Which
// tensors per-node verification can take is decided later, when the rewrite is known.
core::Status check_input_shape_names(const std::vector<InputShapeArg>& args, const onnx::ModelProto& model, const std::string& model_path);

core::Result<std::map<std::string, std::vector<int64_t>>> resolve_input_shapes(const std::vector<InputShapeArg>& args,
                                                                               const onnx::ModelProto& model,
                                                                               const std::string& model_path);

}  // namespace dwdeconv::cli
