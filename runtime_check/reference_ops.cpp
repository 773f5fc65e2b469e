#include "runtime_check/reference_ops.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>

#include "core/reference.h"
#include "onnx_io/attributes.h"
#include "onnx_io/tensor.h"
#include "runtime_check/internal.h"

namespace dwdeconv::runtime_check {

using detail::node_error;
using detail::normalize_axis;
using detail::strides_of;
using onnx::TensorProto;

namespace {

const std::vector<std::string> kSupportedOps = {
    "Add",      "AveragePool", "BatchNormalization", "Cast",    "Clip",     "Concat",  "Constant",
    "ConstantOfShape", "Conv", "ConvTranspose", "DepthToSpace", "Div", "Flatten", "Gather", "Gemm",
    "GlobalAveragePool", "Identity", "LeakyRelu", "MatMul", "MaxPool", "Mul", "Pad", "Relu", "Reshape",
    "Resize",   "Shape",       "Sigmoid",            "Slice",   "Squeeze",  "Sub",     "Tanh",
    "Transpose", "Unsqueeze"};

// Unwrapping attribute getters: an attribute of the wrong type is an invalid model.
core::Result<int64_t> attr_int(const onnx::NodeProto& node, const std::string& name, int64_t fallback) {
  return onnx_io::get_int(node, name, fallback);
}

float attr_float(const onnx::NodeProto& node, const std::string& name, float fallback) {
  const auto* a = onnx_io::find_attribute(node, name);
  return a != nullptr && a->type() == onnx::AttributeProto::FLOAT ? a->f() : fallback;
}

const Tensor* input_or_null(const std::vector<const Tensor*>& inputs, size_t k) {
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
std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& dims, size_t rank) {
  std::vector<int64_t> out(rank, 0);
  const auto own = strides_of(dims);
  const size_t offset = rank - dims.size();
  for (size_t a = 0; a < dims.size(); ++a) out[offset + a] = dims[a] == 1 ? 0 : own[a];
  return out;
}

// ---------------------------------------------------------------- elementwise

core::Status run_unary(const onnx::NodeProto& node, const Tensor& x, Tensor& y) {
  const std::string& op = node.op_type();
  y.reshape(x.dtype, x.dims);
  const auto n = static_cast<size_t>(x.numel());
  if (op == "Identity") {
    y.f = x.f;
    y.i = x.i;
    return core::Ok{};
  }
  if (!x.is_float()) {
    if (op != "Relu") return node_error(node, "integer input is not supported");
    for (size_t k = 0; k < n; ++k) y.i[k] = std::max<int64_t>(0, x.i[k]);
    return core::Ok{};
  }
  const float alpha = attr_float(node, "alpha", 0.01f);
  for (size_t k = 0; k < n; ++k) {
    const float v = x.f[k];
    float r = v;
    if (op == "Relu") r = v > 0.0f ? v : 0.0f;
    else if (op == "LeakyRelu") r = v >= 0.0f ? v : v * alpha;
    else if (op == "Sigmoid") r = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(v))));
    else if (op == "Tanh") r = std::tanh(v);
    y.f[k] = round_to_type(r, x.dtype);
  }
  return core::Ok{};
}

core::Status run_clip(const onnx::NodeProto& node, const std::vector<const Tensor*>& in, Tensor& y) {
  const Tensor& x = *in[0];
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  if (onnx_io::find_attribute(node, "min") != nullptr || onnx_io::find_attribute(node, "max") != nullptr) {
    lo = attr_float(node, "min", -std::numeric_limits<float>::max());
    hi = attr_float(node, "max", std::numeric_limits<float>::max());
  }
  if (const Tensor* t = input_or_null(in, 1); t != nullptr && t->numel() > 0) lo = t->get(0);
  if (const Tensor* t = input_or_null(in, 2); t != nullptr && t->numel() > 0) hi = t->get(0);
  y.reshape(x.dtype, x.dims);
  const auto n = static_cast<size_t>(x.numel());
  for (size_t k = 0; k < n; ++k) {
    if (x.is_float()) {
      y.f[k] = static_cast<float>(std::min(std::max(static_cast<double>(x.f[k]), lo), hi));
    } else {
      y.i[k] = static_cast<int64_t>(std::min(std::max(static_cast<double>(x.i[k]), lo), hi));
    }
  }
  return core::Ok{};
}

core::Status run_binary(const onnx::NodeProto& node, const Tensor& a, const Tensor& b, Tensor& y) {
  if (a.is_float() != b.is_float()) return node_error(node, "inputs have different element types");
  RC_ASSIGN(const auto out_dims, broadcast_dims(node, a.dims, b.dims));
  y.reshape(a.dtype, out_dims);
  const char op = node.op_type()[0];  // A, S, M, D
  const auto sa = broadcast_strides(a.dims, out_dims.size());
  const auto sb = broadcast_strides(b.dims, out_dims.size());
  const bool same = a.dims == b.dims;
  auto offsets = [&](const std::vector<int64_t>& idx, int64_t& oa, int64_t& ob) {
    oa = ob = 0;
    for (size_t k = 0; k < idx.size(); ++k) {
      oa += idx[k] * sa[k];
      ob += idx[k] * sb[k];
    }
  };
  if (a.is_float()) {
    auto apply = [op](float x, float z) {
      switch (op) {
        case 'A': return x + z;
        case 'S': return x - z;
        case 'M': return x * z;
        default: return x / z;
      }
    };
    if (same) {
      for (size_t k = 0; k < y.f.size(); ++k) y.f[k] = round_to_type(apply(a.f[k], b.f[k]), a.dtype);
    } else {
      for_each_index(out_dims, [&](int64_t k, const std::vector<int64_t>& idx) {
        int64_t oa, ob;
        offsets(idx, oa, ob);
        y.f[static_cast<size_t>(k)] = round_to_type(apply(a.f[static_cast<size_t>(oa)], b.f[static_cast<size_t>(ob)]), a.dtype);
      });
    }
    return core::Ok{};
  }
  bool divide_by_zero = false;
  auto apply = [op, &divide_by_zero](int64_t x, int64_t z) -> int64_t {
    switch (op) {
      case 'A': return x + z;
      case 'S': return x - z;
      case 'M': return x * z;
      default:
        if (z == 0) { divide_by_zero = true; return 0; }
        return x / z;  // integer Div truncates toward zero, as C++ does
    }
  };
  for_each_index(out_dims, [&](int64_t k, const std::vector<int64_t>& idx) {
    int64_t oa, ob;
    offsets(idx, oa, ob);
    y.i[static_cast<size_t>(k)] = wrap_to_type(apply(a.i[static_cast<size_t>(oa)], b.i[static_cast<size_t>(ob)]), a.dtype);
  });
  if (divide_by_zero) return node_error(node, "integer division by zero");
  return core::Ok{};
}

core::Status run_cast(const onnx::NodeProto& node, const Tensor& x, Tensor& y) {
  RC_ASSIGN(const int64_t to, attr_int(node, "to", 0));
  const auto type = static_cast<int32_t>(to);
  if (!is_float_type(type) && !is_integer_type(type)) {
    return node_error(node, "cast to " + onnx_io::data_type_name(type) + " is not supported");
  }
  y.reshape(type, x.dims);
  const auto n = static_cast<size_t>(x.numel());
  for (size_t k = 0; k < n; ++k) {
    if (y.is_float()) {
      y.f[k] = round_to_type(x.is_float() ? x.f[k] : static_cast<float>(x.i[k]), type);
    } else if (x.is_float()) {
      const float v = x.f[k];
      y.i[k] = type == TensorProto::BOOL ? (v != 0.0f) : wrap_to_type(static_cast<int64_t>(std::trunc(v)), type);
    } else {
      y.i[k] = wrap_to_type(x.i[k], type);
    }
  }
  return core::Ok{};
}

// ---------------------------------------------------------------- shape ops

void copy_data(const Tensor& x, Tensor& y, std::vector<int64_t> dims) {
  y.reshape(x.dtype, std::move(dims));
  if (x.is_float()) std::copy(x.f.begin(), x.f.end(), y.f.begin());
  else std::copy(x.i.begin(), x.i.end(), y.i.begin());
}

