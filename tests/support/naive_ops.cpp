// The naive executor's op kernels: each evaluates one node with the obvious loops (core/reference.h).
#include "tests/support/naive_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace dwdeconv::test::naive {

int64_t attr_int(const onnx::NodeProto& node, const std::string& name, int64_t fallback) {
  const auto* a = attr(node, name);
  if (a == nullptr) return fallback;
  if (a->type() != onnx::AttributeProto::INT) fail(node, "attribute " + name + " is not INT");
  return a->i();
}

std::vector<int64_t> attr_ints(const onnx::NodeProto& node, const std::string& name, std::vector<int64_t> fallback) {
  const auto* a = attr(node, name);
  if (a == nullptr) return fallback;
  if (a->type() != onnx::AttributeProto::INTS) fail(node, "attribute " + name + " is not INTS");
  return {a->ints().begin(), a->ints().end()};
}

std::string attr_string(const onnx::NodeProto& node, const std::string& name, std::string fallback) {
  const auto* a = attr(node, name);
  if (a == nullptr) return fallback;
  if (a->type() != onnx::AttributeProto::STRING) fail(node, "attribute " + name + " is not STRING");
  return a->s();
}

std::vector<double> bias_of(const onnx::NodeProto& node, const Env& env) {
  const NaiveTensor* b = optional_input(node, env, 2);
  return b == nullptr ? std::vector<double>{} : b->data;
}

std::array<int64_t, 2> two(const onnx::NodeProto& node, const std::vector<int64_t>& v, const std::string& what) {
  if (v.size() != 2) fail(node, what + " must have 2 values");
  return {v[0], v[1]};
}

// A 1-D Conv or ConvTranspose ([N, C, L], weight [.., .., K]) as the 2-D one with a unit H axis: its input, weight
// and attributes lifted (k 1, stride and dilation 1, no pads on H), run by `run`, and the output's H axis dropped.
NaiveTensor run_one_d(const onnx::NodeProto& node, const Env& env, NaiveTensor (*run)(const onnx::NodeProto&, const Env&)) {
  onnx::NodeProto lifted = node;
  lifted.clear_input();
  Env lifted_env;
  for (int i = 0; i < node.input_size(); ++i) {
    const std::string name = "lifted_" + std::to_string(i);
    lifted.add_input(node.input(i).empty() ? "" : name);
    if (node.input(i).empty()) continue;
    NaiveTensor t = input(node, env, i);
    if (i < 2) {
      if (t.dims.size() != 3) fail(node, "a 1-D input or weight must have rank 3");
      t.dims.insert(t.dims.begin() + 2, 1);
    }
    lifted_env.emplace(name, std::move(t));
  }
  for (auto& a : *lifted.mutable_attribute()) {
    const std::string& n = a.name();
    if (n != "strides" && n != "dilations" && n != "kernel_shape" && n != "pads" && n != "output_padding" && n != "output_shape") continue;
    std::vector<int64_t> v(a.ints().begin(), a.ints().end());
    if (n == "pads") {
      if (v.size() != 2) fail(node, "pads must have 2 values for a 1-D node");
      v = {0, v[0], 0, v[1]};
    } else if (n == "output_shape") {
      if (v.size() == 3) v.erase(v.begin(), v.begin() + 2);
      if (v.size() != 1) fail(node, "output_shape must have 1 or 3 values for a 1-D node");
      v = {1, v[0]};
    } else {
      if (v.size() != 1) fail(node, n + " must have 1 value for a 1-D node");
      v = {n == "output_padding" ? 0 : 1, v[0]};
    }
    a.clear_ints();
    for (int64_t e : v) a.add_ints(e);
  }
  NaiveTensor y = run(lifted, lifted_env);
  y.dims.erase(y.dims.begin() + 2);
  return y;
}

