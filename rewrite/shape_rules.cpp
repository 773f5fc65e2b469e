#include "rewrite/shape_rules.h"

#include <limits>
#include <map>
#include <string>

#include "onnx_io/attributes.h"

namespace dwdeconv::rewrite {
namespace {

using Dim = onnx::TensorShapeProto_Dimension;
__extension__ typedef __int128 Int;  // Slice's bounds reach INT64_MIN and INT64_MAX; their sums with a dim must not overflow

// The attribute's ints, `fallback` when absent; nullopt when it has another type (the model is invalid: no rule).
std::optional<std::vector<int64_t>> ints_or(const onnx::NodeProto& node, const char* name, std::vector<int64_t> fallback) {
  auto v = onnx_io::get_ints(node, name, std::move(fallback));
  if (!v) return std::nullopt;
  return *v;
}

std::optional<int64_t> int_or(const onnx::NodeProto& node, const char* name, int64_t fallback) {
  auto v = onnx_io::get_int(node, name, fallback);
  if (!v) return std::nullopt;
  return *v;
}

bool find_attribute_present(const onnx::NodeProto& node, const char* name) { return onnx_io::find_attribute(node, name) != nullptr; }

const onnx::TensorShapeProto* shape_of(const onnx::TypeProto* t) {
  if (t == nullptr || !t->has_tensor_type() || !t->tensor_type().has_shape()) return nullptr;
  return &t->tensor_type().shape();
}

std::optional<int64_t> value_of(const Dim& d) { return d.has_dim_value() ? std::optional<int64_t>(d.dim_value()) : std::nullopt; }

onnx::TypeProto tensor_type(int32_t elem_type) {
  onnx::TypeProto t;
  t.mutable_tensor_type()->set_elem_type(elem_type);
  t.mutable_tensor_type()->mutable_shape();
  return t;
}

void add_value(onnx::TypeProto& t, std::optional<int64_t> v) {
  auto* d = t.mutable_tensor_type()->mutable_shape()->add_dim();
  if (v && *v >= 0) d->set_dim_value(*v);
}

void add_copy(onnx::TypeProto& t, const Dim& from) {
  auto* d = t.mutable_tensor_type()->mutable_shape()->add_dim();
  if (from.has_dim_value()) d->set_dim_value(from.dim_value());
  else if (from.has_dim_param()) d->set_dim_param(from.dim_param());
}

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

// One spatial axis of a pool, a Conv or a ConvTranspose: what its output length depends on.
struct Axis {
  int64_t in = 0, kernel = 1, stride = 1, dilation = 1, pad_begin = 0, pad_end = 0, output_padding = 0;
};

// Pools (MaxPool, AveragePool, LpPool), by the spec's formula: floor, or with ceil_mode ceil, of
// (in + pads - dilated kernel) / stride + 1, where with ceil_mode a window that would start in the right padding
// (at or past in + pad_begin) is dropped. auto_pad: VALID as no pads, SAME_* as ceil(in / stride).
std::optional<int64_t> pool_length(const Axis& a, const std::string& auto_pad, bool ceil_mode) {
  const int64_t dk = a.dilation * (a.kernel - 1) + 1;
  if (auto_pad != "NOTSET") {
    // ONNX Runtime sizes a dilated SAME pool by the undilated kernel, and a ceil_mode VALID or SAME one otherwise
    // than the spec's formula: not shapes both agree on.
    if (ceil_mode || a.dilation != 1) return std::nullopt;
    if (auto_pad != "VALID") return ceil_div(a.in, a.stride);
  }
  const int64_t pads = auto_pad == "VALID" ? 0 : a.pad_begin + a.pad_end;
  const int64_t span = a.in + pads - dk;
  if (span < 0) return std::nullopt;  // the runtimes refuse it
  if (!ceil_mode) return span / a.stride + 1;
  int64_t out = ceil_div(span, a.stride) + 1;
  if ((out - 1) * a.stride >= a.in + a.pad_begin) --out;  // the last window starts in the right padding
  return out;
}

std::optional<int64_t> conv_length(const Axis& a, const std::string& auto_pad) {
  const int64_t dk = a.dilation * (a.kernel - 1) + 1;
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") return ceil_div(a.in, a.stride);
  const int64_t pads = auto_pad == "VALID" ? 0 : a.pad_begin + a.pad_end;
  const int64_t span = a.in + pads - dk;
  if (span < 0) return std::nullopt;
  return span / a.stride + 1;
}

// ConvTranspose without output_shape: SAME_* gives in * stride (output_padding only moves the pads), otherwise
// stride * (in - 1) + output_padding + dilated kernel - pads.
std::optional<int64_t> conv_transpose_length(const Axis& a, const std::string& auto_pad) {
  const int64_t dk = a.dilation * (a.kernel - 1) + 1;
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    // The spec says in * stride; ONNX Runtime pads by max(0, full - in * stride), so where the full output is
    // shorter (a kernel and output_padding that do not cover the stride) it gives the full output instead.
    if (a.stride * (a.in - 1) + a.output_padding + dk < a.in * a.stride) return std::nullopt;
    return a.in * a.stride;
  }
  const int64_t pads = auto_pad == "VALID" ? 0 : a.pad_begin + a.pad_end;
  const int64_t out = a.stride * (a.in - 1) + a.output_padding + dk - pads;
  if (out <= 0) return std::nullopt;
  return out;
}

// Pools, Conv and ConvTranspose: batch, channels, then one length per spatial axis.
std::optional<std::vector<onnx::TypeProto>> windowed(const onnx::NodeProto& node, int64_t opset,
                                                     const std::vector<const onnx::TypeProto*>& inputs) {
  const std::string& op = node.op_type();
  const bool pool = op == "MaxPool" || op == "AveragePool" || op == "LpPool";
  const auto* x = inputs.empty() ? nullptr : shape_of(inputs[0]);
  if (x == nullptr || x->dim_size() < 3) return std::nullopt;
  const int spatial = x->dim_size() - 2;
  const auto* w = !pool && inputs.size() > 1 ? shape_of(inputs[1]) : nullptr;
  if (w != nullptr && w->dim_size() != x->dim_size()) return std::nullopt;

  auto auto_pad_attr = onnx_io::get_string(node, "auto_pad", "NOTSET");
  auto group = int_or(node, "group", 1);
  auto ceil_mode = int_or(node, "ceil_mode", 0);
  auto kernel = ints_or(node, "kernel_shape", {});
  auto strides = ints_or(node, "strides", std::vector<int64_t>(static_cast<size_t>(spatial), 1));
  auto dilations = ints_or(node, "dilations", std::vector<int64_t>(static_cast<size_t>(spatial), 1));
  auto pads = ints_or(node, "pads", std::vector<int64_t>(2 * static_cast<size_t>(spatial), 0));
  auto output_padding = ints_or(node, "output_padding", std::vector<int64_t>(static_cast<size_t>(spatial), 0));
  auto output_shape = ints_or(node, "output_shape", {});
  if (!auto_pad_attr || !group || !ceil_mode || !kernel || !strides || !dilations || !pads || !output_padding || !output_shape) {
    return std::nullopt;
  }
  const std::string auto_pad = *auto_pad_attr;
  const int32_t elem = inputs[0]->tensor_type().elem_type();
  onnx::TypeProto y = tensor_type(elem);
  add_copy(y, x->dim(0));
  if (pool) {
    add_copy(y, x->dim(1));
  } else if (w == nullptr) {
    add_value(y, std::nullopt);
  } else if (op == "Conv") {
    add_copy(y, w->dim(0));
  } else {
    add_value(y, value_of(w->dim(1)) ? std::optional<int64_t>(w->dim(1).dim_value() * *group) : std::nullopt);
  }
  // An attribute this opset's version of the op does not have: ONNX Runtime refuses or ignores it, libonnx reads the
  // model with its own newest schema. No rule both agree on.
  const bool foreign_attr =
      (op == "AveragePool" && opset < 19 && find_attribute_present(node, "dilations")) ||
      (op == "LpPool" && opset < 18 && (find_attribute_present(node, "dilations") || find_attribute_present(node, "ceil_mode"))) ||
      (op == "MaxPool" && opset < 10 && (find_attribute_present(node, "dilations") || find_attribute_present(node, "ceil_mode")));
  const bool shapes_ok = static_cast<int>(strides->size()) == spatial && static_cast<int>(dilations->size()) == spatial &&
                         static_cast<int>(pads->size()) == 2 * spatial && static_cast<int>(output_padding->size()) == spatial &&
                         (kernel->empty() || static_cast<int>(kernel->size()) == spatial) && (!pool || !kernel->empty()) &&
                         (auto_pad == "NOTSET" || auto_pad == "VALID" || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") &&
                         *group >= 1;
  const bool explicit_output = op == "ConvTranspose" && !output_shape->empty();
  for (int i = 0; i < spatial; ++i) {
    const auto k = static_cast<size_t>(i);
    std::optional<int64_t> length;
    if (shapes_ok && !foreign_attr) {
      if (explicit_output) {
        // output_shape names the spatial dims (or all of them); ONNX Runtime reads its last `spatial` entries.
        if (static_cast<int>(output_shape->size()) == spatial || static_cast<int>(output_shape->size()) == spatial + 2) {
          length = (*output_shape)[output_shape->size() - static_cast<size_t>(spatial) + k];
          if (*length <= 0) length.reset();
        }
      } else {
        Axis a;
        const auto in = value_of(x->dim(i + 2));
        const auto kw = !kernel->empty() ? std::optional<int64_t>((*kernel)[k]) : w != nullptr ? value_of(w->dim(i + 2)) : std::nullopt;
        if (in && kw) {
          a.in = *in;
          a.kernel = *kw;
          a.stride = (*strides)[k];
          a.dilation = (*dilations)[k];
          a.pad_begin = (*pads)[k];
          a.pad_end = (*pads)[k + static_cast<size_t>(spatial)];
          a.output_padding = (*output_padding)[k];
          if (a.in >= 0 && a.kernel >= 1 && a.stride >= 1 && a.dilation >= 1 && a.pad_begin >= 0 && a.pad_end >= 0 &&
              a.output_padding >= 0) {
            length = pool           ? pool_length(a, auto_pad, *ceil_mode != 0)
                     : op == "Conv" ? conv_length(a, auto_pad)
                                    : conv_transpose_length(a, auto_pad);
          }
        }
      }
    }
    add_value(y, length);
  }
  std::vector<onnx::TypeProto> out{y};
  if (op == "MaxPool" && node.output_size() > 1) {
    onnx::TypeProto indices = y;
    indices.mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
    out.push_back(indices);
  }
  return out;
}

// Slice, by the spec: a negative start or end counts from the dim's end; then with a positive step both are
// clamped to [0, dim], with a negative one start to [0, dim - 1] and end to [-1, dim - 1]; the length is
// ceil((end - start) / step), at least 0.
std::optional<int64_t> slice_length(int64_t dim, int64_t start, int64_t end, int64_t step) {
  Int s = start, e = end;
  const Int d = dim;
  if (s < 0) s += d;
  if (e < 0) e += d;
  if (step > 0) {
    s = s < 0 ? 0 : s > d ? d : s;
    e = e < 0 ? 0 : e > d ? d : e;
    if (e <= s) return 0;
    return static_cast<int64_t>((e - s + step - 1) / step);
  }
  s = s < 0 ? 0 : s > d - 1 ? d - 1 : s;
  e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
  if (s <= e) return 0;
  const Int neg = -static_cast<Int>(step);
  return static_cast<int64_t>((s - e + neg - 1) / neg);
}

std::optional<std::vector<onnx::TypeProto>> slice(const onnx::NodeProto& node, int64_t opset,
                                                  const std::vector<const onnx::TypeProto*>& inputs, const ConstantInput& constant) {
  const auto* x = inputs.empty() ? nullptr : shape_of(inputs[0]);
  if (x == nullptr) return std::nullopt;
  const int rank = x->dim_size();
  onnx::TypeProto y = tensor_type(inputs[0]->tensor_type().elem_type());
  std::optional<std::vector<int64_t>> starts, ends, axes, steps;
  if (opset < 10) {
    starts = ints_or(node, "starts", {});
    ends = ints_or(node, "ends", {});
    axes = ints_or(node, "axes", {});
    steps = std::vector<int64_t>{};
  } else {
    auto read = [&](int k) -> std::optional<std::vector<int64_t>> {
      if (node.input_size() <= k || node.input(k).empty()) return std::vector<int64_t>{};  // absent: the default
      return constant(k);
    };
    starts = read(1);
    ends = read(2);
    axes = read(3);
    steps = read(4);
  }
  // Without the axes, which dims keep their length is not known either.
  if (!axes) {
    for (int i = 0; i < rank; ++i) add_value(y, std::nullopt);
    return std::vector<onnx::TypeProto>{y};
  }
  const bool bounds = starts && ends && steps;
  const size_t n = starts ? starts->size() : axes->size();
  if (axes->empty()) {
    for (size_t k = 0; k < n; ++k) axes->push_back(static_cast<int64_t>(k));
  }
  if (bounds && (ends->size() != n || (!steps->empty() && steps->size() != n))) return std::nullopt;
  if (bounds && axes->size() != n) return std::nullopt;
  std::map<int64_t, size_t> sliced;  // axis -> position in starts, ends and steps
  for (size_t k = 0; k < axes->size(); ++k) {
    int64_t a = (*axes)[k];
    if (a < -rank || a >= rank) return std::nullopt;
    if (a < 0) a += rank;
    if (!sliced.emplace(a, k).second) return std::nullopt;
  }
  for (int i = 0; i < rank; ++i) {
    const auto it = sliced.find(i);
    if (it == sliced.end()) {
      add_copy(y, x->dim(i));
      continue;
    }
    const auto dim = value_of(x->dim(i));
    if (!bounds || !dim) {
      add_value(y, std::nullopt);
      continue;
    }
    const int64_t step = steps->empty() ? 1 : (*steps)[it->second];
    if (step == 0) return std::nullopt;
    // With a negative step, the spec clamps an end of INT64_MAX to dim - 1 (nothing taken), ONNX Runtime reads it as
    // "to the start" (everything): no length both agree on.
    if (step < 0 && (*ends)[it->second] == std::numeric_limits<int64_t>::max()) {
      add_value(y, std::nullopt);
      continue;
    }
    add_value(y, slice_length(*dim, (*starts)[it->second], (*ends)[it->second], step));
  }
  return std::vector<onnx::TypeProto>{y};
}

}  // namespace

std::optional<std::vector<onnx::TypeProto>> spec_output_types(const onnx::NodeProto& node, int64_t opset,
                                                              const std::vector<const onnx::TypeProto*>& inputs,
                                                              const ConstantInput& constant) {
  if (!(node.domain().empty() || node.domain() == "ai.onnx")) return std::nullopt;
  const std::string& op = node.op_type();
  if (inputs.empty() || inputs[0] == nullptr || !inputs[0]->has_tensor_type()) return std::nullopt;
  if (op == "MaxPool" || op == "AveragePool" || op == "LpPool" || op == "Conv" || op == "ConvTranspose") {
    return windowed(node, opset, inputs);
  }
  if (op == "Slice") return slice(node, opset, inputs, constant);
  const auto policy = onnx_io::get_string(node, "keep_aspect_ratio_policy", "stretch");
  if (op == "Resize" && opset >= 18 && (find_attribute_present(node, "axes") || !policy || *policy != "stretch")) {
    // libonnx 1.12 reads an opset-18 Resize with its opset-13 schema: axes and keep_aspect_ratio_policy unread.
    const auto* x = shape_of(inputs[0]);
    if (x == nullptr) return std::nullopt;
    onnx::TypeProto y = tensor_type(inputs[0]->tensor_type().elem_type());
    for (int i = 0; i < x->dim_size(); ++i) add_value(y, std::nullopt);
    return std::vector<onnx::TypeProto>{y};
  }
  return std::nullopt;
}

bool contradicts(const onnx::TypeProto& inferred, const onnx::TypeProto& spec) {
  const auto* a = shape_of(&inferred);
  const auto* b = shape_of(&spec);
  if (a == nullptr || b == nullptr) return false;
  if (a->dim_size() != b->dim_size()) return true;
  for (int k = 0; k < a->dim_size(); ++k) {
    if (a->dim(k).has_dim_value() && (!b->dim(k).has_dim_value() || b->dim(k).dim_value() != a->dim(k).dim_value())) return true;
  }
  return false;
}

}  // namespace dwdeconv::rewrite
