// The op table: per op, the versions, inputs, outputs, attributes and attribute values its kernel implements, and
// the one dispatch that refuses everything else. tests/ops/op_table_test.cpp sweeps libonnx's schemas (opsets 1 to
// 17) against it, and tests/ops/check_op_table.py a current onnx's (every opset through kKnownThroughOpset).
#include <algorithm>
#include <limits>
#include <set>

#include "onnx_io/attributes.h"
#include "ops/kernels.h"
#include "ops/ops.h"

namespace dwdeconv::ops {

using namespace detail;  // the kernels

namespace {

constexpr size_t kAny = std::numeric_limits<size_t>::max();  // variadic inputs or outputs

AttributeSpec any(std::string name) { return AttributeSpec{std::move(name), {}, {}}; }
AttributeSpec strings(std::string name, std::vector<std::string> values) { return AttributeSpec{std::move(name), std::move(values), {}}; }
AttributeSpec ints(std::string name, std::vector<int64_t> values) { return AttributeSpec{std::move(name), {}, std::move(values)}; }
AttributeSpec flag(std::string name) { return ints(std::move(name), {0, 1}); }

const std::vector<std::string> kAutoPad = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};

// Version lists are the schemas' since_version through kKnownThroughOpset (ONNX 1.23); most later versions only
// add element types, which the kernels check themselves (Tensor holds the float and integer types; anything else is
// refused where it is read). Versions before first_implemented carry legacy attributes (consumed_inputs, the
// pre-7 `broadcast` and `axis` of the arithmetic ops, Cast-1's string `to`) that the kernels do not implement.
std::vector<OpSpec> make_table() {
  std::vector<OpSpec> t;
  auto unary = [&](std::string op, std::vector<int64_t> versions, int64_t first, std::vector<AttributeSpec> attrs = {}) {
    t.push_back(OpSpec{std::move(op), std::move(versions), first, 1, 1, 1, std::move(attrs), {}, run_unary});
  };
  unary("Relu", {1, 6, 13, 14}, 6);
  unary("LeakyRelu", {1, 6, 16}, 6, {any("alpha")});
  unary("Elu", {1, 6, 22}, 6, {any("alpha")});
  unary("Sigmoid", {1, 6, 13}, 6);
  unary("Tanh", {1, 6, 13}, 6);
  unary("Identity", {1, 13, 14, 16, 19, 21, 23, 24, 25}, 1);
  unary("Neg", {1, 6, 13}, 6);
  unary("Sqrt", {1, 6, 13}, 6);
  unary("Erf", {9, 13}, 9);
  unary("Exp", {1, 6, 13}, 6);
  unary("Reciprocal", {1, 6, 13}, 6);
  unary("Abs", {1, 6, 13}, 6);
  unary("Sin", {7, 22}, 7);
  unary("Cos", {7, 22}, 7);
  unary("Sinh", {9, 22}, 9);
  unary("Cosh", {9, 22}, 9);
  unary("Floor", {1, 6, 13}, 6);
  unary("Ceil", {1, 6, 13}, 6);
  unary("Log", {1, 6, 13}, 6);
  unary("HardSigmoid", {1, 6, 22}, 6, {any("alpha"), any("beta")});
  unary("HardSwish", {14, 22}, 14);
  // Unidirectional broadcasting of slope from PRelu-7 on; PRelu-6 only said that a one-element slope is shared.
  t.push_back({"PRelu", {1, 6, 7, 9, 16}, 7, 2, 2, 1, {}, {}, run_prelu});
  t.push_back({"Clip", {1, 6, 11, 12, 13}, 6, 1, 3, 1, {any("min"), any("max")}, {}, run_clip});
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) t.push_back({op, {1, 6, 7, 13, 14}, 7, 2, 2, 1, {}, {}, run_binary});
  t.push_back({"Pow", {1, 7, 12, 13, 15}, 7, 2, 2, 1, {}, {}, run_pow});
  t.push_back({"Equal", {1, 7, 11, 13, 19}, 7, 2, 2, 1, {}, {}, run_equal});
  t.push_back({"Where", {9, 16}, 9, 3, 3, 1, {}, {}, run_where});
  // saturate and round_mode apply only to float8 targets, which run_cast refuses: any value computes the same.
  t.push_back({"Cast", {1, 6, 9, 13, 19, 21, 23, 24, 25, 28}, 6, 1, 1, 1, {any("to"), any("saturate"), any("round_mode")}, {}, run_cast});