NaiveTensor run_conv(const onnx::NodeProto& node, const Env& env) {
  if (input(node, env, 0).dims.size() == 3) return run_one_d(node, env, run_conv);
  const auto x = input(node, env, 0).as_tensor4();
  const auto w = input(node, env, 1).as_tensor4();
  const std::string auto_pad = attr_string(node, "auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID") fail(node, "auto_pad " + auto_pad + " is not implemented");
  core::Conv2dParams p;
  p.group = attr_int(node, "group", 1);
  p.strides = two(node, attr_ints(node, "strides", {1, 1}), "strides");
  p.dilations = two(node, attr_ints(node, "dilations", {1, 1}), "dilations");
  const auto pads = attr_ints(node, "pads", {0, 0, 0, 0});
  if (pads.size() != 4) fail(node, "pads must have 4 values");
  for (int64_t v : pads) {
    if (v < 0) fail(node, "Conv pads must not be negative");
  }
  if (auto_pad == "NOTSET") p.pads = {pads[0], pads[1], pads[2], pads[3]};
  const auto ks = attr_ints(node, "kernel_shape", {w.h, w.w});
  if (ks != std::vector<int64_t>{w.h, w.w}) fail(node, "kernel_shape disagrees with the weight");
  if (x.c != w.c * p.group) fail(node, "input channels do not match weight and group");
  return core::conv2d_reference(x, w, bias_of(node, env), p);
}

NaiveTensor run_conv_transpose(const onnx::NodeProto& node, const Env& env) {
  if (input(node, env, 0).dims.size() == 3) return run_one_d(node, env, run_conv_transpose);
  const auto x = input(node, env, 0).as_tensor4();
  const auto w = input(node, env, 1).as_tensor4();
  core::ConvTranspose2dParams p;
  p.group = attr_int(node, "group", 1);
  p.strides = two(node, attr_ints(node, "strides", {1, 1}), "strides");
  p.dilations = two(node, attr_ints(node, "dilations", {1, 1}), "dilations");
  p.output_padding = two(node, attr_ints(node, "output_padding", {0, 0}), "output_padding");
  const auto pads = attr_ints(node, "pads", {0, 0, 0, 0});
  if (pads.size() != 4) fail(node, "pads must have 4 values");
  auto output_shape = attr_ints(node, "output_shape", {});
  if (output_shape.size() == 4) output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
  if (!output_shape.empty() && output_shape.size() != 2) fail(node, "output_shape must have 2 or 4 values");
  const std::string auto_pad = attr_string(node, "auto_pad", "NOTSET");
  const std::array<int64_t, 2> in{x.h, x.w}, k{w.h, w.w};
  for (size_t axis = 0; axis < 2; ++axis) {
    const auto [begin, end] = naive_deconv_pads(in[axis], k[axis], p.strides[axis], p.dilations[axis], p.output_padding[axis], auto_pad,
                                                pads[axis], pads[axis + 2], output_shape.empty() ? -1 : output_shape[axis]);
    p.pads[axis] = begin;
    p.pads[axis + 2] = end;
  }
  if (x.c != w.n) fail(node, "input channels do not match the weight");
  return core::conv_transpose2d_reference(x, w, bias_of(node, env), p);
}

NaiveTensor run_pad_generic(const onnx::NodeProto& node, const NaiveTensor& x, const std::vector<int64_t>& pads, double value);

