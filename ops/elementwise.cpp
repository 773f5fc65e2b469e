// Elementwise reference kernels: activations and other unary math, Clip, broadcasting arithmetic, PRelu, Pow,
// Equal, Where and Cast.
#include <algorithm>
#include <cmath>
#include <limits>

#include "onnx_io/attributes.h"
#include "onnx_io/tensor.h"
#include "ops/kernels.h"

namespace dwdeconv::ops::detail {

using onnx::TensorProto;

namespace {

// Visits every element k of the broadcast output `out_dims` with the flat offset each operand (of dims
// `operands[o]`) reads there.
template <typename F>
void for_each_broadcast(const std::vector<int64_t>& out_dims, const std::vector<std::vector<int64_t>>& operands, F&& visit) {
  std::vector<std::vector<int64_t>> strides;
  for (const auto& dims : operands) strides.push_back(broadcast_strides(dims, out_dims.size()));
  std::vector<size_t> at(operands.size());
  for_each_index(out_dims, [&](int64_t k, const std::vector<int64_t>& idx) {
    for (size_t o = 0; o < strides.size(); ++o) {
      int64_t offset = 0;
      for (size_t a = 0; a < idx.size(); ++a) offset += idx[a] * strides[o][a];
      at[o] = static_cast<size_t>(offset);
    }
    visit(static_cast<size_t>(k), at);
  });
}

// base^exponent in two's complement (wrapping, as integer arithmetic of the type would); a negative exponent
// gives 1/base^-exponent truncated toward zero.
int64_t integer_power(int64_t base, int64_t exponent) {
  if (exponent < 0) {
    if (base == 1) return 1;
    if (base == -1) return exponent % 2 == 0 ? 1 : -1;
    return 0;
  }
  uint64_t result = 1, factor = static_cast<uint64_t>(base);
  for (auto e = static_cast<uint64_t>(exponent); e != 0; e >>= 1) {
    if (e & 1) result *= factor;
    factor *= factor;
  }
  return static_cast<int64_t>(result);
}

}  // namespace

core::Status run_unary(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = *in[0];
  Tensor& y = *out[0];
  const std::string& op = node.op_type();
  y.reshape(x.dtype, x.dims);
  const auto n = static_cast<size_t>(x.numel());
  if (op == "Identity") {
    y.f = x.f;
    y.i = x.i;
    return core::Ok{};
  }
  if (!x.is_float()) {
    if (op != "Relu" && op != "Neg") return node_error(node, "integer input is not supported");
    for (size_t k = 0; k < n; ++k) {
      const int64_t negated = static_cast<int64_t>(0 - static_cast<uint64_t>(x.i[k]));  // wraps at INT64_MIN
      y.i[k] = op == "Neg" ? wrap_to_type(negated, x.dtype) : std::max<int64_t>(0, x.i[k]);
    }
    return core::Ok{};
  }
  const bool hard_sigmoid = op == "HardSigmoid";
  const float alpha = attr_float(node, "alpha", hard_sigmoid ? 0.2f : op == "Elu" ? 1.0f : 0.01f);  // HardSigmoid's, Elu's, LeakyRelu's
  const float beta = attr_float(node, "beta", 0.5f);                                                // HardSigmoid's
  for (size_t k = 0; k < n; ++k) {
    const float v = x.f[k];
    float r = v;
    if (op == "Relu") r = v > 0.0f ? v : 0.0f;
    else if (op == "LeakyRelu") r = v >= 0.0f ? v : v * alpha;
    else if (op == "Elu") r = v >= 0.0f ? v : static_cast<float>(alpha * std::expm1(static_cast<double>(v)));
    else if (op == "Sigmoid") r = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(v))));
    else if (op == "Tanh") r = std::tanh(v);
    else if (op == "Neg") r = -v;
    else if (op == "Sqrt") r = std::sqrt(v);
    else if (op == "Erf") r = std::erf(v);
    else if (op == "Exp") r = std::exp(v);
    else if (op == "Reciprocal") r = 1.0f / v;
    else if (op == "Abs") r = std::fabs(v);
    else if (op == "Sin") r = std::sin(v);
    else if (op == "Cos") r = std::cos(v);
    else if (op == "Sinh") r = std::sinh(v);
    else if (op == "Cosh") r = std::cosh(v);
    else if (op == "Log") r = std::log(v);
    else if (hard_sigmoid) r = static_cast<float>(std::clamp(static_cast<double>(alpha) * v + beta, 0.0, 1.0));
    else if (op == "HardSwish") r = static_cast<float>(v * std::clamp(v / 6.0 + 0.5, 0.0, 1.0));  // x * HardSigmoid(x, 1/6, 1/2)
    else if (op == "Floor") r = std::floor(v);
    else if (op == "Ceil") r = std::ceil(v);
    y.f[k] = round_to_type(r, x.dtype);
  }
  return core::Ok{};
}

