#include "cli/upsampler_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "cli/report.h"
#include "core/text.h"
#include "onnx_io/shapes.h"
#include "rewrite/shape_propagation.h"

namespace dwdeconv::cli {
namespace {

// The plan's name of a node: its name, or its first output's when unnamed.
std::string plan_name(const onnx::NodeProto& n) { return !n.name().empty() ? n.name() : (n.output_size() ? n.output(0) : ""); }

// Whether a profiler's node name stands for `node`: the same name or first output, or one ONNX Runtime derived from
// it (its layout transformer names a converted node after the node or its output, plus a suffix such as "_nchwc").
bool profiled_as(const std::string& profiled, const onnx::NodeProto& node) {
  for (const std::string& name : {node.name(), node.output_size() ? node.output(0) : std::string()}) {
    if (name.empty()) continue;
    if (profiled == name) return true;
    if (profiled.size() > name.size() && profiled.compare(0, name.size(), name) == 0 && profiled[name.size()] == '_' &&
        profiled.find("_nchwc", name.size()) != std::string::npos) {
      return true;
    }
  }
  return false;
}

bool is_reorder(const NodeMs& n) { return n.op.rfind("Reorder", 0) == 0; }

// Adds the values profiled node `n` reads and writes to `values` (an optional input left out names no value).
void add_values(const NodeMs& n, std::set<std::string>& values) {
  for (const auto* names : {&n.inputs, &n.outputs}) {
    for (const auto& v : *names) {
      if (!v.empty()) values.insert(v);
    }
  }
}

// The time of the layout reorders not yet `used` that read or write one of `values`, each then marked used.
double reorders_ms(const std::vector<NodeMs>& times, const std::set<std::string>& values, std::set<size_t>& used) {
  double ms = 0;
  const auto touches = [&](const std::vector<std::string>& names) {
    return std::any_of(names.begin(), names.end(), [&](const std::string& v) { return values.count(v) != 0; });
  };
  for (size_t k = 0; k < times.size(); ++k) {
    if (used.count(k) || !is_reorder(times[k])) continue;
    if (touches(times[k].inputs) || touches(times[k].outputs)) {
      ms += times[k].ms;
      used.insert(k);
    }
  }
  return ms;
}

// The profiled time of one region: the profiled nodes that stand for one of its nodes, then the layout reorders ONNX
// Runtime inserted around them (ReorderInput / ReorderOutput, which read a value those nodes write or write one they
// read). Each profiled node counts once, for the first region that takes it (`used`).
double time_of(const std::vector<const onnx::NodeProto*>& nodes, const std::vector<NodeMs>& times, std::set<size_t>& used) {
  double ms = 0;
  std::set<std::string> values;  // what the region's profiled nodes read and write
  for (size_t k = 0; k < times.size(); ++k) {
    if (used.count(k)) continue;
    for (const auto* n : nodes) {
      if (profiled_as(times[k].node, *n)) {
        ms += times[k].ms;
        used.insert(k);
        add_values(times[k], values);
        break;
      }
    }
  }
  return ms + reorders_ms(times, values, used);
}

// A node ONNX Runtime removes before it runs anything, its consumers reading its input (IdentityElimination,
// DropoutElimination).
bool passes_through(const onnx::NodeProto& n) {
  return (n.domain().empty() || n.domain() == "ai.onnx") && (n.op_type() == "Identity" || n.op_type() == "Dropout");
}

// What the attribution by values reads of one model's main graph: who writes each value, and which values are
// constants (initializers that are not graph inputs, Constant outputs, and what nodes compute from constants alone,
// which ONNX Runtime folds before it runs anything).
class ModelValues {
 public:
  explicit ModelValues(const onnx::GraphProto& g) {
    std::set<std::string> graph_inputs;
    for (const auto& in : g.input()) graph_inputs.insert(in.name());
    known_ = graph_inputs;
    for (const auto& t : g.initializer()) {
      known_.insert(t.name());
      if (graph_inputs.count(t.name()) == 0) constants_.insert(t.name());
    }
    for (const auto& n : g.node()) {
      bool folded = n.op_type() == "Constant" && (n.domain().empty() || n.domain() == "ai.onnx");
      if (!folded) {
        bool reads = false, all_constant = true;
        for (const auto& in : n.input()) {
          if (in.empty()) continue;  // an optional input left out
          reads = true;
          all_constant = all_constant && constants_.count(in) != 0;
        }
        folded = reads && all_constant;
      }
      for (const auto& out : n.output()) {
        if (out.empty()) continue;
        known_.insert(out);
        producer_.emplace(out, &n);
        if (folded) constants_.insert(out);
      }
      if (!n.name().empty()) by_name_[n.name()].push_back(&n);
    }
  }

