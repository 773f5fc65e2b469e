// Inputs for the executor: seeded random values, .npy and TensorProto .pb files, and `NAME=1x4x256x256` shapes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/result.h"
#include "runtime_check/tensor.h"

namespace dwdeconv::runtime_check {

// One tensor per graph input (initializers excluded), in graph order, with dims from `input_shapes` or else
// the declared dims. Floats are uniform in [-1, 1) from a mt19937_64 seeded with `seed`; integer and bool
// inputs are 0. A symbolic or missing dim without an entry in `input_shapes` is an error naming it.
core::Result<std::vector<NamedTensor>> make_random_inputs(const onnx::ModelProto& model,
                                                          const std::map<std::string, std::vector<int64_t>>& input_shapes, uint64_t seed);

// Checks that each graph input whose dims are known (`input_shapes`, else declared) can be held, with
// checked_element_count; an error names the input and its dims. Inputs with unknown dims are skipped.
core::Status check_input_sizes(const onnx::ModelProto& model, const std::map<std::string, std::vector<int64_t>>& input_shapes);

// Dims of one graph input: `input_shapes` entry, else declared dims (errors as make_random_inputs).
core::Result<std::vector<int64_t>> resolve_input_dims(const onnx::ValueInfoProto& input,
                                                      const std::map<std::string, std::vector<int64_t>>& input_shapes);

// Loads a `.npy` (float32, float16, float64, int64; C order; little-endian) or a serialized TensorProto
// (`.pb`, by extension). The name is the TensorProto's name, or the file's stem for .npy.
core::Result<NamedTensor> load_tensor_file(const std::string& path);

// Parses .npy bytes; `origin` names the source in errors.
core::Result<Tensor> parse_npy(const std::string& bytes, const std::string& origin);

// Parses "NAME=1x4x256x256" into the name and dims.
core::Result<std::pair<std::string, std::vector<int64_t>>> parse_input_shape(const std::string& text);

}  // namespace dwdeconv::runtime_check