  t.push_back({"Reshape", {1, 5, 13, 14, 19, 21, 23, 24, 25}, 5, 2, 2, 1, {flag("allowzero")}, {}, run_reshape});
  t.push_back({"Flatten", {1, 9, 11, 13, 21, 23, 24, 25}, 1, 1, 1, 1, {any("axis")}, {}, run_flatten});
  t.push_back({"Transpose", {1, 13, 21, 23, 24, 25}, 1, 1, 1, 1, {any("perm")}, {}, run_transpose});
  t.push_back({"Squeeze", {1, 11, 13, 21, 23, 24, 25}, 1, 1, 2, 1, {any("axes")}, {}, run_squeeze});
  t.push_back({"Unsqueeze", {1, 11, 13, 21, 23, 24, 25}, 1, 1, 2, 1, {any("axes")}, {}, run_unsqueeze});
  t.push_back({"Shape", {1, 13, 15, 19, 21, 23, 24, 25}, 1, 1, 1, 1, {any("start"), any("end")}, {}, run_shape});
  t.push_back({"Constant",
               {1, 9, 11, 12, 13, 19, 21, 23, 24, 25},
               1,
               0,
               0,
               1,
               {any("value"), any("value_float"), any("value_floats"), any("value_int"), any("value_ints")},
               {"sparse_value", "value_string", "value_strings"},
               run_constant});
  t.push_back({"ConstantOfShape", {9, 20, 21, 23, 24, 25}, 9, 1, 1, 1, {any("value")}, {}, run_constant_of_shape});
  t.push_back({"Gather", {1, 11, 13}, 1, 2, 2, 1, {any("axis")}, {}, run_gather});
  t.push_back({"Slice", {1, 10, 11, 13}, 1, 1, 5, 1, {any("starts"), any("ends"), any("axes")}, {}, run_slice});
  t.push_back({"Concat", {1, 4, 11, 13}, 1, 1, kAny, 1, {any("axis")}, {}, run_concat});
  t.push_back({"Pad",
               {1, 2, 11, 13, 18, 19, 21, 23, 24, 25},
               2,
               1,
               4,
               1,
               {strings("mode", {"constant", "reflect", "edge"}), any("pads"), any("value")},
               {},
               run_pad});
  t.push_back({"DepthToSpace", {1, 11, 13, 28}, 1, 1, 1, 1, {any("blocksize"), strings("mode", {"DCR", "CRD"})}, {}, run_depth_to_space});
  t.push_back({"Expand", {8, 13}, 8, 2, 2, 1, {}, {}, run_expand});
  t.push_back({"Tile", {1, 6, 13}, 1, 2, 3, 1, {}, {}, run_tile});
  t.push_back(
      {"ScatterND", {11, 13, 16, 18}, 11, 3, 3, 1, {strings("reduction", {"none", "add", "mul", "max", "min"})}, {}, run_scatter_nd});
  // stash_type (opset 27) is the precision of the element count; run_range refuses a float Range whose count
  // depends on it.
  t.push_back({"Range", {11, 27}, 11, 3, 3, 1, {any("stash_type")}, {}, run_range});
  t.push_back({"Split", {1, 2, 11, 13, 18}, 1, 1, 2, kAny, {any("axis"), any("split"), any("num_outputs")}, {}, run_split});

  const std::vector<AttributeSpec> conv = {strings("auto_pad", kAutoPad), any("dilations"), any("group"),
                                           any("kernel_shape"),           any("pads"),      any("strides")};
  t.push_back({"Conv", {1, 11, 22}, 1, 2, 3, 1, conv, {}, run_conv});
  auto deconv = conv;
  deconv.push_back(any("output_padding"));
  deconv.push_back(any("output_shape"));
  t.push_back({"ConvTranspose", {1, 11, 22}, 1, 2, 3, 1, deconv, {}, run_conv_transpose});
  // storage_order only orders the Indices output, which is not implemented (max_outputs 1).
  t.push_back({"MaxPool",
               {1, 8, 10, 11, 12, 22},
               1,
               1,
               1,
               1,
               {strings("auto_pad", kAutoPad), flag("ceil_mode"), any("dilations"), any("kernel_shape"), any("pads"), flag("storage_order"),
                any("strides")},
               {},
               run_pool});
  t.push_back({"AveragePool",
               {1, 7, 10, 11, 19, 22},
               1,
               1,
               1,
               1,
               {strings("auto_pad", kAutoPad), flag("ceil_mode"), flag("count_include_pad"), any("dilations"), any("kernel_shape"),
                any("pads"), any("strides")},
               {},
               run_pool});
  t.push_back({"GlobalAveragePool", {1, 22}, 1, 1, 1, 1, {}, {}, run_global_average_pool});
  t.push_back({"MatMul", {1, 9, 13}, 1, 2, 2, 1, {}, {}, run_matmul});
  t.push_back({"Gemm", {1, 6, 7, 9, 11, 13}, 7, 2, 3, 1, {any("alpha"), any("beta"), flag("transA"), flag("transB")}, {}, run_gemm});

