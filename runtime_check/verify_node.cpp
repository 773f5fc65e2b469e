#include "runtime_check/verify_node.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include "core/reference.h"
#include "internal.h"
#include "onnx_io/attributes.h"
#include "onnx_io/shapes.h"
#include "ops/ops.h"
#include "rewrite/forms.h"
#include "runtime_check/executor.h"
#include "runtime_check/tensor_io.h"

namespace dwdeconv::runtime_check {

namespace {

// The element type `name` is declared with in `graph` (FLOAT when undeclared).
int32_t declared_type(const onnx::GraphProto& graph, const std::string& name) {
  for (const auto* list : {&graph.input(), &graph.value_info(), &graph.output()}) {
    for (const auto& vi : *list) {
      if (vi.name() == name && vi.type().tensor_type().elem_type() != 0) return vi.type().tensor_type().elem_type();
    }
  }
  return onnx::TensorProto::FLOAT;
}

// A model holding just the nodes of `model` needed to compute `outputs` from the graph input `x` (dims
// `x_dims`), constants included. Errors when the outputs depend on any other non-constant graph input.
core::Result<onnx::ModelProto> extract_subgraph(const onnx::ModelProto& model, const std::string& x, const std::vector<int64_t>& x_dims,
                                                const std::vector<std::string>& outputs, const std::string& side, size_t* node_count) {
  const onnx::GraphProto& graph = model.graph();
  std::map<std::string, int> producer;
  for (int k = 0; k < graph.node_size(); ++k) {
    for (const auto& name : graph.node(k).output()) producer[name] = k;
  }
  std::set<std::string> initializers;
  for (const auto& init : graph.initializer()) initializers.insert(init.name());
  std::set<int> keep;
  std::set<std::string> used_initializers;
  std::vector<std::string> pending = outputs;
  std::set<std::string> seen;
  while (!pending.empty()) {
    const std::string name = pending.back();
    pending.pop_back();
    if (name.empty() || name == x || !seen.insert(name).second) continue;
    if (initializers.count(name) != 0) {
      used_initializers.insert(name);
      continue;
    }
    const auto it = producer.find(name);
    if (it == producer.end()) {
      return core::invalid_model(side + ": '" + name + "' is neither computed from '" + x + "' nor a constant");
    }
    if (keep.insert(it->second).second) {
      for (const auto& in : graph.node(it->second).input()) pending.push_back(in);
    }
  }
  onnx::ModelProto sub;
  sub.set_ir_version(model.ir_version());
  *sub.mutable_opset_import() = model.opset_import();
  onnx::GraphProto* g = sub.mutable_graph();
  g->set_name(side);
  auto* input = g->add_input();
  input->set_name(x);
  input->mutable_type()->mutable_tensor_type()->set_elem_type(declared_type(graph, x));
  for (int64_t d : x_dims) input->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
  for (const auto& init : graph.initializer()) {
    if (used_initializers.count(init.name()) != 0) *g->add_initializer() = init;
  }
  for (int k : keep) *g->add_node() = graph.node(k);  // std::set keeps graph (topological) order
  for (const auto& name : outputs) g->add_output()->set_name(name);
  *node_count = keep.size();
  return sub;
}

// A Slice end at or past this is read as "to the end" for any tensor a runtime can hold, as the reshape_zero_insertion
// recogniser reads it (PyTorch writes INT64_MAX for `x[:, :, a:]`).
constexpr int64_t kLargeEnd = std::numeric_limits<int64_t>::max() / 2;

// `dims` of a type as text, with the symbols of dims that are not fixed ("1x3xHxW", "?" for a dim without one).
std::string type_dims_text(const onnx::TypeProto* type) {
  if (type == nullptr || !type->has_tensor_type() || !type->tensor_type().has_shape()) return "of unknown shape";
  std::string text;
  for (const auto& d : type->tensor_type().shape().dim()) {
    text += (text.empty() ? "" : "x") + (d.has_dim_value() ? std::to_string(d.dim_value()) : d.has_dim_param() ? d.dim_param() : "?");
  }
  return text.empty() ? "a scalar" : text;
}

// Whether dim `axis` of `name` may take other values than the one per-node mode runs: not a number in the model's
// inferred types (a symbol, unknown, or no shape at all).
bool dim_varies(const onnx_io::ScopedTypes& types, const std::string& name, int64_t axis) {
  const auto* type = types.find(0, name);
  if (type == nullptr || !type->has_tensor_type() || !type->tensor_type().has_shape()) return true;
  const auto& shape = type->tensor_type().shape();
  if (axis < 0) axis += shape.dim_size();
  return axis < 0 || axis >= shape.dim_size() || !shape.dim(static_cast<int>(axis)).has_dim_value();
}

// Whether any dim of `name` may vary (see dim_varies), or its rank is not known.
bool any_dim_varies(const onnx_io::ScopedTypes& types, const std::string& name) {
  const auto* type = types.find(0, name);
  if (type == nullptr || !type->has_tensor_type() || !type->tensor_type().has_shape()) return true;
  for (const auto& d : type->tensor_type().shape().dim()) {
    if (!d.has_dim_value()) return true;
  }
  return false;
}

std::string ints_text(const Tensor& t) {
  std::string text = "[";
  for (int64_t k = 0; k < t.numel(); ++k) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.10g", t.get(k));
    text += (k ? "," : "") + std::string(buf);
  }
  return text + "]";
}

// A size parameter a node on x's data path reads (a literal, by name), and the role it plays.
struct SizeParam {
  const onnx::NodeProto* node;
  std::string role;  // "sizes", "scales", "starts", "ends", "axes", "steps", "shape"
  std::string name;
};

// What collect_size_params found: the literals to evaluate, or why the region is refused before any is.
struct SizeParams {
  std::vector<SizeParam> params;
  std::string refused;
};

std::string where_in_region(const onnx::NodeProto& node, const std::string& label) {
  return onnx_io::describe_node(node) + " in the original's upsampler that ends at " + label;
}

// The size parameters of the nodes on x's data path in `region` that per-node mode must check, or the reason one of
// them is refused outright (sizes on an input whose dims vary; a parameter other than a bound or dims read from a Shape).
SizeParams collect_size_params(const onnx::ModelProto& original, const onnx::ModelProto& region, const std::string& x,
                               const onnx_io::ScopedTypes& types, const std::string& label) {
  const onnx::GraphProto& g = region.graph();
  std::map<std::string, const onnx::NodeProto*> producer;
  for (const auto& node : g.node()) {
    for (const auto& out : node.output()) producer[out] = &node;
  }
  std::set<std::string> initializers;
  for (const auto& init : g.initializer()) initializers.insert(init.name());
  // A literal: computed from initializers and Constants alone, reading no Shape and not x.
  std::map<std::string, bool> memo;
  std::function<bool(const std::string&)> literal = [&](const std::string& name) -> bool {
    if (initializers.count(name) != 0) return true;
    const auto it = producer.find(name);
    if (name == x || it == producer.end()) return false;
    if (const auto m = memo.find(name); m != memo.end()) return m->second;
    memo[name] = false;
    bool result = it->second->op_type() != "Shape";
    for (const auto& in : it->second->input()) result = result && (in.empty() || literal(in));
    return memo[name] = result;
  };
  int64_t opset = 0;
  for (const auto& o : original.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  }
  // The size parameters each node reads, as literal names to evaluate, and the checks on them in check_sizes.
  SizeParams out;
  auto& params = out.params;
  std::string& refused = out.refused;
  const auto where = [&](const onnx::NodeProto& node) { return where_in_region(node, label); };
  const auto input = [](const onnx::NodeProto& node, int k) { return k < node.input_size() ? node.input(k) : std::string(); };
  std::set<std::string> from_x{x};  // values computed from x's values (not through a Shape)
  for (const auto& node : g.node()) {
    if (!refused.empty()) break;
    if (!node.domain().empty() && node.domain() != "ai.onnx") continue;
    const std::string& op = node.op_type();
    // Only the nodes on x's data path: constant chains (a weight's Reshape) have sizes of their own.
    const bool on_path = node.input_size() > 0 && from_x.count(node.input(0)) != 0;
    if (node.op_type() != "Shape" &&
        std::any_of(node.input().begin(), node.input().end(), [&](const std::string& in) { return from_x.count(in) != 0; })) {
      from_x.insert(node.output().begin(), node.output().end());
    }
    if (!on_path) continue;
    std::vector<std::pair<std::string, std::string>> wanted;  // role, input name
    if (op == "Resize") {
      if (opset <= 10) {
        wanted = {{"scales", input(node, 1)}};
      } else {
        wanted = {{"scales", input(node, 2)}, {"sizes", input(node, 3)}};
      }
    } else if (op == "Slice" && node.input_size() >= 3) {
      wanted = {{"starts", input(node, 1)}, {"ends", input(node, 2)}, {"axes", input(node, 3)}, {"steps", input(node, 4)}};
    } else if (op == "Reshape" || op == "Expand") {
      wanted = {{"shape", input(node, 1)}};
    }
    const auto* data_type = types.find(0, node.input(0));
    const std::string data_dims = type_dims_text(data_type);
    for (const auto& [role, name] : wanted) {
      if (name.empty()) continue;
      if (role == "sizes") {
        // Sizes fix the output, read from a Shape or not (the recognisers take them only for an input of known dims).
        if (any_dim_varies(types, node.input(0))) {
          refused = where(node) + " reads sizes '" + name + "', which fix its output size whatever the size of its input '" +
                    node.input(0) + "' (" + data_dims + " in the model)";
          break;
        }
        continue;
      }
      // A Slice's bounds and a Reshape's or Expand's dims read from a Shape follow the sizes they read; the other
      // parameters are taken only as literals.
      const bool from_shape = !literal(name);
      if (from_shape && (role == "starts" || role == "ends" || role == "shape")) continue;
      if (from_shape) {
        refused = where(node) + " reads its " + role + " '" + name + "' from a Shape, which per-node mode does not follow";
        break;
      }
      params.push_back({&node, role, name});
    }
  }
  return out;
}

// The values of `params`' literals: the nodes computing them, run on the reference kernels (they do not read x).
core::Result<std::map<std::string, Tensor>> literal_values(const onnx::ModelProto& original, const std::string& x,
                                                           const std::vector<int64_t>& x_dims, const std::vector<SizeParam>& params,
                                                           const std::string& label) {
  std::vector<std::string> names;
  for (const auto& p : params) names.push_back(p.name);
  size_t count = 0;
  RC_ASSIGN(const onnx::ModelProto literals, extract_subgraph(original, x, x_dims, names, "literals of " + label, &count));
  ExecutorOptions options;
  options.use_xnnpack = false;
  options.input_shapes[x] = x_dims;
  RC_ASSIGN(auto inputs, make_random_inputs(literals, options.input_shapes, 0));
  options.inputs = inputs;
  RC_ASSIGN(Executor exec, Executor::create(literals, options));
  std::map<std::string, Tensor> value;
  for (const auto& out : exec.last_outputs()) value[out.name] = out.tensor;

  return value;
}

// Why one of `params`, with its literal's value in `value`, fixes a size on an axis whose dim varies ("" when none does).
std::string check_sizes(const std::vector<SizeParam>& params, const std::map<std::string, Tensor>& value, const onnx_io::ScopedTypes& types,
                        const std::string& label) {
  const auto where = [&](const onnx::NodeProto& node) { return where_in_region(node, label); };
  const auto value_of = [&](const onnx::NodeProto& node, const std::string& role) -> const Tensor* {
    for (const auto& p : params) {
      if (p.node == &node && p.role == role) return &value.at(p.name);
    }
    return nullptr;
  };
  for (const auto& p : params) {
    const onnx::NodeProto& node = *p.node;
    const std::string& data = node.input(0);
    const Tensor& v = value.at(p.name);
    const std::string of_input = "its input '" + data + "' is " + type_dims_text(types.find(0, data)) + " in the model";
    if (p.role == "scales") {
      for (int64_t k = 0; k < v.numel(); ++k) {
        const double scale = v.get(k);
        if (dim_varies(types, data, k) && scale != std::floor(scale)) {
          char buf[32];
          std::snprintf(buf, sizeof buf, "%.10g", scale);
          return where(node) + " scales axis " + std::to_string(k) + " by " + buf + ", not an integer, and " + of_input +
                 ": floor(size x " + buf + ") is no one multiple of the size for every size";
        }
      }
    } else if (p.role == "ends" || p.role == "starts" || p.role == "steps") {
      const Tensor* axes = value_of(node, "axes");
      for (int64_t k = 0; k < v.numel(); ++k) {
        const int64_t axis = axes != nullptr && k < axes->numel() ? static_cast<int64_t>(axes->get(k)) : k;
        if (!dim_varies(types, data, axis)) continue;
        const auto e = static_cast<int64_t>(v.i.empty() ? v.get(k) : v.i[static_cast<size_t>(k)]);
        const std::string on = " on axis " + std::to_string(axis) + ", and " + of_input;
        if (p.role == "ends" && e >= 0 && e < kLargeEnd) {
          return where(node) + " ends at " + std::to_string(e) + on + ": it crops any larger input to that size";
        }
        if (p.role == "starts" && e < 0) {
          return where(node) + " starts at " + std::to_string(e) + on + ": it keeps " + std::to_string(-e) +
                 " elements of any larger input";
        }
        if (p.role == "steps" && e != 1) {
          return where(node) + " steps by " + std::to_string(e) + on + ": its output size is not one affine function of the input's";
        }
      }
    } else if (p.role == "shape") {
      const bool varies = any_dim_varies(types, data);
      for (int64_t k = 0; varies && k < v.numel(); ++k) {
        const auto d = static_cast<int64_t>(v.get(k));
        const bool keeps = node.op_type() == "Reshape" ? (d == 0 || d == -1) : d == 1;
        if (!keeps) {
          return where(node) + (node.op_type() == "Reshape" ? " reshapes to " : " expands to ") + ints_text(v) + ", and " + of_input +
                 ": a literal dim there is one size for every input size";
        }
      }
    }
  }
  return std::string();
}

// Why the original's region `region` (extracted from `original`, reading `x`) may compute an output whose size does
// not follow x's ("" when it cannot): a node whose output size a constant fixes on an axis the model lets vary. Per-node
// mode runs the region at one input size; there a region fixed at 8x10 and a replacement giving 2H x 2W agree when
// H x W is 4x5, and at no other size. A size read from a Shape at run time follows the sizes it
// reads and is not refused; a constant that only adds to a size (Pad's pads, a Slice's non-negative start), multiplies
// it by an integer (Tile's repeats, Resize's integer scales) or keeps it (Reshape by 0 and -1, Expand by 1) does too.
// What is refused on an axis whose dim varies: Resize by sizes, Resize by a scale that is not an integer (floor(H x
// 2.01) is 2H only while H < 100), a Slice that ends at a literal (a crop once the input is larger) or starts at a
// negative literal (a fixed count from the end) or steps by other than 1, a Reshape to literal dims other than 0 and
// -1, and an Expand to a literal dim other than 1.
core::Result<std::string> fixed_size_in_region(const onnx::ModelProto& original, const onnx::ModelProto& region, const std::string& x,
                                               const std::vector<int64_t>& x_dims, const onnx_io::ScopedTypes& types,
                                               const std::string& label) {
  const SizeParams found = collect_size_params(original, region, x, types, label);
  if (!found.refused.empty() || found.params.empty()) return found.refused;
  RC_ASSIGN(const auto value, literal_values(original, x, x_dims, found.params, label));
  return check_sizes(found.params, value, types, label);
}

// A rank-4 tensor as it is; a rank-3 one (1-D: [N, C, L] or a weight [C, M, K]) with a unit H axis, [N, C, 1, L].
core::Tensor4 to_tensor4(const Tensor& t) {
  const bool one_d = t.dims.size() == 3;
  core::Tensor4 r(t.dims[0], t.dims[1], one_d ? 1 : t.dims[2], one_d ? t.dims[2] : t.dims[3]);
  for (size_t k = 0; k < r.data.size(); ++k) r.data[k] = t.get(static_cast<int64_t>(k));
  return r;
}

// The output of the ConvTranspose `node` by the double-precision formula, from x, its weight w and bias b (nullptr: none)
// as the original graph computes them, in the dtype and rank of the original's output `original_out`. `label` names the
// node in a size error: the reference holds its output in double, twice the bytes the executor needed.
core::Result<Tensor> double_reference(const onnx::NodeProto& node, const Tensor& x_value, const Tensor& w_value, const Tensor* b_value,
                                      const Tensor& original_out, const std::string& label) {
  RC_CHECK(checked_element_count(original_out.dims, sizeof(double),
                                 label + ": the double reference's output " + format_dims(original_out.dims)));
  RC_ASSIGN(const ops::ConvGeometry g, ops::resolve_conv_transpose(node, x_value.dims, w_value.dims));
  std::vector<double> bias;
  if (b_value != nullptr) {
    for (int64_t k = 0; k < b_value->numel(); ++k) bias.push_back(b_value->get(k));
  }
  const core::Tensor4 ref =
      core::conv_transpose2d_reference(to_tensor4(x_value), to_tensor4(w_value), bias, ops::conv_transpose2d_params(g));
  Tensor expected;
  expected.reshape(original_out.dtype,
                   g.spatial == 1 ? std::vector<int64_t>{ref.n, ref.c, ref.w} : std::vector<int64_t>{ref.n, ref.c, ref.h, ref.w});
  for (size_t k = 0; k < ref.data.size(); ++k) expected.f[k] = static_cast<float>(ref.data[k]);
  return expected;
}

}  // namespace