core::Status run_reshape(const onnx::NodeProto& node, const Tensor& x, const Tensor& shape, Tensor& y) {
  RC_ASSIGN(const int64_t allowzero, attr_int(node, "allowzero", 0));
  std::vector<int64_t> dims = int_values(shape);
  int64_t known = 1;
  int infer = -1;
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] == 0 && allowzero == 0) {
      if (k >= x.dims.size()) return node_error(node, "shape copies a dimension the input does not have");
      dims[k] = x.dims[k];
    }
    if (dims[k] == -1) {
      if (infer >= 0) return node_error(node, "shape has more than one -1");
      infer = static_cast<int>(k);
    } else {
      known *= dims[k];
    }
  }
  if (infer >= 0) {
    if (known == 0) return node_error(node, "cannot infer -1 next to a zero dimension");
    dims[static_cast<size_t>(infer)] = x.numel() / known;
  }
  int64_t count = 1;
  for (int64_t d : dims) count *= d;
  if (count != x.numel()) {
    return node_error(node, "cannot reshape " + describe_tensor(x) + " to " + format_dims(dims));
  }
  copy_data(x, y, dims);
  return core::Ok{};
}

core::Status run_flatten(const onnx::NodeProto& node, const Tensor& x, Tensor& y) {
  RC_ASSIGN(int64_t axis, attr_int(node, "axis", 1));
  const auto rank = static_cast<int64_t>(x.dims.size());
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank) return node_error(node, "axis out of range");
  int64_t outer = 1;
  for (int64_t k = 0; k < axis; ++k) outer *= x.dims[static_cast<size_t>(k)];
  copy_data(x, y, {outer, outer == 0 ? 0 : x.numel() / std::max<int64_t>(outer, 1)});
  return core::Ok{};
}

core::Status run_transpose(const onnx::NodeProto& node, const Tensor& x, Tensor& y) {
  const size_t rank = x.dims.size();
  std::vector<int64_t> reverse(rank);
  for (size_t k = 0; k < rank; ++k) reverse[k] = static_cast<int64_t>(rank - 1 - k);
  RC_ASSIGN(const auto perm, onnx_io::get_ints(node, "perm", reverse));
  if (perm.size() != rank) return node_error(node, "perm has the wrong length");
  std::vector<int64_t> out_dims(rank);
  for (size_t k = 0; k < rank; ++k) out_dims[k] = x.dims[static_cast<size_t>(perm[k])];
  y.reshape(x.dtype, out_dims);
  const auto in_strides = strides_of(x.dims);
  for_each_index(out_dims, [&](int64_t k, const std::vector<int64_t>& idx) {
    int64_t src = 0;
    for (size_t a = 0; a < rank; ++a) src += idx[a] * in_strides[static_cast<size_t>(perm[a])];
    if (x.is_float()) y.f[static_cast<size_t>(k)] = x.f[static_cast<size_t>(src)];
    else y.i[static_cast<size_t>(k)] = x.i[static_cast<size_t>(src)];
  });
  return core::Ok{};
}

core::Status run_squeeze(const onnx::NodeProto& node, const std::vector<const Tensor*>& in, Tensor& y) {
  const Tensor& x = *in[0];
  const auto rank = static_cast<int64_t>(x.dims.size());
  std::vector<int64_t> axes;
  if (const Tensor* t = input_or_null(in, 1)) axes = int_values(*t);
  else { RC_ASSIGN(axes, onnx_io::get_ints(node, "axes", {})); }
  std::vector<bool> drop(static_cast<size_t>(rank), false);
  if (axes.empty()) {
    for (int64_t a = 0; a < rank; ++a) drop[static_cast<size_t>(a)] = x.dims[static_cast<size_t>(a)] == 1;
  }
  for (int64_t a : axes) {
    if (!normalize_axis(a, rank) || x.dims[static_cast<size_t>(a)] != 1) return node_error(node, "cannot squeeze axis");
    drop[static_cast<size_t>(a)] = true;
  }
  std::vector<int64_t> dims;
  for (int64_t a = 0; a < rank; ++a) if (!drop[static_cast<size_t>(a)]) dims.push_back(x.dims[static_cast<size_t>(a)]);
  copy_data(x, y, dims);
  return core::Ok{};
}

core::Status run_unsqueeze(const onnx::NodeProto& node, const std::vector<const Tensor*>& in, Tensor& y) {
  const Tensor& x = *in[0];
  std::vector<int64_t> axes;
  if (const Tensor* t = input_or_null(in, 1)) axes = int_values(*t);
  else { RC_ASSIGN(axes, onnx_io::get_ints(node, "axes", {})); }
  const auto rank = static_cast<int64_t>(x.dims.size() + axes.size());
  std::vector<bool> inserted(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    if (!normalize_axis(a, rank) || inserted[static_cast<size_t>(a)]) return node_error(node, "bad unsqueeze axes");
    inserted[static_cast<size_t>(a)] = true;
  }
  std::vector<int64_t> dims;
  size_t next = 0;
  for (int64_t a = 0; a < rank; ++a) dims.push_back(inserted[static_cast<size_t>(a)] ? 1 : x.dims[next++]);
  copy_data(x, y, dims);
  return core::Ok{};
}

core::Status run_shape(const onnx::NodeProto& node, const Tensor& x, Tensor& y) {
  const auto rank = static_cast<int64_t>(x.dims.size());
  RC_ASSIGN(int64_t start, attr_int(node, "start", 0));
  RC_ASSIGN(int64_t end, attr_int(node, "end", rank));
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  y.reshape(TensorProto::INT64, {std::max<int64_t>(0, end - start)});
  for (int64_t k = start; k < end; ++k) y.i[static_cast<size_t>(k - start)] = x.dims[static_cast<size_t>(k)];
  return core::Ok{};
}

core::Status run_constant(const onnx::NodeProto& node, Tensor& y) {
  for (const auto& a : node.attribute()) {
    if (a.name() == "value") {
      RC_ASSIGN(y, tensor_from_proto(a.t(), onnx_io::describe_node(node)));
      return core::Ok{};
    }
    if (a.name() == "value_float") { y.reshape(TensorProto::FLOAT, {}); y.f[0] = a.f(); return core::Ok{}; }
    if (a.name() == "value_int") { y.reshape(TensorProto::INT64, {}); y.i[0] = a.i(); return core::Ok{}; }
    if (a.name() == "value_floats") {
      y.reshape(TensorProto::FLOAT, {a.floats_size()});
      std::copy(a.floats().begin(), a.floats().end(), y.f.begin());
      return core::Ok{};
    }
    if (a.name() == "value_ints") {
      y.reshape(TensorProto::INT64, {a.ints_size()});
      std::copy(a.ints().begin(), a.ints().end(), y.i.begin());
      return core::Ok{};
    }
  }
  return node_error(node, "has no supported value attribute (sparse and string constants are not supported)");
}

core::Status run_constant_of_shape(const onnx::NodeProto& node, const Tensor& shape, Tensor& y) {
  Tensor value;
  value.reshape(TensorProto::FLOAT, {1});
  if (const auto* a = onnx_io::find_attribute(node, "value")) {
    RC_ASSIGN(value, tensor_from_proto(a->t(), onnx_io::describe_node(node)));
  }
  if (value.numel() != 1) return node_error(node, "value must hold one element");
  y.reshape(value.dtype, int_values(shape));
  if (y.is_float()) std::fill(y.f.begin(), y.f.end(), value.f[0]);
  else std::fill(y.i.begin(), y.i.end(), value.i[0]);
  return core::Ok{};
}