NaiveTensor run_pad(const onnx::NodeProto& node, const Env& env, int64_t opset) {
  if (input(node, env, 0).dims.size() == 3 && opset >= 11 && optional_input(node, env, 3) == nullptr) {
    // A 1-D tensor [N, C, L], in any mode: the 4-D Pad of [N, C, 1, L] with nothing on H, then H dropped.
    const std::vector<double>& p = input(node, env, 1).data;
    if (p.size() != 6) fail(node, "pads must have 6 values for a 3-D input");
    onnx::NodeProto lifted = node;
    lifted.clear_input();
    Env lifted_env;
    NaiveTensor x = input(node, env, 0);
    x.dims.insert(x.dims.begin() + 2, 1);
    lifted_env.emplace("x", std::move(x));
    lifted_env.emplace("pads", NaiveTensor({8}, {p[0], p[1], 0, p[2], p[3], p[4], 0, p[5]}));
    lifted.add_input("x");
    lifted.add_input("pads");
    if (const NaiveTensor* c = optional_input(node, env, 2)) {
      lifted_env.emplace("value", *c);
      lifted.add_input("value");
    }
    NaiveTensor y = run_pad(lifted, lifted_env, opset);
    y.dims.erase(y.dims.begin() + 2);
    return y;
  }
  if (input(node, env, 0).dims.size() != 4) {
    // Any other rank (StyleGAN2-ADA's zero insertion pads a 6-D tensor): input-form pads, no axes.
    if (opset < 11 || optional_input(node, env, 3) != nullptr)
      fail(node, "only input-form pads without axes are implemented for rank != 4");
    if (attr_string(node, "mode", "constant") != "constant") fail(node, "only constant mode is implemented");
    std::vector<int64_t> pads;
    for (double v : input(node, env, 1).data) pads.push_back(static_cast<int64_t>(v));
    const NaiveTensor* c = optional_input(node, env, 2);
    return run_pad_generic(node, input(node, env, 0), pads, c == nullptr ? 0.0 : c->data.at(0));
  }
  const auto x = input(node, env, 0).as_tensor4();
  const std::string mode = attr_string(node, "mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge") fail(node, "mode " + mode + " is not implemented");
  std::vector<int64_t> pads;
  double value = 0.0;
  if (opset < 11) {
    pads = attr_ints(node, opset >= 2 ? "pads" : "paddings", {});
    if (const auto* a = attr(node, "value")) value = a->f();
  } else {
    for (double v : input(node, env, 1).data) pads.push_back(static_cast<int64_t>(v));
    if (const NaiveTensor* c = optional_input(node, env, 2)) value = c->data.at(0);
    if (const NaiveTensor* axes = optional_input(node, env, 3)) {
      // Scatter the listed axes' pads into the full [begins..., ends...] form.
      std::vector<int64_t> full(8, 0);
      const size_t n = axes->data.size();
      if (pads.size() != 2 * n) fail(node, "pads do not match axes");
      for (size_t i = 0; i < n; ++i) {
        int64_t a = static_cast<int64_t>(axes->data[i]);
        if (a < 0) a += 4;
        full[static_cast<size_t>(a)] = pads[i];
        full[static_cast<size_t>(a) + 4] = pads[i + n];
      }
      pads = full;
    }
  }
  if (pads.size() != 8) fail(node, "pads must have 8 values for a 4-D input");
  if (pads[0] != 0 || pads[1] != 0 || pads[4] != 0 || pads[5] != 0) fail(node, "padding N or C is not implemented");
  if (mode == "constant") return core::pad2d_reference(x, {pads[2], pads[3], pads[6], pads[7]}, value);
  // reflect (the edge sample is not repeated) and edge (it is, as often as needed), straight from the spec, for
  // non-negative pads.
  for (int64_t p : pads) {
    if (p < 0) fail(node, "negative pads are implemented in constant mode only");
  }
  const auto source = [&](int64_t i, int64_t n) {
    if (mode == "edge") return std::clamp<int64_t>(i, 0, n - 1);
    while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;
    return i;
  };
  core::Tensor4 y(x.n, x.c, x.h + pads[2] + pads[6], x.w + pads[3] + pads[7]);
  for (int64_t n = 0; n < y.n; ++n)
    for (int64_t c = 0; c < y.c; ++c)
      for (int64_t i = 0; i < y.h; ++i)
        for (int64_t j = 0; j < y.w; ++j) y.at(n, c, i, j) = x.at(n, c, source(i - pads[2], x.h), source(j - pads[3], x.w));
  return y;
}

// Row-major strides of `dims`.
std::vector<int64_t> strides_of(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return strides;
}

