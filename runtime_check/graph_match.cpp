// The region half of the graph match: the replaced upsamplers found from the graphs or from the rewrite's record,
// the record confirmed against the graphs, and each region checked on its own; the rest of the two models is
// compared node for node by graph_match_compare.cpp.
#include "runtime_check/graph_match.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "graph_match_internal.h"
#include "onnx_io/attributes.h"
#include "onnx_io/tensor.h"
#include "rewrite/forms.h"

namespace dwdeconv::runtime_check {
namespace {

using detail::node_reads;
using detail::same_graph;
using onnx_io::describe_node;

std::map<std::string, int> producers(const onnx::GraphProto& graph) {
  std::map<std::string, int> producer;
  for (int k = 0; k < graph.node_size(); ++k) {
    for (const auto& name : graph.node(k).output()) producer[name] = k;
  }
  return producer;
}

// Per node of `graph`: the index of the region it belongs to only, or -1 when it stays compared. A region is
// everything its output y depends on, back to its x; a node the rest of the graph also needs (back from the graph
// outputs and from each x, never through a y) stays compared.
std::vector<int> region_of(const onnx::GraphProto& graph, const std::vector<Replacement>& regions) {
  const auto producer = producers(graph);
  const auto walk = [&](std::vector<std::string> pending, const std::set<std::string>& stop, std::vector<bool>& marked) {
    while (!pending.empty()) {
      const std::string name = pending.back();
      pending.pop_back();
      const auto it = producer.find(name);
      if (stop.count(name) != 0 || it == producer.end() || marked[static_cast<size_t>(it->second)]) continue;
      marked[static_cast<size_t>(it->second)] = true;
      for (auto& read : node_reads(graph.node(it->second))) pending.push_back(std::move(read));
    }
  };
  const size_t n = static_cast<size_t>(graph.node_size());
  std::vector<bool> needed(n, false);
  std::vector<std::string> roots;
  std::set<std::string> replaced_outputs;
  for (const auto& o : graph.output()) roots.push_back(o.name());
  for (const auto& r : regions) {
    roots.push_back(r.input);
    replaced_outputs.insert(r.output);
  }
  walk(roots, replaced_outputs, needed);
  std::vector<int> region(n, -1);
  for (size_t k = 0; k < regions.size(); ++k) {
    std::vector<bool> in_region(n, false);
    walk({regions[k].output}, {regions[k].input}, in_region);
    for (size_t j = 0; j < n; ++j) {
      if (in_region[j] && !needed[j] && region[j] < 0) region[j] = static_cast<int>(k);
    }
  }
  return region;
}

std::vector<bool> outside(const std::vector<int>& region) {
  std::vector<bool> out(region.size());
  for (size_t k = 0; k < region.size(); ++k) out[k] = region[k] < 0;
  return out;
}

bool standard_domain(const onnx::NodeProto& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }

// Whether `attr` is a list of ints that are all `value`.
bool ints_all(const onnx::AttributeProto& attr, int64_t value) {
  return attr.type() == onnx::AttributeProto::INTS &&
         std::all_of(attr.ints().begin(), attr.ints().end(), [value](int64_t v) { return v == value; });
}

bool all_zero(const onnx::TensorProto& t) {
  const auto values = onnx_io::to_doubles(t);
  return values.ok() && std::all_of(values->begin(), values->end(), [](double v) { return v == 0; });
}

// Whether `attr` of a region node has a form the emitter writes (rewrite/emitter.cpp). Sizes such as kernel_shape,
// pads, group and blocksize are left to the numeric check; what is refused would make the region not affine in
// x, or affine in a way the small random inputs of per-node mode might not show.
bool emitted_attribute(const std::string& op, const onnx::AttributeProto& attr) {
  const std::string& name = attr.name();
  if (op == "Conv") {
    if (name == "group" || name == "kernel_shape" || name == "pads") return true;
    // Dilations other than 1 only on the one Conv of a stride-1 ConvTranspose (region_node_difference checks where).
    if (name == "strides") return ints_all(attr, 1);
    if (name == "dilations") {
      return attr.type() == onnx::AttributeProto::INTS &&
             std::all_of(attr.ints().begin(), attr.ints().end(), [](int64_t v) { return v >= 1; });
    }
    return name == "auto_pad" && attr.s() == "NOTSET";
  }
  if (op == "Pad") {
    if (name == "pads" || name == "paddings") return true;
    if (name == "mode") return attr.s() == "constant" || attr.s() == "edge";  // edge: a copy of x's edge samples
    return name == "value" && attr.type() == onnx::AttributeProto::FLOAT && attr.f() == 0;
  }
  // Concat on channels (or the batch axis for batch_crd, the new last axis and W for the interleave, the length of a
  // 1-D signal for its edge samples); DepthToSpace in either order; the Gather (constant indices), Transpose, Unsqueeze,
  // Reshape and Slice of the joins and edges only move elements.
  if (op == "Concat") return name == "axis" && attr.type() == onnx::AttributeProto::INT && attr.i() >= 0 && attr.i() <= 4;
  if (op == "Unsqueeze" || op == "Squeeze") return name == "axes";
  if (op == "Flatten") return name == "axis";  // ExecuTorch's 1-D join: moves no element
  if (op == "DepthToSpace") return name == "blocksize" || (name == "mode" && (attr.s() == "DCR" || attr.s() == "CRD"));
  if (op == "Gather") return name == "axis";
  if (op == "Transpose") return name == "perm";
  if (op == "ConstantOfShape") return name == "value" && attr.type() == onnx::AttributeProto::TENSOR && all_zero(attr.t());
  // The nearest layout's Resize: replication, x[floor(o/s)], linear in x.
  if (op == "Resize") {
    return (name == "mode" && attr.s() == "nearest") || (name == "coordinate_transformation_mode" && attr.s() == "asymmetric") ||
           (name == "nearest_mode" && attr.s() == "floor");
  }
  return op == "Constant";  // a constant, whatever it holds; Shape has no attribute the emitter writes
}

// How a node inside the region of `region` differs from what the emitter writes ("" when it does not). Per-node mode
// checks a region numerically on random inputs in [-1, 1); that says something about all inputs only because the
// emitted ops are affine in x (constant Pad, Conv with constant weights, Concat, DepthToSpace) or ignore its values
// (Shape, ConstantOfShape, Constant). Any other op, e.g. a Clip(-1, 1), could hide on those inputs.
std::string region_node_difference(const onnx::NodeProto& node, const onnx::GraphProto& graph, const Replacement& region) {
  static const std::set<std::string> kEmitted{"Pad",       "Conv",    "Concat",          "DepthToSpace", "Gather",
                                              "Transpose", "Shape",   "ConstantOfShape", "Constant",     "Resize",
                                              "Unsqueeze", "Reshape", "Squeeze",         "Slice",        "Flatten"};
  const std::string where = describe_node(node) + " in the region that replaces " + region.label;
  if (!standard_domain(node) || kEmitted.count(node.op_type()) == 0) {
    return where +
           " is not one the rewrite emits (Pad, Conv, Concat, DepthToSpace, Gather, Transpose, Shape, "
           "ConstantOfShape, Constant, Resize, Unsqueeze, Reshape, Squeeze, Slice, Flatten)";
  }
  for (const auto& attr : node.attribute()) {
    if (!emitted_attribute(node.op_type(), attr)) return where + ": attribute '" + attr.name() + "' is not in a form the rewrite emits";
    // A dilated Conv is what a stride-1 ConvTranspose becomes: one Conv writing y, never a phase of a join.
    if (node.op_type() == "Conv" && attr.name() == "dilations" && !ints_all(attr, 1) &&
        (node.output_size() != 1 || node.output(0) != region.output)) {
      return where + ": attribute 'dilations' is not in a form the rewrite emits (only the one Conv that writes '" + region.output +
             "' is dilated)";
    }
  }
  // A constant here: an initializer or a Constant node's output.
  const auto constant = [&graph](const std::string& name) {
    for (const auto& init : graph.initializer()) {
      if (init.name() == name) return true;
    }
    for (const auto& n : graph.node()) {
      if (n.op_type() == "Constant" && n.output_size() > 0 && n.output(0) == name) return true;
    }
    return false;
  };
  if (node.op_type() == "Conv") {
    if (node.input_size() < 2 || node.input_size() > 3 || !constant(node.input(1))) {
      return where + " reads its weight from something other than a constant";
    }
    if (node.input_size() == 3 && node.input(2) != region.bias) {
      return where + " reads bias '" + node.input(2) + "', not the bias of " + region.label;
    }
  }
  if (node.op_type() == "Pad" && (node.input_size() > 2 || (node.input_size() == 2 && !constant(node.input(1))))) {
    return where + " has inputs the rewrite does not emit (only the data and constant pads)";
  }
  // The edge samples of a folded 1-D upsampler: x's first or last sample, by constant starts, ends and axes.
  if (node.op_type() == "Slice" &&
      (node.input_size() < 3 || node.input_size() > 4 || !std::all_of(node.input().begin() + 1, node.input().end(), constant))) {
    return where + " slices by starts, ends or axes that are not constants (the rewrite emits constant ones, and no steps)";
  }
  if (node.op_type() == "Gather" && (node.input_size() != 2 || !constant(node.input(1)))) {
    return where + " gathers by indices that are not a constant";
  }
  if (node.op_type() == "Resize") {
    // (X, scales) at opset 10, (X, roi, scales) after it: constant scales, no sizes, the mode asked for above.
    const bool constants = node.input_size() >= 2 && node.input_size() <= 3 && constant(node.input(node.input_size() - 1)) &&
                           (node.input_size() == 2 || node.input(1).empty() || constant(node.input(1)));
    const bool nearest =
        std::any_of(node.attribute().begin(), node.attribute().end(), [](const onnx::AttributeProto& a) { return a.name() == "mode"; });
    if (!constants || !nearest) return where + " is not the nearest Resize by constant scales the rewrite emits";
  }
  return "";
}

// How what a rewritten region reads from outside itself differs from what its original reads ("" when it does
// not): exactly the original's activation x, the node's bias, and constants (initializers and Constant outputs,
// wherever they stand: regions share phase weights). A region reading another value both models compute, e.g.
// Clip(x, -1, 1), would be checked on per-node mode's inputs in [-1, 1), where the Clip changes nothing.
std::string region_reads_difference(const onnx::GraphProto& graph, const std::vector<int>& region,
                                    const std::vector<Replacement>& replaced) {
  std::set<std::string> constants;
  for (const auto& init : graph.initializer()) constants.insert(init.name());
  for (const auto& node : graph.node()) {
    if (node.op_type() == "Constant" && standard_domain(node)) constants.insert(node.output().begin(), node.output().end());
  }
  std::vector<std::set<std::string>> produced(replaced.size());
  for (int k = 0; k < graph.node_size(); ++k) {
    const int r = region[static_cast<size_t>(k)];
    if (r >= 0) produced[static_cast<size_t>(r)].insert(graph.node(k).output().begin(), graph.node(k).output().end());
  }
  for (int k = 0; k < graph.node_size(); ++k) {
    const int r = region[static_cast<size_t>(k)];
    if (r < 0) continue;
    const Replacement& rep = replaced[static_cast<size_t>(r)];
    for (const auto& name : node_reads(graph.node(k))) {
      if (name.empty() || name == rep.input || (name == rep.bias && !rep.bias.empty()) || constants.count(name) != 0 ||
          produced[static_cast<size_t>(r)].count(name) != 0) {
        continue;
      }
      return describe_node(graph.node(k)) + " in the region that replaces " + rep.label + " reads '" + name +
             "', which is neither that upsampler's input '" + rep.input + "' nor a constant";
    }
  }
  return "";
}

// Ops whose output is not a function of their inputs: never part of a constant chain.
bool is_random_op(const std::string& op) {
  static const std::set<std::string> random{"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                                            "Multinomial",  "Bernoulli",     "Dropout"};
  return random.count(op) != 0;
}

// How a node of the original's region of `region` keeps that region from being checked on its own ("" when it
// does not). The region must be affine in x for the same reason the rewritten one must (see region_node_difference):
// so it may hold only the upsampler forms' ops, and each reads x's values as its data: through input 0 (Mul through
// either input, never both: Mul(u, u) would be quadratic; a Concat through any), never as indices, sizes, pads or
// shapes (Gather(table, x) is a lookup table), and a Cast of them only to f32 or f64 (to an integer it truncates,
// which is 0 everywhere on per-node mode's inputs in [-1, 1)). `from_x` holds the values computed from x's values so far.
std::string original_region_node_difference(const onnx::NodeProto& node, const Replacement& region, std::set<std::string>& from_x) {
  const std::string where = describe_node(node) + " in the original's upsampler that ends at " + region.label;
  // A node that reads nothing computed from x is part of a constant chain (a mask's or a weight's): any standard op
  // the reference kernels implement (the region's run refuses one they do not).
  const bool reads_from_x =
      std::any_of(node.input().begin(), node.input().end(), [&](const std::string& in) { return from_x.count(in) != 0; });
  if (standard_domain(node) && !reads_from_x && !is_random_op(node.op_type())) return "";
  // The ops of the upsampler forms the rewrite recognises, their constant chains included: each form's row lists them.
  if (const auto ops = rewrite::form_ops(); !standard_domain(node) || ops.count(node.op_type()) == 0) {
    std::string listed;
    for (const auto& op : ops) listed += (listed.empty() ? "" : ", ") + op;
    return where + " is not an op of the upsampler forms the rewrite replaces (" + listed + "), so per-node mode cannot check it";
  }
  const std::string& op = node.op_type();
  if (op == "Shape") return "";  // reads x's dims, not its values
  const std::string not_affine = "computed from '" + region.input + "', so it is not affine in it and per-node mode cannot check it";
  size_t reads_x = 0;
  for (int k = 0; k < node.input_size(); ++k) {
    if (from_x.count(node.input(k)) == 0) continue;
    ++reads_x;
    const bool data = k == 0 || (op == "Mul" && k == 1) || op == "Concat";
    if (!data || op == "ConstantOfShape") return where + " reads its input " + std::to_string(k) + " from values " + not_affine;
  }
  if (reads_x > 1 && op != "Concat") {
    return where + " reads values computed from '" + region.input + "' through " + std::to_string(reads_x) +
           " inputs, so it is not affine in it and per-node mode cannot check it";
  }
  if (reads_x > 0 && op == "Cast") {
    const auto to = onnx_io::get_int(node, "to", 0);
    if (!to.ok() || (to.value() != onnx::TensorProto::FLOAT && to.value() != onnx::TensorProto::DOUBLE)) {
      return where + " casts values " + not_affine + " (only a Cast to a float type of 32 bits or more keeps them)";
    }
  }
  if (reads_x > 0) from_x.insert(node.output().begin(), node.output().end());
  return "";
}

}  // namespace

std::vector<Replacement> find_replacements(const onnx::ModelProto& original, const onnx::ModelProto& rewritten) {
  const onnx::GraphProto& a = original.graph();
  const onnx::GraphProto& b = rewritten.graph();
  std::set<std::string> b_defined;
  std::map<std::string, std::string> b_op;  // output -> the op producing it in the rewritten model
  for (const auto& in : b.input()) b_defined.insert(in.name());
  for (const auto& init : b.initializer()) b_defined.insert(init.name());
  for (const auto& node : b.node()) {
    for (const auto& out : node.output()) {
      b_defined.insert(out);
      b_op[out] = standard_domain(node) ? node.op_type() : node.domain() + "::" + node.op_type();
    }
  }
  const auto a_producer = producers(a);
  std::set<std::string> a_initializers;
  for (const auto& init : a.initializer()) a_initializers.insert(init.name());

  // Whether a value of the original is computed from constants alone: an initializer, a Shape (its input's dims,
  // not its values), or an upsampler-form op reading only such values.
  std::map<std::string, bool> memo;
  std::function<bool(const std::string&)> constant = [&](const std::string& name) {
    if (a_initializers.count(name) != 0) return true;
    const auto it = a_producer.find(name);
    if (it == a_producer.end()) return false;
    if (const auto m = memo.find(name); m != memo.end()) return m->second;
    memo[name] = false;  // a cycle is no constant
    const onnx::NodeProto& node = a.node(it->second);
    // Any deterministic standard op computes a constant from constants (a mask's Slice/Reshape/Add chain, a weight's
    // ConstantOfShape/Equal/Where/Expand), as the rewrite's own constant folding evaluates them.
    bool result = standard_domain(node) && !is_random_op(node.op_type()) && node.input_size() + node.output_size() > 0;
    if (result && node.op_type() != "Shape") {
      for (const auto& in : node_reads(node)) result = result && (in.empty() || constant(in));
    }
    return memo[name] = result;
  };

  std::vector<Replacement> replaced;
  const std::set<std::string> roots = rewrite::form_root_ops();
  for (int k = 0; k < a.node_size(); ++k) {
    const onnx::NodeProto& node = a.node(k);
    // An upsampler ends at the op its form starts from (the form's row says which): its Conv or ConvTranspose, or (a
    // folded 1-D one, form upsample1d) the Slice of its crop after a ConvTranspose.
    const bool conv = node.op_type() == "Conv" || node.op_type() == "ConvTranspose";
    if (!standard_domain(node) || roots.count(node.op_type()) == 0 || node.output_size() != 1) continue;
    const auto op = b_op.find(node.output(0));
    if (op == b_op.end() || op->second == node.op_type()) continue;
    Replacement r;
    r.node = &node;
    r.output = node.output(0);
    r.bias = conv && node.input_size() > 2 ? node.input(2) : "";
    r.label = describe_node(node);
    // Back from y through what the rewritten model no longer has, to the values both models define.
    std::set<std::string> activations, seen;
    std::set<int> visited{k};
    std::vector<std::string> pending = node_reads(node);
    while (!pending.empty()) {
      const std::string name = pending.back();
      pending.pop_back();
      if (name.empty() || !seen.insert(name).second) continue;
      const auto it = a_producer.find(name);
      if (b_defined.count(name) != 0 || it == a_producer.end()) {
        if (!constant(name)) activations.insert(name);
        continue;
      }
      if (visited.insert(it->second).second) {
        for (auto& read : node_reads(a.node(it->second))) pending.push_back(std::move(read));
      }
    }
    if (!conv) {
      // A Slice is the end of an upsampler only with the ConvTranspose it crops in its region.
      const auto deconv = std::find_if(visited.begin(), visited.end(),
                                       [&](int j) { return standard_domain(a.node(j)) && a.node(j).op_type() == "ConvTranspose"; });
      if (deconv == visited.end()) continue;
      r.bias = a.node(*deconv).input_size() > 2 ? a.node(*deconv).input(2) : "";
    }
    if (activations.size() == 1) {
      r.input = *activations.begin();
    } else {
      std::string names;
      for (const auto& name : activations) names += (names.empty() ? "'" : ", '") + name + "'";
      r.problem = "the original's upsampler that ends at " + r.label + " reads " +
                  (activations.empty() ? std::string("no activation, only constants")
                                       : std::to_string(activations.size()) + " activations (" + names + ")") +
                  "; per-node mode checks an upsampler that reads one";
    }
    replaced.push_back(std::move(r));
  }
  return replaced;
}

std::string difference_outside_replacements(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                            const std::vector<Replacement>& replaced) {
  if (original.ir_version() != rewritten.ir_version()) return "the IR versions differ";
  std::map<std::string, int64_t> a_opsets, b_opsets;
  for (const auto& o : original.opset_import()) a_opsets[o.domain() == "ai.onnx" ? "" : o.domain()] = o.version();
  for (const auto& o : rewritten.opset_import()) b_opsets[o.domain() == "ai.onnx" ? "" : o.domain()] = o.version();
  if (a_opsets != b_opsets) return "the opset imports differ";
  if (original.functions_size() != rewritten.functions_size()) return "the model-local functions differ";
  for (int k = 0; k < original.functions_size(); ++k) {
    if (original.functions(k).SerializeAsString() != rewritten.functions(k).SerializeAsString()) {
      return "model-local function '" + original.functions(k).name() + "' differs";
    }
  }
  for (const auto& r : replaced) {
    if (!r.problem.empty()) return r.problem;
  }
  const auto original_regions = region_of(original.graph(), replaced);
  const auto rewritten_regions = region_of(rewritten.graph(), replaced);
  if (auto d = same_graph(original.graph(), rewritten.graph(), outside(original_regions), outside(rewritten_regions), "",
                          original.ir_version() < 4);
      !d.empty()) {
    return d;
  }
  for (int k = 0; k < rewritten.graph().node_size(); ++k) {
    const int r = rewritten_regions[static_cast<size_t>(k)];
    if (r < 0) continue;
    if (auto d = region_node_difference(rewritten.graph().node(k), rewritten.graph(), replaced[static_cast<size_t>(r)]); !d.empty()) {
      return d;
    }
  }
  if (auto d = region_reads_difference(rewritten.graph(), rewritten_regions, replaced); !d.empty()) return d;
  // Graph order is topological, so each node's inputs computed from x are known when it is reached.
  std::vector<std::set<std::string>> from_x(replaced.size());
  for (size_t r = 0; r < replaced.size(); ++r) from_x[r].insert(replaced[r].input);
  for (int k = 0; k < original.graph().node_size(); ++k) {
    const int r = original_regions[static_cast<size_t>(k)];
    if (r < 0) continue;
    const auto index = static_cast<size_t>(r);
    if (auto d = original_region_node_difference(original.graph().node(k), replaced[index], from_x[index]); !d.empty()) return d;
  }
  return "";
}

std::vector<Replacement> replacements_from_record(const onnx::ModelProto& original, const std::vector<core::ReplacedRegion>& regions) {
  const auto& graph = original.graph();
  const auto producer = producers(graph);
  std::vector<std::pair<int, Replacement>> ordered;
  for (const auto& region : regions) {
    Replacement r;
    static_cast<core::ReplacedRegion&>(r) = region;
    const auto it = producer.find(region.output);
    if (it == producer.end()) {
      r.label = "'" + region.output + "'";
      r.problem = "the rewrite's record names '" + region.output + "', which the original's main graph does not compute";
      ordered.emplace_back(graph.node_size(), std::move(r));
      continue;
    }
    r.node = &graph.node(it->second);
    r.label = describe_node(*r.node);
    if (r.input.empty()) r.problem = "the rewrite's record of " + r.label + " names no input";
    ordered.emplace_back(it->second, std::move(r));
  }
  std::stable_sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Replacement> out;
  for (auto& [index, r] : ordered) out.push_back(std::move(r));
  return out;
}

std::string record_difference(const std::vector<Replacement>& recorded, const std::vector<Replacement>& found) {
  std::map<std::string, const Replacement*> by_y;
  for (const auto& r : found) by_y[r.output] = &r;
  for (const auto& r : recorded) {
    const auto it = by_y.find(r.output);
    if (it == by_y.end())
      return "the rewrite recorded replacing " + r.label + ", but the rewritten model still computes '" + r.output +
             "' as the original does";
    // A region the graphs alone cannot resolve (x == "" and a problem: e.g. a mask built from Shape(x) reads x
    // twice) takes the record's x; difference_outside_replacements() then checks the region read from it.
    if (it->second->input != r.input && !it->second->input.empty()) {
      return "the rewrite recorded " + r.label + " as reading '" + r.input + "', but the graphs say '" + it->second->input + "'";
    }
    by_y.erase(it);
  }
  if (!by_y.empty()) return "the rewritten model replaces " + by_y.begin()->second->label + ", which the rewrite did not record";
  return "";
}

}  // namespace dwdeconv::runtime_check
