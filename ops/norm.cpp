// Normalization and reduction reference kernels: BatchNormalization, InstanceNormalization, the Reduce ops,
// Softmax and LogSoftmax, ArgMax.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/kernels.h"

namespace dwdeconv::ops::detail {

core::Status run_batch_norm(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  Tensor& y = *out[0];
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

core::Status run_instance_norm(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  Tensor& y = *out[0];
  if (in.size() < 3 || in[1] == nullptr || in[2] == nullptr) return node_error(node, "needs input, scale and B");
  const Tensor& x = *in[0];
  const Tensor& scale = *in[1];
  const Tensor& bias = *in[2];
  if (!x.is_float() || x.dims.size() < 3) {
    return node_error(node, "needs a float input of rank >= 3, not " + describe_tensor(x));
  }
  const int64_t c = x.dims[1];
  if (scale.numel() != c || bias.numel() != c) {
    return node_error(node, "scale " + describe_tensor(scale) + " and B " + describe_tensor(bias) + " must hold one value per channel (" +
                                std::to_string(c) + ")");
  }
  const double epsilon = attr_float(node, "epsilon", 1e-5f);
  int64_t inner = 1;
  for (size_t a = 2; a < x.dims.size(); ++a) inner *= x.dims[a];
  y.reshape(x.dtype, x.dims);
  // Mean and (population) variance per image and channel, then scale * (x - mean) / sqrt(var + epsilon) + B.
  for (int64_t plane = 0; plane < x.dims[0] * c; ++plane) {
    const int64_t ch = plane % c;
    const float* src = x.f.data() + plane * inner;
    double sum = 0.0, sum_sq = 0.0;
    for (int64_t k = 0; k < inner; ++k) sum += src[k];
    const double mean = inner > 0 ? sum / static_cast<double>(inner) : 0.0;
    for (int64_t k = 0; k < inner; ++k) sum_sq += (src[k] - mean) * (src[k] - mean);
    const double var = inner > 0 ? sum_sq / static_cast<double>(inner) : 0.0;
    const double gain = scale.get(ch) / std::sqrt(var + epsilon);
    for (int64_t k = 0; k < inner; ++k) {
      const double r = (src[k] - mean) * gain + bias.get(ch);
      y.f[static_cast<size_t>(plane * inner + k)] = round_to_type(static_cast<float>(r), x.dtype);
    }
  }
  return core::Ok{};
}

core::Status run_reduce(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  const int64_t opset = ctx.opset;
  Tensor& y = *out[0];
  const Tensor& x = *in[0];
  const std::string& op = node.op_type();
  const bool is_max = op == "ReduceMax", is_sum = op == "ReduceSum";
  const auto rank = static_cast<int64_t>(x.dims.size());
  RC_ASSIGN(const int64_t keepdims, attr_int(node, "keepdims", 1));
  std::vector<int64_t> axes;
  if (opset >= (is_sum ? 13 : 18)) {  // axes moved from an attribute to an optional input
    if (const Tensor* t = input_or_null(in, 1)) axes = int_values(*t);
    RC_ASSIGN(const int64_t noop, attr_int(node, "noop_with_empty_axes", 0));
    if (axes.empty() && noop != 0) {
      copy_data(x, y, x.dims);
      return core::Ok{};
    }
  } else {
    RC_ASSIGN(axes, onnx_io::get_ints(node, "axes", {}));
  }
  // No axes: reduce every axis.
  std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty());
  for (int64_t a : axes) {
    const int64_t given = a;
    RC_CHECK(resolve_axis(node, a, rank));
    if (reduced[static_cast<size_t>(a)]) return node_error(node, "axis " + std::to_string(given) + " is repeated");
    reduced[static_cast<size_t>(a)] = true;
  }
  // The output indexed with the input's rank (reduced axes of size 1), and its strides.
  std::vector<int64_t> kept(x.dims), dims;
  int64_t count = 1;
  for (size_t a = 0; a < kept.size(); ++a) {
    if (reduced[a]) {
      count *= kept[a];
      kept[a] = 1;
    }
    if (!reduced[a] || keepdims != 0) dims.push_back(kept[a]);
  }
  int64_t out_count = 1;
  for (int64_t d : kept) out_count *= d;
  const auto kept_strides = strides_of(kept);
  // Integer sums and maxima stay exact in int64 (sums wrap, as the type's arithmetic would); the rest is double.
  const bool exact = !x.is_float() && (is_max || is_sum);
  std::vector<double> acc(static_cast<size_t>(out_count), is_max ? -std::numeric_limits<double>::infinity() : 0.0);
  std::vector<int64_t> exact_acc(exact ? static_cast<size_t>(out_count) : 0, is_max ? std::numeric_limits<int64_t>::min() : 0);
  for_each_index(x.dims, [&](int64_t k, const std::vector<int64_t>& idx) {
    int64_t dst = 0;
    for (size_t a = 0; a < idx.size(); ++a) dst += (reduced[a] ? 0 : idx[a]) * kept_strides[a];
    const auto o = static_cast<size_t>(dst);
    if (exact) {
      const int64_t v = x.i[static_cast<size_t>(k)];
      exact_acc[o] =
          is_max ? std::max(exact_acc[o], v) : static_cast<int64_t>(static_cast<uint64_t>(exact_acc[o]) + static_cast<uint64_t>(v));
    } else {
      acc[o] = is_max ? std::max(acc[o], x.get(k)) : acc[o] + x.get(k);
    }
  });
  y.reshape(x.dtype, dims);
  for (size_t k = 0; k < acc.size(); ++k) {
    if (exact) {
      y.i[k] = wrap_to_type(exact_acc[k], x.dtype);
      continue;
    }
    // A mean over an empty axis is NaN, as numpy gives.
    const double r = is_max || is_sum ? acc[k] : acc[k] / static_cast<double>(count);
    if (y.is_float()) y.f[k] = round_to_type(static_cast<float>(r), x.dtype);
    else y.i[k] = wrap_to_type(truncate_to_int64(r), x.dtype);
  }
  return core::Ok{};
}

core::Status run_softmax(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  const int64_t opset = ctx.opset;
  const Tensor& x = *in[0];
  Tensor& y = *out[0];
  const bool log_softmax = node.op_type() == "LogSoftmax";
  if (!x.is_float()) return node_error(node, "needs a float input, not " + describe_tensor(x));
  const auto rank = static_cast<int64_t>(x.dims.size());
  RC_ASSIGN(int64_t axis, attr_int(node, "axis", opset < 13 ? 1 : -1));
  RC_CHECK(resolve_axis(node, axis, rank));
  // Before opset 13 the input is coerced to 2-D [outer, everything from axis on]; from 13, one axis.
  int64_t outer = 1, length = 1, inner = 1;
  for (int64_t a = 0; a < rank; ++a) {
    const int64_t d = x.dims[static_cast<size_t>(a)];
    if (a < axis) outer *= d;
    else if (a == axis || opset < 13) length *= d;
    else inner *= d;
  }
  y.reshape(x.dtype, x.dims);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) { return static_cast<size_t>((o * length + j) * inner + i); };
      double top = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < length; ++j) top = std::max(top, static_cast<double>(x.f[at(j)]));
      double total = 0.0;
      for (int64_t j = 0; j < length; ++j) total += std::exp(x.f[at(j)] - top);
      // softmax = exp(x - top) / total; log_softmax = (x - top) - log(total), which stays finite where the
      // softmax underflows to 0.
      for (int64_t j = 0; j < length; ++j) {
        const double shifted = x.f[at(j)] - top;
        const double r = log_softmax ? shifted - std::log(total) : std::exp(shifted) / total;
        y.f[at(j)] = round_to_type(static_cast<float>(r), x.dtype);
      }
    }
  return core::Ok{};
}

