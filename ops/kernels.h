// The reference kernels, one family per file (elementwise.cpp, shape.cpp, conv.cpp, norm.cpp, resize.cpp), and the
// helpers they share. run_reference_node in dispatch.cpp dispatches to them. Internal to the op library and the
// executor built on it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/result.h"
#include "onnx_io/attributes.h"
#include "onnx_io/tensor.h"
#include "ops/internal.h"
#include "ops/ops.h"
#include "ops/tensor.h"

namespace dwdeconv::ops::detail {

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

// normalize_axis, or an error naming the node and the axis as given ("axis -3 is out of range for a rank-2 input").
inline core::Status resolve_axis(const onnx::NodeProto& node, int64_t& axis, int64_t rank) {
  const int64_t given = axis;
  if (normalize_axis(axis, rank)) return core::Ok{};
  return node_error(node, "axis " + std::to_string(given) + " is out of range for a rank-" + std::to_string(rank) +
                              " input");
}

// The most elements a reference kernel creates from a shape or repeats input (8 GiB of float): a hostile shape
// gets an error naming the node instead of an allocation failure.
constexpr int64_t kMaxReferenceElements = int64_t{1} << 31;

// Errors naming the node when `dims` (an output shape computed from input values) has a negative dimension, an
// element count that overflows int64 (onnx_io's one check for both), or more than kMaxReferenceElements elements.
inline core::Status check_element_count(const onnx::NodeProto& node, const std::vector<int64_t>& dims) {
  const auto count = onnx_io::element_count(dims, "output shape " + format_dims(dims));
  if (!count) return node_error(node, count.error().message);
  if (*count > kMaxReferenceElements) {
    return node_error(node, "output shape " + format_dims(dims) + " has " + std::to_string(*count) +
                                " elements, more than the " + std::to_string(kMaxReferenceElements) +
                                " a reference kernel allocates");
  }
  return core::Ok{};
}

// A double truncated toward zero into int64, saturating outside its range (NaN gives 0): a float result stored
// in an integer tensor, defined for any value.
inline int64_t truncate_to_int64(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9223372036854775807.0) return std::numeric_limits<int64_t>::max();
  if (v <= -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

// ---------------------------------------------------------------- elementwise (reference_elementwise.cpp)

// Relu, LeakyRelu, Sigmoid, Tanh, Identity, Neg, Sqrt, Erf, Exp.
core::Status run_unary(const onnx::NodeProto& node, const Tensor& x, Tensor& y);
core::Status run_clip(const onnx::NodeProto& node, const std::vector<const Tensor*>& in, Tensor& y);
// Add, Sub, Mul, Div with numpy broadcasting.
core::Status run_binary(const onnx::NodeProto& node, const Tensor& a, const Tensor& b, Tensor& y);
core::Status run_cast(const onnx::NodeProto& node, const Tensor& x, Tensor& y);
// Pow: the base's type wins (from opset 12 the exponent may be any numeric type); integer results truncate
// toward zero, as the ONNX reference's astype does.
core::Status run_pow(const onnx::NodeProto& node, const Tensor& x, const Tensor& e, Tensor& y);
// Equal gives BOOL; Where picks X where the BOOL condition holds, else Y. Both broadcast, numpy style.
core::Status run_equal(const onnx::NodeProto& node, const Tensor& a, const Tensor& b, Tensor& y);
core::Status run_where(const onnx::NodeProto& node, const Tensor& condition, const Tensor& x, const Tensor& other,
                       Tensor& y);

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
// Expand: numpy broadcast of x against the `shape` input (a 1 there keeps x's dimension).
core::Status run_expand(const onnx::NodeProto& node, const Tensor& x, const Tensor& shape, Tensor& y);
// Tile: `repeats` copies per axis; before opset 6, `tiles` copies along the `axis` input.
core::Status run_tile(const onnx::NodeProto& node, int64_t opset, const std::vector<const Tensor*>& in, Tensor& y);
// The length of each of `outputs` Split outputs along an axis of `extent` elements, from the `split` input or
// attribute, `num_outputs`, or equal parts (the opset forms); errors name the node when they do not add up.
core::Result<std::vector<int64_t>> split_sizes(const onnx::NodeProto& node, const std::vector<const Tensor*>& in,
                                               int64_t extent, size_t outputs);
// Split into every output of `out` (a nullptr output is computed and dropped), sizes as split_sizes reads them.
core::Status run_split(const onnx::NodeProto& node, const std::vector<const Tensor*>& in,
                       const std::vector<Tensor*>& out);

// ---------------------------------------------------------------- conv, pool, matmul (reference_conv.cpp)

core::Status run_conv(const onnx::NodeProto& node, const std::vector<const Tensor*>& in, Tensor& y, bool transpose);
// MaxPool and AveragePool.
core::Status run_pool(const onnx::NodeProto& node, const Tensor& x, Tensor& y);
core::Status run_global_average_pool(const onnx::NodeProto& node, const Tensor& x, Tensor& y);
core::Status run_matmul(const onnx::NodeProto& node, const Tensor& a_in, const Tensor& b_in, Tensor& y);
core::Status run_gemm(const onnx::NodeProto& node, const std::vector<const Tensor*>& in, Tensor& y);

// ---------------------------------------------------------------- normalization and reduction (reference_norm.cpp)

core::Status run_batch_norm(const onnx::NodeProto& node, const std::vector<const Tensor*>& in, Tensor& y);
// InstanceNormalization: per image and channel, scale * (x - mean) / sqrt(var + epsilon) + B.
core::Status run_instance_norm(const onnx::NodeProto& node, const std::vector<const Tensor*>& in, Tensor& y);
// ReduceMean, ReduceSum, ReduceMax: axes from the attribute, or from the optional input (with
// noop_with_empty_axes) from opset 18 (ReduceSum: 13).
core::Status run_reduce(const onnx::NodeProto& node, int64_t opset, const std::vector<const Tensor*>& in, Tensor& y);
// Softmax: before opset 13 over the input coerced to 2-D at axis (default 1); from 13 along one axis (default -1).
core::Status run_softmax(const onnx::NodeProto& node, int64_t opset, const Tensor& x, Tensor& y);

// ---------------------------------------------------------------- resize (reference_resize.cpp)

core::Status run_resize(const onnx::NodeProto& node, int64_t opset, const std::vector<const Tensor*>& in, Tensor& y);

}  // namespace dwdeconv::ops::detail