  const onnx::NodeProto* producer(const std::string& v) const {
    const auto p = producer_.find(v);
    return p == producer_.end() ? nullptr : p->second;
  }
  bool is_constant(const std::string& v) const { return constants_.count(v) != 0; }
  bool knows(const std::string& v) const { return known_.count(v) != 0; }

  // The one node a kernel's name stands for, or null (none, or more than one): a node of that name, or the node
  // writing V for ONNX Runtime's layout transformer's "V_nchwc" (nchwc_transformer.cc names the node it makes after
  // its output, with "_token_N" added where that name is taken).
  const onnx::NodeProto* named(const std::string& kernel) const {
    std::set<const onnx::NodeProto*> found;
    if (const auto n = by_name_.find(kernel); n != by_name_.end()) found.insert(n->second.begin(), n->second.end());
    std::string base = kernel;
    if (const auto token = base.rfind("_token_");
        token != std::string::npos && token + 7 < base.size() && base.find_first_not_of("0123456789", token + 7) == std::string::npos) {
      base.resize(token);
    }
    const std::string suffix = "_nchwc";
    if (base.size() > suffix.size() && base.compare(base.size() - suffix.size(), suffix.size(), suffix) == 0) {
      const auto* writer = producer(base.substr(0, base.size() - suffix.size()));
      if (writer != nullptr && writer->output(0) == base.substr(0, base.size() - suffix.size())) found.insert(writer);
    }
    return found.size() == 1 ? *found.begin() : nullptr;
  }

 private:
  std::set<std::string> known_;
  std::set<std::string> constants_;
  std::map<std::string, const onnx::NodeProto*> producer_;
  std::map<std::string, std::vector<const onnx::NodeProto*>> by_name_;
};

// A kernel fused by ONNX Runtime covers a handful of nodes (Pad, Conv, Add, Relu); a walk past this many has left the
// kernel through a value that was not read right, and is given up.
constexpr size_t kMaxKernelNodes = 64;

// What each profiled node of one side computes: the model's nodes between the values it reads and the values it
// writes, read through the graph the runtime ran (its own values stand for the model's: a reorder's output for the
// value it copies, a value a ReorderOutput copies out for what it writes, a layout kernel's output for the value it is
// named after).
class KernelCovers {
 public:
  KernelCovers(const std::vector<NodeMs>& times, const ModelValues& model) : times_(times), model_(model) {
    for (size_t k = 0; k < times.size(); ++k) {
      for (const auto& v : times[k].outputs) writers_[v].push_back(k);
      for (const auto& v : times[k].inputs) readers_[v].push_back(k);
      has_values_ = has_values_ || !times[k].inputs.empty() || !times[k].outputs.empty();
    }
    covers_.resize(times.size());
    known_.assign(times.size(), false);
    std::map<const onnx::NodeProto*, int> claims;
    for (size_t k = 0; k < times.size(); ++k) {
      if (is_reorder(times[k])) continue;
      known_[k] = cover(k, covers_[k]);
      if (known_[k]) {
        for (const auto* n : covers_[k]) ++claims[n];
      }
    }
    // Two kernels computing one node means a value was read wrong: neither is trusted.
    for (size_t k = 0; k < times.size(); ++k) {
      for (const auto* n : covers_[k]) {
        if (claims[n] > 1) known_[k] = false;
      }
    }
  }

  bool has_values() const { return has_values_; }
  bool known(size_t k) const { return known_[k]; }
  const std::set<const onnx::NodeProto*>& cover(size_t k) const { return covers_[k]; }

 private:
  enum class Kind { kValue, kConstant, kUnknown };
  struct Resolved {
    Kind kind = Kind::kUnknown;
    std::string value;
  };