core::Status run_gather(const onnx::NodeProto& node, const Tensor& x, const Tensor& indices, Tensor& y) {
  RC_ASSIGN(int64_t axis, attr_int(node, "axis", 0));
  const auto rank = static_cast<int64_t>(x.dims.size());
  if (!normalize_axis(axis, rank)) return node_error(node, "axis out of range");
  std::vector<int64_t> dims(x.dims.begin(), x.dims.begin() + axis);
  dims.insert(dims.end(), indices.dims.begin(), indices.dims.end());
  dims.insert(dims.end(), x.dims.begin() + axis + 1, x.dims.end());
  y.reshape(x.dtype, dims);
  int64_t outer = 1, inner = 1;
  for (int64_t a = 0; a < axis; ++a) outer *= x.dims[static_cast<size_t>(a)];
  for (int64_t a = axis + 1; a < rank; ++a) inner *= x.dims[static_cast<size_t>(a)];
  const int64_t extent = x.dims[static_cast<size_t>(axis)];
  const auto idx = int_values(indices);
  const auto count = static_cast<int64_t>(idx.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < count; ++j) {
      int64_t src = idx[static_cast<size_t>(j)];
      if (src < 0) src += extent;
      if (src < 0 || src >= extent) return node_error(node, "index " + std::to_string(idx[static_cast<size_t>(j)]) + " out of range");
      for (int64_t k = 0; k < inner; ++k) {
        const auto from = static_cast<size_t>((o * extent + src) * inner + k);
        const auto to = static_cast<size_t>((o * count + j) * inner + k);
        if (x.is_float()) y.f[to] = x.f[from];
        else y.i[to] = x.i[from];
      }
    }
  }
  return core::Ok{};
}

core::Status run_slice(const onnx::NodeProto& node, const std::vector<const Tensor*>& in, Tensor& y) {
  const Tensor& x = *in[0];
  const auto rank = static_cast<int64_t>(x.dims.size());
  std::vector<int64_t> starts, ends, axes, steps;
  if (onnx_io::find_attribute(node, "starts") != nullptr) {  // opset < 10: attributes
    RC_ASSIGN(starts, onnx_io::get_ints(node, "starts", {}));
    RC_ASSIGN(ends, onnx_io::get_ints(node, "ends", {}));
    RC_ASSIGN(axes, onnx_io::get_ints(node, "axes", {}));
  } else {
    if (input_or_null(in, 1) == nullptr || input_or_null(in, 2) == nullptr) return node_error(node, "needs starts and ends");
    starts = int_values(*in[1]);
    ends = int_values(*in[2]);
    if (const Tensor* t = input_or_null(in, 3)) axes = int_values(*t);
    if (const Tensor* t = input_or_null(in, 4)) steps = int_values(*t);
  }
  if (axes.empty()) for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return node_error(node, "starts, ends, axes and steps differ in length");
  }
  std::vector<int64_t> first(static_cast<size_t>(rank), 0), step(static_cast<size_t>(rank), 1), dims = x.dims;
  for (size_t k = 0; k < starts.size(); ++k) {
    int64_t a = axes[k];
    if (!normalize_axis(a, rank)) return node_error(node, "axis out of range");
    const int64_t extent = x.dims[static_cast<size_t>(a)];
    const int64_t s = steps[k];
    if (s == 0) return node_error(node, "step 0");
    int64_t b = starts[k], e = ends[k];
    if (b < 0) b += extent;
    if (e < 0) e += extent;
    if (s > 0) {
      b = std::clamp<int64_t>(b, 0, extent);
      e = std::clamp<int64_t>(e, 0, extent);
    } else {
      b = std::clamp<int64_t>(b, -1, extent - 1);
      e = std::clamp<int64_t>(e, -1, extent - 1);
    }
    const int64_t len = s > 0 ? (e > b ? (e - b + s - 1) / s : 0) : (b > e ? (b - e + (-s) - 1) / (-s) : 0);
    first[static_cast<size_t>(a)] = b;
    step[static_cast<size_t>(a)] = s;
    dims[static_cast<size_t>(a)] = len;
  }
  y.reshape(x.dtype, dims);
  const auto in_strides = strides_of(x.dims);
  for_each_index(dims, [&](int64_t k, const std::vector<int64_t>& idx) {
    int64_t src = 0;
    for (size_t a = 0; a < idx.size(); ++a) src += (first[a] + idx[a] * step[a]) * in_strides[a];
    if (x.is_float()) y.f[static_cast<size_t>(k)] = x.f[static_cast<size_t>(src)];
    else y.i[static_cast<size_t>(k)] = x.i[static_cast<size_t>(src)];
  });
  return core::Ok{};
}

core::Status run_concat(const onnx::NodeProto& node, const std::vector<const Tensor*>& in, Tensor& y) {
  RC_ASSIGN(int64_t axis, attr_int(node, "axis", 0));
  const Tensor& first = *in[0];
  const auto rank = static_cast<int64_t>(first.dims.size());
  if (!normalize_axis(axis, rank)) return node_error(node, "axis out of range");
  std::vector<int64_t> dims = first.dims;
  dims[static_cast<size_t>(axis)] = 0;
  for (const Tensor* t : in) {
    if (t == nullptr || t->dims.size() != first.dims.size()) return node_error(node, "inputs differ in rank");
    for (int64_t a = 0; a < rank; ++a) {
      if (a != axis && t->dims[static_cast<size_t>(a)] != first.dims[static_cast<size_t>(a)]) {
        return node_error(node, "inputs differ outside the concat axis");
      }
    }
    dims[static_cast<size_t>(axis)] += t->dims[static_cast<size_t>(axis)];
  }
  y.reshape(first.dtype, dims);
  int64_t outer = 1, inner = 1;
  for (int64_t a = 0; a < axis; ++a) outer *= dims[static_cast<size_t>(a)];
  for (int64_t a = axis + 1; a < rank; ++a) inner *= dims[static_cast<size_t>(a)];
  const int64_t out_row = dims[static_cast<size_t>(axis)] * inner;
  int64_t offset = 0;
  for (const Tensor* t : in) {
    const int64_t row = t->dims[static_cast<size_t>(axis)] * inner;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t k = 0; k < row; ++k) {
        const auto from = static_cast<size_t>(o * row + k);
        const auto to = static_cast<size_t>(o * out_row + offset + k);
        if (y.is_float()) y.f[to] = t->f[from];
        else y.i[to] = t->i[from];
      }
    }
    offset += row;
  }
  return core::Ok{};
}

// ONNX Pad on any rank: constant, reflect or edge. Negative pads crop.
core::Status run_pad(const onnx::NodeProto& node, const std::vector<const Tensor*>& in, Tensor& y) {
  const Tensor& x = *in[0];
  const auto rank = static_cast<int64_t>(x.dims.size());
  RC_ASSIGN(const std::string mode, onnx_io::get_string(node, "mode", "constant"));
  std::vector<int64_t> pads;
  double value = 0.0;
  std::vector<int64_t> axes;
  if (onnx_io::find_attribute(node, "pads") != nullptr) {  // opset < 11: attributes
    RC_ASSIGN(pads, onnx_io::get_ints(node, "pads", {}));
    value = attr_float(node, "value", 0.0f);
  } else {
    if (input_or_null(in, 1) == nullptr) return node_error(node, "needs pads");
    pads = int_values(*in[1]);
    if (const Tensor* t = input_or_null(in, 2); t != nullptr && t->numel() > 0) value = t->get(0);
    if (const Tensor* t = input_or_null(in, 3)) axes = int_values(*t);
  }
  std::vector<int64_t> begin(static_cast<size_t>(rank), 0), end(static_cast<size_t>(rank), 0);
  if (axes.empty()) {
    if (static_cast<int64_t>(pads.size()) != 2 * rank) return node_error(node, "pads length is not 2*rank");
    for (int64_t a = 0; a < rank; ++a) {
      begin[static_cast<size_t>(a)] = pads[static_cast<size_t>(a)];
      end[static_cast<size_t>(a)] = pads[static_cast<size_t>(a + rank)];
    }
  } else {
    const auto n = axes.size();
    if (pads.size() != 2 * n) return node_error(node, "pads length is not 2*len(axes)");
    for (size_t k = 0; k < n; ++k) {
      int64_t a = axes[k];
      if (!normalize_axis(a, rank)) return node_error(node, "axis out of range");
      begin[static_cast<size_t>(a)] = pads[k];
      end[static_cast<size_t>(a)] = pads[k + n];
    }
  }
  if (mode != "constant" && mode != "reflect" && mode != "edge") return node_error(node, "mode '" + mode + "' is not supported");
  std::vector<int64_t> dims(static_cast<size_t>(rank));
  for (int64_t a = 0; a < rank; ++a) {
    const auto k = static_cast<size_t>(a);
    dims[k] = x.dims[k] + begin[k] + end[k];
    if (dims[k] < 0) return node_error(node, "pads crop more than the input holds");
  }
  y.reshape(x.dtype, dims);
  const auto in_strides = strides_of(x.dims);
  for_each_index(dims, [&](int64_t k, const std::vector<int64_t>& idx) {
    int64_t src = 0;
    bool inside = true;
    for (size_t a = 0; a < idx.size(); ++a) {
      int64_t p = idx[a] - begin[a];
      const int64_t n = x.dims[a];
      if (p < 0 || p >= n) {
        if (mode == "constant" || n == 0) { inside = false; break; }
        if (mode == "edge") {
          p = std::clamp<int64_t>(p, 0, n - 1);
        } else {  // reflect without repeating the edge
          const int64_t period = std::max<int64_t>(1, 2 * (n - 1));
          p = ((p % period) + period) % period;
          if (p >= n) p = period - p;
        }
      }
      src += p * in_strides[a];
    }
    const auto o = static_cast<size_t>(k);
    if (y.is_float()) y.f[o] = inside ? x.f[static_cast<size_t>(src)] : static_cast<float>(value);
    else y.i[o] = inside ? x.i[static_cast<size_t>(src)] : static_cast<int64_t>(value);
  });
  return core::Ok{};
}