int64_t count_of(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Calls f(coords, flat) for every element of a tensor of `dims`, in row-major order.
template <typename F>
void for_each_coord(const std::vector<int64_t>& dims, F f) {
  std::vector<int64_t> c(dims.size(), 0);
  for (int64_t i = 0, n = count_of(dims); i < n; ++i) {
    f(c, i);
    for (size_t d = dims.size(); d-- > 0;) {
      if (++c[d] < dims[d]) break;
      c[d] = 0;
    }
  }
}

// Constant padding of any rank, non-negative pads [begins..., ends...].
NaiveTensor run_pad_generic(const onnx::NodeProto& node, const NaiveTensor& x, const std::vector<int64_t>& pads, double value) {
  const size_t rank = x.dims.size();
  if (pads.size() != 2 * rank) fail(node, "pads do not match the rank");
  std::vector<int64_t> dims = x.dims;
  for (size_t d = 0; d < rank; ++d) {
    if (pads[d] < 0 || pads[d + rank] < 0) fail(node, "negative pads are not implemented for rank != 4");
    dims[d] += pads[d] + pads[d + rank];
  }
  const auto so = strides_of(dims);
  NaiveTensor out(dims, std::vector<double>(static_cast<size_t>(count_of(dims)), value));
  for_each_coord(x.dims, [&](const std::vector<int64_t>& c, int64_t flat) {
    int64_t dst = 0;
    for (size_t d = 0; d < rank; ++d) dst += (c[d] + pads[d]) * so[d];
    out.data[static_cast<size_t>(dst)] = x.data[static_cast<size_t>(flat)];
  });
  return out;
}

// The int64 values of input i (axes, shapes, repeats).
std::vector<int64_t> ints_input(const onnx::NodeProto& node, const Env& env, int i) {
  std::vector<int64_t> v;
  for (double d : input(node, env, i).data) v.push_back(static_cast<int64_t>(d));
  return v;
}

// Unsqueeze with axes as an attribute (before opset 13) or an input (13 on).
NaiveTensor run_unsqueeze(const onnx::NodeProto& node, const Env& env) {
  NaiveTensor x = input(node, env, 0);
  const auto axes = node.input_size() > 1 ? ints_input(node, env, 1) : attr_ints(node, "axes", {});
  const auto rank = static_cast<int64_t>(x.dims.size() + axes.size());
  std::vector<bool> inserted(static_cast<size_t>(rank), false);
  for (int64_t a : axes) inserted.at(static_cast<size_t>(a < 0 ? a + rank : a)) = true;
  std::vector<int64_t> dims;
  size_t next = 0;
  for (int64_t i = 0; i < rank; ++i) dims.push_back(inserted[static_cast<size_t>(i)] ? 1 : x.dims.at(next++));
  x.dims = dims;
  return x;
}

NaiveTensor run_squeeze(const onnx::NodeProto& node, const Env& env) {
  NaiveTensor x = input(node, env, 0);
  const auto axes = node.input_size() > 1 ? ints_input(node, env, 1) : attr_ints(node, "axes", {});
  const auto rank = static_cast<int64_t>(x.dims.size());
  std::vector<bool> removed(static_cast<size_t>(rank), axes.empty());
  for (int64_t a : axes) removed.at(static_cast<size_t>(a < 0 ? a + rank : a)) = true;
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t d = x.dims[static_cast<size_t>(i)];
    if (!removed[static_cast<size_t>(i)]) {
      dims.push_back(d);
    } else if (d != 1 && !axes.empty()) {
      fail(node, "squeezes an axis of extent " + std::to_string(d));
    } else if (d != 1) {
      dims.push_back(d);  // no axes: only the unit ones go
    }
  }
  x.dims = dims;
  return x;
}