  // The model value a value of the graph the runtime ran stands for.
  Resolved resolve(const std::string& v, int depth = 0) {
    if (v.empty() || model_.is_constant(v)) return {Kind::kConstant, ""};
    if (model_.knows(v)) return {Kind::kValue, v};
    if (depth > 16) return {};  // reorders of reorders this deep: a cycle in a hostile profile
    const auto w = writers_.find(v);
    const size_t writers = w == writers_.end() ? 0 : w->second.size();
    if (writers == 0) return {Kind::kConstant, ""};  // a weight the runtime laid out anew
    if (writers > 1) return {};
    const NodeMs& writer = times_[w->second.front()];
    if (is_reorder(writer)) return writer.inputs.empty() ? Resolved{} : resolve(writer.inputs.front(), depth + 1);
    if (const auto r = readers_.find(v); r != readers_.end()) {
      for (size_t reader : r->second) {
        if (times_[reader].op != "ReorderOutput" || times_[reader].outputs.empty()) continue;
        const auto out = resolve(times_[reader].outputs.front(), depth + 1);
        if (out.kind == Kind::kValue) return out;
      }
    }
    if (const auto* n = model_.named(writer.node); n != nullptr) {
      const auto j = static_cast<int>(std::find(writer.outputs.begin(), writer.outputs.end(), v) - writer.outputs.begin());
      if (j < n->output_size() && !n->output(j).empty()) return {Kind::kValue, n->output(j)};
    }
    return {};
  }

  // The nodes kernel `k` computes: walking back from what it writes to what it reads. False when that cannot be told.
  bool cover(size_t k, std::set<const onnx::NodeProto*>& nodes) {
    std::set<std::string> reads;
    std::vector<std::string> pending;
    for (const auto& v : times_[k].inputs) {
      const auto r = resolve(v);
      if (r.kind == Kind::kUnknown) return false;
      if (r.kind == Kind::kValue) reads.insert(r.value);
    }
    for (const auto& v : times_[k].outputs) {
      const auto r = resolve(v);
      if (r.kind == Kind::kUnknown) return false;
      if (r.kind == Kind::kValue && reads.count(r.value) == 0) pending.push_back(r.value);
    }
    if (pending.empty()) return false;
    while (!pending.empty()) {
      const std::string v = pending.back();
      pending.pop_back();
      if (reads.count(v) != 0 || model_.is_constant(v)) continue;
      const auto* n = model_.producer(v);
      if (n == nullptr) return false;  // a graph input it does not read: the walk left the kernel
      if (passes_through(*n)) {
        // ORT removes it and reads its input instead: no kernel's work, and several kernels may read through it.
        if (n->input_size() > 0 && !n->input(0).empty()) pending.push_back(n->input(0));
        continue;
      }
      if (!nodes.insert(n).second) continue;
      if (nodes.size() > kMaxKernelNodes) return false;
      for (const auto& in : n->input()) {
        if (!in.empty()) pending.push_back(in);
      }
    }
    return true;
  }

