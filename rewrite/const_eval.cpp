#include "rewrite/const_eval.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <set>

#include "core/text.h"
#include "onnx_io/attributes.h"
#include "onnx_io/tensor.h"
#include "ops/ops.h"

namespace dwdeconv::rewrite {
namespace {

using core::declined;
using onnx::TensorProto;

bool integer_type(int32_t t) {
  switch (t) {
    case TensorProto::INT8:
    case TensorProto::UINT8:
    case TensorProto::INT16:
    case TensorProto::UINT16:
    case TensorProto::INT32:
    case TensorProto::UINT32:
    case TensorProto::INT64:
    case TensorProto::UINT64:
    case TensorProto::BOOL: return true;
    default: return false;
  }
}

bool float_type(int32_t t) {
  return t == TensorProto::FLOAT || t == TensorProto::DOUBLE || t == TensorProto::FLOAT16 || t == TensorProto::BFLOAT16;
}

core::Result<int64_t> count_of(const std::vector<int64_t>& dims, const std::string& who) {
  auto n = onnx_io::element_count(dims, who);
  if (!n) return declined(n.error().message);
  if (*n > kMaxFoldedElements) {
    return declined(who + " would have " + std::to_string(*n) + " elements, more than the " + std::to_string(kMaxFoldedElements) +
                    " this tool folds");
  }
  return *n;
}

// Where `name` is defined as `scope` reads it: the graph, and the node that outputs it (nullptr for an
// initializer or graph input). Inner definitions hide outer ones, as ONNX scopes names.
std::pair<const GraphScope*, const onnx::NodeProto*> find_definition(const std::string& name, const GraphScope& scope) {
  for (const GraphScope* at = &scope; at != nullptr; at = at->parent) {
    for (const auto& node : at->graph->node()) {
      for (const auto& out : node.output()) {
        if (out == name) return {at, &node};
      }
    }
    for (const auto& init : at->graph->initializer()) {
      if (init.name() == name) return {at, nullptr};
    }
    for (const auto& input : at->graph->input()) {
      if (input.name() == name) return {at, nullptr};
    }
  }
  return {nullptr, nullptr};
}

// A folded value as the op library holds it (floats as float).
core::Result<ops::Tensor> to_op_tensor(const ConstTensor& value) {
  ops::Tensor t;
  try {
    t.reshape(value.data_type, value.dims);
  } catch (const ops::TensorSizeError& e) {
    return declined(e.what());
  }
  if (value.is_integer()) std::copy(value.ints.begin(), value.ints.end(), t.i.begin());
  else std::transform(value.reals.begin(), value.reals.end(), t.f.begin(), [](double v) { return static_cast<float>(v); });
  return t;
}

// An op library value as a folded value.
ConstTensor from_op_tensor(const ops::Tensor& tensor) {
  ConstTensor out;
  out.data_type = tensor.dtype;
  out.dims = tensor.dims;
  if (tensor.is_float()) out.reals.assign(tensor.f.begin(), tensor.f.end());
  else out.ints = tensor.i;
  return out;
}

// Ops whose every result is the same on every runtime: they move or select elements, compare them, or round once
// as IEEE 754 requires (+ - * /, sqrt, floor, a cast), so the folder's float is the runtime's. Any other op is
// inexact until listed here: the transcendentals (Sigmoid, Exp, Log, Tanh, Erf, Pow, Softmax, HardSigmoid's
// alpha * x + beta) are approximated differently on each runtime (ONNX Runtime's Sigmoid(0.5) is one float below the
// correctly rounded one), sums are added in another order (MatMul, Gemm, Conv, pools, reductions, normalizations),
// and Resize computes its source coordinates in float on one runtime and in double on another.
const std::set<std::string>& exact_ops() {
  static const std::set<std::string> ops = {
      "Identity",  "Relu",    "LeakyRelu",    "PRelu",   "Neg",       "Sqrt",  "Floor",           "Ceil",
      "Clip",      "Add",     "Sub",          "Mul",     "Div",       "Equal", "Where",           "Cast",
      "Reshape",   "Flatten", "Transpose",    "Squeeze", "Unsqueeze", "Shape", "Gather",          "Slice",
      "Concat",    "Pad",     "DepthToSpace", "Expand",  "Tile",      "Split", "ConstantOfShape", "MaxPool",
      "ReduceMax", "ArgMax",  "Abs"};
  return ops;
}

// Whether every runtime computes `node`'s output as the op library did (see exact_ops()). A Cast of a float out of the
// integer type's range, which converts as each runtime's compiler does, is refused by its kernel before this.
bool rounds_alike(const onnx::NodeProto& node, const ops::Tensor& output) {
  const std::string& op = node.op_type();
  if (exact_ops().count(op) != 0) return true;
  // Integer arithmetic is exact in any order; float sums are not.
  if (op == "ReduceSum" || op == "MatMul" || op == "Gemm" || op == "Range") return !output.is_float();
  if (op == "ScatterND") {
    auto reduction = onnx_io::get_string(node, "reduction", "none");
    return !output.is_float() || (reduction && (*reduction == "none" || *reduction == "max" || *reduction == "min"));
  }
  return false;
}

// Whether the values of input `k` of `op` decide its output's dims (a Reshape's shape, a Slice's bounds), as opposed
// to being carried into its elements only. Unlisted ops: every input, the safe answer.
bool values_decide_dims(const std::string& op, int k) {
  // Elementwise ops, and ops whose output dims follow from their inputs' dims and attributes alone.
  static const std::set<std::string> unary = {"Identity",  "Relu",       "LeakyRelu", "Elu",   "Sigmoid", "Tanh", "Neg",
                                              "Sqrt",      "Erf",        "Exp",       "Floor", "Ceil",    "Log",  "HardSigmoid",
                                              "HardSwish", "Reciprocal", "Abs",       "Sin",   "Cos",     "Sinh", "Cosh"};
  static const std::set<std::string> elementwise = {"PRelu", "Clip", "Add", "Sub", "Mul", "Div", "Pow", "Equal", "Where", "Cast"};
  static const std::set<std::string> dims_from_dims = {"Flatten",     "Transpose",          "Concat",
                                                       "Gather",      "DepthToSpace",       "ScatterND",
                                                       "Conv",        "ConvTranspose",      "MaxPool",
                                                       "AveragePool", "GlobalAveragePool",  "MatMul",
                                                       "Gemm",        "BatchNormalization", "InstanceNormalization",
                                                       "Softmax",     "LogSoftmax",         "ArgMax"};
  // Ops whose input 0 carries the elements and whose later inputs (shape, repeats, axes, bounds, pads, sizes) set dims.
  static const std::set<std::string> shaped_by_parameters = {"Reshape", "Expand", "Tile",     "Squeeze",    "Unsqueeze", "Slice",    "Pad",
                                                             "Split",   "Resize", "Upsample", "ReduceMean", "ReduceSum", "ReduceMax"};
  if (unary.count(op) != 0 || elementwise.count(op) != 0 || dims_from_dims.count(op) != 0) return false;
  if (shaped_by_parameters.count(op) != 0) return k >= 1;
  return true;  // ConstantOfShape, Range, and any op added to the table later
}

}  // namespace

bool ConstTensor::is_integer() const { return integer_type(data_type); }

core::Status decidable(const ConstTensor& value, const std::string& subject) {
  if (value.inexact.empty()) return core::Ok{};
  return declined(subject + " computed through " + value.inexact +
                  ", which runtimes round differently: the value this tool folds need not be the one a runtime computes");
}

core::Result<ConstTensor> to_const_tensor(const TensorProto& tensor) {
  ConstTensor out;
  out.data_type = tensor.data_type();
  out.dims = onnx_io::dims_of(tensor);
  const std::string who = "tensor '" + tensor.name() + "'";
  if (!integer_type(out.data_type) && !float_type(out.data_type)) {
    return declined(who + " has element type " + onnx_io::data_type_name(out.data_type) + ", which is not folded");
  }
  if (onnx_io::is_external(tensor) && !tensor.has_raw_data()) return declined(who + " has its data outside the model");
  auto count = count_of(out.dims, who);
  if (!count) return count.error();
  if (out.data_type == TensorProto::INT64) {
    // Read exactly: Slice bounds such as INT64_MAX do not survive a trip through double.
    if (auto status = onnx_io::validate_tensor_data(tensor, who); !status) return status.error();
    out.ints.resize(static_cast<size_t>(*count));
    if (tensor.has_raw_data()) {
      if (*count > 0) std::memcpy(out.ints.data(), tensor.raw_data().data(), out.ints.size() * sizeof(int64_t));
    } else {
      std::copy(tensor.int64_data().begin(), tensor.int64_data().end(), out.ints.begin());
    }
    return out;
  }
  auto values = onnx_io::to_doubles(tensor);
  if (!values) return declined(values.error().message);
  if (out.is_integer()) {
    for (double v : *values) out.ints.push_back(static_cast<int64_t>(v));  // exact: every other integer type fits
  } else {
    out.reals = std::move(*values);
  }
  return out;
}

core::Result<ConstTensor> ConstEvaluator::evaluate(const std::string& name, const GraphScope& scope) {
  auto value = evaluate_flagged(name, scope);
  if (!value) return value;
  if (auto ok = decidable(*value, "'" + core::printable(name) + "' is"); !ok) return ok.error();
  return value;
}

core::Result<ConstTensor> ConstEvaluator::evaluate_weight(const std::string& name, const GraphScope& scope) {
  auto value = evaluate_flagged(name, scope);
  if (!value || value->inexact_dims.empty()) return value;
  return declined("the dims of '" + core::printable(name) + "' are computed through " + value->inexact_dims +
                  ", which runtimes round differently: the dims this tool folds need not be the ones a runtime computes");
}

core::Result<ConstTensor> ConstEvaluator::evaluate_flagged(const std::string& name, const GraphScope& scope) {
  const auto [where, producer] = find_definition(name, scope);
  if (where == nullptr) return core::invalid_model("tensor '" + name + "' is read but never defined");
  const auto key = std::make_pair(where->index, name);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  if (depth_ > 256) return declined("'" + name + "' is computed by a chain deeper than 256 nodes");
  core::Result<ConstTensor> result = declined("not evaluated");
  if (producer != nullptr && producer->op_type() != "Constant") {
    ++depth_;
    result = evaluate_node(*producer, name, *where);
    --depth_;
  } else {
    // Initializers and Constants, with the same rules the weights follow (no overridable initializers, ...).
    auto source = resolve_constant(name, *where, ir_version_);
    if (!source) {
      result = source.error();
    } else if (source->sparse != nullptr) {
      result = declined("'" + name + "' is a sparse initializer, which is not folded");
    } else if (auto n = onnx_io::element_count(onnx_io::dims_of(*source->tensor), "'" + name + "'"); !n || *n > max_elements_) {
      result = declined("'" + name + "' has more than the " + std::to_string(max_elements_) + " elements this evaluation folds");
    } else {
      result = to_const_tensor(*source->tensor);
    }
  }
  cache_.emplace(key, result);
  return result;
}

void ConstEvaluator::forget_refusals() {
  for (auto it = cache_.begin(); it != cache_.end();) it = it->second ? std::next(it) : cache_.erase(it);
}

core::Result<ConstTensor> ConstEvaluator::evaluate_node(const onnx::NodeProto& node, const std::string& name, const GraphScope& scope) {
  const std::string who = onnx_io::describe_node(node);
  const std::string& op = node.op_type();
  if (!node.domain().empty() && node.domain() != "ai.onnx") {
    return declined("'" + name + "' is computed by " + who + " in domain '" + node.domain() + "', which is not folded");
  }
  if (op == "Identity") return evaluate_flagged(node.input(0), scope);
  // The op library's kernels compute the value, as the executor computes it: one semantics for both. The table
  // refuses what its kernel does not implement; the bound keeps a hostile shape from allocating.
  if (std::string why = ops::unsupported_reason(node, opset_); !why.empty()) {
    return declined("'" + name + "' is computed by " + who + ", which is not folded: " + why);
  }
  const ops::OpContext ctx{opset_, max_elements_};
  std::vector<ops::Tensor> values(static_cast<size_t>(node.input_size()));
  ops::Inputs inputs(values.size(), nullptr);
  std::string inexact, inexact_dims;  // carried from the inputs: the first op on the way that runtimes round differently
  if (op == "Shape") {
    // A Shape reads only its input's dims, which shape inference knows without a value: a dims-only stand-in (no
    // elements are allocated or read) lets the kernel apply start and end.
    auto dims = known_dims(node.input(0), scope);
    if (!dims) return declined(who + ": " + dims.error().message);
    values[0].dims = std::move(*dims);
    inputs[0] = &values[0];
  } else {
    for (int k = 0; k < node.input_size(); ++k) {
      if (node.input(k).empty()) continue;
      auto value = evaluate_flagged(node.input(k), scope);
      if (!value) return value.error();
      if (inexact.empty()) inexact = value->inexact;
      if (inexact_dims.empty()) inexact_dims = value->inexact_dims;
      if (inexact_dims.empty() && values_decide_dims(op, k)) inexact_dims = value->inexact;
      // The library holds DOUBLE as float; a double value folded there would come back rounded.
      if (value->data_type == TensorProto::DOUBLE) return declined(who + ": input '" + node.input(k) + "' is DOUBLE, which is not folded");
      auto tensor = to_op_tensor(*value);
      if (!tensor) return declined(who + ": " + tensor.error().message);
      values[static_cast<size_t>(k)] = std::move(*tensor);
      inputs[static_cast<size_t>(k)] = &values[static_cast<size_t>(k)];
    }
  }
  std::vector<ops::Tensor> results(static_cast<size_t>(node.output_size()));
  ops::Outputs outputs;
  int wanted = -1;
  for (int k = 0; k < node.output_size(); ++k) {
    outputs.push_back(node.output(k).empty() ? nullptr : &results[static_cast<size_t>(k)]);
    if (node.output(k) == name) wanted = k;
  }
  // Checked once the inputs are computed (they count too), before this node's own value is.
  if (computed_elements_ >= kMaxComputedElements) {
    return declined("'" + name + "' is computed by " + who + ", which is not folded: the constants folded so far hold " +
                    std::to_string(computed_elements_) + " elements, the most this tool computes for one model");
  }
  try {
    if (auto ran = ops::run_reference_node(node, ctx, inputs, outputs); !ran) return declined(ran.error().message);
  } catch (const ops::TensorSizeError& e) {
    return declined(who + ": " + e.what());
  }
  const ops::Tensor& result = results[static_cast<size_t>(wanted)];
  if (result.dtype == TensorProto::DOUBLE) return declined(who + ": its output is DOUBLE, which is not folded");
  ConstTensor out = from_op_tensor(result);
  computed_elements_ += static_cast<int64_t>(out.size());
  out.inexact = !inexact.empty() || rounds_alike(node, result) ? inexact : who;
  out.inexact_dims = inexact_dims;
  return out;
}

core::Result<std::vector<int64_t>> ConstEvaluator::known_dims(const std::string& name, const GraphScope& scope) const {
  const auto* type = types_.find(scope.index, name);
  if (type == nullptr || !type->has_tensor_type() || !type->tensor_type().has_shape()) {
    return declined("the shape of '" + name + "' is not known");
  }
  std::vector<int64_t> dims;
  for (const auto& d : type->tensor_type().shape().dim()) {
    if (!d.has_dim_value()) return declined("the shape of '" + name + "' has a dim that is not known");
    dims.push_back(d.dim_value());
  }
  return dims;
}

}  // namespace dwdeconv::rewrite