// Expand (bidirectional broadcast) and Tile (repeats), written as one gather each.
NaiveTensor run_expand_or_tile(const onnx::NodeProto& node, const Env& env, bool tile) {
  const NaiveTensor& x = input(node, env, 0);
  const auto arg = ints_input(node, env, 1);
  std::vector<int64_t> dims;
  if (tile) {
    if (arg.size() != x.dims.size()) fail(node, "repeats do not match the rank");
    for (size_t d = 0; d < arg.size(); ++d) dims.push_back(x.dims[d] * arg[d]);
  } else {
    const size_t rank = std::max(x.dims.size(), arg.size());
    for (size_t i = 0; i < rank; ++i) {
      const int64_t a = i + x.dims.size() >= rank ? x.dims[i + x.dims.size() - rank] : 1;
      const int64_t b = i + arg.size() >= rank ? arg[i + arg.size() - rank] : 1;
      if (a != b && a != 1 && b != 1) fail(node, "shapes do not broadcast");
      dims.push_back(a == 1 ? b : a);
    }
  }
  const size_t lead = dims.size() - x.dims.size();
  const auto sx = strides_of(x.dims);
  NaiveTensor out(dims, std::vector<double>(static_cast<size_t>(count_of(dims))));
  for_each_coord(dims, [&](const std::vector<int64_t>& c, int64_t flat) {
    int64_t src = 0;
    for (size_t d = 0; d < x.dims.size(); ++d) src += (tile ? c[d] % x.dims[d] : (x.dims[d] == 1 ? 0 : c[d + lead])) * sx[d];
    out.data[static_cast<size_t>(flat)] = x.data[static_cast<size_t>(src)];
  });
  return out;
}

// Gather on axis 0 of a 1-D tensor by a scalar or 1-D index (shape arithmetic).
NaiveTensor run_gather(const onnx::NodeProto& node, const Env& env) {
  const NaiveTensor& x = input(node, env, 0);
  const NaiveTensor& index = input(node, env, 1);
  if (x.dims.size() == 4 && attr_int(node, "axis", 0) == 1 && index.dims.size() == 1) {
    // The channel Gather the rewrite emits for a CRD DepthToSpace: out[n, j] = x[n, index[j]].
    const int64_t n = x.dims[0], c = x.dims[1], plane = x.dims[2] * x.dims[3];
    NaiveTensor out({n, index.dims[0], x.dims[2], x.dims[3]}, {});
    for (int64_t b = 0; b < n; ++b) {
      for (double i : index.data) {
        auto at = static_cast<int64_t>(i);
        if (at < 0) at += c;
        if (at < 0 || at >= c) fail(node, "index out of range");
        const auto from = x.data.begin() + static_cast<std::ptrdiff_t>((b * c + at) * plane);
        out.data.insert(out.data.end(), from, from + static_cast<std::ptrdiff_t>(plane));
      }
    }
    return out;
  }
  if (x.dims.size() != 1 || attr_int(node, "axis", 0) != 0)
    fail(node, "only axis 0 of a 1-D tensor and axis 1 of a 4-D one are implemented");
  NaiveTensor out(index.dims, {});
  for (double i : index.data) {
    auto at = static_cast<int64_t>(i);
    if (at < 0) at += x.dims[0];
    out.data.push_back(x.data.at(static_cast<size_t>(at)));
  }
  return out;
}

// Any axis, any rank: the output element at coordinate c comes from the input whose range on `axis` holds it.
NaiveTensor run_concat_generic(const onnx::NodeProto& node, const Env& env, int64_t axis) {
  std::vector<const NaiveTensor*> parts;
  for (int i = 0; i < node.input_size(); ++i) parts.push_back(&input(node, env, i));
  const auto rank = static_cast<int64_t>(parts[0]->dims.size());
  if (axis < 0) axis += rank;
  NaiveTensor out(parts[0]->dims, {});
  out.dims[static_cast<size_t>(axis)] = 0;
  for (const auto* p : parts) out.dims[static_cast<size_t>(axis)] += p->dims[static_cast<size_t>(axis)];
  out.data.resize(static_cast<size_t>(count_of(out.dims)));
  for_each_coord(out.dims, [&](std::vector<int64_t> c, int64_t flat) {
    size_t k = 0;
    while (c[static_cast<size_t>(axis)] >= parts[k]->dims[static_cast<size_t>(axis)])
      c[static_cast<size_t>(axis)] -= parts[k++]->dims[static_cast<size_t>(axis)];
    const auto st = strides_of(parts[k]->dims);
    int64_t src = 0;
    for (size_t d = 0; d < c.size(); ++d) src += c[d] * st[d];
    out.data[static_cast<size_t>(flat)] = parts[k]->data[static_cast<size_t>(src)];
  });
  return out;
}