  // momentum only updates the running statistics of training mode, which is refused.
  t.push_back({"BatchNormalization",
               {1, 6, 7, 9, 14, 15},
               7,
               5,
               5,
               1,
               {any("epsilon"), any("momentum"), ints("spatial", {1}), ints("training_mode", {0})},
               {},
               run_batch_norm});
  t.push_back({"InstanceNormalization", {1, 6, 22}, 6, 3, 3, 1, {any("epsilon")}, {}, run_instance_norm});
  const std::vector<AttributeSpec> reduce = {any("axes"), flag("keepdims"), flag("noop_with_empty_axes")};
  t.push_back({"ReduceMean", {1, 11, 13, 18}, 1, 1, 2, 1, reduce, {}, run_reduce});
  t.push_back({"ReduceSum", {1, 11, 13}, 1, 1, 2, 1, reduce, {}, run_reduce});
  t.push_back({"ReduceMax", {1, 11, 12, 13, 18, 20}, 1, 1, 2, 1, reduce, {}, run_reduce});
  t.push_back({"Softmax", {1, 11, 13}, 1, 1, 1, 1, {any("axis")}, {}, run_softmax});
  t.push_back({"LogSoftmax", {1, 11, 13}, 1, 1, 1, 1, {any("axis")}, {}, run_softmax});
  t.push_back({"ArgMax", {1, 11, 12, 13}, 1, 1, 1, 1, {any("axis"), flag("keepdims"), flag("select_last_index")}, {}, run_argmax});

  // antialias changes linear and cubic downscaling only; not implemented, so only its default is taken. axes
  // (opset 18) is not implemented. keep_aspect_ratio_policy is implemented for its default, "stretch".
  t.push_back(
      {"Resize",
       {10, 11, 13, 18, 19},
       10,
       1,
       4,
       1,
       {strings("mode", {"nearest", "linear", "cubic"}),
        strings("coordinate_transformation_mode", {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                                                   "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"}),
        strings("nearest_mode", {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}), any("cubic_coeff_a"),
        flag("exclude_outside"), any("extrapolation_value"), ints("antialias", {0}), strings("keep_aspect_ratio_policy", {"stretch"})},
       {"axes"},
       run_resize});
  // Upsample-7 takes its scales as an attribute, Upsample-9 as an input; Upsample-1 (height_scale, width_scale) is
  // not implemented, and Upsample-10 is the deprecated schema (ONNX's checker and ONNX Runtime refuse it: Resize).
  t.push_back({"Upsample", {1, 7, 9, 10}, 7, 1, 2, 1, {strings("mode", {"nearest", "linear"}), any("scales")}, {}, run_upsample, 9});
  std::sort(t.begin(), t.end(), [](const OpSpec& a, const OpSpec& b) { return a.op_type < b.op_type; });
  return t;
}

std::string join_quoted(const std::vector<std::string>& values) {
  std::string s;
  for (const auto& v : values) s += (s.empty() ? "'" : ", '") + v + "'";
  return s;
}

std::string join_ints(const std::vector<int64_t>& values) {
  std::string s;
  for (int64_t v : values) s += (s.empty() ? "" : ", ") + std::to_string(v);
  return s;
}

}  // namespace

std::string attribute_outside(const std::vector<AttributeSpec>& implemented, const onnx::AttributeProto& a) {
  const auto it = std::find_if(implemented.begin(), implemented.end(), [&](const AttributeSpec& s) { return s.name == a.name(); });
  if (it == implemented.end()) return "attribute " + a.name() + " is not implemented";
  if (!it->strings.empty()) {
    if (a.type() != onnx::AttributeProto::STRING) return "attribute " + a.name() + " is not a string";
    if (std::find(it->strings.begin(), it->strings.end(), a.s()) == it->strings.end()) {
      return "attribute " + a.name() + " = '" + a.s() + "' is not implemented (only " + join_quoted(it->strings) + ")";
    }
  }
  if (!it->ints.empty()) {
    if (a.type() != onnx::AttributeProto::INT) return "attribute " + a.name() + " is not an int";
    if (std::find(it->ints.begin(), it->ints.end(), a.i()) == it->ints.end()) {
      return "attribute " + a.name() + " = " + std::to_string(a.i()) + " is not implemented (only " + join_ints(it->ints) + ")";
    }
  }
  return "";
}

