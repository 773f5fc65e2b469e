// What ONNX shape inference knows about a model's tensors.
#pragma once

#include <map>
#include <string>

#include <onnx/onnx_pb.h>

namespace dwdeconv::onnx_io {

// The type of every tensor that shape inference (with data propagation) can tell, from all graphs: inputs,
// outputs, value_info and initializers. Inference errors are ignored: what was inferred before them is kept.
std::map<std::string, onnx::TypeProto> infer_types(const onnx::ModelProto& model);

// The tensor type's dims as numbers when every dim is known; empty otherwise.
std::vector<int64_t> known_dims(const onnx::TypeProto& type);

}  // namespace dwdeconv::onnx_io
