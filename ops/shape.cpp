// Shape reference kernels: they give a value new dims without moving its elements (Reshape, Flatten, Squeeze,
// Unsqueeze), read its dims (Shape), or make a value from attributes and scalars (Constant, ConstantOfShape, Range).
// The kernels that move or pick elements are in data_movement.cpp.
#include <algorithm>

#include "onnx_io/attributes.h"
#include "ops/kernels.h"

namespace dwdeconv::ops::detail {

using onnx::TensorProto;

core::Status run_reshape(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = *in[0];
  const Tensor& shape = *in[1];
  Tensor& y = *out[0];
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
    } else if (dims[k] < 0) {
      return node_error(node, "shape " + format_dims(dims) + " has a negative dim");
    } else if (__builtin_mul_overflow(known, dims[k], &known)) {
      return node_error(node, "shape " + format_dims(int_values(shape)) + " holds more elements than int64 counts");
    }
  }
  if (infer >= 0) {
    if (known == 0) return node_error(node, "cannot infer -1 next to a zero dimension");
    dims[static_cast<size_t>(infer)] = x.numel() / known;
  }
  int64_t count = 1;
  for (int64_t d : dims) count *= d;  // the known part fits (checked above), and the inferred dim only divides it
  if (count != x.numel()) {
    return node_error(node, "cannot reshape " + describe_tensor(x) + " to " + format_dims(dims));
  }
  copy_data(x, y, dims);
  return core::Ok{};
}

core::Status run_flatten(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = *in[0];
  Tensor& y = *out[0];
  RC_ASSIGN(int64_t axis, attr_int(node, "axis", 1));
  const auto rank = static_cast<int64_t>(x.dims.size());
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank) return node_error(node, "axis out of range");
  int64_t outer = 1;
  for (int64_t k = 0; k < axis; ++k) outer *= x.dims[static_cast<size_t>(k)];
  copy_data(x, y, {outer, outer == 0 ? 0 : x.numel() / std::max<int64_t>(outer, 1)});
  return core::Ok{};
}

core::Status run_squeeze(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  Tensor& y = *out[0];
  const Tensor& x = *in[0];
  const auto rank = static_cast<int64_t>(x.dims.size());
  std::vector<int64_t> axes;
  if (const Tensor* t = input_or_null(in, 1)) axes = int_values(*t);
  else {
    RC_ASSIGN(axes, onnx_io::get_ints(node, "axes", {}));
  }
  std::vector<bool> drop(static_cast<size_t>(rank), false);
  if (axes.empty()) {
    for (int64_t a = 0; a < rank; ++a) drop[static_cast<size_t>(a)] = x.dims[static_cast<size_t>(a)] == 1;
  }
  for (int64_t a : axes) {
    const int64_t given = a;
    RC_CHECK(resolve_axis(node, a, rank));
    if (x.dims[static_cast<size_t>(a)] != 1) {
      return node_error(node, "axis " + std::to_string(given) + " has size " + std::to_string(x.dims[static_cast<size_t>(a)]) + ", not 1");
    }
    drop[static_cast<size_t>(a)] = true;
  }
  std::vector<int64_t> dims;
  for (int64_t a = 0; a < rank; ++a)
    if (!drop[static_cast<size_t>(a)]) dims.push_back(x.dims[static_cast<size_t>(a)]);
  copy_data(x, y, dims);
  return core::Ok{};
}