// Numpy-broadcast elementwise product, or difference with `subtract` (shape arithmetic: x.shape[i] - 0).
NaiveTensor run_mul(const onnx::NodeProto& node, const Env& env, bool subtract) {
  const NaiveTensor& a = input(node, env, 0);
  const NaiveTensor& b = input(node, env, 1);
  const size_t rank = std::max(a.dims.size(), b.dims.size());
  auto padded = [rank](const std::vector<int64_t>& d) {
    std::vector<int64_t> p(rank - d.size(), 1);
    p.insert(p.end(), d.begin(), d.end());
    return p;
  };
  const auto da = padded(a.dims), db = padded(b.dims);
  std::vector<int64_t> dims(rank);
  for (size_t i = 0; i < rank; ++i) {
    if (da[i] != db[i] && da[i] != 1 && db[i] != 1) fail(node, "shapes do not broadcast");
    dims[i] = std::max(da[i], db[i]);
  }
  const auto sa = strides_of(da), sb = strides_of(db);
  NaiveTensor out(dims, std::vector<double>(static_cast<size_t>(count_of(dims))));
  for_each_coord(dims, [&](const std::vector<int64_t>& c, int64_t flat) {
    int64_t ia = 0, ib = 0;
    for (size_t d = 0; d < rank; ++d) {
      ia += (da[d] == 1 ? 0 : c[d]) * sa[d];
      ib += (db[d] == 1 ? 0 : c[d]) * sb[d];
    }
    const double x = a.data[static_cast<size_t>(ia)], y = b.data[static_cast<size_t>(ib)];
    out.data[static_cast<size_t>(flat)] = node.op_type() == "Add" ? x + y : subtract ? x - y : x * y;
  });
  return out;
}

