// Building the step list as named stages (build_step_list, at the end): the values' slots, the initializers and
// creation inputs, the nodes in graph order (each planned by step_list_node.cpp), freeing on the way what no later
// node needs, and the graph outputs.
#include "step_list.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <unordered_set>

#include "internal.h"
#include "memory_plan.h"
#include "onnx_io/attributes.h"
#include "onnx_io/model_io.h"
#include "ops/ops.h"
#include "runtime_check/tensor_io.h"
#include "step_list_node.h"

namespace dwdeconv::runtime_check::detail {
namespace {

core::Status ensure_xnnpack_initialized() {
  static const xnn_status status = xnn_initialize(nullptr);
  if (status != xnn_status_success) {
    return core::invalid_model("xnn_initialize failed with status " + std::to_string(static_cast<int>(status)));
  }
  return core::Ok{};
}

// Per node, the values no later node needs: the node's inputs it reads last, and outputs nothing reads. A Conv's
// inputs stay until its output's only reader (and that one's only reader, after a Relu or Clip) has been planned,
// since fusing them re-runs the Conv. Graph inputs and outputs are never listed; initializers are.
// `held` maps a node to a later one that reads its inputs in its place (a group normalization chain's first Reshape
// to the chain's last node, whose step reads x).
std::vector<std::vector<int>> dead_after(const onnx::GraphProto& graph, const std::unordered_map<std::string, int>& slot_of,
                                         const std::unordered_map<std::string, int>& readers, const std::unordered_map<int, int>& held) {
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

}  // namespace

void note_non_finite_outputs(StepList& list, const onnx::NodeProto& node, const std::vector<int>& out) {
  for (size_t k = 0; k < out.size(); ++k) note_non_finite(list, out[k], node.output(static_cast<int>(k)), onnx_io::describe_node(node));
}

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

// Gives every value a slot up front, so slot storage never moves, and refuses a node the op table does not
// implement. Returns the initializers' names.
core::Result<std::unordered_set<std::string>> assign_slots(const onnx::GraphProto& graph, int64_t opset, StepList& list) {
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
  return initializer_names;
}

// How many times each value is read (a graph output counts as a read), for fusion.
std::unordered_map<std::string, int> count_readers(const onnx::GraphProto& graph) {
  std::unordered_map<std::string, int> readers;
  for (const auto& node : graph.node()) {
    for (const auto& name : node.input()) ++readers[name];
  }
  for (const auto& o : graph.output()) ++readers[o.name()];
  return readers;
}

// The thread pool the steps run on, when more than one thread is asked for.
core::Status start_threadpool(const ExecutorOptions& options, StepList& list) {
  if (options.threads > 1) {
    list.threadpool = ThreadPool(pthreadpool_create(options.threads), &pthreadpool_destroy);
    if (!list.threadpool) return core::invalid_model("pthreadpool_create failed");
  }
  list.values.threadpool = list.threadpool.get();
  return core::Ok{};
}

// The initializers, into their slots as constants.
core::Status load_initializers(const onnx::GraphProto& graph, StepList& list) {
  Values& v = list.values;
  for (const auto& init : graph.initializer()) {
    RC_ASSIGN(Tensor t, tensor_from_proto(init, "initializer '" + init.name() + "'"));
    Slot& s = v.slots[static_cast<size_t>(list.slot_of.at(init.name()))];
    s.t = std::move(t);
    s.defined = s.constant = true;
  }
  return core::Ok{};
}

// Creation inputs: explicit ones, the rest seeded random; loaded into the graph inputs' slots.
core::Status load_creation_inputs(const onnx::GraphProto& graph, const ExecutorOptions& options,
                                  const std::unordered_set<std::string>& initializer_names, StepList& list) {
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
    list.inputs.emplace_back(r.name, list.slot_of.at(r.name));
  }
  list.creation_inputs = std::move(random);
  RC_CHECK(list.load_inputs(list.creation_inputs, false));
  return core::Ok{};
}

// Every value the run holds is scanned for inf and NaN (first_non_finite()): the inputs, the constants, and each
// node's outputs right after it wrote them (before the memory plan retires them). This scans the inputs and the
// constants.
void scan_inputs_and_constants(const onnx::GraphProto& graph, StepList& list) {
  for (const auto& [name, id] : list.inputs) note_non_finite(list, id, name, "", /*graph_input=*/true);
  for (const auto& init : graph.initializer()) note_non_finite(list, list.slot_of.at(init.name()), init.name(), "");
}

// The group normalization chains (group_norm_chains()), by node: a chain runs as one step at its last node, and its
// other nodes are skipped where they stand.
struct GroupNormChains {
  std::vector<std::vector<int>> chains;
  std::unordered_map<int, size_t> chain_of;     // node index -> its chain
  std::unordered_map<int, int> held;            // a chain's first node -> its last, which reads x in its place
  std::vector<std::vector<size_t>> placements;  // the skipped nodes' placements, by chain
};

// The chains XNNPACK runs as one step (none without XNNPACK).
GroupNormChains index_group_norm_chains(const onnx::GraphProto& graph, const ExecutorOptions& options,
                                        const std::unordered_map<std::string, int>& readers) {
  GroupNormChains index;
  if (options.use_xnnpack) index.chains = group_norm_chains(graph, readers);
  for (size_t c = 0; c < index.chains.size(); ++c) {
    for (int k : index.chains[c]) index.chain_of[k] = c;
    for (int k : index.chains[c]) index.held[k] = index.chains[c].back();
  }
  index.placements.resize(index.chains.size());
  return index;
}

// With a memory plan, creation frees each activation after its last reader, so it holds about what a run holds.
struct CreationMemory {
  std::vector<std::vector<int>> dead;  // per node, the values no later node needs (dead_after())
  std::vector<bool> run_reads;         // values a step built so far reads on every run
  size_t scanned = 0;                  // steps whose reads are in run_reads
  std::vector<Access> accesses;
};

// What creation frees after each node when memory is planned; creation then reuses the freed buffers.
CreationMemory plan_creation_memory(const onnx::GraphProto& graph, const ExecutorOptions& options,
                                    const std::unordered_map<std::string, int>& readers, const std::unordered_map<int, int>& held,
                                    StepList& list) {
  Values& v = list.values;
  CreationMemory memory;
  if (options.plan_memory) memory.dead = dead_after(graph, list.slot_of, readers, held);
  memory.run_reads.assign(v.slots.size(), false);
  v.reuse_spare = options.plan_memory;
  return memory;
}

// Frees the values no node after node `n` needs, now that every node up to it is planned.
void free_after_node(size_t n, CreationMemory& memory, StepList& list) {
  Values& v = list.values;
  std::vector<bool>& run_reads = memory.run_reads;
  size_t& scanned = memory.scanned;
  std::vector<Access>& accesses = memory.accesses;
  // A constant whose last reader is planned is freed too, unless a step reads it on every run: what stays are
  // the weights XNNPACK packed (Step::packed_copy_of), so the creation run does not hold them twice either.
  for (; scanned < list.steps.size(); ++scanned) {
    accesses.clear();
    list.steps[scanned]->accesses(v, accesses);
    for (const Access& a : accesses) {
      if (!list.steps[scanned]->packed_copy_of(v, a.id)) run_reads[static_cast<size_t>(a.id)] = true;
    }
  }
  for (int id : memory.dead[n]) {
    Slot& s = v.slots[static_cast<size_t>(id)];
    if (!s.constant) {
      v.retire(id);
    } else if (!run_reads[static_cast<size_t>(id)] && s.t.is_float()) {
      s.t.f.release();
      s.converted.f.release();
    }
  }
}

// Plan: fold constants, build a step per remaining node and run it once to fix shapes (plan_node()), in graph order;
// a group normalization chain at its last node.
core::Status plan_nodes(const onnx::GraphProto& graph, int64_t opset, const ExecutorOptions& options,
                        const std::unordered_map<std::string, int>& readers, StepList& list) {
  GroupNormChains chains = index_group_norm_chains(graph, options, readers);
  CreationMemory memory = plan_creation_memory(graph, options, readers, chains.held, list);
  NodePlanner planner{opset, options, readers, {}};
  for (int n = 0; n < graph.node_size(); ++n) {
    if (n > 0 && options.plan_memory) free_after_node(static_cast<size_t>(n - 1), memory, list);
    const onnx::NodeProto& node = graph.node(n);
    list.planning = &node;
    if (const auto c = chains.chain_of.find(n); c != chains.chain_of.end()) {
      if (n != chains.chains[c->second].back()) {
        chains.placements[c->second].push_back(list.placements.size());
        list.placements.push_back(NodePlacement{onnx_io::describe_node(node), node.op_type(), Placement::kReference, {}, {}, {}});
        continue;
      }
      RC_CHECK(plan_group_norm(graph, chains.chains[c->second], chains.placements[c->second], list.slot_of, opset, list));
      continue;
    }
    RC_CHECK(plan_node(node, planner, list));
  }
  return core::Ok{};
}

// The graph outputs, each of which a node, an initializer or a graph input must produce, and none DOUBLE.
core::Status bind_graph_outputs(const onnx::GraphProto& graph, StepList& list) {
  const auto& slot_of = list.slot_of;
  const Values& v = list.values;
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
  return core::Ok{};
}

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
  RC_ASSIGN(const std::unordered_set<std::string> initializer_names, assign_slots(graph, opset, list));
  const std::unordered_map<std::string, int> readers = count_readers(graph);
  RC_CHECK(start_threadpool(options, list));
  RC_CHECK(load_initializers(graph, list));
  RC_CHECK(load_creation_inputs(graph, options, initializer_names, list));
  scan_inputs_and_constants(graph, list);
  RC_CHECK(plan_nodes(graph, opset, options, readers, list));
  RC_CHECK(bind_graph_outputs(graph, list));
  release_packed_constants(list);
  return core::Ok{};
}

}  // namespace dwdeconv::runtime_check::detail