  const std::vector<NodeMs>& times_;
  const ModelValues& model_;
  std::map<std::string, std::vector<size_t>> writers_, readers_;
  std::vector<std::set<const onnx::NodeProto*>> covers_;
  std::vector<bool> known_;
  bool has_values_ = false;
};

// The name the attribution keys a node by across both models: its first output that is there (an outside node keeps its
// outputs through the rewrite).
std::string key_of(const onnx::NodeProto& n) {
  for (const auto& out : n.output()) {
    if (!out.empty()) return out;
  }
  return "";
}

// One side of the attribution by values: a model, its kernels, and which region owns each of its nodes.
struct Side {
  const char* model;  // "the original model", for a reason
  const ModelValues& values;
  const std::vector<NodeMs>& times;
  KernelCovers covers;
  std::map<const onnx::NodeProto*, size_t> owner;  // node -> the index of the region it belongs to
};

// Into `kernels`, the kernels of `side` that compute nodes of region `index` or of the outside nodes `with` names (by
// key_of), and into `outside`, the other nodes they compute (by key_of). Returns why the region cannot be timed so, or
// "": a kernel computes part of another region, or a kernel named after one of those nodes cannot be read.
std::string kernels_of(const Side& side, const std::vector<const onnx::NodeProto*>& region_nodes, size_t index,
                       const std::vector<UpsamplerRegion>& regions, const std::set<std::string>& with, std::vector<size_t>& kernels,
                       std::set<std::string>& outside) {
  std::set<const onnx::NodeProto*> nodes(region_nodes.begin(), region_nodes.end());
  for (const auto& v : with) {
    const auto* n = side.values.producer(v);
    if (n == nullptr || side.owner.count(n) != 0) {
      return "'" + core::printable(v) + "', which ONNX Runtime runs in one kernel with it, is not a node outside the upsamplers of " +
             side.model;
    }
    nodes.insert(n);
  }
  kernels.clear();
  for (size_t k = 0; k < side.times.size(); ++k) {
    const NodeMs& t = side.times[k];
    if (is_reorder(t)) continue;
    if (!side.covers.known(k)) {
      // Unread, it may compute anything: only its name says which row it could belong to.
      const bool named_here = std::any_of(nodes.begin(), nodes.end(), [&t](const onnx::NodeProto* n) { return profiled_as(t.node, *n); });
      if (named_here) {
        return "what ONNX Runtime's kernel '" + core::printable(t.node) + "' of " + side.model +
               " computes cannot be told from the values it reads and writes";
      }
      continue;
    }
    const auto& cover = side.covers.cover(k);
    if (std::none_of(cover.begin(), cover.end(), [&nodes](const onnx::NodeProto* n) { return nodes.count(n) != 0; })) continue;
    for (const auto* n : cover) {
      if (nodes.count(n) != 0) continue;
      if (const auto o = side.owner.find(n); o != side.owner.end() && o->second != index) {
        return "ONNX Runtime runs it and upsampler '" + core::printable(regions[o->second].name) + "' in one kernel ('" +
               core::printable(t.node) + "') in " + side.model;
      }
      outside.insert(key_of(*n));
    }
    kernels.push_back(k);
  }
  return "";
}

// The kernels' time per run, and the layout reorders that read or write their values (each counted once: `used`).
double kernels_ms(const std::vector<size_t>& kernels, const std::vector<NodeMs>& times, std::set<size_t>& used) {
  double ms = 0;
  std::set<std::string> values;
  for (size_t k : kernels) {
    ms += times[k].ms;
    add_values(times[k], values);
  }
  return ms + reorders_ms(times, values, used);
}

// The rows by values (NodeValues::kOnnx): see upsampler_times.
void attribute_by_values(const onnx::ModelProto& original, const onnx::ModelProto& rewritten, const std::vector<UpsamplerRegion>& regions,
                         const std::vector<NodeMs>& original_times, const std::vector<NodeMs>& rewritten_times,
                         std::vector<UpsamplerTime>& rows) {
  const ModelValues original_values(original.graph()), rewritten_values(rewritten.graph());
  Side sides[2] = {{"the original model", original_values, original_times, KernelCovers(original_times, original_values), {}},
                   {"the rewritten model", rewritten_values, rewritten_times, KernelCovers(rewritten_times, rewritten_values), {}}};
  for (size_t i = 0; i < regions.size(); ++i) {
    for (const auto* n : regions[i].original_nodes) sides[0].owner.emplace(n, i);
    for (const auto* n : regions[i].emitted_nodes) sides[1].owner.emplace(n, i);
  }
  const auto nodes_of = [&](size_t side, size_t i) -> const std::vector<const onnx::NodeProto*>& {
    return side == 0 ? regions[i].original_nodes : regions[i].emitted_nodes;
  };
  std::map<const onnx::NodeProto*, size_t> order;  // place in the original graph, for timed_with
  for (const auto& n : original.graph().node()) order.emplace(&n, order.size());
  // No kernel is timed with two rows: a kernel that computes nodes of one row is refused by the other unless those are
  // nodes outside both, and a node outside both that two rows are widened to is one a kernel runs with nodes of each,
  // which the widening pass of either row meets and refuses.
  std::set<size_t> used[2];  // the reorders counted
  for (size_t i = 0; i < regions.size(); ++i) {
    UpsamplerTime& row = rows[i];
    const auto fail = [&row](const std::string& why) {
      row.not_attributable = why;
      row.original_ms = row.rewritten_ms = std::numeric_limits<double>::quiet_NaN();
      row.timed_with.clear();
    };
    if (!sides[0].covers.has_values() || !sides[1].covers.has_values()) {
      fail(std::string("ONNX Runtime's optimised graph of ") + (sides[0].covers.has_values() ? sides[1].model : sides[0].model) +
           " could not be read back, so what its kernels compute is not known");
      continue;
    }
    // The kernels of the region on both sides; then, when they compute nodes outside it too (on either side), the
    // kernels of the region and those nodes, which must compute nothing further.
    std::set<std::string> with;
    std::vector<size_t> kernels[2];
    std::string why;
    for (const bool widened : {false, true}) {
      std::set<std::string> outside;
      for (size_t s = 0; s < 2 && why.empty(); ++s) why = kernels_of(sides[s], nodes_of(s, i), i, regions, with, kernels[s], outside);
      if (!why.empty() || outside.empty()) break;
      if (widened) {
        std::string more;
        for (const auto& v : outside) more += (more.empty() ? "'" : ", '") + core::printable(v) + "'";
        why = "ONNX Runtime runs what it fuses with the upsampler in one kernel with " + more +
              " too, so the layer has no edge both models share";
        break;
      }
      with = outside;
    }
    if (!why.empty()) {
      fail(why);
      continue;
    }
    row.original_ms = kernels_ms(kernels[0], original_times, used[0]);
    row.rewritten_ms = kernels_ms(kernels[1], rewritten_times, used[1]);
    std::vector<const onnx::NodeProto*> outside;
    for (const auto& v : with) outside.push_back(original_values.producer(v));  // kernels_of found each
    std::sort(outside.begin(), outside.end(),
              [&order](const onnx::NodeProto* a, const onnx::NodeProto* b) { return order.at(a) < order.at(b); });
    for (const auto* n : outside) row.timed_with.push_back(plan_name(*n));
  }
}

}  // namespace

std::vector<UpsamplerRegion> upsampler_regions(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                               const rewrite::RewriteResult& result,
                                               const std::vector<runtime_check::NamedTensor>& inputs) {
  std::vector<UpsamplerRegion> regions;
  const auto& og = original.graph();
  std::map<std::string, const onnx::NodeProto*> first_output_of;
  for (const auto& n : og.node()) {
    if (n.output_size() > 0) first_output_of.emplace(n.output(0), &n);
  }
  // Types of the original's values at the inputs' dims, as the rewrite computes them (rewrite/shape_propagation.h).
  onnx::ModelProto skeleton = onnx_io::skeleton_copy(original);
  for (auto& in : *skeleton.mutable_graph()->mutable_input()) {
    for (const auto& t : inputs) {
      if (t.name != in.name() || !in.type().has_tensor_type()) continue;
      auto* shape = in.mutable_type()->mutable_tensor_type()->mutable_shape();
      shape->clear_dim();
      for (int64_t d : t.tensor.dims) shape->add_dim()->set_dim_value(d);
    }
  }
  const auto propagated = rewrite::propagate_types(skeleton);
  const auto type_of = [&propagated](const std::string& name) { return propagated.types.find(0, name); };
  // A name two nodes share names no one region: such upsamplers get none (their times could be either's).
  std::map<std::string, const onnx::NodeProto*> by_plan_name;
  std::set<std::string> shared;
  for (const auto& n : og.node()) {
    if (!by_plan_name.emplace(plan_name(n), &n).second) shared.insert(plan_name(n));
  }
  for (const auto& name : shared) by_plan_name.erase(name);
  std::map<std::string, const onnx::NodeProto*> rewritten_by_name;
  for (const auto& n : rewritten.graph().node()) rewritten_by_name.emplace(plan_name(n), &n);
  for (const auto& n : result.nodes) {
    if (!n.rewritten || n.summary.graph_path != "main") continue;
    const auto anchor = by_plan_name.find(n.summary.name);
    if (anchor == by_plan_name.end()) continue;
    UpsamplerRegion region;
    static_cast<core::ReplacedRegion&>(region) = n.region;
    region.name = n.summary.name;
    region.form = rewrite::form_name(n.summary.form);
    // The replaced nodes the rewriter recorded (by first output), as nodes of the original.
    for (const auto& name : n.region.nodes) {
      const auto p = first_output_of.find(name);
      if (p != first_output_of.end()) region.original_nodes.push_back(p->second);
    }
    if (region.original_nodes.empty() || region.original_nodes.front() != anchor->second) continue;
    region.input_shape = "?";
    if (const auto* t = type_of(region.input); t != nullptr && t->has_tensor_type()) {
      region.input_type = *t;
      if (t->tensor_type().has_shape()) {
        std::string text;
        for (const auto& d : t->tensor_type().shape().dim()) {
          text += (text.empty() ? "" : "x") + (d.has_dim_value() ? std::to_string(d.dim_value()) : std::string("?"));
        }
        region.input_shape = text;
      }
    }
    if (const auto* t = type_of(region.output); t != nullptr && t->has_tensor_type()) region.output_type = *t;
    for (const auto& name : n.emitted_nodes) {
      if (const auto e = rewritten_by_name.find(name); e != rewritten_by_name.end()) region.emitted_nodes.push_back(e->second);
    }
    regions.push_back(std::move(region));
  }
  return regions;
}

std::vector<UpsamplerTime> upsampler_times(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                           const rewrite::RewriteResult& result, const std::vector<NodeMs>& original_nodes,
                                           const std::vector<NodeMs>& rewritten_nodes,
                                           const std::vector<runtime_check::NamedTensor>& inputs, NodeValues values) {
  std::vector<UpsamplerTime> rows;
  std::set<size_t> used_original, used_rewritten;
  const auto regions = upsampler_regions(original, rewritten, result, inputs);
  for (const auto& region : regions) {
    UpsamplerTime row;
    row.name = region.name;
    row.form = region.form;
    row.input_shape = region.input_shape;
    if (values == NodeValues::kNames) {
      row.original_ms = time_of(region.original_nodes, original_nodes, used_original);
      row.rewritten_ms = time_of(region.emitted_nodes, rewritten_nodes, used_rewritten);
    }
    rows.push_back(row);
  }
  if (values == NodeValues::kOnnx) attribute_by_values(original, rewritten, regions, original_nodes, rewritten_nodes, rows);
  return rows;
}

std::string format_upsampler_times(const std::vector<UpsamplerTime>& rows) {
  size_t width = 9;
  for (const auto& r : rows) width = std::max(width, core::printable(r.name).size());
  char line[512];
  std::snprintf(line, sizeof line, "  %-*s  %-22s  %-16s %12s %13s %7s\n", static_cast<int>(width), "upsampler", "form", "input",
                "original ms", "rewritten ms", "ratio");
  std::string text = line;
  const auto ms = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3f", v);
    return std::isfinite(v) ? std::string(b) : std::string("-");
  };
  for (const auto& r : rows) {
    const bool timed = r.not_attributable.empty() && r.rewritten_ms > 0 && std::isfinite(r.original_ms);
    const std::string ratio = timed ? [&] {
      char b[32];
      std::snprintf(b, sizeof b, "%.2fx", r.original_ms / r.rewritten_ms);
      return std::string(b);
    }() : std::string("-");
    std::snprintf(line, sizeof line, "  %-*s  %-22s  %-16s %12s %13s %7s\n", static_cast<int>(width), core::printable(r.name).c_str(),
                  r.form.c_str(), r.input_shape.c_str(), ms(r.original_ms).c_str(), ms(r.rewritten_ms).c_str(), ratio.c_str());
    text += line;
    // The names are the model's, the reason's already printable: each note stays one line.
    if (!r.not_attributable.empty()) {
      text += "    not attributable: " + r.not_attributable + "\n";
    } else if (!r.timed_with.empty()) {
      std::string names;
      for (size_t k = 0; k < r.timed_with.size(); ++k) {
        names += std::string(k == 0 ? "" : k + 1 == r.timed_with.size() ? " and " : ", ") + "'" + core::printable(r.timed_with[k]) + "'";
      }
      text += "    timed with " + names + " both ways: the runtime runs " + (r.timed_with.size() == 1 ? "it" : "them") +
              " in one kernel with the upsampler's nodes\n";
    }
  }
  return text;
}

}  // namespace dwdeconv::cli