core::Status run_depth_to_space(const onnx::NodeProto& node, const Tensor& x, Tensor& y) {
  if (x.dims.size() != 4) return node_error(node, "needs a rank-4 input");
  RC_ASSIGN(const int64_t b, attr_int(node, "blocksize", 0));
  RC_ASSIGN(const std::string mode, onnx_io::get_string(node, "mode", "DCR"));
  if (b <= 0 || x.dims[1] % (b * b) != 0) return node_error(node, "channels are not a multiple of blocksize^2");
  const int64_t n = x.dims[0], c = x.dims[1] / (b * b), h = x.dims[2], w = x.dims[3];
  y.reshape(x.dtype, {n, c, h * b, w * b});
  const bool dcr = mode != "CRD";
  for (int64_t in = 0; in < n; ++in)
    for (int64_t oc = 0; oc < c; ++oc)
      for (int64_t oy = 0; oy < h * b; ++oy)
        for (int64_t ox = 0; ox < w * b; ++ox) {
          const int64_t by = oy % b, bx = ox % b;
          // DCR: channel (by*b + bx)*C + c; CRD: c*b*b + by*b + bx.
          const int64_t ic = dcr ? (by * b + bx) * c + oc : oc * b * b + by * b + bx;
          const auto src = static_cast<size_t>(((in * c * b * b + ic) * h + oy / b) * w + ox / b);
          const auto dst = static_cast<size_t>(((in * c + oc) * h * b + oy) * w * b + ox);
          if (x.is_float()) y.f[dst] = x.f[src];
          else y.i[dst] = x.i[src];
        }
  return core::Ok{};
}

core::Status run_batch_norm(const onnx::NodeProto& node, const std::vector<const Tensor*>& in, Tensor& y) {
  RC_ASSIGN(const int64_t training, attr_int(node, "training_mode", 0));
  if (training != 0) return node_error(node, "training_mode=1 is not supported");
  if (in.size() < 5 || std::any_of(in.begin(), in.begin() + 5, [](const Tensor* t) { return t == nullptr; })) {
    return node_error(node, "needs X, scale, B, mean and var");
  }
  const Tensor& x = *in[0];
  const float epsilon = attr_float(node, "epsilon", 1e-5f);
  if (x.dims.size() < 2) return node_error(node, "input rank below 2");
  const int64_t c = x.dims[1];
  int64_t inner = 1;
  for (size_t a = 2; a < x.dims.size(); ++a) inner *= x.dims[a];
  y.reshape(x.dtype, x.dims);
  for (int64_t k = 0; k < x.numel(); ++k) {
    const int64_t ch = (k / inner) % c;
    const double scale = in[1]->get(ch) / std::sqrt(in[4]->get(ch) + epsilon);
    y.f[static_cast<size_t>(k)] = static_cast<float>((x.f[static_cast<size_t>(k)] - in[3]->get(ch)) * scale + in[2]->get(ch));
  }
  return core::Ok{};
}

// ---------------------------------------------------------------- conv

core::Tensor4 to_tensor4(const Tensor& t, size_t spatial) {
  // [N, C, L] is treated as [N, C, 1, L].
  const int64_t h = spatial == 2 ? t.dims[2] : 1;
  const int64_t w = spatial == 2 ? t.dims[3] : t.dims[2];
  core::Tensor4 r(t.dims[0], t.dims[1], h, w);
  for (size_t k = 0; k < r.data.size(); ++k) r.data[k] = t.f[k];
  return r;
}

void from_tensor4(const core::Tensor4& r, int32_t dtype, size_t spatial, Tensor& y) {
  if (spatial == 2) y.reshape(dtype, {r.n, r.c, r.h, r.w});
  else y.reshape(dtype, {r.n, r.c, r.w});
  for (size_t k = 0; k < r.data.size(); ++k) y.f[k] = round_to_type(static_cast<float>(r.data[k]), dtype);
}

core::Status run_conv(const onnx::NodeProto& node, const std::vector<const Tensor*>& in, Tensor& y, bool transpose) {
  if (in.size() < 2 || in[0] == nullptr || in[1] == nullptr) return node_error(node, "needs X and W");
  const Tensor& x = *in[0];
  const Tensor& w = *in[1];
  if (!x.is_float() || !w.is_float()) return node_error(node, "needs float inputs");
  ConvGeometry g;
  if (transpose) { RC_ASSIGN(g, resolve_conv_transpose(node, x.dims, w.dims)); }
  else { RC_ASSIGN(g, resolve_conv(node, x.dims, w.dims)); }
  if (g.spatial != 1 && g.spatial != 2) {
    return node_error(node, std::to_string(g.spatial) + "-D convolution is not supported (only 1-D and 2-D)");
  }
  std::vector<double> bias;
  if (const Tensor* b = input_or_null(in, 2)) bias.assign(b->f.begin(), b->f.end());
  const auto axis = [&](const std::vector<int64_t>& v, size_t k, int64_t fill) {
    return g.spatial == 2 ? v[k] : (k == 0 ? fill : v[0]);
  };
  core::Tensor4 r;
  if (transpose) {
    core::ConvTranspose2dParams p;
    p.strides = {axis(g.strides, 0, 1), axis(g.strides, 1, 1)};
    p.dilations = {axis(g.dilations, 0, 1), axis(g.dilations, 1, 1)};
    p.output_padding = {axis(g.output_padding, 0, 0), axis(g.output_padding, 1, 0)};
    p.pads = {axis(g.pads_begin, 0, 0), axis(g.pads_begin, 1, 0), axis(g.pads_end, 0, 0), axis(g.pads_end, 1, 0)};
    p.group = g.group;
    r = core::conv_transpose2d_reference(to_tensor4(x, g.spatial), to_tensor4(w, g.spatial), bias, p);
  } else {
    core::Conv2dParams p;
    p.strides = {axis(g.strides, 0, 1), axis(g.strides, 1, 1)};
    p.dilations = {axis(g.dilations, 0, 1), axis(g.dilations, 1, 1)};
    p.pads = {axis(g.pads_begin, 0, 0), axis(g.pads_begin, 1, 0), axis(g.pads_end, 0, 0), axis(g.pads_end, 1, 0)};
    p.group = g.group;
    r = core::conv2d_reference(to_tensor4(x, g.spatial), to_tensor4(w, g.spatial), bias, p);
  }
  from_tensor4(r, x.dtype, g.spatial, y);
  return core::Ok{};
}

