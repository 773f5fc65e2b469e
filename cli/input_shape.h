// --input-shape in the spellings of the neighbouring tools: NAME:1,3,256,256 (onnxsim, onnx2tf),
// NAME:[1,3,256,256] (Polygraphy), NAME=1x3x256x256 (this tool's first form), and a bare shape for a model
// with one input.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
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

// The side file of a model: MODEL.input-shapes beside it (MODEL without its .onnx), as the Action reads it; "" for
// stdin ("-").
std::string input_shapes_file_of(const std::string& model_path);

// A side file's shapes: one --input-shape per line, in any of its spellings; blank lines and lines starting with '#'
// are skipped. nullopt when there is no such file. A usage error naming the file (and the line) for a file that is
// not a regular one, is larger than 64 KiB, or holds a line --input-shape refuses; an I/O error when it cannot be read.
core::Result<std::optional<std::vector<InputShapeArg>>> read_input_shapes_file(const std::string& path);

// The --input-shape list of one model of a run: the command line's, then its side file's for the inputs the command
// line does not give (a bare shape resolved to the model's only input first). `overridden` gets each side-file
// line the command line overrides. A usage error naming the side file when one of its lines fits no input.
core::Result<std::vector<InputShapeArg>> merge_input_shapes(const std::vector<InputShapeArg>& given, const std::vector<InputShapeArg>& side,
                                                            const onnx::ModelProto& model, const std::string& model_path,
                                                            const std::string& side_path, std::vector<std::string>& overridden);

core::Result<std::map<std::string, std::vector<int64_t>>> resolve_input_shapes(const std::vector<InputShapeArg>& args,
                                                                               const onnx::ModelProto& model,
                                                                               const std::string& model_path);

}  // namespace dwdeconv::cli