const std::vector<OpSpec>& op_table() {
  static const std::vector<OpSpec> table = make_table();
  return table;
}

const OpSpec* find_op(const std::string& op_type) {
  const auto& t = op_table();
  const auto it = std::lower_bound(t.begin(), t.end(), op_type, [](const OpSpec& s, const std::string& op) { return s.op_type < op; });
  return it != t.end() && it->op_type == op_type ? &*it : nullptr;
}

const std::vector<std::string>& supported_ops() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> v;
    for (const auto& s : op_table()) v.push_back(s.op_type);
    return v;
  }();
  return ops;
}

bool is_supported_op(const std::string& op_type) { return find_op(op_type) != nullptr; }

int64_t op_version(const OpSpec& spec, int64_t opset) {
  int64_t version = 0;
  for (int64_t v : spec.versions) {
    if (v <= opset) version = v;
  }
  return version;
}

std::string unsupported_reason(const onnx::NodeProto& node, int64_t opset) {
  if (!node.domain().empty() && node.domain() != "ai.onnx") {
    return "op " + node.domain() + "::" + node.op_type() + " is not supported by the executor";
  }
  const OpSpec* spec = find_op(node.op_type());
  // Random draws (SNAC's NoiseBlock exports RandomNormalLike): no two runs agree, so no run of either model could be
  // compared with the other's.
  static const std::set<std::string> random{"RandomNormal",      "RandomNormalLike", "RandomUniform",
                                            "RandomUniformLike", "Multinomial",      "Bernoulli"};
  if (spec == nullptr && random.count(node.op_type()) != 0) {
    return "op " + node.op_type() +
           " draws random values, so no run of the model can be compared with another's (export the model "
           "without it)";
  }
  if (spec == nullptr) return "op " + node.op_type() + " is not supported by the executor";
  if (opset > kKnownThroughOpset) {
    return "the model imports opset " + std::to_string(opset) + ", newer than the executor's op table (opsets up to " +
           std::to_string(kKnownThroughOpset) + ")";
  }
  const int64_t version = op_version(*spec, opset);
  if (version == 0) return node.op_type() + " does not exist at opset " + std::to_string(opset);
  if (version < spec->first_implemented) {
    return node.op_type() + "-" + std::to_string(version) + " (opset " + std::to_string(opset) + ") is not implemented (versions from " +
           std::to_string(spec->first_implemented) + " on are)";
  }
  if (spec->last_implemented != 0 && version > spec->last_implemented) {
    return node.op_type() + "-" + std::to_string(version) + " (opset " + std::to_string(opset) + ") is not implemented (versions " +
           std::to_string(spec->first_implemented) + " to " + std::to_string(spec->last_implemented) + " are)";
  }
  for (int k = 0; k < node.input_size(); ++k) {
    const bool present = !node.input(k).empty();
    if (static_cast<size_t>(k) < spec->required_inputs && !present) return "required input " + std::to_string(k) + " is missing";
    if (static_cast<size_t>(k) >= spec->max_inputs && present) {
      return "input " + std::to_string(k) + " ('" + node.input(k) + "') is not implemented (the kernel reads " +
             std::to_string(spec->max_inputs) + ")";
    }
  }
  if (static_cast<size_t>(node.input_size()) < spec->required_inputs) {
    return "has " + std::to_string(node.input_size()) + " inputs, needs " + std::to_string(spec->required_inputs);
  }
  for (int k = 0; k < node.output_size(); ++k) {
    if (static_cast<size_t>(k) >= spec->max_outputs && !node.output(k).empty()) {
      return "output " + std::to_string(k) + " ('" + node.output(k) + "') is not implemented";
    }
  }
  for (const auto& a : node.attribute()) {
    if (std::string why = attribute_outside(spec->attributes, a); !why.empty()) return why;
  }
  return "";
}

core::Status run_reference_node(const onnx::NodeProto& node, const OpContext& ctx, const Inputs& in, const Outputs& out) {
  if (std::string why = unsupported_reason(node, ctx.opset); !why.empty()) return node_error(node, why);
  const OpSpec& spec = *find_op(node.op_type());
  if (out.empty() || out[0] == nullptr) return node_error(node, "has no output");
  for (size_t k = 0; k < spec.required_inputs; ++k) {
    if (k >= in.size() || in[k] == nullptr) return node_error(node, "missing input " + std::to_string(k));
  }
  for (size_t k = spec.max_outputs; k < out.size(); ++k) {
    if (out[k] != nullptr) return node_error(node, "output " + std::to_string(k) + " is not implemented");
  }
  return spec.kernel(ctx, node, in, out);
}

}  // namespace dwdeconv::ops