// ---------------------------------------------------------------- pooling

core::Status run_pool(const onnx::NodeProto& node, const Tensor& x, Tensor& y) {
  const bool is_max = node.op_type() == "MaxPool";
  if (!x.is_float() && !is_max) return node_error(node, "needs a float input");
  RC_ASSIGN(const PoolGeometry g, resolve_pool(node, x.dims));
  std::vector<int64_t> dims = {x.dims[0], x.dims[1]};
  dims.insert(dims.end(), g.output_size.begin(), g.output_size.end());
  y.reshape(x.dtype, dims);
  const auto in_strides = strides_of(x.dims);
  const size_t sp = g.spatial;
  for_each_index(dims, [&](int64_t k, const std::vector<int64_t>& idx) {
    double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
    int64_t valid = 0, window = 1;
    std::vector<int64_t> lo(sp), hi(sp);
    for (size_t a = 0; a < sp; ++a) {
      const int64_t start = idx[2 + a] * g.strides[a] - g.pads_begin[a];
      // The window as clipped to input + pads, which count_include_pad counts.
      const int64_t end = std::min(start + (g.kernel[a] - 1) * g.dilations[a] + 1, x.dims[2 + a] + g.pads_end[a]);
      window *= (end - start + g.dilations[a] - 1) / g.dilations[a];
      lo[a] = start;
      hi[a] = end;
    }
    std::vector<int64_t> tap(sp, 0);
    for (;;) {
      bool inside = true;
      int64_t src = idx[0] * in_strides[0] + idx[1] * in_strides[1];
      for (size_t a = 0; a < sp; ++a) {
        const int64_t p = lo[a] + tap[a] * g.dilations[a];
        if (p < 0 || p >= x.dims[2 + a]) inside = false;
        src += p * in_strides[2 + a];
      }
      if (inside) {
        const double v = x.get(src);
        acc = is_max ? std::max(acc, v) : acc + v;
        ++valid;
      }
      size_t a = sp;
      while (a-- > 0) {
        if (lo[a] + (++tap[a]) * g.dilations[a] < hi[a]) break;
        tap[a] = 0;
      }
      if (a == static_cast<size_t>(-1)) break;
    }
    double r = acc;
    if (!is_max) r = acc / static_cast<double>(g.count_include_pad ? window : std::max<int64_t>(valid, 1));
    if (y.is_float()) y.f[static_cast<size_t>(k)] = round_to_type(static_cast<float>(r), x.dtype);
    else y.i[static_cast<size_t>(k)] = static_cast<int64_t>(r);
  });
  return core::Ok{};
}

core::Status run_global_average_pool(const onnx::NodeProto& node, const Tensor& x, Tensor& y) {
  if (!x.is_float() || x.dims.size() < 3) return node_error(node, "needs a float input of rank >= 3");
  std::vector<int64_t> dims(x.dims.size(), 1);
  dims[0] = x.dims[0];
  dims[1] = x.dims[1];
  y.reshape(x.dtype, dims);
  const int64_t inner = x.numel() / std::max<int64_t>(1, dims[0] * dims[1]);
  for (int64_t k = 0; k < dims[0] * dims[1]; ++k) {
    double sum = 0.0;
    for (int64_t j = 0; j < inner; ++j) sum += x.f[static_cast<size_t>(k * inner + j)];
    y.f[static_cast<size_t>(k)] = round_to_type(static_cast<float>(sum / static_cast<double>(inner)), x.dtype);
  }
  return core::Ok{};
}

// ---------------------------------------------------------------- matmul

core::Status run_matmul(const onnx::NodeProto& node, const Tensor& a_in, const Tensor& b_in, Tensor& y) {
  if (!a_in.is_float() || !b_in.is_float()) return node_error(node, "needs float inputs");
  if (a_in.dims.empty() || b_in.dims.empty()) return node_error(node, "scalar inputs");
  std::vector<int64_t> ad = a_in.dims, bd = b_in.dims;
  const bool a_vec = ad.size() == 1, b_vec = bd.size() == 1;
  if (a_vec) ad.insert(ad.begin(), 1);
  if (b_vec) bd.push_back(1);
  const int64_t m = ad[ad.size() - 2], k = ad.back(), n = bd.back();
  if (bd[bd.size() - 2] != k) return node_error(node, "inner dimensions differ");
  const std::vector<int64_t> a_batch(ad.begin(), ad.end() - 2), b_batch(bd.begin(), bd.end() - 2);
  RC_ASSIGN(const auto batch, broadcast_dims(node, a_batch, b_batch));
  std::vector<int64_t> dims = batch;
  if (!a_vec) dims.push_back(m);
  if (!b_vec) dims.push_back(n);
  y.reshape(a_in.dtype, dims);
  const auto sa = broadcast_strides(a_batch, batch.size());
  const auto sb = broadcast_strides(b_batch, batch.size());
  for_each_index(batch, [&](int64_t bi, const std::vector<int64_t>& idx) {
    int64_t oa = 0, ob = 0;
    for (size_t q = 0; q < idx.size(); ++q) { oa += idx[q] * sa[q]; ob += idx[q] * sb[q]; }
    const float* pa = a_in.f.data() + oa * m * k;
    const float* pb = b_in.f.data() + ob * k * n;
    float* py = y.f.data() + bi * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0.0;
        for (int64_t q = 0; q < k; ++q) sum += static_cast<double>(pa[i * k + q]) * pb[q * n + j];
        py[i * n + j] = round_to_type(static_cast<float>(sum), a_in.dtype);
      }
  });
  return core::Ok{};
}

core::Status run_gemm(const onnx::NodeProto& node, const std::vector<const Tensor*>& in, Tensor& y) {
  const Tensor& a = *in[0];
  const Tensor& b = *in[1];
  if (a.dims.size() != 2 || b.dims.size() != 2) return node_error(node, "needs 2-D A and B");
  RC_ASSIGN(const int64_t trans_a, attr_int(node, "transA", 0));
  RC_ASSIGN(const int64_t trans_b, attr_int(node, "transB", 0));
  const double alpha = attr_float(node, "alpha", 1.0f), beta = attr_float(node, "beta", 1.0f);
  const int64_t m = trans_a ? a.dims[1] : a.dims[0], k = trans_a ? a.dims[0] : a.dims[1];
  const int64_t n = trans_b ? b.dims[0] : b.dims[1];
  if ((trans_b ? b.dims[1] : b.dims[0]) != k) return node_error(node, "inner dimensions differ");
  const Tensor* c = input_or_null(in, 2);
  std::vector<int64_t> cs;
  if (c != nullptr) {
    RC_ASSIGN(const auto cd, broadcast_dims(node, c->dims, {m, n}));
    if (cd != std::vector<int64_t>{m, n}) return node_error(node, "C does not broadcast to [M, N]");
    cs = broadcast_strides(c->dims, 2);
  }
  y.reshape(a.dtype, {m, n});
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int64_t q = 0; q < k; ++q) {
        const double av = a.f[static_cast<size_t>(trans_a ? q * m + i : i * k + q)];
        const double bv = b.f[static_cast<size_t>(trans_b ? j * k + q : q * n + j)];
        sum += av * bv;
      }
      double r = alpha * sum;
      if (c != nullptr) r += beta * c->get(i * cs[0] + j * cs[1]);
      y.f[static_cast<size_t>(i * n + j)] = round_to_type(static_cast<float>(r), a.dtype);
    }
  return core::Ok{};
}

// ---------------------------------------------------------------- resize

struct ResizeMode {
  std::string mode, coordinate, nearest;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0.0;
};