std::string NodeVerification::summary() const {
  ComparisonReport report;
  report.outputs = {original, rewritten};
  report.outputs[0].name = "original (" + std::to_string(original_nodes) + " nodes)";
  report.outputs[1].name = "rewritten (" + std::to_string(replacement_nodes) + " nodes)";
  return node + " on input " + format_dims(input_shape) + ", each side against " + expected + ": " + (passed ? "pass" : "FAIL") + "\n" +
         report.summary() + "original placement: " + original_placement + "\nrewritten placement: " + rewritten_placement + "\n";
}

core::Result<NodeVerification> verify_node(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                           const std::string& output_name, const std::string& input_name,
                                           const std::vector<int64_t>& input_shape, const onnx_io::ScopedTypes& model_types, uint64_t seed,
                                           const Tolerances& tolerances) {
  const onnx::NodeProto* node = nullptr;
  for (const auto& n : original.graph().node()) {
    if (n.output_size() > 0 && n.output(0) == output_name) node = &n;
  }
  if (node == nullptr) return core::invalid_model("no node in the original model produces '" + output_name + "'");
  // A region ends at the op its form starts from (the form's row says which): a Conv or ConvTranspose with its weight,
  // or the last node of a fold, which has none (upsample1d's Slice of its crop).
  const bool conv = node->op_type() == "ConvTranspose" || node->op_type() == "Conv";
  const bool folded = !conv && rewrite::form_root_ops().count(node->op_type()) != 0;
  if (!folded && (!conv || node->input_size() < 2)) {
    return detail::node_error(*node, "is not a Conv or ConvTranspose with a weight, nor the last node of a folded upsampler");
  }
  if (input_shape.size() != 4 && input_shape.size() != 3) {
    return detail::node_error(*node, "only 1-D and 2-D upsamplers (rank-3 or rank-4 input) can be verified");
  }
  NodeVerification result;
  result.node = onnx_io::describe_node(*node);
  result.input_shape = input_shape;
  const std::string& x = input_name;
  // A ConvTranspose reading x itself has a formula to check both sides against; a hand-written form is checked
  // against its own region computed by other kernels.
  const bool lone_deconv = node->op_type() == "ConvTranspose" && node->input(0) == x;
  const std::string w = folded ? "" : node->input(1);
  const std::string b = !folded && node->input_size() > 2 ? node->input(2) : "";

  std::vector<std::string> original_outputs = {output_name};
  if (lone_deconv) original_outputs.push_back(w);
  if (lone_deconv && !b.empty()) original_outputs.push_back(b);
  RC_ASSIGN(const onnx::ModelProto original_sub,
            extract_subgraph(original, x, input_shape, original_outputs, "original " + result.node, &result.original_nodes));
  RC_ASSIGN(const onnx::ModelProto rewritten_sub,
            extract_subgraph(rewritten, x, input_shape, {output_name}, "rewritten " + result.node, &result.replacement_nodes));
  // One input size is checked below. When the model lets x take others, the original's output size must follow x's
  // as the replacement's does, or the two can agree at this size only.
  if (any_dim_varies(model_types, x)) {
    RC_ASSIGN(const std::string fixed, fixed_size_in_region(original, original_sub, x, input_shape, model_types, result.node));
    if (!fixed.empty()) {
      return core::Error{core::ErrorKind::kCannotVerify,
                         fixed + "; per-node mode checks the region at one size of '" + x + "' (" + format_dims(input_shape) +
                             ", where the model has " + type_dims_text(model_types.find(0, x)) + "), and there a replacement whose " +
                             "output size follows x's can agree with it by chance: fix the model's input dims to check it"};
    }
  }

  ExecutorOptions options;
  options.seed = seed;
  options.input_shapes[x] = input_shape;
  RC_ASSIGN(auto inputs, make_random_inputs(original_sub, options.input_shapes, seed));
  options.inputs = inputs;

  // Creating an executor runs its model on options.inputs: those outputs are the ones compared. The inputs are
  // finite, so a non-finite value comes from the region's constants, which the executor does not run faithfully.
  const auto comparable = [&](const Executor& executor, const std::string& side) -> core::Status {
    if (const auto& bad = executor.first_non_finite()) {
      return core::Error{core::ErrorKind::kCannotVerify,
                         "the " + side + " of " + result.node + " run on its own: " + bad->describe() + "; " + kNonFiniteCaveat};
    }
    return core::Ok{};
  };
  RC_ASSIGN(Executor original_exec, Executor::create(original_sub, options));
  RC_CHECK(comparable(original_exec, "original"));
  const auto original_out = original_exec.last_outputs();
  RC_ASSIGN(Executor rewritten_exec, Executor::create(rewritten_sub, options));
  RC_CHECK(comparable(rewritten_exec, "replacement"));
  const auto rewritten_out = rewritten_exec.last_outputs();
  result.original_placement = original_exec.placement_summary();
  result.rewritten_placement = rewritten_exec.placement_summary();
  result.rewritten_xnnpack_ops = rewritten_exec.count(Placement::kXnnpack);
  result.rewritten_reference_ops = rewritten_exec.count(Placement::kReference);
  result.runs = original_exec.runs() + rewritten_exec.runs();

  Tensor expected;
  if (lone_deconv) {
    RC_ASSIGN(expected, double_reference(*node, inputs[0].tensor, original_out[1].tensor, b.empty() ? nullptr : &original_out[2].tensor,
                                         original_out[0].tensor, result.node));
    result.expected = "the double-precision ConvTranspose formula";
  } else {
    // The original region again, on the plain C++ kernels: a layout mistake in an XNNPACK path shows against it.
    ExecutorOptions reference_options = options;
    reference_options.use_xnnpack = false;
    RC_ASSIGN(Executor reference_exec, Executor::create(original_sub, reference_options));
    RC_CHECK(comparable(reference_exec, "original (reference kernels)"));
    expected = std::move(reference_exec.last_outputs()[0].tensor);
    result.runs += reference_exec.runs();
    result.expected = "the original region on the reference kernels";
  }

  result.original = compare_tensor(output_name, original_out[0].tensor, expected, tolerances);
  result.rewritten = compare_tensor(output_name, rewritten_out[0].tensor, expected, tolerances);
  result.passed = result.original.passed && result.rewritten.passed;
  return result;
}

}  // namespace dwdeconv::runtime_check