// Resize, nearest, by the scales or the sizes input, straight from the schema text: the source coordinate of
// output o per coordinate_transformation_mode, then rounded per nearest_mode and clamped into the input.
// Opset 10's form (X, scales) replicates: asymmetric coordinates, floor.
NaiveTensor run_resize(const onnx::NodeProto& node, const Env& env) {
  if (attr_string(node, "mode", "nearest") != "nearest") fail(node, "only mode nearest is implemented");
  const bool opset10 = node.input_size() == 2;
  const std::string ctm = attr_string(node, "coordinate_transformation_mode", opset10 ? "asymmetric" : "half_pixel");
  const std::string rounding = attr_string(node, "nearest_mode", opset10 ? "floor" : "round_prefer_floor");
  const NaiveTensor& x = input(node, env, 0);
  const NaiveTensor* scales = optional_input(node, env, opset10 ? 1 : 2);
  const NaiveTensor* sizes = opset10 ? nullptr : optional_input(node, env, 3);
  std::vector<int64_t> dims;
  std::vector<double> scale;
  if (scales != nullptr && scales->data.size() == x.dims.size()) {
    scale = scales->data;
    for (size_t d = 0; d < x.dims.size(); ++d) dims.push_back(static_cast<int64_t>(std::floor(static_cast<double>(x.dims[d]) * scale[d])));
  } else if (sizes != nullptr && sizes->data.size() == x.dims.size()) {
    for (size_t d = 0; d < x.dims.size(); ++d) {
      dims.push_back(static_cast<int64_t>(sizes->data[d]));
      scale.push_back(sizes->data[d] / static_cast<double>(x.dims[d]));
    }
  } else {
    fail(node, "needs scales or sizes for every axis");
  }
  const auto source = [&](int64_t o, size_t d) {
    const double s = scale[d], oo = static_cast<double>(o), in = static_cast<double>(x.dims[d]), out = static_cast<double>(dims[d]);
    if (ctm == "asymmetric") return oo / s;
    if (ctm == "half_pixel") return (oo + 0.5) / s - 0.5;
    if (ctm == "half_pixel_symmetric") {
      const double adjustment = out / (in * s), center = in / 2;
      return center * (1 - adjustment) + (oo + 0.5) / s - 0.5;
    }
    if (ctm == "pytorch_half_pixel") return out > 1 ? (oo + 0.5) / s - 0.5 : 0.0;
    if (ctm == "tf_half_pixel_for_nn") return (oo + 0.5) / s;
    if (ctm == "align_corners") return out > 1 ? oo * (in - 1) / (out - 1) : 0.0;
    fail(node, "coordinate_transformation_mode " + ctm + " is not implemented");
    return 0.0;
  };
  const auto nearest = [&](double v) {
    if (rounding == "floor") return std::floor(v);
    if (rounding == "ceil") return std::ceil(v);
    const bool tie = v - std::floor(v) == 0.5;
    if (rounding == "round_prefer_floor") return tie ? std::floor(v) : std::round(v);
    if (rounding == "round_prefer_ceil") return tie ? std::ceil(v) : std::round(v);
    fail(node, "nearest_mode " + rounding + " is not implemented");
    return 0.0;
  };
  const auto sx = strides_of(x.dims);
  NaiveTensor out(dims, std::vector<double>(static_cast<size_t>(count_of(dims))));
  for_each_coord(dims, [&](const std::vector<int64_t>& c, int64_t flat) {
    int64_t src = 0;
    for (size_t d = 0; d < dims.size(); ++d) {
      const auto i = static_cast<int64_t>(nearest(source(c[d], d)));
      src += std::clamp<int64_t>(i, 0, x.dims[d] - 1) * sx[d];
    }
    out.data[static_cast<size_t>(flat)] = x.data[static_cast<size_t>(src)];
  });
  return out;
}

NaiveTensor run_reshape(const onnx::NodeProto& node, const Env& env) {
  NaiveTensor x = input(node, env, 0);
  std::vector<int64_t> dims;
  for (double v : input(node, env, 1).data) dims.push_back(static_cast<int64_t>(v));
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0) dims[i] = x.dims.at(i);
    if (dims[i] == -1) {
      infer = static_cast<int64_t>(i);
    } else {
      known *= dims[i];
    }
  }
  if (infer >= 0) dims[static_cast<size_t>(infer)] = static_cast<int64_t>(x.data.size()) / known;
  if (count_of(dims) != static_cast<int64_t>(x.data.size())) fail(node, "element count changes");
  x.dims = dims;
  return x;
}