// The source coordinate of output index `o` on one axis.
double source_coordinate(const ResizeMode& m, int64_t o, int64_t in, int64_t out, double scale, double roi_start,
                         double roi_end) {
  const double x = static_cast<double>(o);
  if (m.coordinate == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (m.coordinate == "pytorch_half_pixel") return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  // length_resized is in*scale, unfloored, as the ONNX reference uses it (sizes given: scale = out/in).
  if (m.coordinate == "align_corners") return out == 1 ? 0.0 : x * static_cast<double>(in - 1) / (static_cast<double>(in) * scale - 1.0);
  if (m.coordinate == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  if (m.coordinate == "tf_crop_and_resize") {
    return out > 1 ? roi_start * static_cast<double>(in - 1) +
                         x * (roi_end - roi_start) * static_cast<double>(in - 1) / static_cast<double>(out - 1)
                   : 0.5 * (roi_start + roi_end) * static_cast<double>(in - 1);
  }
  return x / scale;  // asymmetric
}

// The input index nearest mode reads for source coordinate `src` on an axis of `in` elements.
int64_t nearest_index(const ResizeMode& m, double src, int64_t in) {
  double r;
  const double frac = src - std::floor(src);
  if (m.nearest == "floor") r = std::floor(src);
  else if (m.nearest == "ceil") r = std::ceil(src);
  else if (m.nearest == "round_prefer_ceil") r = frac == 0.5 ? std::ceil(src) : std::round(src);
  else r = frac == 0.5 ? std::floor(src) : std::round(src);  // round_prefer_floor
  return std::clamp<int64_t>(static_cast<int64_t>(r), 0, in - 1);
}

// Resizes one axis of `x` (row-major, logical order): the ONNX Resize is separable per axis.
void resize_axis(const ResizeMode& m, const Tensor& x, size_t axis, int64_t out, double scale, double roi_start,
                 double roi_end, Tensor& y) {
  std::vector<int64_t> dims = x.dims;
  const int64_t in = dims[axis];
  dims[axis] = out;
  y.reshape(x.dtype, dims);
  int64_t outer = 1, inner = 1;
  for (size_t a = 0; a < axis; ++a) outer *= dims[a];
  for (size_t a = axis + 1; a < dims.size(); ++a) inner *= dims[a];
  // Per output index: source indices and weights (-1 index: extrapolation value).
  std::vector<std::vector<std::pair<int64_t, double>>> taps(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    auto& t = taps[static_cast<size_t>(o)];
    const double src = source_coordinate(m, o, in, out, scale, roi_start, roi_end);
    if (m.coordinate == "tf_crop_and_resize" && (src < 0.0 || src > static_cast<double>(in - 1))) {
      t.push_back({-1, 1.0});
      continue;
    }
    if (m.mode == "nearest") {
      t.push_back({nearest_index(m, src, in), 1.0});
      continue;
    }
    const auto base = static_cast<int64_t>(std::floor(src));
    const double r = src - static_cast<double>(base);
    std::vector<std::pair<int64_t, double>> raw;
    if (m.mode == "linear") {
      raw = {{base, 1.0 - r}, {base + 1, r}};
    } else {  // cubic, Keys with coefficient A
      const double a = m.cubic_a;
      auto c_far = [a](double d) { return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a; };  // 1 < d < 2
      auto c_near = [a](double d) { return ((a + 2) * d - (a + 3)) * d * d + 1; };      // d <= 1
      raw = {{base - 1, c_far(r + 1)}, {base, c_near(r)}, {base + 1, c_near(1 - r)}, {base + 2, c_far(2 - r)}};
    }
    double total = 0.0;
    for (auto& [i, wgt] : raw) {
      if (m.exclude_outside && (i < 0 || i >= in)) wgt = 0.0;
      total += wgt;
    }
    for (auto& [i, wgt] : raw) {
      if (m.exclude_outside && total != 0.0) wgt /= total;
      t.push_back({std::clamp<int64_t>(i, 0, in - 1), wgt});  // edge padding outside the input
    }
  }
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < out; ++j)
      for (int64_t q = 0; q < inner; ++q) {
        double v = 0.0;
        for (const auto& [i, wgt] : taps[static_cast<size_t>(j)]) {
          v += i < 0 ? m.extrapolation * wgt : wgt * x.get((o * in + i) * inner + q);
        }
        const auto dst = static_cast<size_t>((o * out + j) * inner + q);
        if (y.is_float()) y.f[dst] = static_cast<float>(v);
        else y.i[dst] = static_cast<int64_t>(std::llround(v));
      }
}

// Resize's attributes with the defaults of `opset`.
core::Result<ResizeMode> resize_mode(const onnx::NodeProto& node, int64_t opset) {
  ResizeMode m;
  RC_ASSIGN(m.mode, onnx_io::get_string(node, "mode", "nearest"));
  RC_ASSIGN(m.coordinate, onnx_io::get_string(node, "coordinate_transformation_mode",
                                              opset < 11 ? "asymmetric" : "half_pixel"));
  RC_ASSIGN(m.nearest, onnx_io::get_string(node, "nearest_mode", opset < 11 ? "floor" : "round_prefer_floor"));
  m.cubic_a = attr_float(node, "cubic_coeff_a", -0.75f);
  RC_ASSIGN(const int64_t exclude, attr_int(node, "exclude_outside", 0));
  m.exclude_outside = exclude != 0;
  m.extrapolation = attr_float(node, "extrapolation_value", 0.0f);
  if (m.mode != "nearest" && m.mode != "linear" && m.mode != "cubic") return node_error(node, "mode '" + m.mode + "' is not supported");
  return m;
}

// run_resize leaves an axis alone when its size and scale are unchanged (tf_crop_and_resize still crops it).
bool resize_skips_axis(const ResizeMode& m, const ResizeGeometry& g, int64_t in, size_t axis) {
  return g.output_dims[axis] == in && g.scales[axis] == 1.0 && m.coordinate != "tf_crop_and_resize";
}

core::Status run_resize(const onnx::NodeProto& node, int64_t opset, const std::vector<const Tensor*>& in, Tensor& y) {
  RC_ASSIGN(const ResizeMode m, resize_mode(node, opset));
  RC_ASSIGN(const ResizeGeometry g, resolve_resize(node, opset, in));
  const Tensor& x = *in[0];
  const size_t rank = x.dims.size();
  Tensor current = x, next;
  for (size_t a = 0; a < rank; ++a) {
    const double roi_start = g.roi.empty() ? 0.0 : g.roi[a];
    const double roi_end = g.roi.empty() ? 1.0 : g.roi[a + rank];
    if (resize_skips_axis(m, g, x.dims[a], a)) continue;
    resize_axis(m, current, a, g.output_dims[a], g.scales[a], roi_start, roi_end, next);
    std::swap(current, next);
  }
  y.reshape(x.dtype, current.dims);
  y.f = current.f;
  y.i = current.i;
  for (float& v : y.f) v = round_to_type(v, x.dtype);
  return core::Ok{};
}

// Spatial attribute with a default for every axis.
core::Result<std::vector<int64_t>> spatial_ints(const onnx::NodeProto& node, const std::string& name, size_t spatial,
                                                int64_t fallback) {
  RC_ASSIGN(auto v, onnx_io::get_ints(node, name, std::vector<int64_t>(spatial, fallback)));
  if (v.size() != spatial) return node_error(node, name + " has " + std::to_string(v.size()) + " values for " +
                                                       std::to_string(spatial) + " spatial axes");
  return v;
}

core::Status read_pads(const onnx::NodeProto& node, size_t spatial, std::vector<int64_t>& begin,
                       std::vector<int64_t>& end) {
  RC_ASSIGN(const auto pads, onnx_io::get_ints(node, "pads", std::vector<int64_t>(2 * spatial, 0)));
  if (pads.size() != 2 * spatial) return node_error(node, "pads must hold 2 values per spatial axis");
  begin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(spatial));
  end.assign(pads.begin() + static_cast<std::ptrdiff_t>(spatial), pads.end());
  return core::Ok{};
}

}  // namespace

const std::vector<std::string>& supported_ops() { return kSupportedOps; }

bool is_supported_op(const std::string& op_type) {
  return std::find(kSupportedOps.begin(), kSupportedOps.end(), op_type) != kSupportedOps.end();
}

std::vector<int64_t> int_values(const Tensor& tensor) {
  if (!tensor.is_float()) return tensor.i;
  std::vector<int64_t> v;
  for (float x : tensor.f) v.push_back(static_cast<int64_t>(x));
  return v;
}