core::Status run_argmax(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = *in[0];
  Tensor& y = *out[0];
  const auto rank = static_cast<int64_t>(x.dims.size());
  RC_ASSIGN(int64_t axis, attr_int(node, "axis", 0));
  RC_CHECK(resolve_axis(node, axis, rank));
  RC_ASSIGN(const int64_t keepdims, attr_int(node, "keepdims", 1));
  RC_ASSIGN(const int64_t select_last, attr_int(node, "select_last_index", 0));
  const int64_t length = x.dims[static_cast<size_t>(axis)];
  if (length == 0) return node_error(node, "axis " + std::to_string(axis) + " is empty: it has no maximum");
  // NaN has no place in the order: numpy (the ONNX reference) takes the first NaN as the maximum, ONNX Runtime
  // skips NaNs. Refused rather than answered one way.
  if (x.is_float() && std::any_of(x.f.begin(), x.f.end(), [](float v) { return std::isnan(v); })) {
    return node_error(node, "input holds NaN, whose index runtimes answer differently");
  }
  int64_t outer = 1, inner = 1;
  for (int64_t a = 0; a < rank; ++a) {
    if (a < axis) outer *= x.dims[static_cast<size_t>(a)];
    if (a > axis) inner *= x.dims[static_cast<size_t>(a)];
  }
  std::vector<int64_t> dims = x.dims;
  if (keepdims != 0) dims[static_cast<size_t>(axis)] = 1;
  else dims.erase(dims.begin() + axis);
  y.reshape(onnx::TensorProto::INT64, dims);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) { return (o * length + j) * inner + i; };
      // The first index of the maximum, or with select_last_index the last: a later equal value replaces it only
      // then. Integers compare exactly, as int64.
      int64_t best = 0;
      for (int64_t j = 1; j < length; ++j) {
        const auto k = static_cast<size_t>(at(j)), b = static_cast<size_t>(at(best));
        const bool greater = x.is_float() ? x.f[k] > x.f[b] : x.i[k] > x.i[b];
        const bool equal = x.is_float() ? x.f[k] == x.f[b] : x.i[k] == x.i[b];
        if (greater || (equal && select_last != 0)) best = j;
      }
      y.i[static_cast<size_t>(o * inner + i)] = best;
    }
  return core::Ok{};
}

}  // namespace dwdeconv::ops::detail