core::Status run_clip(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  Tensor& y = *out[0];
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

core::Status run_binary(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  const Tensor& a = *in[0];
  const Tensor& b = *in[1];
  Tensor& y = *out[0];
  if (a.dtype != b.dtype) return node_error(node, "inputs have different element types");
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
  // Integer arithmetic wraps in two's complement, as the runtimes' integer types do (computed on uint64, so an int64
  // overflow is defined here). A division that runtimes answer differently is refused: by zero, the one quotient
  // that overflows, and an inexact negative quotient (C++ and ONNX Runtime truncate, numpy floors).
  std::string refused;
  auto apply = [op, &refused](int64_t x, int64_t z) -> int64_t {
    const auto ux = static_cast<uint64_t>(x), uz = static_cast<uint64_t>(z);
    switch (op) {
      case 'A': return static_cast<int64_t>(ux + uz);
      case 'S': return static_cast<int64_t>(ux - uz);
      case 'M': return static_cast<int64_t>(ux * uz);
      default:
        if (z == 0) refused = "integer division by zero";
        else if (z == -1 && x == std::numeric_limits<int64_t>::min()) refused = "integer division overflows";
        else if (x % z != 0 && (x < 0) != (z < 0))
          refused = "integer division " + std::to_string(x) + " / " + std::to_string(z) +
                    " is inexact and negative (runtimes round it differently)";
        return refused.empty() ? x / z : 0;
    }
  };
  for_each_index(out_dims, [&](int64_t k, const std::vector<int64_t>& idx) {
    int64_t oa, ob;
    offsets(idx, oa, ob);
    y.i[static_cast<size_t>(k)] = wrap_to_type(apply(a.i[static_cast<size_t>(oa)], b.i[static_cast<size_t>(ob)]), a.dtype);
  });
  if (!refused.empty()) return node_error(node, refused);
  return core::Ok{};
}

core::Status run_prelu(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = *in[0];
  const Tensor& slope = *in[1];
  Tensor& y = *out[0];
  if (x.dtype != slope.dtype) {
    return node_error(node, "X is " + describe_tensor(x) + " but slope is " + describe_tensor(slope) + "; their types must match");
  }
  // Unidirectional broadcasting: slope broadcasts to X's shape, which the output keeps.
  RC_ASSIGN(const auto out_dims, broadcast_dims(node, x.dims, slope.dims));
  if (out_dims != x.dims) {
    return node_error(node, "slope " + format_dims(slope.dims) + " does not broadcast to X " + format_dims(x.dims));
  }
  y.reshape(x.dtype, x.dims);
  for_each_broadcast(x.dims, {x.dims, slope.dims}, [&](size_t k, const std::vector<size_t>& at) {
    if (x.is_float()) {
      const float v = x.f[at[0]];
      y.f[k] = v < 0.0f ? round_to_type(slope.f[at[1]] * v, x.dtype) : v;
    } else {
      const int64_t v = x.i[at[0]];
      // Wrapping product (computed on uint64), as the type's own arithmetic would.
      const auto product = static_cast<int64_t>(static_cast<uint64_t>(slope.i[at[1]]) * static_cast<uint64_t>(v));
      y.i[k] = v < 0 ? wrap_to_type(product, x.dtype) : v;
    }
  });
  return core::Ok{};
}

core::Status run_cast(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = *in[0];
  Tensor& y = *out[0];
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
      if (type == TensorProto::BOOL) {
        y.i[k] = v != 0.0f;
        continue;
      }
      // Out of the target's range (or NaN) a float has no integer value that runtimes agree on (C++ leaves it
      // undefined): refused. In range it truncates toward zero.
      const double t = std::trunc(static_cast<double>(v));
      if (!(t >= -9223372036854775808.0 && t < 9223372036854775808.0) ||
          wrap_to_type(static_cast<int64_t>(t), type) != static_cast<int64_t>(t)) {
        return node_error(node, "cast of " + std::to_string(v) + " to " + onnx_io::data_type_name(type) + " is out of its range");
      }
      y.i[k] = static_cast<int64_t>(t);
    } else {
      y.i[k] = wrap_to_type(x.i[k], type);
    }
  }
  return core::Ok{};
}