namespace {

// dst[col][row] = src[row][col] for a rows x cols matrix, in square tiles so that both sides stream through the
// cache (a plain double loop walks one side with a stride and reloads each cache line per element when large).
void transpose_2d(const float* src, float* dst, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 32;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    const int64_t r1 = std::min(rows, r0 + kTile);
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t c1 = std::min(cols, c0 + kTile);
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) dst[c * rows + r] = src[r * cols + c];
    }
  }
}

}  // namespace

void nchw_to_nhwc(const float* src, float* dst, int64_t n, int64_t c, int64_t h, int64_t w) {
  // Per image, [C, H*W] -> [H*W, C].
  const int64_t hw = h * w;
  for (int64_t in = 0; in < n; ++in) transpose_2d(src + in * c * hw, dst + in * c * hw, c, hw);
}

void nhwc_to_nchw(const float* src, float* dst, int64_t n, int64_t c, int64_t h, int64_t w) {
  // Per image, [H*W, C] -> [C, H*W].
  const int64_t hw = h * w;
  for (int64_t in = 0; in < n; ++in) transpose_2d(src + in * c * hw, dst + in * c * hw, hw, c);
}

core::Result<std::vector<int64_t>> broadcast_dims(const onnx::NodeProto& node, const std::vector<int64_t>& a,
                                                  const std::vector<int64_t>& b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t k = 0; k < rank; ++k) {
    const int64_t da = k + a.size() >= rank ? a[k + a.size() - rank] : 1;
    const int64_t db = k + b.size() >= rank ? b[k + b.size() - rank] : 1;
    if (da != db && da != 1 && db != 1) {
      return node_error(node, "shapes " + format_dims(a) + " and " + format_dims(b) + " do not broadcast");
    }
    out[k] = da == 1 ? db : da;
  }
  return out;
}

core::Result<ConvGeometry> resolve_conv(const onnx::NodeProto& node, const std::vector<int64_t>& x_dims,
                                        const std::vector<int64_t>& w_dims) {
  if (x_dims.size() < 3 || w_dims.size() != x_dims.size()) return node_error(node, "X and W ranks do not match");
  ConvGeometry g;
  g.spatial = x_dims.size() - 2;
  RC_ASSIGN(g.group, attr_int(node, "group", 1));
  const std::vector<int64_t> w_kernel(w_dims.begin() + 2, w_dims.end());
  RC_ASSIGN(g.kernel, onnx_io::get_ints(node, "kernel_shape", w_kernel));
  if (g.kernel != w_kernel) return node_error(node, "kernel_shape disagrees with W");
  if (g.group <= 0 || x_dims[1] != w_dims[1] * g.group || w_dims[0] % g.group != 0) {
    return node_error(node, "channels do not match group " + std::to_string(g.group));
  }
  RC_ASSIGN(g.strides, spatial_ints(node, "strides", g.spatial, 1));
  RC_ASSIGN(g.dilations, spatial_ints(node, "dilations", g.spatial, 1));
  RC_ASSIGN(const std::string auto_pad, onnx_io::get_string(node, "auto_pad", "NOTSET"));
  RC_CHECK(read_pads(node, g.spatial, g.pads_begin, g.pads_end));
  for (size_t a = 0; a < g.spatial; ++a) {
    const int64_t in = x_dims[2 + a];
    const int64_t eff = (g.kernel[a] - 1) * g.dilations[a] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t out = (in + g.strides[a] - 1) / g.strides[a];
      const int64_t total = std::max<int64_t>(0, (out - 1) * g.strides[a] + eff - in);
      const int64_t small = total / 2;
      g.pads_begin[a] = auto_pad == "SAME_UPPER" ? small : total - small;
      g.pads_end[a] = total - g.pads_begin[a];
    } else if (auto_pad == "VALID") {
      g.pads_begin[a] = g.pads_end[a] = 0;
    } else if (auto_pad != "NOTSET") {
      return node_error(node, "unknown auto_pad '" + auto_pad + "'");
    }
    const int64_t span = in + g.pads_begin[a] + g.pads_end[a] - eff;
    if (span < 0) return node_error(node, "kernel larger than the padded input");
    g.output_size.push_back(span / g.strides[a] + 1);
  }
  return g;
}

core::Result<ConvGeometry> resolve_conv_transpose(const onnx::NodeProto& node, const std::vector<int64_t>& x_dims,
                                                  const std::vector<int64_t>& w_dims) {
  if (x_dims.size() < 3 || w_dims.size() != x_dims.size()) return node_error(node, "X and W ranks do not match");
  ConvGeometry g;
  g.spatial = x_dims.size() - 2;
  RC_ASSIGN(g.group, attr_int(node, "group", 1));
  const std::vector<int64_t> w_kernel(w_dims.begin() + 2, w_dims.end());
  RC_ASSIGN(g.kernel, onnx_io::get_ints(node, "kernel_shape", w_kernel));
  if (g.kernel != w_kernel) return node_error(node, "kernel_shape disagrees with W");
  if (g.group <= 0 || x_dims[1] != w_dims[0] || w_dims[0] % g.group != 0) {
    return node_error(node, "channels do not match group " + std::to_string(g.group));
  }
  RC_ASSIGN(g.strides, spatial_ints(node, "strides", g.spatial, 1));
  RC_ASSIGN(g.dilations, spatial_ints(node, "dilations", g.spatial, 1));
  RC_ASSIGN(g.output_padding, spatial_ints(node, "output_padding", g.spatial, 0));
  RC_ASSIGN(const std::string auto_pad, onnx_io::get_string(node, "auto_pad", "NOTSET"));
  RC_ASSIGN(auto output_shape, onnx_io::get_ints(node, "output_shape", {}));
  if (output_shape.size() == g.spatial + 2) output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
  if (!output_shape.empty() && output_shape.size() != g.spatial) return node_error(node, "output_shape has the wrong length");
  RC_CHECK(read_pads(node, g.spatial, g.pads_begin, g.pads_end));
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (!same && auto_pad != "VALID" && auto_pad != "NOTSET") return node_error(node, "unknown auto_pad '" + auto_pad + "'");
  for (size_t a = 0; a < g.spatial; ++a) {
    const int64_t in = x_dims[2 + a];
    const int64_t eff = (g.kernel[a] - 1) * g.dilations[a] + 1;
    const int64_t natural = g.strides[a] * (in - 1) + g.output_padding[a] + eff;
    if (!output_shape.empty() || same) {
      // total = s*(in-1) + op + (k-1)*d + 1 - out; SAME_UPPER: begin = total/2, else begin = total - total/2.
      const int64_t out = !output_shape.empty() ? output_shape[a] : in * g.strides[a];
      const int64_t total = natural - out;
      // Floor division, as the ONNX reference computes it: an output_shape one larger than the natural size
      // gives pads (0, -1), i.e. one extra row at the end, the same as output_padding would.
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      g.pads_begin[a] = auto_pad == "SAME_UPPER" ? half : total - half;
      g.pads_end[a] = total - g.pads_begin[a];
    } else if (auto_pad == "VALID") {
      g.pads_begin[a] = g.pads_end[a] = 0;
    }
    const int64_t out = natural - g.pads_begin[a] - g.pads_end[a];
    if (out <= 0) return node_error(node, "output size is not positive");
    g.output_size.push_back(out);
  }
  return g;
}

