#include "runtime_check/verify_node.h"

#include <map>
#include <set>

#include "core/reference.h"
#include "onnx_io/attributes.h"
#include "runtime_check/executor.h"
#include "runtime_check/internal.h"
#include "ops/ops.h"
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
core::Result<onnx::ModelProto> extract_subgraph(const onnx::ModelProto& model, const std::string& x,
                                                const std::vector<int64_t>& x_dims,
                                                const std::vector<std::string>& outputs, const std::string& side,
                                                size_t* node_count) {
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

core::Tensor4 to_tensor4(const Tensor& t) {
  core::Tensor4 r(t.dims[0], t.dims[1], t.dims[2], t.dims[3]);
  for (size_t k = 0; k < r.data.size(); ++k) r.data[k] = t.get(static_cast<int64_t>(k));
  return r;
}

}  // namespace

std::string NodeVerification::summary() const {
  ComparisonReport report;
  report.outputs = {original, rewritten};
  report.outputs[0].name = "original (" + std::to_string(original_nodes) + " nodes)";
  report.outputs[1].name = "rewritten (" + std::to_string(replacement_nodes) + " nodes)";
  return node + " on input " + format_dims(input_shape) + ", each side against " + expected + ": " + (passed ? "pass" : "FAIL") +
         "\n" + report.summary() + "original placement: " + original_placement + "\nrewritten placement: " + rewritten_placement + "\n";
}

core::Result<NodeVerification> verify_node(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                           const std::string& output_name, const std::string& input_name,
                                           const std::vector<int64_t>& input_shape, uint64_t seed,
                                           const Tolerances& tolerances) {
  const onnx::NodeProto* node = nullptr;
  for (const auto& n : original.graph().node()) {
    if (n.output_size() > 0 && n.output(0) == output_name) node = &n;
  }
  if (node == nullptr) return core::invalid_model("no node in the original model produces '" + output_name + "'");
  if ((node->op_type() != "ConvTranspose" && node->op_type() != "Conv") || node->input_size() < 2) {
    return detail::node_error(*node, "is not a Conv or ConvTranspose with a weight");
  }
  if (input_shape.size() != 4) return detail::node_error(*node, "only 2-D upsamplers (rank-4 input) can be verified");
  NodeVerification result;
  result.node = onnx_io::describe_node(*node);
  result.input_shape = input_shape;
  const std::string& x = input_name;
  // A ConvTranspose reading x itself has a formula to check both sides against; a hand-written form is checked
  // against its own region computed by other kernels.
  const bool lone_deconv = node->op_type() == "ConvTranspose" && node->input(0) == x;
  const std::string w = node->input(1);
  const std::string b = node->input_size() > 2 ? node->input(2) : "";

  std::vector<std::string> original_outputs = {output_name};
  if (lone_deconv) original_outputs.push_back(w);
  if (lone_deconv && !b.empty()) original_outputs.push_back(b);
  RC_ASSIGN(const onnx::ModelProto original_sub,
            extract_subgraph(original, x, input_shape, original_outputs, "original " + result.node, &result.original_nodes));
  RC_ASSIGN(const onnx::ModelProto rewritten_sub,
            extract_subgraph(rewritten, x, input_shape, {output_name}, "rewritten " + result.node, &result.replacement_nodes));

  ExecutorOptions options;
  options.seed = seed;
  options.input_shapes[x] = input_shape;
  RC_ASSIGN(auto inputs, make_random_inputs(original_sub, options.input_shapes, seed));
  options.inputs = inputs;

  // Creating an executor runs its model on options.inputs: those outputs are the ones compared. The inputs are
  // finite, so a non-finite value comes from the region's constants, which the executor does not run faithfully.
  const auto comparable = [&](const Executor& executor, const std::string& side) -> core::Status {
    if (const auto& bad = executor.first_non_finite()) {
      return core::Error{core::ErrorKind::kCheckFailed,
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
    // The double reference, from the same input and the weights as the original graph computes them. It holds its
    // output in double, twice the bytes the executor needed.
    RC_CHECK(checked_element_count(original_out[0].tensor.dims, sizeof(double), result.node + ": the double reference's output " +
                                                                                    format_dims(original_out[0].tensor.dims)));
    const Tensor& x_value = inputs[0].tensor;
    const Tensor& w_value = original_out[1].tensor;
    RC_ASSIGN(const ops::ConvGeometry g, ops::resolve_conv_transpose(*node, x_value.dims, w_value.dims));
    core::ConvTranspose2dParams params;
    params.strides = {g.strides[0], g.strides[1]};
    params.dilations = {g.dilations[0], g.dilations[1]};
    params.output_padding = {g.output_padding[0], g.output_padding[1]};
    params.pads = {g.pads_begin[0], g.pads_begin[1], g.pads_end[0], g.pads_end[1]};
    params.group = g.group;
    std::vector<double> bias;
    if (!b.empty()) {
      const Tensor& b_value = original_out[2].tensor;
      for (int64_t k = 0; k < b_value.numel(); ++k) bias.push_back(b_value.get(k));
    }
    const core::Tensor4 ref = core::conv_transpose2d_reference(to_tensor4(x_value), to_tensor4(w_value), bias, params);
    expected.reshape(original_out[0].tensor.dtype, {ref.n, ref.c, ref.h, ref.w});
    for (size_t k = 0; k < ref.data.size(); ++k) expected.f[k] = static_cast<float>(ref.data[k]);
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
