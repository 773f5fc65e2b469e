// Helpers shared by the op library and the executor; not part of either API.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/result.h"
#include "onnx_io/attributes.h"
#include "ops/tensor.h"

namespace dwdeconv::ops::detail {

// An invalid-model error that names the node: "Conv 'c1': <message>".
inline core::Error node_error(const onnx::NodeProto& node, const std::string& message) {
  return core::invalid_model(onnx_io::describe_node(node) + ": " + message);
}

// Row-major strides of dims.
inline std::vector<int64_t> strides_of(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t k = dims.size(); k-- > 1;) s[k - 1] = s[k] * dims[k];
  return s;
}

// Normalizes a possibly negative axis into [0, rank); false when out of range.
inline bool normalize_axis(int64_t& axis, int64_t rank) {
  if (axis < 0) axis += rank;
  return axis >= 0 && axis < rank;
}

}  // namespace dwdeconv::ops::detail