core::Result<PoolGeometry> resolve_pool(const onnx::NodeProto& node, const std::vector<int64_t>& x_dims) {
  if (x_dims.size() < 3) return node_error(node, "needs a rank >= 3 input");
  PoolGeometry g;
  g.spatial = x_dims.size() - 2;
  RC_ASSIGN(g.kernel, onnx_io::get_ints(node, "kernel_shape", {}));
  if (g.kernel.size() != g.spatial) return node_error(node, "kernel_shape must hold one value per spatial axis");
  RC_ASSIGN(g.strides, spatial_ints(node, "strides", g.spatial, 1));
  RC_ASSIGN(g.dilations, spatial_ints(node, "dilations", g.spatial, 1));
  RC_ASSIGN(const int64_t ceil_mode, attr_int(node, "ceil_mode", 0));
  RC_ASSIGN(const int64_t include, attr_int(node, "count_include_pad", 0));
  g.count_include_pad = include != 0;
  RC_ASSIGN(const std::string auto_pad, onnx_io::get_string(node, "auto_pad", "NOTSET"));
  RC_CHECK(read_pads(node, g.spatial, g.pads_begin, g.pads_end));
  for (size_t a = 0; a < g.spatial; ++a) {
    const int64_t in = x_dims[2 + a];
    const int64_t eff = (g.kernel[a] - 1) * g.dilations[a] + 1;
    const int64_t s = g.strides[a];
    int64_t out = 0;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      out = (in + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (out - 1) * s + eff - in);
      const int64_t small = total / 2;
      g.pads_begin[a] = auto_pad == "SAME_UPPER" ? small : total - small;
      g.pads_end[a] = total - g.pads_begin[a];
    } else if (auto_pad == "VALID") {
      g.pads_begin[a] = g.pads_end[a] = 0;
      out = (in - eff) / s + 1;
    } else {
      const int64_t span = in + g.pads_begin[a] + g.pads_end[a] - eff;
      out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
      // A last window that starts in the end padding is dropped.
      if (ceil_mode && (out - 1) * s >= in + g.pads_begin[a]) --out;
    }
    if (out <= 0) return node_error(node, "output size is not positive");
    g.output_size.push_back(out);
  }
  return g;
}

core::Result<ResizeGeometry> resolve_resize(const onnx::NodeProto& node, int64_t opset,
                                            const std::vector<const Tensor*>& inputs) {
  const Tensor& x = *inputs[0];
  const size_t rank = x.dims.size();
  const Tensor* roi = nullptr;
  const Tensor* scales = nullptr;
  const Tensor* sizes = nullptr;
  if (opset < 11 || inputs.size() == 2) {
    scales = input_or_null(inputs, 1);
  } else {
    roi = input_or_null(inputs, 1);
    scales = input_or_null(inputs, 2);
    sizes = input_or_null(inputs, 3);
  }
  if (scales != nullptr && scales->numel() == 0) scales = nullptr;
  if (sizes != nullptr && sizes->numel() == 0) sizes = nullptr;
  ResizeGeometry g;
  if (roi != nullptr) for (int64_t k = 0; k < roi->numel(); ++k) g.roi.push_back(roi->get(k));
  if (!g.roi.empty() && g.roi.size() != 2 * rank) g.roi.clear();
  if (sizes != nullptr) {
    g.output_dims = int_values(*sizes);
    if (g.output_dims.size() != rank) return node_error(node, "sizes has the wrong length");
    for (size_t a = 0; a < rank; ++a) g.scales.push_back(static_cast<double>(g.output_dims[a]) / static_cast<double>(x.dims[a]));
  } else if (scales != nullptr) {
    if (static_cast<size_t>(scales->numel()) != rank) return node_error(node, "scales has the wrong length");
    for (size_t a = 0; a < rank; ++a) {
      const double s = scales->get(static_cast<int64_t>(a));
      g.scales.push_back(s);
      g.output_dims.push_back(static_cast<int64_t>(std::floor(static_cast<double>(x.dims[a]) * s)));
    }
  } else {
    return node_error(node, "needs scales or sizes");
  }
  return g;
}

core::Result<std::vector<std::vector<int64_t>>> nearest_resize_sources(const onnx::NodeProto& node, int64_t opset,
                                                                       const std::vector<const Tensor*>& inputs) {
  RC_ASSIGN(const ResizeMode m, resize_mode(node, opset));
  if (m.mode != "nearest") return node_error(node, "mode '" + m.mode + "' is not nearest");
  RC_ASSIGN(const ResizeGeometry g, resolve_resize(node, opset, inputs));
  const Tensor& x = *inputs[0];
  const size_t rank = x.dims.size();
  std::vector<std::vector<int64_t>> sources(rank);
  for (size_t a = 0; a < rank; ++a) {
    const int64_t in = x.dims[a], out = g.output_dims[a];
    auto& axis = sources[a];
    if (resize_skips_axis(m, g, in, a)) {
      for (int64_t o = 0; o < out; ++o) axis.push_back(o);
      continue;
    }
    const double roi_start = g.roi.empty() ? 0.0 : g.roi[a];
    const double roi_end = g.roi.empty() ? 1.0 : g.roi[a + rank];
    // The same mapping as resize_axis: source coordinate, extrapolation outside a crop, then the rounding.
    for (int64_t o = 0; o < out; ++o) {
      const double src = source_coordinate(m, o, in, out, g.scales[a], roi_start, roi_end);
      const bool outside = m.coordinate == "tf_crop_and_resize" && (src < 0.0 || src > static_cast<double>(in - 1));
      axis.push_back(outside ? -1 : nearest_index(m, src, in));
    }
  }
  return sources;
}

core::Status run_reference_node(const onnx::NodeProto& node, int64_t opset, const std::vector<const Tensor*>& in,
                                const std::vector<Tensor*>& out) {
  const std::string& op = node.op_type();
  if (!is_supported_op(op)) return node_error(node, "op " + op + " is not supported by the executor");
  if (out.empty() || out[0] == nullptr) return node_error(node, "has no output");
  Tensor& y = *out[0];
  if (op == "Constant") return run_constant(node, y);
  if (in.empty() || in[0] == nullptr) return node_error(node, "missing its first input");
  const Tensor& x = *in[0];
  auto need = [&](size_t k) -> core::Status {
    if (k >= in.size() || in[k] == nullptr) return node_error(node, "missing input " + std::to_string(k));
    return core::Ok{};
  };
  if (op == "Relu" || op == "LeakyRelu" || op == "Sigmoid" || op == "Tanh" || op == "Identity") return run_unary(node, x, y);
  if (op == "Clip") return run_clip(node, in, y);
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") { RC_CHECK(need(1)); return run_binary(node, x, *in[1], y); }
  if (op == "Cast") return run_cast(node, x, y);
  if (op == "Reshape") { RC_CHECK(need(1)); return run_reshape(node, x, *in[1], y); }
  if (op == "Flatten") return run_flatten(node, x, y);
  if (op == "Transpose") return run_transpose(node, x, y);
  if (op == "Squeeze") return run_squeeze(node, in, y);
  if (op == "Unsqueeze") return run_unsqueeze(node, in, y);
  if (op == "Shape") return run_shape(node, x, y);
  if (op == "ConstantOfShape") return run_constant_of_shape(node, x, y);
  if (op == "Gather") { RC_CHECK(need(1)); return run_gather(node, x, *in[1], y); }
  if (op == "Slice") return run_slice(node, in, y);
  if (op == "Concat") return run_concat(node, in, y);
  if (op == "Pad") return run_pad(node, in, y);
  if (op == "DepthToSpace") return run_depth_to_space(node, x, y);
  if (op == "BatchNormalization") {
    for (size_t k = 1; k < out.size(); ++k) {
      if (out[k] != nullptr) return node_error(node, "training outputs (mean, var) are not supported");
    }
    return run_batch_norm(node, in, y);
  }
  if (op == "Conv") return run_conv(node, in, y, false);
  if (op == "ConvTranspose") return run_conv(node, in, y, true);
  if (op == "MaxPool" || op == "AveragePool") {
    if (out.size() > 1 && out[1] != nullptr) return node_error(node, "the Indices output is not supported");
    return run_pool(node, x, y);
  }
  if (op == "GlobalAveragePool") return run_global_average_pool(node, x, y);
  if (op == "MatMul") { RC_CHECK(need(1)); return run_matmul(node, x, *in[1], y); }
  if (op == "Gemm") { RC_CHECK(need(1)); return run_gemm(node, in, y); }
  if (op == "Resize") return run_resize(node, opset, in, y);
  return node_error(node, "op " + op + " has no reference kernel");
}

}  // namespace dwdeconv::runtime_check
