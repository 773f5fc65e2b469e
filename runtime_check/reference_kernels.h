// The reference kernels, one family per file (reference_elementwise.cpp, reference_shape.cpp, reference_conv.cpp,
// reference_norm.cpp, reference_resize.cpp), and the helpers they share. run_reference_node in reference_ops.cpp
// dispatches to them. Internal to runtime_check.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/result.h"
#include "onnx_io/attributes.h"
#include "runtime_check/internal.h"
#include "runtime_check/reference_ops.h"
#include "runtime_check/tensor.h"

namespace dwdeconv::runtime_check::detail {

// Unwrapping attribute getters: an attribute of the wrong type is an invalid model.
inline core::Result<int64_t> attr_int(const onnx::NodeProto& node, const std::string& name, int64_t fallback) {
  return onnx_io::get_int(node, name, fallback);
}

inline float attr_float(const onnx::NodeProto& node, const std::string& name, float fallback) {
  const auto* a = onnx_io::find_attribute(node, name);
  return a != nullptr && a->type() == onnx::AttributeProto::FLOAT ? a->f() : fallback;
}

inline const Tensor* input_or_null(const std::vector<const Tensor*>& inputs, size_t k) {
  return k < inputs.size() ? inputs[k] : nullptr;
}

// Visits every index of `dims` in row-major order with the running multi-index.
template <typename F>
void for_each_index(const std::vector<int64_t>& dims, F&& visit) {
  int64_t total = 1;
  for (int64_t d : dims) total *= d;
  std::vector<int64_t> index(dims.size(), 0);
  for (int64_t k = 0; k < total; ++k) {
    visit(k, index);
    for (size_t a = dims.size(); a-- > 0;) {
      if (++index[a] < dims[a]) break;
      index[a] = 0;
    }
  }
}

// Strides of `dims` seen from a broadcast output of rank `rank` (0 on broadcast axes).
inline std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& dims, size_t rank) {
  std::vector<int64_t> out(rank, 0);
  const auto own = strides_of(dims);
  const size_t offset = rank - dims.size();
  for (size_t a = 0; a < dims.size(); ++a) out[offset + a] = dims[a] == 1 ? 0 : own[a];
  return out;
}

// y = x's data with new dims (same element count).
inline void copy_data(const Tensor& x, Tensor& y, std::vector<int64_t> dims) {
  y.reshape(x.dtype, std::move(dims));
  if (x.is_float()) std::copy(x.f.begin(), x.f.end(), y.f.begin());
  else std::copy(x.i.begin(), x.i.end(), y.i.begin());
}

// ---------------------------------------------------------------- elementwise (reference_elementwise.cpp)

// Relu, LeakyRelu, Sigmoid, Tanh, Identity.
core::Status run_unary(const onnx::NodeProto& node, const Tensor& x, Tensor& y);
core::Status run_clip(const onnx::NodeProto& node, const std::vector<const Tensor*>& in, Tensor& y);
// Add, Sub, Mul, Div with numpy broadcasting.
core::Status run_binary(const onnx::NodeProto& node, const Tensor& a, const Tensor& b, Tensor& y);
core::Status run_cast(const onnx::NodeProto& node, const Tensor& x, Tensor& y);

// ---------------------------------------------------------------- shape and data movement (reference_shape.cpp)

core::Status run_reshape(const onnx::NodeProto& node, const Tensor& x, const Tensor& shape, Tensor& y);
core::Status run_flatten(const onnx::NodeProto& node, const Tensor& x, Tensor& y);
core::Status run_transpose(const onnx::NodeProto& node, const Tensor& x, Tensor& y);
core::Status run_squeeze(const onnx::NodeProto& node, const std::vector<const Tensor*>& in, Tensor& y);
core::Status run_unsqueeze(const onnx::NodeProto& node, const std::vector<const Tensor*>& in, Tensor& y);
core::Status run_shape(const onnx::NodeProto& node, const Tensor& x, Tensor& y);
core::Status run_constant(const onnx::NodeProto& node, Tensor& y);
core::Status run_constant_of_shape(const onnx::NodeProto& node, const Tensor& shape, Tensor& y);
core::Status run_gather(const onnx::NodeProto& node, const Tensor& x, const Tensor& indices, Tensor& y);
core::Status run_slice(const onnx::NodeProto& node, const std::vector<const Tensor*>& in, Tensor& y);
core::Status run_concat(const onnx::NodeProto& node, const std::vector<const Tensor*>& in, Tensor& y);
// ONNX Pad on any rank: constant, reflect or edge. Negative pads crop.
core::Status run_pad(const onnx::NodeProto& node, const std::vector<const Tensor*>& in, Tensor& y);
core::Status run_depth_to_space(const onnx::NodeProto& node, const Tensor& x, Tensor& y);

// ---------------------------------------------------------------- conv, pool, matmul (reference_conv.cpp)

core::Status run_conv(const onnx::NodeProto& node, const std::vector<const Tensor*>& in, Tensor& y, bool transpose);
// MaxPool and AveragePool.
core::Status run_pool(const onnx::NodeProto& node, const Tensor& x, Tensor& y);
core::Status run_global_average_pool(const onnx::NodeProto& node, const Tensor& x, Tensor& y);
core::Status run_matmul(const onnx::NodeProto& node, const Tensor& a_in, const Tensor& b_in, Tensor& y);
core::Status run_gemm(const onnx::NodeProto& node, const std::vector<const Tensor*>& in, Tensor& y);

// ---------------------------------------------------------------- normalization and reduction (reference_norm.cpp)

core::Status run_batch_norm(const onnx::NodeProto& node, const std::vector<const Tensor*>& in, Tensor& y);

// ---------------------------------------------------------------- resize (reference_resize.cpp)

core::Status run_resize(const onnx::NodeProto& node, int64_t opset, const std::vector<const Tensor*>& in, Tensor& y);

}  // namespace dwdeconv::runtime_check::detail
