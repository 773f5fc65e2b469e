// The reference kernels, one family per file (elementwise.cpp, shape.cpp, data_movement.cpp, conv.cpp, norm.cpp,
// resize.cpp), and the helpers they share. run_reference_node in op_table.cpp dispatches to them. Internal to the op
// library and the executor built on it.
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

inline const Tensor* input_or_null(const std::vector<const Tensor*>& inputs, size_t k) { return k < inputs.size() ? inputs[k] : nullptr; }

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
  return node_error(node, "axis " + std::to_string(given) + " is out of range for a rank-" + std::to_string(rank) + " input");
}

// Errors naming the node when `dims` (an output shape computed from input values or attributes) has a negative
// dimension, an element count that overflows int64 (onnx_io's one check for both), or more than ctx.max_elements
// elements. Every kernel whose output can outgrow its inputs checks its output shape here before allocating it.
inline core::Status check_element_count(const OpContext& ctx, const onnx::NodeProto& node, const std::vector<int64_t>& dims) {
  const auto count = onnx_io::element_count(dims, "output shape " + format_dims(dims));
  if (!count) return node_error(node, count.error().message);
  if (*count > ctx.max_elements) {
    return node_error(node, "output shape " + format_dims(dims) + " has " + std::to_string(*count) + " elements, more than the " +
                                std::to_string(ctx.max_elements) + " allowed here");
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

// ---------------------------------------------------------------- the kernels
// Each is a KernelFunction (ops.h), declared through that type, and called by run_reference_node only for a node inside its op's
// OpSpec: every required input is present, no output beyond the spec's is asked for, every attribute and value is
// one the spec lists. One line names the ops each serves.

// elementwise.cpp
KernelFunction run_unary;  // Relu, LeakyRelu, Sigmoid, Tanh, Identity, Neg, Sqrt, Erf, Exp, Log, Floor, Ceil,
                           // HardSigmoid, HardSwish
KernelFunction run_clip;
KernelFunction run_binary;  // Add, Sub, Mul, Div, numpy broadcasting
KernelFunction run_prelu;   // slope * x where x < 0, slope broadcast to x (unidirectionally)
KernelFunction run_cast;
KernelFunction run_pow;    // the base's type wins; integer results truncate toward zero
KernelFunction run_equal;  // BOOL result, broadcasting
KernelFunction run_where;  // X where the BOOL condition holds, else Y, broadcasting

// shape.cpp: they change or read a value's dims, or make a value from attributes and scalars
KernelFunction run_reshape;
KernelFunction run_flatten;
KernelFunction run_squeeze;
KernelFunction run_unsqueeze;
KernelFunction run_shape;
KernelFunction run_constant;
KernelFunction run_constant_of_shape;
KernelFunction run_range;  // integer; float where every way of computing it agrees

// data_movement.cpp: they move or pick elements and compute no new values (ScatterND's reductions aside)
KernelFunction run_transpose;
KernelFunction run_gather;
KernelFunction run_slice;
KernelFunction run_concat;
KernelFunction run_pad;  // constant, reflect or edge on any rank; negative pads crop
KernelFunction run_depth_to_space;
KernelFunction run_expand;      // numpy broadcast of x against `shape`
KernelFunction run_tile;        // `repeats` copies per axis; before opset 6, `tiles` along `axis`
KernelFunction run_split;       // every output asked for; sizes as split_sizes reads them
KernelFunction run_scatter_nd;  // reduction none (each slice written once), add, mul, max, min
// The length of each of `outputs` Split outputs along an axis of `extent` elements, from the `split` input or
// attribute, `num_outputs`, or equal parts (the opset forms); errors name the node when they do not add up.
core::Result<std::vector<int64_t>> split_sizes(const onnx::NodeProto& node, const Inputs& in, int64_t extent, size_t outputs);

// conv.cpp
KernelFunction run_conv;
KernelFunction run_conv_transpose;
KernelFunction run_pool;  // MaxPool, AveragePool
KernelFunction run_global_average_pool;
KernelFunction run_matmul;
KernelFunction run_gemm;

// norm.cpp
KernelFunction run_batch_norm;     // inference mode
KernelFunction run_instance_norm;  // scale * (x - mean) / sqrt(var + epsilon) + B per image and channel
KernelFunction run_reduce;         // ReduceMean, ReduceSum, ReduceMax; axes attribute or input by version
KernelFunction run_softmax;        // Softmax, LogSoftmax; before opset 13 over the input coerced to 2-D at axis
KernelFunction run_argmax;         // INT64 indices of the first (or last) maximum along one axis

// resize.cpp
KernelFunction run_resize;
KernelFunction run_upsample;  // Upsample-7 and -9: Resize-10's nearest (floor) and linear, asymmetric, scales >= 1

}  // namespace dwdeconv::ops::detail