core::Status run_unsqueeze(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  Tensor& y = *out[0];
  const Tensor& x = *in[0];
  std::vector<int64_t> axes;
  if (const Tensor* t = input_or_null(in, 1)) axes = int_values(*t);
  else {
    RC_ASSIGN(axes, onnx_io::get_ints(node, "axes", {}));
  }
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

core::Status run_shape(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = *in[0];
  Tensor& y = *out[0];
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

core::Status run_constant(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  Tensor& y = *out[0];
  for (const auto& a : node.attribute()) {
    if (a.name() == "value") {
      RC_ASSIGN(y, tensor_from_proto(a.t(), onnx_io::describe_node(node)));
      return core::Ok{};
    }
    if (a.name() == "value_float") {
      y.reshape(TensorProto::FLOAT, {});
      y.f[0] = a.f();
      return core::Ok{};
    }
    if (a.name() == "value_int") {
      y.reshape(TensorProto::INT64, {});
      y.i[0] = a.i();
      return core::Ok{};
    }
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

core::Status run_constant_of_shape(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  const Tensor& shape = *in[0];
  Tensor& y = *out[0];
  Tensor value;
  value.reshape(TensorProto::FLOAT, {1});
  if (const auto* a = onnx_io::find_attribute(node, "value")) {
    RC_ASSIGN(value, tensor_from_proto(a->t(), onnx_io::describe_node(node)));
  }
  if (value.numel() != 1) return node_error(node, "value must hold one element");
  const std::vector<int64_t> dims = int_values(shape);
  RC_CHECK(check_element_count(ctx, node, dims));
  y.reshape(value.dtype, dims);
  if (y.is_float()) std::fill(y.f.begin(), y.f.end(), value.f[0]);
  else std::fill(y.i.begin(), y.i.end(), value.i[0]);
  return core::Ok{};
}

core::Status run_range(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  const Tensor& start = *in[0];
  const Tensor& limit = *in[1];
  const Tensor& delta = *in[2];
  Tensor& y = *out[0];
  if (start.numel() != 1 || limit.numel() != 1 || delta.numel() != 1) return node_error(node, "start, limit and delta must be scalars");
  if (limit.dtype != start.dtype || delta.dtype != start.dtype) return node_error(node, "start, limit and delta differ in element type");
  if (start.is_float()) {
    // Runtimes compute the count and the values of a float Range differently (ONNX Runtime adds delta up in the
    // type, numpy multiplies in double), so a float Range runs only where every way gives the same answer.
    const float s = start.f[0], l = limit.f[0], d = delta.f[0];
    if (d == 0.0f || !std::isfinite(s) || !std::isfinite(l) || !std::isfinite(d))
      return node_error(node, "delta is 0 or a bound is not finite");
    const double count_f = std::ceil(static_cast<double>((l - s) / d));
    const double count_d = std::ceil((static_cast<double>(l) - s) / d);
    if (count_f != count_d) return node_error(node, "the element count of this float Range depends on the precision it is computed in");
    const auto n = static_cast<int64_t>(std::max(0.0, count_d));
    RC_CHECK(check_element_count(ctx, node, {n}));
    y.reshape(start.dtype, {n});
    float running = s;
    for (int64_t i = 0; i < n; ++i) {
      const auto exact = static_cast<float>(static_cast<double>(s) + static_cast<double>(i) * d);
      if (running != exact) return node_error(node, "the values of this float Range depend on how they are computed");
      y.f[static_cast<size_t>(i)] = exact;
      running += d;
    }
    return core::Ok{};
  }
  const int64_t s = start.i[0], l = limit.i[0], d = delta.i[0];
  if (d == 0) return node_error(node, "delta is 0");
  // ceil((l - s) / d), written so that nothing overflows; a span beyond int64 is far beyond any bound.
  int64_t span = 0;
  if (__builtin_sub_overflow(l, s, &span)) return node_error(node, "has more than " + std::to_string(ctx.max_elements) + " elements");
  const int64_t n = d > 0 ? (span > 0 ? 1 + (span - 1) / d : 0) : (span < 0 ? 1 + (span + 1) / d : 0);
  RC_CHECK(check_element_count(ctx, node, {n}));
  y.reshape(start.dtype, {n});
  int64_t value = s;  // every value lies between start and limit, so the running sum never overflows
  for (int64_t i = 0; i < n; ++i, value += i < n ? d : 0) y.i[static_cast<size_t>(i)] = value;
  return core::Ok{};
}

}  // namespace dwdeconv::ops::detail
