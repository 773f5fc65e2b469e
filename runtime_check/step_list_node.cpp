// Planning one node of the step list, in the first form that applies: folded on the reference kernels when its
// inputs are constants, fused into the Convs it reads (Concat, Relu, Clip) or into a group normalization chain, its
// XNNPACK family's step, the executor's own data movement, or the reference kernels. build_step_list
// (step_list.cpp) plans the nodes through it in graph order.
#include "step_list_node.h"

#include <algorithm>
#include <map>
#include <unordered_set>

#include "internal.h"
#include "onnx_io/attributes.h"
#include "ops/ops.h"

namespace dwdeconv::runtime_check::detail {
namespace {

using XnnpackFactory = core::Result<Built> (*)(const NodeIo& io, Values& v, const ExecutorOptions& options, ConvStep** conv);

// A factory that needs neither the options nor the Conv registration.
template <core::Result<Built> (*Make)(const NodeIo&, Values&)>
core::Result<Built> plain(const NodeIo& io, Values& v, const ExecutorOptions&, ConvStep**) {
  return Make(io, v);
}

// The XNNPACK families, by op: the attributes and values each family's steps implement, and its factory. A node
// with any other attribute or value runs on the reference kernels, which implement everything the op table lets
// through (tests/runtime_check/xnnpack_ops_test.cpp checks these lists against the op table). Attributes a step
// does not read because they cannot change its result are listed with the reason.
struct XnnpackFamily {
  std::vector<ops::AttributeSpec> attributes;
  XnnpackFactory make;
};

const std::map<std::string, XnnpackFamily>& xnnpack_families() {
  using ops::AttributeSpec;
  const auto any = [](std::string name) { return AttributeSpec{std::move(name), {}, {}}; };
  const auto only = [](std::string name, std::string value) { return AttributeSpec{std::move(name), {std::move(value)}, {}}; };
  const auto only_int = [](std::string name, int64_t value) { return AttributeSpec{std::move(name), {}, {value}}; };
  const auto conv = [](const NodeIo& io, Values& v, const ExecutorOptions& o, ConvStep** c) {
    return make_conv_step(io, v, o.zero_extend_depthwise, c);
  };
  const XnnpackFactory unary = plain<make_unary_step>, binary = plain<make_binary_step>;
  static const std::map<std::string, XnnpackFamily> families = {
      {"Conv", {{any("auto_pad"), any("dilations"), any("group"), any("kernel_shape"), any("pads"), any("strides")}, conv}},
      {"ConvTranspose",
       {{any("auto_pad"), any("dilations"), any("group"), any("kernel_shape"), any("pads"), any("strides"), any("output_padding"),
         any("output_shape")},
        conv}},
      {"Relu", {{}, unary}},
      {"LeakyRelu", {{any("alpha")}, unary}},
      {"Sigmoid", {{}, unary}},
      {"HardSwish", {{}, unary}},
      {"PRelu", {{}, plain<make_prelu_step>}},
      {"Clip", {{any("min"), any("max")}, unary}},
      {"Neg", {{}, unary}},
      {"Sqrt", {{}, unary}},
      {"Add", {{}, binary}},
      {"Sub", {{}, binary}},
      {"Mul", {{}, binary}},
      {"Div", {{}, binary}},
      {"Pow", {{}, plain<make_pow_step>}},
      {"Softmax", {{any("axis")}, plain<make_softmax_step>}},
      {"ReduceMean", {{any("axes"), any("keepdims"), any("noop_with_empty_axes")}, plain<make_reduce_mean_step>}},
      {"Pad", {{only("mode", "constant"), any("pads"), any("value")}, plain<make_pad_step>}},
      {"Concat", {{any("axis")}, plain<make_concat_step>}},
      {"DepthToSpace", {{any("blocksize"), only("mode", "DCR")}, plain<make_depth_to_space_step>}},
      // storage_order orders only MaxPool's Indices output, which the op table refuses.
      {"MaxPool",
       {{any("auto_pad"), any("ceil_mode"), any("dilations"), any("kernel_shape"), any("pads"), any("storage_order"), any("strides")},
        plain<make_pool_step>}},
      {"AveragePool",
       {{any("auto_pad"), any("ceil_mode"), only_int("count_include_pad", 0), any("dilations"), any("kernel_shape"), any("pads"),
         any("strides")},
        plain<make_pool_step>}},
      {"GlobalAveragePool", {{}, plain<make_global_average_pool_step>}},
      // Bilinear only: cubic_coeff_a and nearest_mode apply to other modes, extrapolation_value only to
      // tf_crop_and_resize, which is not taken.
      {"Resize",
       {{only("mode", "linear"),
         AttributeSpec{"coordinate_transformation_mode", {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"}, {}},
         only_int("exclude_outside", 0), any("cubic_coeff_a"), any("nearest_mode"), any("extrapolation_value"),
         only("keep_aspect_ratio_policy", "stretch")},
        plain<make_resize_step>}},
      // Upsample-7 and -9 are Resize-10 (asymmetric) for scales >= 1: bilinear on the same step.
      {"Upsample", {{only("mode", "linear"), any("scales")}, plain<make_resize_step>}},
      {"MatMul", {{}, plain<make_fully_connected_step>}},
      {"Gemm", {{any("alpha"), any("beta"), any("transA"), any("transB")}, plain<make_fully_connected_step>}},
      {"Split", {{any("axis"), any("split"), any("num_outputs")}, plain<make_split_step>}},
  };
  return families;
}

}  // namespace

std::vector<std::pair<std::string, std::vector<ops::AttributeSpec>>> xnnpack_family_attributes() {
  std::vector<std::pair<std::string, std::vector<ops::AttributeSpec>>> out;
  for (const auto& [op, family] : xnnpack_families()) out.emplace_back(op, family.attributes);
  return out;
}

namespace {

// Tries to build an XNNPACK step for `node`; returns a null step with a reason when XNNPACK cannot run it. `conv` is
// set when the step is a Conv or ConvTranspose.
core::Result<Built> build_xnnpack_step(const NodeIo& io, Values& v, const ExecutorOptions& options, ConvStep** conv) {
  const auto& families = xnnpack_families();
  const auto family = families.find(io.node.op_type());
  if (family == families.end()) return declined("");  // no XNNPACK operator for this op
  for (const auto& a : io.node.attribute()) {
    if (std::string why = ops::attribute_outside(family->second.attributes, a); !why.empty()) {
      return declined(why + " on XNNPACK");
    }
  }
  if (io.input(0) < 0) return declined("no data input");
  if (!v.peek(io.input(0)).is_float()) return declined("integer data");
  if (io.node.op_type() != "Split") {  // the one op with several outputs
    for (size_t k = 1; k < io.out.size(); ++k) {
      if (io.out[k] >= 0) return declined("extra outputs");
    }
  }
  return family->second.make(io, v, options, conv);
}

constexpr const char* kFusedConcatNote = "fused: input Convs write into its channel slices";

// Before: y_k = Conv(...) for each k;  y = Concat(y_0 .. y_n, axis=1)   (one strided copy per input)
// After:  each Conv writes channels [offset_k, offset_k + C_k) of y;  Concat does nothing
// Applies when every Concat input comes from an XNNPACK Conv (not ConvTranspose) and is read by nothing else (not
// another node, not twice by this Concat, not a graph output). Returns null, changing nothing, when it does not.
// Re-runs the redirected Convs once, so y holds the creation-time values like every other planned step's output.
core::Result<std::unique_ptr<Step>> try_fuse_concat(const NodeIo& io, const std::unordered_map<int, ConvProducer>& conv_producers,
                                                    const std::unordered_map<std::string, int>& readers, Values& v,
                                                    std::vector<NodePlacement>& placements) {
  const auto& in = io.in;
  const auto& out = io.out;
  const auto axis_attr = onnx_io::get_int(io.node, "axis", 0);
  if (!axis_attr.ok() || in.empty() || out.empty() || out[0] < 0) return std::unique_ptr<Step>{};
  for (size_t k = 1; k < out.size(); ++k) {
    if (out[k] >= 0) return std::unique_ptr<Step>{};
  }
  int64_t axis = axis_attr.value();
  if (!normalize_axis(axis, 4) || axis != 1) return std::unique_ptr<Step>{};
  std::vector<ConvProducer> producers;
  for (size_t k = 0; k < in.size(); ++k) {
    const auto found = conv_producers.find(in[k]);
    const auto read = readers.find(io.node.input(static_cast<int>(k)));
    if (in[k] < 0 || found == conv_producers.end() || is_transpose(*found->second.conv)) return std::unique_ptr<Step>{};
    if (read == readers.end() || read->second != 1) return std::unique_ptr<Step>{};
    const Tensor& t = v.peek(in[k]);
    const Tensor& first = v.peek(in[0]);
    if (!t.is_float() || t.dims.size() != 4 || t.dtype != first.dtype || t.dims[0] != first.dims[0] || t.dims[2] != first.dims[2] ||
        t.dims[3] != first.dims[3]) {
      return std::unique_ptr<Step>{};
    }
    producers.push_back(found->second);
  }
  std::vector<int64_t> y_dims = v.peek(in[0]).dims;
  y_dims[1] = 0;
  for (int id : in) y_dims[1] += v.peek(id).dims[1];
  v.write(out[0], Layout::kNhwc, v.peek(in[0]).dtype, y_dims);
  int64_t offset = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    const int64_t channels = v.peek(in[k]).dims[1];
    RC_CHECK(write_into(*producers[k].conv, v, out[0], y_dims, offset));
    RC_CHECK(producers[k].step->run(v));
    std::string& fusion = placements[producers[k].placement].fusion;
    fusion += (fusion.empty() ? "fused: writes into " : "; writes into ") + onnx_io::describe_node(io.node) + " channels [" +
              std::to_string(offset) + ", " + std::to_string(offset + channels) + ")";
    offset += channels;
    v.retire(in[k]);  // never written or read again
  }
  return make_fused_concat_step(out[0]);
}

// Before: y = Conv(x, ...);  z = Relu(y)  (or Clip, e.g. Clip(y, 0, 6) for Relu6)
// After:  z = Conv(x, ...) with output range [0, inf] (or the Clip's bounds);  the Relu runs no step
// As XNNPACK's xnn_subgraph_fusion and the TFLite delegate do. Applies when the activation's data input comes
// from an XNNPACK Conv or ConvTranspose without a range yet and nothing else reads it (not another node, not a
// graph output), and the bounds are constant. Returns the Conv's description ("Conv 'c'"), or empty, changing
// nothing, when it does not apply. Re-runs the Conv once, so z holds its creation-time values.
core::Result<std::string> try_fuse_activation(const NodeIo& io, std::unordered_map<int, ConvProducer>& conv_producers,
                                              const std::unordered_map<std::string, int>& readers, Values& v,
                                              std::vector<NodePlacement>& placements) {
  const auto& in = io.in;
  const auto& out = io.out;
  if (in.empty() || in[0] < 0 || out.size() != 1 || out[0] < 0) return std::string();
  const auto found = conv_producers.find(in[0]);
  const auto read = readers.find(io.node.input(0));
  if (found == conv_producers.end() || has_output_range(*found->second.conv)) return std::string();
  if (read == readers.end() || read->second != 1) return std::string();
  const ClampRange range = clamp_range(io, v);
  if (!range.declined.empty()) return std::string();
  const ConvProducer producer = found->second;
  RC_CHECK(fuse_activation(*producer.conv, v, out[0], range.lo, range.hi));
  RC_CHECK(producer.step->run(v));
  NodePlacement& conv_placement = placements[producer.placement];
  conv_placement.fusion = "fused: " + onnx_io::describe_node(io.node) + " is its output range";
  conv_producers.erase(found);
  conv_producers[out[0]] = producer;
  v.retire(in[0]);  // never written or read again
  return conv_placement.node;
}

// Elementwise ops of one data input: the op table's unary kernel, and Clip (whose bounds are scalars).
bool layout_preserving(const std::string& op) {
  const ops::OpSpec* spec = ops::find_op(op);
  return spec != nullptr && (spec->kernel == &ops::detail::run_unary || spec->kernel == &ops::detail::run_clip);
}

// Appends `step` and its node's placement.
void add_step(StepList& list, std::unique_ptr<Step> step, NodePlacement placement) {
  list.steps.push_back(std::move(step));
  list.step_node.push_back(list.placements.size());
  list.placements.push_back(std::move(placement));
}

// A node's input and output slots, and whether every input is a constant.
struct NodeSlots {
  std::vector<int> in, out;
  bool all_constant = true;
};

// The slots of `node`'s inputs and outputs; an error names an input no earlier node, initializer or graph input
// defines.
core::Result<NodeSlots> node_slots(const onnx::NodeProto& node, const StepList& list) {
  const auto& slot_of = list.slot_of;
  const Values& v = list.values;
  std::vector<int> in, out;
  bool all_constant = true;
  for (const auto& name : node.input()) {
    if (name.empty()) {
      in.push_back(-1);
      continue;
    }
    const auto it = slot_of.find(name);
    if (it == slot_of.end() || !v.slots[static_cast<size_t>(it->second)].defined) {
      return node_error(node, "input '" + name + "' is not produced by any earlier node, initializer or graph input");
    }
    in.push_back(it->second);
    all_constant = all_constant && v.constant(it->second);
  }
  for (const auto& name : node.output()) out.push_back(name.empty() ? -1 : slot_of.at(name));
  return NodeSlots{std::move(in), std::move(out), all_constant};
}

// Folds a node of constant inputs (or a Shape): runs it once on the reference kernels, and its outputs become
// constants. It gets no step.
core::Status fold_node(const NodeIo& io, NodePlacement placement, StepList& list) {
  const onnx::NodeProto& node = io.node;
  const auto& in = io.in;
  const auto& out = io.out;
  Values& v = list.values;
  std::vector<const Tensor*> inputs;
  for (int id : in) inputs.push_back(id < 0 ? nullptr : &v.read(id, Layout::kNchw));
  std::vector<Tensor*> outputs;
  for (int id : out) outputs.push_back(id < 0 ? nullptr : &v.slots[static_cast<size_t>(id)].t);
  RC_CHECK(run_reference_node(node, OpContext{io.opset}, inputs, outputs));
  if (std::string why = double_output_reason(node, out, v); !why.empty()) return node_error(node, why);
  for (int id : out) {
    if (id < 0) continue;
    v.touch(id, Layout::kNchw);
    v.slots[static_cast<size_t>(id)].constant = true;
  }
  note_non_finite_outputs(list, node, out);
  placement.placement = Placement::kFolded;
  list.placements.push_back(std::move(placement));
  return core::Ok{};
}

// Plans a Concat whose input Convs write into its channel slices (try_fuse_concat()); false, changing nothing, when
// they cannot.
core::Result<bool> plan_fused_concat(const NodeIo& io, NodePlanner& planner, NodePlacement& placement, StepList& list) {
  const onnx::NodeProto& node = io.node;
  const auto& out = io.out;
  Values& v = list.values;
  RC_ASSIGN(auto fused, try_fuse_concat(io, planner.conv_producers, planner.readers, v, list.placements));
  if (fused) {
    placement.placement = Placement::kXnnpack;
    placement.fusion = kFusedConcatNote;
    RC_CHECK(fused->run(v));
    note_non_finite_outputs(list, node, out);
    add_step(list, std::move(fused), std::move(placement));
    return true;
  }
  return false;
}

// Plans a Relu or Clip as the output range of the Conv it reads (try_fuse_activation()); false, changing nothing,
// when it cannot be.
core::Result<bool> plan_fused_activation(const NodeIo& io, NodePlanner& planner, NodePlacement& placement, StepList& list) {
  const onnx::NodeProto& node = io.node;
  const auto& out = io.out;
  Values& v = list.values;
  RC_ASSIGN(const std::string conv, try_fuse_activation(io, planner.conv_producers, planner.readers, v, list.placements));
  if (!conv.empty()) {
    placement.placement = Placement::kXnnpack;
    placement.fusion = std::string(kFusedIntoNote) + " " + conv;
    list.placements.push_back(std::move(placement));
    note_non_finite_outputs(list, node, out);
    return true;
  }
  return false;
}

// The step for a node XNNPACK does not run: the executor's own data movement, a BatchNormalization step, else the
// reference kernels.
std::unique_ptr<Step> fallback_step(const NodeIo& io, const ExecutorOptions& options, NodePlacement& placement, Values& v) {
  const onnx::NodeProto& node = io.node;
  std::unique_ptr<Step> step;
  // Data movement the executor does itself, in the value's layout: nearest replication, channel permutations.
  Built copy;
  if (options.use_xnnpack && (node.op_type() == "Resize" || node.op_type() == "Upsample")) {
    copy = make_nearest_upsample_step(io, v);
  } else if (options.use_xnnpack && (node.op_type() == "Gather" || node.op_type() == "DepthToSpace")) {
    copy = make_channel_permute_step(io, v);
  }
  if (copy.step) {
    placement.note = std::move(copy.note);
    step = std::move(copy.step);
  } else if (node.op_type() == "BatchNormalization") {
    step = make_batch_norm_step(io, v);
  }
  if (!step) step = make_reference_step(node, io.opset, io.in, io.out, layout_preserving(node.op_type()));
  return step;
}

// Builds the node's step, on XNNPACK when its family runs it (and records a Conv for the fusions of later nodes),
// else fallback_step(), and runs it once on the creation values.
core::Status plan_step(const NodeIo& io, NodePlanner& planner, NodePlacement placement, StepList& list) {
  const onnx::NodeProto& node = io.node;
  const ExecutorOptions& options = planner.options;
  const auto& out = io.out;
  Values& v = list.values;
  std::unique_ptr<Step> step;
  if (options.use_xnnpack) {
    ConvStep* conv = nullptr;
    RC_ASSIGN(Built built, build_xnnpack_step(io, v, options, &conv));
    step = std::move(built.step);
    placement.reason = std::move(built.declined);
    placement.note = std::move(built.note);
    if (step && conv != nullptr && !out.empty() && out[0] >= 0) {
      planner.conv_producers[out[0]] = ConvProducer{conv, step.get(), list.placements.size()};
    }
  } else {
    placement.reason = "XNNPACK disabled";
  }
  if (step) {
    placement.placement = Placement::kXnnpack;
  } else {
    step = fallback_step(io, options, placement, v);
  }
  RC_CHECK(step->run(v));
  if (std::string why = double_output_reason(node, out, v); !why.empty()) return node_error(node, why);
  note_non_finite_outputs(list, node, out);
  add_step(list, std::move(step), std::move(placement));
  return core::Ok{};
}

}  // namespace

core::Status plan_node(const onnx::NodeProto& node, NodePlanner& planner, StepList& list) {
  const ExecutorOptions& options = planner.options;
  Values& v = list.values;
  RC_ASSIGN(const NodeSlots slots, node_slots(node, list));
  if (std::string why = double_input_reason(node, slots.in, v); !why.empty()) return node_error(node, why);
  const NodeIo io{node, planner.opset, slots.in, slots.out};
  NodePlacement placement{onnx_io::describe_node(node), node.op_type(), Placement::kReference, {}, {}, {}};
  const bool shape_only = node.op_type() == "Shape";  // input dims are fixed at creation
  if (slots.all_constant || shape_only) return fold_node(io, std::move(placement), list);
  if (options.use_xnnpack && options.fuse_concat && node.op_type() == "Concat") {
    RC_ASSIGN(const bool fused, plan_fused_concat(io, planner, placement, list));
    if (fused) return core::Ok{};
  }
  if (options.use_xnnpack && options.fuse_activations && (node.op_type() == "Relu" || node.op_type() == "Clip")) {
    RC_ASSIGN(const bool fused, plan_fused_activation(io, planner, placement, list));
    if (fused) return core::Ok{};
  }
  return plan_step(io, planner, std::move(placement), list);
}

std::vector<std::vector<int>> group_norm_chains(const onnx::GraphProto& graph, const std::unordered_map<std::string, int>& readers) {
  std::unordered_map<std::string, int> reader_node;  // by value name, when one node reads it once
  for (int n = 0; n < graph.node_size(); ++n) {
    for (const auto& name : graph.node(n).input()) {
      if (!name.empty()) reader_node[name] = n;
    }
  }
  // The node that reads `node`'s only output as its data and is its only reader, if it has `op_type`.
  const auto next = [&](const onnx::NodeProto& node, const char* op_type) -> int {
    if (node.output_size() != 1) return -1;
    const std::string& y = node.output(0);
    const auto read = readers.find(y);
    const auto it = reader_node.find(y);
    if (read == readers.end() || read->second != 1 || it == reader_node.end()) return -1;
    const onnx::NodeProto& r = graph.node(it->second);
    if (r.op_type() != op_type || !r.domain().empty()) return -1;
    const bool data = r.input_size() > 0 && r.input(0) == y;
    const bool other = std::string(op_type) == "Mul" || std::string(op_type) == "Add";  // either operand
    return data || (other && r.input_size() == 2 && r.input(1) == y) ? it->second : -1;
  };
  std::vector<std::vector<int>> chains;
  std::unordered_set<int> claimed;
  for (int n = 0; n < graph.node_size(); ++n) {
    const onnx::NodeProto& first = graph.node(n);
    if (first.op_type() != "Reshape" || !first.domain().empty() || first.input_size() != 2) continue;
    const int norm = next(first, "InstanceNormalization");
    if (norm < 0 || graph.node(norm).input_size() != 3) continue;
    const int back = next(graph.node(norm), "Reshape");
    if (back < 0 || graph.node(back).input_size() != 2) continue;
    std::vector<int> chain{n, norm, back};
    if (const int mul = next(graph.node(back), "Mul"); mul >= 0) chain.push_back(mul);
    if (const int add = next(graph.node(chain.back()), "Add"); add >= 0) chain.push_back(add);
    // A node belongs to one chain at most: a chain's closing Reshape may look like the start of another.
    if (std::any_of(chain.begin(), chain.end(), [&](int k) { return claimed.count(k) > 0; })) continue;
    claimed.insert(chain.begin(), chain.end());
    chains.push_back(std::move(chain));
  }
  return chains;
}

core::Status plan_group_norm(const onnx::GraphProto& graph, const std::vector<int>& chain, const std::vector<size_t>& skipped,
                             const std::unordered_map<std::string, int>& slot_of, int64_t opset, StepList& list) {
  Values& v = list.values;
  std::vector<const onnx::NodeProto*> nodes;
  std::vector<std::vector<int>> ins, outs;
  std::unordered_set<std::string> inside;  // values the chain computes
  for (int k : chain) {
    const onnx::NodeProto& node = graph.node(k);
    nodes.push_back(&node);
    std::vector<int> in, out;
    for (const auto& name : node.input()) {
      if (name.empty()) {
        in.push_back(-1);
        continue;
      }
      const auto it = slot_of.find(name);
      if (it == slot_of.end() || (inside.count(name) == 0 && !v.slots[static_cast<size_t>(it->second)].defined)) {
        return node_error(node, "input '" + name + "' is not produced by any earlier node, initializer or graph input");
      }
      in.push_back(it->second);
    }
    for (const auto& name : node.output()) {
      out.push_back(name.empty() ? -1 : slot_of.at(name));
      inside.insert(name);
    }
    ins.push_back(std::move(in));
    outs.push_back(std::move(out));
  }
  std::vector<NodeIo> io;
  for (size_t k = 0; k < chain.size(); ++k) io.push_back(NodeIo{*nodes[k], opset, ins[k], outs[k]});
  const onnx::NodeProto& last = *nodes.back();
  NodePlacement placement{onnx_io::describe_node(last), last.op_type(), Placement::kReference, {}, {}, {}};
  Built fused = make_group_norm_step(nodes, io, v);
  if (fused.step) {
    for (size_t p : skipped) list.placements[p].note = std::string(kGroupNormNote) + ": runs in the step of " + placement.node;
    placement.note = std::move(fused.note);
    RC_CHECK(fused.step->run(v));
    note_non_finite_outputs(list, last, outs.back());
    list.steps.push_back(std::move(fused.step));
    list.step_node.push_back(list.placements.size());
    list.placements.push_back(std::move(placement));
    return core::Ok{};
  }
  list.placements.push_back(std::move(placement));
  for (size_t k = 0; k < chain.size(); ++k) {
    const onnx::NodeProto& node = *nodes[k];
    list.planning = &node;
    if (std::string why = double_input_reason(node, ins[k], v); !why.empty()) return node_error(node, why);
    auto step = make_reference_step(node, opset, ins[k], outs[k], layout_preserving(node.op_type()));
    RC_CHECK(step->run(v));
    if (std::string why = double_output_reason(node, outs[k], v); !why.empty()) return node_error(node, why);
    note_non_finite_outputs(list, node, outs[k]);
    list.steps.push_back(std::move(step));
    list.step_node.push_back(k + 1 < chain.size() ? skipped[k] : list.placements.size() - 1);
  }
  return core::Ok{};
}

}  // namespace dwdeconv::runtime_check::detail
