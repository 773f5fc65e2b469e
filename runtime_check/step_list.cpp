#include "step_list.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <unordered_set>

#include "onnx_io/attributes.h"
#include "onnx_io/model_io.h"
#include "internal.h"
#include "memory_plan.h"
#include "ops/ops.h"
#include "runtime_check/tensor_io.h"

namespace dwdeconv::runtime_check::detail {
namespace {

core::Status ensure_xnnpack_initialized() {
  static const xnn_status status = xnn_initialize(nullptr);
  if (status != xnn_status_success) {
    return core::invalid_model("xnn_initialize failed with status " + std::to_string(static_cast<int>(status)));
  }
  return core::Ok{};
}

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
  const auto conv = [](const NodeIo& io, Values& v, const ExecutorOptions& o, ConvStep** c) { return make_conv_step(io, v, o.zero_extend_depthwise, c); };
  const XnnpackFactory unary = plain<make_unary_step>, binary = plain<make_binary_step>;
  static const std::map<std::string, XnnpackFamily> families = {
      {"Conv", {{any("auto_pad"), any("dilations"), any("group"), any("kernel_shape"), any("pads"), any("strides")}, conv}},
      {"ConvTranspose", {{any("auto_pad"), any("dilations"), any("group"), any("kernel_shape"), any("pads"), any("strides"),
                          any("output_padding"), any("output_shape")}, conv}},
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
      {"MaxPool", {{any("auto_pad"), any("ceil_mode"), any("dilations"), any("kernel_shape"), any("pads"),
                    any("storage_order"), any("strides")}, plain<make_pool_step>}},
      {"AveragePool", {{any("auto_pad"), any("ceil_mode"), only_int("count_include_pad", 0), any("dilations"),
                        any("kernel_shape"), any("pads"), any("strides")}, plain<make_pool_step>}},
      {"GlobalAveragePool", {{}, plain<make_global_average_pool_step>}},
      // Bilinear only: cubic_coeff_a and nearest_mode apply to other modes, extrapolation_value only to
      // tf_crop_and_resize, which is not taken.
      {"Resize", {{only("mode", "linear"),
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

// A Conv step already built, with the index of its node's placement.
struct ConvProducer {
  ConvStep* conv = nullptr;
  Step* step = nullptr;  // the same step
  size_t placement = 0;
};

// Before: y_k = Conv(...) for each k;  y = Concat(y_0 .. y_n, axis=1)   (one strided copy per input)
// After:  each Conv writes channels [offset_k, offset_k + C_k) of y;  Concat does nothing
// Applies when every Concat input comes from an XNNPACK Conv (not ConvTranspose) and is read by nothing else (not
// another node, not twice by this Concat, not a graph output). Returns null, changing nothing, when it does not.
// Re-runs the redirected Convs once, so y holds the creation-time values like every other planned step's output.
core::Result<std::unique_ptr<Step>> try_fuse_concat(const NodeIo& io,
                                                    const std::unordered_map<int, ConvProducer>& conv_producers,
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
    if (!t.is_float() || t.dims.size() != 4 || t.dtype != first.dtype || t.dims[0] != first.dims[0] ||
        t.dims[2] != first.dims[2] || t.dims[3] != first.dims[3]) {
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

// GroupNorm as PyTorch exports it (step_norm.cpp): per chain its nodes' indices, Reshape, InstanceNormalization,
// Reshape, then a Mul and an Add when they follow. Structure only: each value inside the chain has the next node as
// its one reader (not another node, not a graph output), so no other step can miss it. The values decide at the
// chain's last node whether it is a group normalization (make_group_norm_step); when they do not, its nodes run
// there one by one.
std::vector<std::vector<int>> group_norm_chains(const onnx::GraphProto& graph,
                                                const std::unordered_map<std::string, int>& readers) {
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

// Per node, the values no later node needs: the node's inputs it reads last, and outputs nothing reads. A Conv's
// inputs stay until its output's only reader (and that one's only reader, after a Relu or Clip) has been planned,
// since fusing them re-runs the Conv. Graph inputs and outputs are never listed; initializers are.
// `held` maps a node to a later one that reads its inputs in its place (a group normalization chain's first Reshape
// to the chain's last node, whose step reads x).
std::vector<std::vector<int>> dead_after(const onnx::GraphProto& graph, const std::unordered_map<std::string, int>& slot_of,
                                         const std::unordered_map<std::string, int>& readers,
                                         const std::unordered_map<int, int>& held) {
  const int nodes = graph.node_size();
  std::unordered_map<std::string, std::vector<int>> reader_nodes;
  for (int n = 0; n < nodes; ++n) {
    for (const auto& name : graph.node(n).input()) {
      if (!name.empty()) reader_nodes[name].push_back(n);
    }
  }
  // The only node reading `name`, or -1 (none, several, or also a graph output).
  const auto only_reader = [&](const std::string& name) {
    const auto it = reader_nodes.find(name);
    const auto read = readers.find(name);
    return it != reader_nodes.end() && it->second.size() == 1 && read != readers.end() && read->second == 1 ? it->second[0] : -1;
  };
  std::vector<int> last_use(slot_of.size(), -1);
  for (int n = 0; n < nodes; ++n) {
    const auto& node = graph.node(n);
    int hold = n;
    if (const auto h = held.find(n); h != held.end()) hold = h->second;
    if ((node.op_type() == "Conv" || node.op_type() == "ConvTranspose") && node.output_size() > 0) {
      const int r = only_reader(node.output(0));
      if (r >= 0) {
        hold = r;
        const auto& act = graph.node(r);
        if ((act.op_type() == "Relu" || act.op_type() == "Clip") && act.output_size() > 0 && only_reader(act.output(0)) >= 0) {
          hold = only_reader(act.output(0));
        }
      }
    }
    const auto use = [&](const std::string& name, int until) {
      const auto it = slot_of.find(name);  // a missing input is reported when its node is planned
      if (it != slot_of.end()) last_use[static_cast<size_t>(it->second)] = std::max(last_use[static_cast<size_t>(it->second)], until);
    };
    for (const auto& name : node.input()) use(name, hold);
    for (const auto& name : node.output()) use(name, n);
  }
  std::unordered_set<int> kept;
  for (const auto& in : graph.input()) kept.insert(slot_of.at(in.name()));
  for (const auto& out : graph.output()) {
    if (const auto it = slot_of.find(out.name()); it != slot_of.end()) kept.insert(it->second);
  }
  std::vector<std::vector<int>> dead(static_cast<size_t>(nodes));
  for (size_t id = 0; id < last_use.size(); ++id) {
    if (last_use[id] >= 0 && kept.count(static_cast<int>(id)) == 0) dead[static_cast<size_t>(last_use[id])].push_back(static_cast<int>(id));
  }
  return dead;
}

// Every float type is held in f32 (ops/tensor.h). FLOAT16 and BFLOAT16 round to their type where a runtime would, but
// a DOUBLE computed in f32 is another computation: (x + 1e10) - 1e10 gives 0 for every |x| < 512, not x. So no node
// may read a DOUBLE value (a Shape reads only its dims) or write one, as the constant folder folds none.
constexpr const char* kNoDouble =
    "the executor holds float64 values in float32 and would judge a float64 computation in float32, so it does not run "
    "DOUBLE values";

// Why `node` is refused for a DOUBLE input (empty when it has none); `in` are its input slots.
std::string double_input_reason(const onnx::NodeProto& node, const std::vector<int>& in, const Values& v) {
  if (node.op_type() == "Shape") return {};
  for (size_t k = 0; k < in.size(); ++k) {
    if (in[k] >= 0 && v.peek(in[k]).dtype == onnx::TensorProto::DOUBLE) {
      return "reads '" + node.input(static_cast<int>(k)) + "', which is DOUBLE: " + kNoDouble;
    }
  }
  return {};
}

// Why `node` is refused for a DOUBLE output it has just written (empty when it wrote none).
std::string double_output_reason(const onnx::NodeProto& node, const std::vector<int>& out, const Values& v) {
  for (size_t k = 0; k < out.size(); ++k) {
    if (out[k] >= 0 && v.peek(out[k]).dtype == onnx::TensorProto::DOUBLE) {
      return "writes '" + node.output(static_cast<int>(k)) + "', which is DOUBLE: " + kNoDouble;
    }
  }
  return {};
}

// The first element of `t` (stored in `layout`) that is inf or NaN, in ONNX (row-major NCHW) order, and its value.
std::optional<std::pair<int64_t, float>> first_non_finite_element(const Tensor& t, Layout layout) {
  if (!t.is_float()) return std::nullopt;
  const FloatStorage& f = t.f;
  const auto bad = [](float x) { return !std::isfinite(x); };
  if (std::none_of(f.begin(), f.end(), bad)) return std::nullopt;  // the common case: one pass, no index arithmetic
  if (!layout_applies(t) || layout == Layout::kNchw) {
    const auto at = static_cast<size_t>(std::find_if(f.begin(), f.end(), bad) - f.begin());
    return std::make_pair(static_cast<int64_t>(at), f[at]);
  }
  // NHWC storage: logical element (n, c, h, w) is stored at ((n * H + h) * W + w) * C + c.
  const int64_t batch = t.dims[0], channels = t.dims[1], height = t.dims[2], width = t.dims[3];
  int64_t element = 0;
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t c = 0; c < channels; ++c) {
      for (int64_t h = 0; h < height; ++h) {
        for (int64_t w = 0; w < width; ++w, ++element) {
          const float x = f[static_cast<size_t>(((n * height + h) * width + w) * channels + c)];
          if (bad(x)) return std::make_pair(element, x);
        }
      }
    }
  }
  return std::nullopt;
}

// Records value `id` (named `name`, written by `node`, or a graph input or initializer when `node` is empty) as the
// executor's first non-finite value when it holds one and none was recorded before.
void note_non_finite(StepList& list, int id, const std::string& name, const std::string& node, bool graph_input = false) {
  if (list.non_finite || id < 0) return;
  const Tensor& t = list.values.peek(id);
  const auto found = first_non_finite_element(t, list.values.layout(id));
  if (!found) return;
  NonFiniteValue bad{name, node, graph_input, found->first, {}, found->second};
  bad.index.assign(t.dims.size(), 0);
  int64_t rest = found->first;  // row-major: the last axis varies fastest
  for (size_t a = t.dims.size(); a-- > 0;) {
    bad.index[a] = t.dims[a] > 0 ? rest % t.dims[a] : 0;
    rest = t.dims[a] > 0 ? rest / t.dims[a] : 0;
  }
  list.non_finite = std::move(bad);
}

// Records the first non-finite output of `node` (see note_non_finite).
void note_non_finite_outputs(StepList& list, const onnx::NodeProto& node, const std::vector<int>& out) {
  for (size_t k = 0; k < out.size(); ++k) note_non_finite(list, out[k], node.output(static_cast<int>(k)), onnx_io::describe_node(node));
}

// Elementwise ops of one data input: the op table's unary kernel, and Clip (whose bounds are scalars).
bool layout_preserving(const std::string& op) {
  const ops::OpSpec* spec = ops::find_op(op);
  return spec != nullptr && (spec->kernel == &ops::detail::run_unary || spec->kernel == &ops::detail::run_clip);
}

}  // namespace

core::Status StepList::load_inputs(const std::vector<NamedTensor>& given, bool check_against_creation) {
  for (size_t k = 0; k < inputs.size(); ++k) {
    const auto& [name, id] = inputs[k];
    const NamedTensor* found = nullptr;
    for (const auto& g : given) {
      if (g.name == name) found = &g;
    }
    if (found == nullptr) return core::invalid_model("no value given for graph input '" + name + "'");
    const Tensor& t = found->tensor;
    if (check_against_creation) {
      const Tensor& want = creation_inputs[k].tensor;
      if (t.dims != want.dims || t.is_float() != want.is_float()) {
        return core::invalid_model("input '" + name + "' is " + describe_tensor(t) + " but the executor was planned for " +
                                   describe_tensor(want));
      }
    }
    Tensor& dst = values.write(id, Layout::kNchw, t.dtype, t.dims);
    if (t.dtype == onnx::TensorProto::FLOAT || t.dtype == onnx::TensorProto::DOUBLE) {
      std::copy(t.f.begin(), t.f.end(), dst.f.begin());  // already what f32 holds
    } else if (t.is_float()) {
      for (size_t e = 0; e < t.f.size(); ++e) dst.f[e] = round_to_type(t.f[e], t.dtype);
    } else {
      std::copy(t.i.begin(), t.i.end(), dst.i.begin());
    }
  }
  return core::Ok{};
}

namespace {

// Plans a group normalization chain at its last node (group_norm_chains()): one step when the values make it one,
// else each of its nodes on the reference kernels, in order. `skipped` are the placements of the nodes before the
// last, pushed where those nodes stand.
core::Status plan_group_norm(const onnx::GraphProto& graph, const std::vector<int>& chain,
                             const std::vector<size_t>& skipped, const std::unordered_map<std::string, int>& slot_of,
                             int64_t opset, StepList& list) {
  Values& v = list.values;
  std::vector<const onnx::NodeProto*> nodes;
  std::vector<std::vector<int>> ins, outs;
  std::unordered_set<std::string> inside;  // values the chain computes
  for (int k : chain) {
    const onnx::NodeProto& node = graph.node(k);
    nodes.push_back(&node);
    std::vector<int> in, out;
    for (const auto& name : node.input()) {
      if (name.empty()) { in.push_back(-1); continue; }
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

}  // namespace

namespace {

// Frees the float constants no step reads on a run: the ones only folded nodes read, and the weights XNNPACK holds
// packed copies of (Step::packed_copy_of). Their dims stay. Stable Diffusion's VAE decoder holds 198 MB of Conv
// weights, which were kept twice, as initializers here and packed in XNNPACK.
void release_packed_constants(StepList& list) {
  Values& v = list.values;
  std::vector<bool> read(v.slots.size(), false);
  std::vector<Access> accesses;
  for (const auto& step : list.steps) {
    accesses.clear();
    step->accesses(v, accesses);
    for (const Access& a : accesses) {
      if (!step->packed_copy_of(v, a.id)) read[static_cast<size_t>(a.id)] = true;
    }
  }
  for (const auto& output : list.outputs) read[static_cast<size_t>(output.second)] = true;
  for (size_t id = 0; id < v.slots.size(); ++id) {
    Slot& s = v.slots[id];
    if (s.constant && !read[id] && s.t.is_float()) {
      s.t.f.release();
      s.converted.f.release();
    }
  }
  list.memory.constant_bytes = held_constant_bytes(list);
}

}  // namespace

core::Status build_step_list(const onnx::ModelProto& model, const ExecutorOptions& options, StepList& list) {
  RC_CHECK(ensure_xnnpack_initialized());
  const onnx::GraphProto& graph = model.graph();
  const int64_t opset = onnx_io::default_opset(model);

  // Every value gets a slot up front, so slot storage never moves.
  auto& slot_of = list.slot_of;
  auto add_slot = [&](const std::string& name) {
    if (!name.empty() && slot_of.find(name) == slot_of.end()) slot_of.emplace(name, static_cast<int>(slot_of.size()));
  };
  std::unordered_set<std::string> initializer_names;
  for (const auto& init : graph.initializer()) {
    add_slot(init.name());
    initializer_names.insert(init.name());
  }
  for (const auto& in : graph.input()) add_slot(in.name());
  for (const auto& node : graph.node()) {
    // Every node, XNNPACK's included, must be one the op table implements: the reference kernels are the judge of
    // what the XNNPACK steps compute, and an attribute neither implements is never run as if it were absent.
    if (std::string why = unsupported_reason(node, opset); !why.empty()) return node_error(node, why);
    for (const auto& name : node.output()) add_slot(name);
  }
  list.values.slots.resize(slot_of.size());
  Values& v = list.values;

  // How many times each value is read (a graph output counts as a read), for fusion.
  std::unordered_map<std::string, int> readers;
  for (const auto& node : graph.node()) {
    for (const auto& name : node.input()) ++readers[name];
  }
  for (const auto& o : graph.output()) ++readers[o.name()];
  std::unordered_map<int, ConvProducer> conv_producers;  // by output slot

  if (options.threads > 1) {
    list.threadpool = ThreadPool(pthreadpool_create(options.threads), &pthreadpool_destroy);
    if (!list.threadpool) return core::invalid_model("pthreadpool_create failed");
  }
  v.threadpool = list.threadpool.get();

  for (const auto& init : graph.initializer()) {
    RC_ASSIGN(Tensor t, tensor_from_proto(init, "initializer '" + init.name() + "'"));
    Slot& s = v.slots[static_cast<size_t>(slot_of.at(init.name()))];
    s.t = std::move(t);
    s.defined = s.constant = true;
  }

  // Creation inputs: explicit ones, the rest seeded random.
  std::map<std::string, std::vector<int64_t>> shapes = options.input_shapes;
  for (const auto& given : options.inputs) shapes[given.name] = given.tensor.dims;
  onnx::ModelProto inputs_only;
  for (const auto& in : graph.input()) {
    if (initializer_names.count(in.name()) == 0) *inputs_only.mutable_graph()->add_input() = in;
  }
  RC_ASSIGN(auto random, make_random_inputs(inputs_only, shapes, options.seed));
  for (auto& r : random) {
    for (const auto& given : options.inputs) {
      if (given.name != r.name) continue;
      const int32_t declared = r.tensor.dtype;
      r.tensor = given.tensor;
      // A file of another float type feeds the input as its declared type, as a caller converts it for a runtime:
      // a float64 .npy for a float32 input is rounded to float32 (and a float32 one for a float64 input is DOUBLE).
      if (r.tensor.is_float() && is_float_type(declared)) {
        r.tensor.dtype = declared;
        for (float& x : r.tensor.f) x = round_to_type(x, declared);
      }
    }
    list.inputs.emplace_back(r.name, slot_of.at(r.name));
  }
  list.creation_inputs = std::move(random);
  RC_CHECK(list.load_inputs(list.creation_inputs, false));
  // Every value the run holds is scanned for inf and NaN (first_non_finite()): the inputs, the constants, and each
  // node's outputs right after it wrote them (before the memory plan retires them).
  for (const auto& [name, id] : list.inputs) note_non_finite(list, id, name, "", /*graph_input=*/true);
  for (const auto& init : graph.initializer()) note_non_finite(list, slot_of.at(init.name()), init.name(), "");

  // Plan: fold constants, build a step per remaining node and run it once to fix shapes.
  auto add_step = [&](std::unique_ptr<Step> step, NodePlacement placement) {
    list.steps.push_back(std::move(step));
    list.step_node.push_back(list.placements.size());
    list.placements.push_back(std::move(placement));
  };
  // With a memory plan, creation frees each activation after its last reader, so it holds about what a run holds.
  // Group normalization chains run as one step at their last node; their other nodes are skipped where they stand.
  std::vector<std::vector<int>> chains;
  std::unordered_map<int, size_t> chain_of;  // node index -> its chain
  std::unordered_map<int, int> held;         // a chain's first node -> its last, which reads x in its place
  if (options.use_xnnpack) chains = group_norm_chains(graph, readers);
  for (size_t c = 0; c < chains.size(); ++c) {
    for (int k : chains[c]) chain_of[k] = c;
    for (int k : chains[c]) held[k] = chains[c].back();
  }
  std::vector<std::vector<size_t>> chain_placements(chains.size());  // the skipped nodes' placements, by chain
  std::vector<std::vector<int>> dead;
  if (options.plan_memory) dead = dead_after(graph, slot_of, readers, held);
  std::vector<bool> run_reads(v.slots.size(), false);  // values a step built so far reads on every run
  size_t scanned = 0;                                 // steps whose reads are in run_reads
  std::vector<Access> accesses;
  v.reuse_spare = options.plan_memory;
  for (int n = 0; n < graph.node_size(); ++n) {
    if (n > 0 && options.plan_memory) {
      // A constant whose last reader is planned is freed too, unless a step reads it on every run: what stays are
      // the weights XNNPACK packed (Step::packed_copy_of), so the creation run does not hold them twice either.
      for (; scanned < list.steps.size(); ++scanned) {
        accesses.clear();
        list.steps[scanned]->accesses(v, accesses);
        for (const Access& a : accesses) {
          if (!list.steps[scanned]->packed_copy_of(v, a.id)) run_reads[static_cast<size_t>(a.id)] = true;
        }
      }
      for (int id : dead[static_cast<size_t>(n - 1)]) {
        Slot& s = v.slots[static_cast<size_t>(id)];
        if (!s.constant) {
          v.retire(id);
        } else if (!run_reads[static_cast<size_t>(id)] && s.t.is_float()) {
          s.t.f.release();
          s.converted.f.release();
        }
      }
    }
    const onnx::NodeProto& node = graph.node(n);
    list.planning = &node;
    if (const auto c = chain_of.find(n); c != chain_of.end()) {
      if (n != chains[c->second].back()) {
        chain_placements[c->second].push_back(list.placements.size());
        list.placements.push_back(NodePlacement{onnx_io::describe_node(node), node.op_type(), Placement::kReference, {}, {}, {}});
        continue;
      }
      RC_CHECK(plan_group_norm(graph, chains[c->second], chain_placements[c->second], slot_of, opset, list));
      continue;
    }
    std::vector<int> in, out;
    bool all_constant = true;
    for (const auto& name : node.input()) {
      if (name.empty()) { in.push_back(-1); continue; }
      const auto it = slot_of.find(name);
      if (it == slot_of.end() || !v.slots[static_cast<size_t>(it->second)].defined) {
        return node_error(node, "input '" + name + "' is not produced by any earlier node, initializer or graph input");
      }
      in.push_back(it->second);
      all_constant = all_constant && v.constant(it->second);
    }
    for (const auto& name : node.output()) out.push_back(name.empty() ? -1 : slot_of.at(name));
    if (std::string why = double_input_reason(node, in, v); !why.empty()) return node_error(node, why);
    const NodeIo io{node, opset, in, out};
    NodePlacement placement{onnx_io::describe_node(node), node.op_type(), Placement::kReference, {}, {}, {}};
    const bool shape_only = node.op_type() == "Shape";  // input dims are fixed at creation
    if (all_constant || shape_only) {
      std::vector<const Tensor*> inputs;
      for (int id : in) inputs.push_back(id < 0 ? nullptr : &v.read(id, Layout::kNchw));
      std::vector<Tensor*> outputs;
      for (int id : out) outputs.push_back(id < 0 ? nullptr : &v.slots[static_cast<size_t>(id)].t);
      RC_CHECK(run_reference_node(node, OpContext{opset}, inputs, outputs));
      if (std::string why = double_output_reason(node, out, v); !why.empty()) return node_error(node, why);
      for (int id : out) {
        if (id < 0) continue;
        v.touch(id, Layout::kNchw);
        v.slots[static_cast<size_t>(id)].constant = true;
      }
      note_non_finite_outputs(list, node, out);
      placement.placement = Placement::kFolded;
      list.placements.push_back(std::move(placement));
      continue;
    }
    if (options.use_xnnpack && options.fuse_concat && node.op_type() == "Concat") {
      RC_ASSIGN(auto fused, try_fuse_concat(io, conv_producers, readers, v, list.placements));
      if (fused) {
        placement.placement = Placement::kXnnpack;
        placement.fusion = kFusedConcatNote;
        RC_CHECK(fused->run(v));
        note_non_finite_outputs(list, node, out);
        add_step(std::move(fused), std::move(placement));
        continue;
      }
    }
    if (options.use_xnnpack && options.fuse_activations && (node.op_type() == "Relu" || node.op_type() == "Clip")) {
      RC_ASSIGN(const std::string conv, try_fuse_activation(io, conv_producers, readers, v, list.placements));
      if (!conv.empty()) {
        placement.placement = Placement::kXnnpack;
        placement.fusion = std::string(kFusedIntoNote) + " " + conv;
        list.placements.push_back(std::move(placement));
        note_non_finite_outputs(list, node, out);
        continue;
      }
    }
    std::unique_ptr<Step> step;
    if (options.use_xnnpack) {
      ConvStep* conv = nullptr;
      RC_ASSIGN(Built built, build_xnnpack_step(io, v, options, &conv));
      step = std::move(built.step);
      placement.reason = std::move(built.declined);
      placement.note = std::move(built.note);
      if (step && conv != nullptr && !out.empty() && out[0] >= 0) {
        conv_producers[out[0]] = ConvProducer{conv, step.get(), list.placements.size()};
      }
    } else {
      placement.reason = "XNNPACK disabled";
    }
    if (step) {
      placement.placement = Placement::kXnnpack;
    } else {
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
      if (!step) step = make_reference_step(node, opset, in, out, layout_preserving(node.op_type()));
    }
    RC_CHECK(step->run(v));
    if (std::string why = double_output_reason(node, out, v); !why.empty()) return node_error(node, why);
    note_non_finite_outputs(list, node, out);
    add_step(std::move(step), std::move(placement));
  }

  for (const auto& out : graph.output()) {
    const auto it = slot_of.find(out.name());
    if (it == slot_of.end() || !v.slots[static_cast<size_t>(it->second)].defined) {
      return core::invalid_model("graph output '" + out.name() + "' is never produced");
    }
    // A DOUBLE graph input or initializer that is itself a graph output: no node reads or writes it.
    if (v.peek(it->second).dtype == onnx::TensorProto::DOUBLE) {
      return core::invalid_model("graph output '" + out.name() + "' is DOUBLE: " + kNoDouble);
    }
    list.outputs.emplace_back(out.name(), it->second);
  }
  release_packed_constants(list);
  return core::Ok{};
}

}  // namespace dwdeconv::runtime_check::detail
