#include "rewrite/matcher.h"

#include "recogniser_parts.h"
#include "rewrite/const_eval.h"

#include "onnx_io/attributes.h"
#include "onnx_io/tensor.h"

#include <optional>
#include <variant>

namespace dwdeconv::rewrite {
namespace {

using core::declined;
using core::invalid_model;
using parts::join;

bool is_float_type(int32_t t) {
  return t == onnx::TensorProto::FLOAT || t == onnx::TensorProto::FLOAT16 || t == onnx::TensorProto::BFLOAT16 ||
         t == onnx::TensorProto::DOUBLE;
}

// The known extent of dimension `axis` of a tensor type, if any.
std::optional<int64_t> known_dim(const std::optional<onnx::TypeProto>& type, int axis) {
  if (!type || !type->has_tensor_type() || !type->tensor_type().has_shape()) return std::nullopt;
  const auto& shape = type->tensor_type().shape();
  if (axis >= shape.dim_size() || !shape.dim(axis).has_dim_value()) return std::nullopt;
  return shape.dim(axis).dim_value();
}

std::optional<int> known_rank(const std::optional<onnx::TypeProto>& type) {
  if (!type || !type->has_tensor_type() || !type->tensor_type().has_shape()) return std::nullopt;
  return type->tensor_type().shape().dim_size();
}

// The largest kernel extent (k-1)*d + 1 rewritten: the emitted Conv's pads are about that large.
constexpr int64_t kMaxKernelExtent = int64_t{1} << 30;

// The attributes of a ConvTranspose, parsed and checked against the spec's value rules.
struct Attributes {
  int64_t group = 1;
  std::vector<int64_t> strides, dilations, pads, output_padding, output_shape, kernel_shape;
  core::AutoPad auto_pad = core::AutoPad::kNotSet;
};

core::Result<Attributes> read_attributes(const onnx::NodeProto& node) {
  Attributes a;
  auto group = onnx_io::get_int(node, "group", 1);
  auto strides = onnx_io::get_ints(node, "strides", {});
  auto dilations = onnx_io::get_ints(node, "dilations", {});
  auto pads = onnx_io::get_ints(node, "pads", {});
  auto output_padding = onnx_io::get_ints(node, "output_padding", {});
  auto output_shape = onnx_io::get_ints(node, "output_shape", {});
  auto kernel_shape = onnx_io::get_ints(node, "kernel_shape", {});
  auto auto_pad = onnx_io::get_string(node, "auto_pad", "NOTSET");
  for (const core::Error* e : {group.ok() ? nullptr : &group.error(), strides.ok() ? nullptr : &strides.error(),
                               dilations.ok() ? nullptr : &dilations.error(), pads.ok() ? nullptr : &pads.error(),
                               output_padding.ok() ? nullptr : &output_padding.error(), output_shape.ok() ? nullptr : &output_shape.error(),
                               kernel_shape.ok() ? nullptr : &kernel_shape.error(), auto_pad.ok() ? nullptr : &auto_pad.error()}) {
    if (e != nullptr) return *e;
  }
  const std::string who = onnx_io::describe_node(node);
  a.group = *group;
  a.strides = *strides;
  a.dilations = *dilations;
  a.pads = *pads;
  a.output_padding = *output_padding;
  a.output_shape = *output_shape;
  a.kernel_shape = *kernel_shape;
  const auto parsed = core::parse_auto_pad(*auto_pad);
  if (!parsed) return invalid_model(who + ": auto_pad '" + *auto_pad + "' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID");
  a.auto_pad = *parsed;
  if (a.group < 1) return invalid_model(who + ": group " + std::to_string(a.group) + " must be >= 1");
  for (int64_t s : a.strides) {
    if (s < 1) return invalid_model(who + ": stride " + std::to_string(s) + " must be >= 1 (strides " + join(a.strides) + ")");
  }
  for (int64_t d : a.dilations) {
    if (d < 1) return invalid_model(who + ": dilation " + std::to_string(d) + " must be >= 1");
  }
  for (int64_t p : a.pads) {
    if (p < 0) return invalid_model(who + ": negative pad in pads " + join(a.pads));
  }
  for (int64_t p : a.output_padding) {
    if (p < 0) return invalid_model(who + ": negative output_padding " + join(a.output_padding));
  }
  return a;
}

// Rewrites the attributes of a 1-D ConvTranspose as those of the 2-D one with a unit H axis in front: strides [s] ->
// [1, s], pads [b, e] -> [0, b, 0, e], output_shape [L] -> [1, L] (or [N, C, L] -> [N, C, 1, L]), and so on. Returns
// why the attributes do not fit a 1-D node, or "".
std::string as_two_d(Attributes& a, const std::string& who) {
  const auto one = [&](std::vector<int64_t>& v, int64_t unit, const char* name) -> std::string {
    if (v.empty()) return "";
    if (v.size() != 1) return who + ": " + name + " " + join(v) + " must have 1 value for a 1-D ConvTranspose";
    v.insert(v.begin(), unit);
    return "";
  };
  for (const auto& error : {one(a.strides, 1, "strides"), one(a.dilations, 1, "dilations"), one(a.output_padding, 0, "output_padding"),
                            one(a.kernel_shape, 1, "kernel_shape")}) {
    if (!error.empty()) return error;
  }
  if (!a.pads.empty()) {
    if (a.pads.size() != 2) return who + ": pads " + join(a.pads) + " must have 2 values for a 1-D ConvTranspose";
    a.pads = {0, a.pads[0], 0, a.pads[1]};
  }
  if (!a.output_shape.empty()) {
    if (a.output_shape.size() != 1 && a.output_shape.size() != 3) {
      return who + ": output_shape " + join(a.output_shape) + " must have 1 (spatial) or 3 values for a 1-D ConvTranspose";
    }
    a.output_shape.insert(a.output_shape.end() - 1, 1);
  }
  return "";
}

// Broadcasts an optional per-axis attribute to both spatial axes; errors if its length is wrong.
core::Result<std::array<int64_t, 2>> per_axis(const std::vector<int64_t>& v, int64_t fallback, const std::string& attr,
                                              const std::string& who) {
  if (v.empty()) return std::array<int64_t, 2>{fallback, fallback};
  if (v.size() != 2) return invalid_model(who + ": " + attr + " " + join(v) + " must have 2 values for a 2-D ConvTranspose");
  return std::array<int64_t, 2>{v[0], v[1]};
}

// The depthwise [C, 1, kH, kW] weight a group-1 ConvTranspose weight [C, C, kH, kW] computes when every off-diagonal
// slice [c_in, c_out != c_in] is exactly zero (FCN's bilinear upsamplers), or nullptr when one is not. 0 * inf is NaN in
// the dense original and absent from the depthwise one: docs/verification.md, non-finite values.
std::shared_ptr<const onnx::TensorProto> depthwise_in_value(const onnx::TensorProto& w, const std::vector<int64_t>& dims) {
  const int64_t c = dims[0], plane = dims[2] * dims[3];
  // A trained dense weight is non-zero at [0, 1, 0, 0]: read that one element before converting the whole weight.
  if (auto first = onnx_io::gather_elements(w, {plane}, {1}); !first) {
    return nullptr;
  } else if (auto v = onnx_io::to_doubles(*first); !v || (*v)[0] != 0.0) {
    return nullptr;
  }
  const auto values = onnx_io::to_doubles(w);
  if (!values || static_cast<int64_t>(values->size()) != c * c * plane) return nullptr;
  std::vector<int64_t> diagonal;
  diagonal.reserve(static_cast<size_t>(c * plane));
  for (int64_t ci = 0; ci < c; ++ci) {
    for (int64_t co = 0; co < c; ++co) {
      const int64_t start = (ci * c + co) * plane;
      for (int64_t t = 0; t < plane; ++t) {
        if (co == ci) {
          diagonal.push_back(start + t);
        } else if ((*values)[static_cast<size_t>(start + t)] != 0.0) {
          return nullptr;  // NaN too: it is not 0
        }
      }
    }
  }
  auto gathered = onnx_io::gather_elements(w, diagonal, {c, 1, dims[2], dims[3]});
  if (!gathered) return nullptr;
  gathered->set_name(w.name());
  return std::make_shared<onnx::TensorProto>(std::move(*gathered));
}

// Validate: the node's arity and attributes against the spec, before anything is read from its inputs. Every error is
// kInvalidModel.
core::Result<Attributes> validate_node(const onnx::NodeProto& node, const std::string& who) {
  // Validation counts them too, but a model newer than libonnx gets only a partial check: never read an output
  // that is not there, nor drop an extra input or output.
  if (node.output_size() != 1 || node.output(0).empty()) {
    return invalid_model(who + ": has " + std::to_string(node.output_size()) + " outputs, but ConvTranspose has 1");
  }
  if (node.input_size() > 3) {
    return invalid_model(who + ": has " + std::to_string(node.input_size()) + " inputs, but ConvTranspose takes 2 to 3");
  }
  if (node.input_size() < 2 || node.input(0).empty() || node.input(1).empty()) return invalid_model(who + ": needs inputs X and W");
  return read_attributes(node);
}

// A ConvTranspose read as a 2-D one with a constant weight: what normalise makes of a valid node.
struct Normalised {
  Attributes a;  // of the 2-D node (a 1-D one's with a unit H axis in front)
  ConstantSource weight;
  std::shared_ptr<const onnx::TensorProto> folded;               // the weight as nodes compute it, folded
  std::vector<std::pair<const GraphScope*, std::string>> chain;  // the values that computed it
  std::string weight_inexact;                                    // the op those values went through that runtimes round
  std::vector<int64_t> weight_dims;                              // as stored
  std::vector<int64_t> w_dims;                                   // as 2-D: [C_in, C_out/group, kH, kW]
  bool one_d = false;
  std::optional<onnx::TypeProto> input_type;  // as 2-D: [N, C, 1, L] for a 1-D node
  std::array<int64_t, 2> strides{1, 1}, dilations{1, 1}, output_padding{0, 0};
  // The bias input, when the node has one: the constant, or why it is not one (validate_resolved fills it).
  std::optional<std::variant<ConstantSource, core::Error>> bias;
};

// The weight as a constant: an initializer or Constant, or folded by the op library's kernels when a chain of nodes
// computes it from constants (torch exports FastDepth's Unpool weight as Expand(mask, Where(Equal(...)))), as a
// recogniser folds its weights. Fills n.weight, n.folded, n.chain and n.weight_inexact; declines when it is none.
core::Status resolve_weight(const onnx::NodeProto& node, const GraphScope& scope, int64_t ir_version, ConstEvaluator* eval,
                            const std::string& who, Normalised& n) {
  auto weight = resolve_constant(node.input(1), scope, ir_version);
  if (!weight && weight.error().kind != core::ErrorKind::kInvalidModel && eval != nullptr) {
    if (auto value = eval->evaluate_flagged(node.input(1), scope); value && !value->is_integer()) {
      if (!value->inexact_dims.empty()) {
        return declined("weight not constant: its dims are computed through " + value->inexact_dims +
                        ", which runtimes round differently: the dims this tool folds need not be the ones a runtime computes");
      }
      n.weight_inexact = value->inexact;
      n.folded = std::make_shared<onnx::TensorProto>(
          onnx_io::make_tensor(node.input(1), value->data_type, value->dims, value->reals, /*raw=*/true));
      ConstantSource source;
      source.scope = &scope;
      source.tensor = n.folded.get();
      source.name = node.input(1);
      weight = std::move(source);
      n.chain = computed_from(node.input(1), scope);
    }
  }
  if (!weight) {
    if (weight.error().kind == core::ErrorKind::kInvalidModel) return invalid_model(who + ": " + weight.error().message);
    return declined("weight not constant: " + weight.error().message);
  }
  if (weight->sparse != nullptr) {
    return declined("weight '" + weight->name + "' is a sparse initializer, which is not supported by this tool");
  }
  n.weight = std::move(*weight);
  return core::Ok{};
}

// Normalise: the weight as a constant, and a 1-D node as the 2-D one of an [N, C, 1, L] input with a unit H axis (its
// attributes, weight dims and input type are read as that from here on; the emitter writes the rewrite in 1-D again),
// checked against the spec where the weight's rank and channels decide (kInvalidModel). Fills `sum` as far as it gets.
core::Result<Normalised> normalise(const onnx::NodeProto& node, const GraphScope& scope, int64_t ir_version,
                                   const onnx_io::ScopedTypes& types, ConstEvaluator* eval, Attributes attributes, const std::string& who,
                                   NodeSummary& sum) {
  Normalised n;
  n.a = std::move(attributes);
  Attributes& a = n.a;
  // The weight decides the spatial rank and the channel count, so it comes before the per-axis checks.
  if (auto resolved = resolve_weight(node, scope, ir_version, eval, who, n); !resolved) return resolved.error();
  n.weight_dims = onnx_io::dims_of(*n.weight.tensor);
  const auto& weight_dims = n.weight_dims;
  if (weight_dims.size() != 4 && weight_dims.size() != 3) {
    return declined("not 1-D or 2-D: weight has rank " + std::to_string(weight_dims.size()) +
                    ", a 1-D ConvTranspose has rank 3 and a 2-D one rank 4");
  }
  for (int64_t d : weight_dims) {
    if (d < 1) return invalid_model(who + ": weight '" + n.weight.name + "' has dims " + join(weight_dims));
  }
  n.one_d = weight_dims.size() == 3;
  if (const auto* type = types.find(scope.index, node.input(0))) n.input_type = *type;
  if (auto rank = known_rank(n.input_type); rank && *rank != static_cast<int>(weight_dims.size())) {
    return invalid_model(who + ": input '" + node.input(0) + "' has rank " + std::to_string(*rank) + " but the weight has rank " +
                         std::to_string(weight_dims.size()));
  }
  if (n.one_d) {
    if (auto error = as_two_d(a, who); !error.empty()) return invalid_model(error);
    n.input_type = parts::one_d_type(types, scope, node.input(0));
  }
  n.w_dims = n.one_d ? std::vector<int64_t>{weight_dims[0], weight_dims[1], 1, weight_dims[2]} : weight_dims;
  const auto& w_dims = n.w_dims;
  const int64_t c_in = w_dims[0];
  sum.channels = c_in;
  sum.kernel = {w_dims[2], w_dims[3]};
  auto strides = per_axis(a.strides, 1, "strides", who);
  auto dilations = per_axis(a.dilations, 1, "dilations", who);
  auto output_padding = per_axis(a.output_padding, 0, "output_padding", who);
  for (const auto* r : {&strides, &dilations, &output_padding}) {
    if (!r->ok()) return r->error();
  }
  n.strides = *strides;
  n.dilations = *dilations;
  n.output_padding = *output_padding;
  sum.strides = n.strides;
  if (n.strides[0] == n.strides[1]) sum.stride = n.strides[0];
  sum.output_padding = n.output_padding;
  if (!a.pads.empty() && a.pads.size() != 4) return invalid_model(who + ": pads " + join(a.pads) + " must have 4 values");
  if (!a.output_shape.empty() && a.output_shape.size() != 2 && a.output_shape.size() != 4) {
    return invalid_model(who + ": output_shape " + join(a.output_shape) + " must have 2 (spatial) or 4 values");
  }
  if (!a.kernel_shape.empty() && (a.kernel_shape.size() != 2 || a.kernel_shape[0] != w_dims[2] || a.kernel_shape[1] != w_dims[3])) {
    return invalid_model(who + ": kernel_shape " + join(n.one_d ? std::vector<int64_t>{a.kernel_shape.back()} : a.kernel_shape) +
                         " disagrees with weight '" + n.weight.name + "' of shape " + join(weight_dims));
  }
  if (c_in % a.group != 0) {
    return invalid_model(who + ": group " + std::to_string(a.group) + " does not divide the " + std::to_string(c_in) + " input channels");
  }
  if (auto c = known_dim(n.input_type, 1); c && *c != c_in) {
    return invalid_model(who + ": input '" + node.input(0) + "' has " + std::to_string(*c) + " channels but weight '" + n.weight.name +
                         "' expects " + std::to_string(c_in));
  }
  for (int axis = 0; axis < 2; ++axis) {
    const int64_t op = n.output_padding[axis], s = n.strides[axis], d = n.dilations[axis];
    if (op >= s && op >= d) {
      return invalid_model(who + ": output_padding " + std::to_string(op) + " must be less than stride " + std::to_string(s));
    }
  }
  if (!a.pads.empty()) sum.pads = std::array<int64_t, 4>{a.pads[0], a.pads[1], a.pads[2], a.pads[3]};
  return n;
}

// Match, the channels: why a valid node's grouping, dilation or element type is not one this tool rewrites; else
// the depthwise weight a dense-in-the-graph node computes (nullptr for any other), with `sum` saying so.
core::Result<std::shared_ptr<const onnx::TensorProto>> match_channels(const Normalised& n, bool take_dense, const std::string& who,
                                                                      NodeSummary& sum) {
  const Attributes& a = n.a;
  const auto& w_dims = n.w_dims;
  const int64_t c_in = w_dims[0];
  const onnx::TensorProto& w = *n.weight.tensor;
  // Dense in the graph, depthwise in value: the weight read as its diagonal, the node as the depthwise one it computes.
  std::shared_ptr<const onnx::TensorProto> diagonal;
  if (a.group == 1 && c_in > 1 && w_dims[1] == c_in && !take_dense && is_float_type(w.data_type()) &&
      onnx_io::validate_tensor_data(w, who).ok()) {
    diagonal = depthwise_in_value(w, w_dims);
  }
  if (diagonal && !n.weight_inexact.empty()) {
    // Depthwise only because its off-diagonal elements are zeros, which a runtime may round to other values.
    return declined("dense (group 1) in the graph and depthwise only in value, and its weight is computed through " + n.weight_inexact +
                    ", which runtimes round differently: its zeros need not be a runtime's");
  }
  if (diagonal) {
    sum.depthwise_in_value = true;
  } else if (a.group == 1 && c_in > 1 && !take_dense) {
    return declined("dense (group 1), " + std::to_string(c_in) + " to " + std::to_string(w_dims[1]) +
                    " channels: XNNPACK already runs a dense deconvolution as polyphase subconvolutions, and a "
                    "polyphase rewrite measured 0.88x-1.08x on the executor (BENCHMARKS.md, \"Dense ConvTranspose\")");
  }
  if (a.group != c_in && !take_dense && !diagonal) {
    return declined("grouped but not depthwise: group " + std::to_string(a.group) + " != " + std::to_string(c_in) + " input channels");
  }
  if (w_dims[1] != 1 && !take_dense && !diagonal) return declined("channel multiplier " + std::to_string(w_dims[1]) + " != 1");
  const auto& d = n.dilations;
  const auto& s = n.strides;
  if (d[0] != 1 || d[1] != 1) {
    sum.dilations = d;
    // A stride-1 axis is a dilated Conv; a dilated stride-s axis spreads each phase's taps over two lattices.
    if ((d[0] != 1 && s[0] != 1) || (d[1] != 1 && s[1] != 1)) {
      return declined("dilation > 1 with stride > 1 on one axis (dilations " + join({d[0], d[1]}) + ", strides " + join({s[0], s[1]}) +
                      "): only a stride-1 axis may be dilated");
    }
  }
  if (!is_float_type(w.data_type())) {
    return declined("unsupported element type " + onnx_io::data_type_name(w.data_type()) +
                    " (float, float16, bfloat16 and double are rewritten)");
  }
  if (auto status = onnx_io::validate_tensor_data(w, who + ": weight '" + n.weight.name + "'"); !status) return status.error();
  return diagonal;
}

// Normalise, the geometry: the pads of each axis resolved from pads / output_shape / auto_pad (declined when they
// cannot be known or come out negative).
core::Result<std::array<core::AxisGeometry, 2>> resolve_geometry(const Normalised& n) {
  const Attributes& a = n.a;
  std::array<core::AxisGeometry, 2> geo;
  for (int axis = 0; axis < 2; ++axis) {
    core::AxisPadSpec spec;
    spec.auto_pad = a.auto_pad;
    if (!a.pads.empty()) {
      spec.explicit_begin = a.pads[static_cast<size_t>(axis)];
      spec.explicit_end = a.pads[static_cast<size_t>(axis) + 2];
    }
    if (!a.output_shape.empty()) spec.output_size = a.output_shape[a.output_shape.size() - 2 + static_cast<size_t>(axis)];
    spec.input_size = known_dim(n.input_type, 2 + axis);
    auto g = core::resolve_axis(n.w_dims[2 + static_cast<size_t>(axis)], n.strides[axis], n.output_padding[axis], spec, n.dilations[axis]);
    if (!g) return g.error();
    geo[static_cast<size_t>(axis)] = *g;
  }
  return geo;
}

// Validate, what only the resolved geometry and the bias show (kInvalidModel): the output of a known input length must
// be positive (ONNX's own rule), and a constant bias must hold C_out values. Fills n.bias with the bias when it is a
// constant.
core::Status validate_resolved(const onnx::NodeProto& node, const GraphScope& scope, int64_t ir_version,
                               const std::array<core::AxisGeometry, 2>& geo, const std::string& who, Normalised& n) {
  for (int axis = 0; axis < 2; ++axis) {
    if (const auto in = known_dim(n.input_type, 2 + axis)) {
      const auto out = core::deconv_output_length(geo[static_cast<size_t>(axis)], *in);
      if (!out || *out <= 0) {
        return invalid_model(who + ": output length " + (out ? std::to_string(*out) : "past int64") + " from input length " +
                             std::to_string(*in) + " is not positive (" + (axis == 0 ? "H" : "W") + " axis)");
      }
    }
  }
  if (node.input_size() <= 2 || node.input(2).empty()) return core::Ok{};
  auto bias = resolve_constant(node.input(2), scope, ir_version);
  if (!bias) {
    if (bias.error().kind == core::ErrorKind::kInvalidModel) return invalid_model(who + ": " + bias.error().message);
    n.bias = std::move(bias.error());
    return core::Ok{};
  }
  if (bias->sparse == nullptr) {
    const auto b_dims = onnx_io::dims_of(*bias->tensor);
    const int64_t c_out = n.w_dims[1] * n.a.group;
    if (b_dims.size() != 1 || b_dims[0] != c_out) {
      return invalid_model(who + ": bias '" + bias->name + "' has shape " + join(b_dims) + ", expected [" + std::to_string(c_out) + "]");
    }
  }
  n.bias = std::move(*bias);
  return core::Ok{};
}

// Match, the geometry: why the resolved axes are not a whole number of strides per input sample (a clean upscale, or
// s*(H+q)), or a kernel too wide to plan. Puts the resolved pads in `sum`.
core::Status match_geometry(const Normalised& n, const std::array<core::AxisGeometry, 2>& geo, NodeSummary& sum) {
  sum.pads = std::array<int64_t, 4>{geo[0].pad_begin, geo[1].pad_begin, geo[0].pad_end, geo[1].pad_end};
  for (const auto& g : geo) {
    if (g.effective_kernel().value_or(kMaxKernelExtent + 1) > kMaxKernelExtent) {
      return declined("a kernel of " + std::to_string(g.kernel) + " taps dilated by " + std::to_string(g.dilation) +
                      " spans more than 2^30 samples");
    }
  }
  // A clean xs upscale, or an output a whole number of strides longer or shorter (s*(H+q)): every phase the same length.
  if (!core::plannable(geo[0]) || !core::plannable(geo[1])) {
    std::string reason =
        "not a clean upscale: output is " + core::describe_output_length(geo[0], "H") + " x " + core::describe_output_length(geo[1], "W");
    const auto h = known_dim(n.input_type, 2), wd = known_dim(n.input_type, 3);
    // 0 where a dim is unknown (no output length to show).
    const int64_t oh = h ? core::deconv_output_length(geo[0], *h).value_or(0) : 0;
    const int64_t ow = wd ? core::deconv_output_length(geo[1], *wd).value_or(0) : 0;
    if (oh > 0 && ow > 0)
      reason += " (" + std::to_string(oh) + "x" + std::to_string(ow) + " from " + std::to_string(*h) + "x" + std::to_string(*wd) + ")";
    const std::string sy = std::to_string(n.strides[0]), sx = std::to_string(n.strides[1]);
    return declined(reason + ", wants " + sy + "*H x " + sx + "*W or a whole number of strides more or less (" + sy + "*(H+q))");
  }
  return core::Ok{};
}

// Match, the bias: a dense constant (validate_resolved checked its shape), or why not.
core::Status match_bias(const Normalised& n) {
  if (!n.bias) return core::Ok{};  // no bias
  if (const auto* error = std::get_if<core::Error>(&*n.bias)) return declined("bias not constant: " + error->message);
  const auto& bias = std::get<ConstantSource>(*n.bias);
  if (bias.sparse != nullptr) return declined("bias '" + bias.name + "' is a sparse initializer, which is not supported by this tool");
  return core::Ok{};
}

}  // namespace

MatchOutcome match_deconv(const onnx::NodeProto& node, const GraphScope& scope, int64_t ir_version, const onnx_io::ScopedTypes& types,
                          bool dense, ConstEvaluator* eval) {
  MatchOutcome out{{}, core::declined("not matched")};
  NodeSummary& sum = out.summary;
  sum.name = node.name().empty() ? (node.output_size() ? node.output(0) : std::string()) : node.name();
  sum.graph_path = scope.path;
  const std::string who = onnx_io::describe_node(node);
  auto fail = [&out](core::Error e) {
    out.match = std::move(e);
    return out;
  };
  auto attributes = validate_node(node, who);
  if (!attributes) return fail(attributes.error());
  auto normalised = normalise(node, scope, ir_version, types, eval, std::move(*attributes), who, sum);
  if (!normalised) return fail(normalised.error());
  Normalised& n = *normalised;
  // Pads that cannot be known are a reason to keep the node (resolve_axis declines), said after the channels' reason.
  auto geo = resolve_geometry(n);
  if (geo) {
    if (auto valid = validate_resolved(node, scope, ir_version, *geo, who, n); !valid) return fail(valid.error());
  }
  // The node is valid; from here on a refusal is a reason to keep it.
  const bool take_dense = dense && n.a.group == 1;
  auto diagonal = match_channels(n, take_dense, who, sum);
  if (!diagonal) return fail(diagonal.error());
  if (!geo) return fail(geo.error());
  if (auto fits = match_geometry(n, *geo, sum); !fits) return fail(fits.error());
  if (auto bias = match_bias(n); !bias) return fail(bias.error());

  DeconvMatch m;
  m.node = &node;
  m.scope = &scope;
  m.name = node.name();
  m.input = node.input(0);
  m.bias = node.input_size() > 2 ? node.input(2) : std::string();
  m.output = node.output(0);
  m.channels = n.w_dims[0];
  if (take_dense) {
    m.group = 1;
    m.out_channels = n.w_dims[1];
  }
  m.y = (*geo)[0];
  m.x = (*geo)[1];
  if (*diagonal) {
    // The depthwise weight is derived; the dense one, stored as it was, goes once nothing else reads it.
    n.chain.emplace_back(n.weight.scope, n.weight.name);
    n.weight.tensor = diagonal->get();
    n.folded = std::move(*diagonal);
  }
  m.weight = std::move(n.weight);
  m.derived_weight = std::move(n.folded);
  m.weight_chain = std::move(n.chain);
  m.input_type = n.input_type;
  m.one_d = n.one_d;
  out.match = std::move(m);
  return out;
}

}  // namespace dwdeconv::rewrite