// Slice from opset 10 on (inputs), steps of either sign, bounds clamped as the schema says; and Slice-1 (one input,
// starts, ends and axes as attributes, step 1).
NaiveTensor run_slice(const onnx::NodeProto& node, const Env& env) {
  const NaiveTensor& x = input(node, env, 0);
  const bool attribute_form = node.input_size() == 1;
  auto ints = [&](int i) {
    std::vector<int64_t> v;
    if (attribute_form) {
      const char* const names[] = {"", "starts", "ends", "axes", "steps"};
      if (const auto* a = attr(node, names[i])) v.assign(a->ints().begin(), a->ints().end());
      return v;
    }
    if (const NaiveTensor* t = optional_input(node, env, i)) {
      for (double d : t->data) v.push_back(d >= 9.2e18 ? INT64_MAX : d <= -9.2e18 ? -INT64_MAX : static_cast<int64_t>(d));
    }
    return v;
  };
  const auto starts = ints(1), ends = ints(2);
  auto axes = ints(3), steps = ints(4);
  if (attribute_form && starts.empty()) fail(node, "Slice-1 without starts");
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  const auto rank = static_cast<int64_t>(x.dims.size());
  std::vector<int64_t> first(x.dims.size(), 0), step(x.dims.size(), 1), dims = x.dims;
  for (size_t i = 0; i < starts.size(); ++i) {
    const auto a = static_cast<size_t>(axes[i] < 0 ? axes[i] + rank : axes[i]);
    const int64_t n = x.dims[a];
    int64_t b = starts[i] < 0 ? std::max<int64_t>(starts[i], -n) + n : starts[i];
    int64_t e = ends[i] < 0 ? std::max<int64_t>(ends[i], -n - 1) + n : ends[i];
    if (steps[i] > 0) {
      b = std::min(b, n);
      e = std::min(std::max<int64_t>(e, 0), n);
      dims[a] = std::max<int64_t>(0, (e - b + steps[i] - 1) / steps[i]);
    } else {
      b = std::min(b, n - 1);
      e = std::min(e, n - 1);
      dims[a] = std::max<int64_t>(0, (b - e - steps[i] - 1) / -steps[i]);
    }
    first[a] = b;
    step[a] = steps[i];
  }
  const auto sx = strides_of(x.dims);
  NaiveTensor out(dims, std::vector<double>(static_cast<size_t>(count_of(dims))));
  for_each_coord(dims, [&](const std::vector<int64_t>& c, int64_t flat) {
    int64_t src = 0;
    for (size_t d = 0; d < dims.size(); ++d) src += (first[d] + c[d] * step[d]) * sx[d];
    out.data[static_cast<size_t>(flat)] = x.data[static_cast<size_t>(src)];
  });
  return out;
}

NaiveTensor run_transpose(const onnx::NodeProto& node, const Env& env) {
  const NaiveTensor& x = input(node, env, 0);
  std::vector<int64_t> reverse;
  for (size_t i = x.dims.size(); i-- > 0;) reverse.push_back(static_cast<int64_t>(i));
  const auto perm = attr_ints(node, "perm", reverse);
  std::vector<int64_t> dims;
  for (int64_t p : perm) dims.push_back(x.dims.at(static_cast<size_t>(p)));
  const auto sx = strides_of(x.dims);
  NaiveTensor out(dims, std::vector<double>(static_cast<size_t>(count_of(dims))));
  for_each_coord(dims, [&](const std::vector<int64_t>& c, int64_t flat) {
    int64_t src = 0;
    for (size_t d = 0; d < dims.size(); ++d) src += c[d] * sx[static_cast<size_t>(perm[d])];
    out.data[static_cast<size_t>(flat)] = x.data[static_cast<size_t>(src)];
  });
  return out;
}

NaiveTensor run_concat(const onnx::NodeProto& node, const Env& env) {
  const int64_t axis = attr_int(node, "axis", 0);
  if (input(node, env, 0).dims.size() != 4 || (axis != 1 && axis != -3)) return run_concat_generic(node, env, axis);
  std::vector<core::Tensor4> parts;
  for (int i = 0; i < node.input_size(); ++i) parts.push_back(input(node, env, i).as_tensor4());
  for (const auto& t : parts) {
    if (t.n != parts[0].n || t.h != parts[0].h || t.w != parts[0].w) fail(node, "inputs differ outside the channel axis");
  }
  return core::concat_channels_reference(parts);
}

NaiveTensor run_depth_to_space(const onnx::NodeProto& node, const Env& env, int64_t opset) {
  const auto x = input(node, env, 0).as_tensor4();
  const int64_t block = attr_int(node, "blocksize", 0);
  if (block < 1 || x.c % (block * block) != 0) fail(node, "bad blocksize");
  std::string mode = "DCR";
  if (opset >= 11) {
    mode = attr_string(node, "mode", "DCR");
  } else if (attr(node, "mode") != nullptr) {
    fail(node, "mode attribute before opset 11");
  }
  if (mode != "DCR" && mode != "CRD") fail(node, "unknown mode " + mode);
  return core::depth_to_space_reference(x, block, mode == "DCR");
}

}  // namespace dwdeconv::test::naive