core::Status run_pow(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = *in[0];
  const Tensor& e = *in[1];
  Tensor& y = *out[0];
  RC_ASSIGN(const auto out_dims, broadcast_dims(node, x.dims, e.dims));
  y.reshape(x.dtype, out_dims);
  for_each_broadcast(out_dims, {x.dims, e.dims}, [&](size_t k, const std::vector<size_t>& at) {
    if (x.is_float()) {
      y.f[k] = round_to_type(static_cast<float>(std::pow(x.get(at[0]), e.get(at[1]))), x.dtype);
    } else if (!e.is_float()) {
      y.i[k] = wrap_to_type(integer_power(x.i[at[0]], e.i[at[1]]), x.dtype);
    } else {
      y.i[k] = wrap_to_type(truncate_to_int64(std::pow(x.get(at[0]), e.get(at[1]))), x.dtype);
    }
  });
  return core::Ok{};
}

core::Status run_equal(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  const Tensor& a = *in[0];
  const Tensor& b = *in[1];
  Tensor& y = *out[0];
  if (a.dtype != b.dtype) {
    return node_error(node, "inputs are " + describe_tensor(a) + " and " + describe_tensor(b) + "; their types must match");
  }
  RC_ASSIGN(const auto out_dims, broadcast_dims(node, a.dims, b.dims));
  y.reshape(TensorProto::BOOL, out_dims);
  for_each_broadcast(out_dims, {a.dims, b.dims}, [&](size_t k, const std::vector<size_t>& at) {
    y.i[k] = a.is_float() ? a.f[at[0]] == b.f[at[1]] : a.i[at[0]] == b.i[at[1]];
  });
  return core::Ok{};
}

core::Status run_where(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  const Tensor& condition = *in[0];
  const Tensor& x = *in[1];
  const Tensor& other = *in[2];
  Tensor& y = *out[0];
  if (condition.dtype != TensorProto::BOOL) {
    return node_error(node, "condition is " + describe_tensor(condition) + ", not BOOL");
  }
  if (x.dtype != other.dtype) {
    return node_error(node, "X is " + describe_tensor(x) + " but Y is " + describe_tensor(other) + "; their types must match");
  }
  RC_ASSIGN(const auto xy_dims, broadcast_dims(node, x.dims, other.dims));
  RC_ASSIGN(const auto out_dims, broadcast_dims(node, condition.dims, xy_dims));
  y.reshape(x.dtype, out_dims);
  for_each_broadcast(out_dims, {condition.dims, x.dims, other.dims}, [&](size_t k, const std::vector<size_t>& at) {
    const bool take_x = condition.i[at[0]] != 0;
    if (y.is_float()) y.f[k] = take_x ? x.f[at[1]] : other.f[at[2]];
    else y.i[k] = take_x ? x.i[at[1]] : other.i[at[2]];
  });
  return core::Ok{};
}

}  // namespace dwdeconv::ops::detail
