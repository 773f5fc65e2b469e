#include "runtime_check/graph_match.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "onnx_io/attributes.h"
#include "onnx_io/shapes.h"
#include "onnx_io/tensor.h"
#include "runtime_check/tensor.h"

namespace dwdeconv::runtime_check {
namespace {

using onnx_io::describe_node;
using onnx_io::describe_type;

void outer_reads(const onnx::GraphProto& graph, std::set<std::string>& reads);

// The names a node reads: its inputs, and what its subgraphs read from enclosing graphs.
std::vector<std::string> node_reads(const onnx::NodeProto& node) {
  std::vector<std::string> reads(node.input().begin(), node.input().end());
  std::set<std::string> outer;
  for (const auto& attr : node.attribute()) {
    if (attr.has_g()) outer_reads(attr.g(), outer);
    for (const auto& g : attr.graphs()) outer_reads(g, outer);
  }
  reads.insert(reads.end(), outer.begin(), outer.end());
  return reads;
}

// Names the nodes of `graph` (and of its subgraphs) read but `graph` does not define.
void outer_reads(const onnx::GraphProto& graph, std::set<std::string>& reads) {
  std::set<std::string> defined;
  for (const auto& in : graph.input()) defined.insert(in.name());
  for (const auto& init : graph.initializer()) defined.insert(init.name());
  for (const auto& node : graph.node()) defined.insert(node.output().begin(), node.output().end());
  for (const auto& node : graph.node()) {
    for (const auto& name : node_reads(node)) {
      if (!name.empty() && defined.count(name) == 0) reads.insert(name);
    }
  }
}

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
    roots.push_back(r.x);
    replaced_outputs.insert(r.y);
  }
  walk(roots, replaced_outputs, needed);
  std::vector<int> region(n, -1);
  for (size_t k = 0; k < regions.size(); ++k) {
    std::vector<bool> in_region(n, false);
    walk({regions[k].y}, {regions[k].x}, in_region);
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
    if (name == "strides" || name == "dilations") return ints_all(attr, 1);
    return name == "auto_pad" && attr.s() == "NOTSET";
  }
  if (op == "Pad") {
    if (name == "pads" || name == "paddings") return true;
    if (name == "mode") return attr.s() == "constant" || attr.s() == "edge";  // edge: a copy of x's edge samples
    return name == "value" && attr.type() == onnx::AttributeProto::FLOAT && attr.f() == 0;
  }
  // Concat on channels (or, for the batch_crd layout, on the batch axis); DepthToSpace in either order; the
  // Gather (constant indices) and Transpose of the CRD layouts only move elements.
  if (op == "Concat") return name == "axis" && attr.type() == onnx::AttributeProto::INT && (attr.i() == 1 || attr.i() == 0);
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
  static const std::set<std::string> kEmitted{"Pad", "Conv", "Concat", "DepthToSpace", "Gather", "Transpose", "Shape",
                                              "ConstantOfShape", "Constant", "Resize"};
  const std::string where = describe_node(node) + " in the region that replaces " + region.label;
  if (!standard_domain(node) || kEmitted.count(node.op_type()) == 0) {
    return where + " is not one the rewrite emits (Pad, Conv, Concat, DepthToSpace, Gather, Transpose, Shape, "
                   "ConstantOfShape, Constant, Resize)";
  }
  for (const auto& attr : node.attribute()) {
    if (!emitted_attribute(node.op_type(), attr)) return where + ": attribute '" + attr.name() + "' is not in a form the rewrite emits";
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
  if (node.op_type() == "Gather" && (node.input_size() != 2 || !constant(node.input(1)))) {
    return where + " gathers by indices that are not a constant";
  }
  if (node.op_type() == "Resize") {
    // (X, scales) at opset 10, (X, roi, scales) after it: constant scales, no sizes, the mode asked for above.
    const bool constants = node.input_size() >= 2 && node.input_size() <= 3 && constant(node.input(node.input_size() - 1)) &&
                           (node.input_size() == 2 || node.input(1).empty() || constant(node.input(1)));
    const bool nearest = std::any_of(node.attribute().begin(), node.attribute().end(),
                                     [](const onnx::AttributeProto& a) { return a.name() == "mode"; });
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
      if (name.empty() || name == rep.x || (name == rep.bias && !rep.bias.empty()) || constants.count(name) != 0 ||
          produced[static_cast<size_t>(r)].count(name) != 0) {
        continue;
      }
      return describe_node(graph.node(k)) + " in the region that replaces " + rep.label + " reads '" + name +
             "', which is neither that upsampler's input '" + rep.x + "' nor a constant";
    }
  }
  return "";
}

// The ops of the upsampler forms the rewrite recognises (rewrite/recognisers.h), their constant chains included.
const std::set<std::string>& upsampler_ops() {
  static const std::set<std::string> ops{"Resize", "Mul", "Pad", "Conv", "ConvTranspose", "Identity", "Reshape", "Slice",
                                         "ConstantOfShape", "Concat", "Transpose", "Cast", "Unsqueeze", "Squeeze",
                                         "Expand", "Tile", "Gather", "Shape", "Constant"};
  return ops;
}

// How a node of the original's region of `region` keeps that region from being checked on its own ("" when it
// does not). The region must be affine in x for the same reason the rewritten one must (see region_node_difference):
// so it may hold only the upsampler forms' ops, and each reads x's values as its data: through input 0 (Mul through
// either input, never both: Mul(u, u) would be quadratic; a Concat through any), never as indices, sizes, pads or
// shapes (Gather(table, x) is a lookup table), and a Cast of them only to f32 or f64 (to an integer it truncates,
// which is 0 everywhere on per-node mode's inputs in [-1, 1)). `from_x` holds the values computed from x's values so far.
std::string original_region_node_difference(const onnx::NodeProto& node, const Replacement& region, std::set<std::string>& from_x) {
  const std::string where = describe_node(node) + " in the original's upsampler that ends at " + region.label;
  if (!standard_domain(node) || upsampler_ops().count(node.op_type()) == 0) {
    return where + " is not an op of the upsampler forms the rewrite replaces (Resize, Mul, Pad, Conv, ConvTranspose, "
                   "Identity, Reshape, Slice and constant-chain ops), so per-node mode cannot check it";
  }
  const std::string& op = node.op_type();
  if (op == "Shape") return "";  // reads x's dims, not its values
  const std::string not_affine = "computed from '" + region.x + "', so it is not affine in it and per-node mode cannot check it";
  size_t reads_x = 0;
  for (int k = 0; k < node.input_size(); ++k) {
    if (from_x.count(node.input(k)) == 0) continue;
    ++reads_x;
    const bool data = k == 0 || (op == "Mul" && k == 1) || op == "Concat";
    if (!data || op == "ConstantOfShape") return where + " reads its input " + std::to_string(k) + " from values " + not_affine;
  }
  if (reads_x > 1 && op != "Concat") {
    return where + " reads values computed from '" + region.x + "' through " + std::to_string(reads_x) +
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

// Equal element values (bit for bit), whatever the storage form (raw_data or a typed field). Names are not compared.
bool same_tensor(const onnx::TensorProto& a, const onnx::TensorProto& b) {
  if (a.data_type() != b.data_type() || onnx_io::dims_of(a) != onnx_io::dims_of(b)) return false;
  if (onnx_io::is_external(a) || onnx_io::is_external(b)) {
    // Not loaded here: the same only when both name the same bytes of the same file.
    if (!onnx_io::is_external(a) || !onnx_io::is_external(b) || a.external_data_size() != b.external_data_size()) return false;
    for (int k = 0; k < a.external_data_size(); ++k) {
      if (a.external_data(k).key() != b.external_data(k).key() || a.external_data(k).value() != b.external_data(k).value()) return false;
    }
    return true;
  }
  if (a.has_raw_data() && b.has_raw_data()) return a.raw_data() == b.raw_data();
  if (is_integer_type(a.data_type())) {
    const auto va = tensor_from_proto(a, "a"), vb = tensor_from_proto(b, "b");
    return va.ok() && vb.ok() && va->i == vb->i;
  }
  if (is_float_type(a.data_type())) {
    const auto va = onnx_io::to_doubles(a), vb = onnx_io::to_doubles(b);
    return va.ok() && vb.ok() && va->size() == vb->size() &&
           std::memcmp(va->data(), vb->data(), va->size() * sizeof(double)) == 0;
  }
  onnx::TensorProto a_unnamed = a, b_unnamed = b;  // strings and other types: the same message
  a_unnamed.clear_name();
  b_unnamed.clear_name();
  return a_unnamed.SerializeAsString() == b_unnamed.SerializeAsString();
}

std::string same_graph(const onnx::GraphProto& a, const onnx::GraphProto& b, const std::vector<bool>& a_compared,
                       const std::vector<bool>& b_compared, const std::string& where, bool initializers_listed);

// A subgraph, node for node.
std::string all_of_graph(const onnx::GraphProto& a, const onnx::GraphProto& b, const std::string& where) {
  return same_graph(a, b, std::vector<bool>(static_cast<size_t>(a.node_size()), true),
                    std::vector<bool>(static_cast<size_t>(b.node_size()), true), where, false);
}

// How an attribute differs ("" when it does not); subgraphs are matched node for node.
std::string attribute_difference(const onnx::AttributeProto& a, const onnx::AttributeProto& b, const std::string& where) {
  if (a.type() != b.type()) return "has another type";
  if (a.type() == onnx::AttributeProto::GRAPH) return all_of_graph(a.g(), b.g(), where);
  if (a.type() == onnx::AttributeProto::GRAPHS) {
    if (a.graphs_size() != b.graphs_size()) return "has another number of graphs";
    for (int k = 0; k < a.graphs_size(); ++k) {
      if (auto d = all_of_graph(a.graphs(k), b.graphs(k), where + " graph " + std::to_string(k)); !d.empty()) return d;
    }
    return "";
  }
  if (a.type() == onnx::AttributeProto::TENSOR) return same_tensor(a.t(), b.t()) ? "" : "holds another tensor";
  if (a.type() == onnx::AttributeProto::TENSORS) {
    if (a.tensors_size() != b.tensors_size()) return "holds another number of tensors";
    for (int k = 0; k < a.tensors_size(); ++k) {
      if (!same_tensor(a.tensors(k), b.tensors(k))) return "holds another tensor";
    }
    return "";
  }
  onnx::AttributeProto a_value = a, b_value = b;
  a_value.clear_doc_string();
  b_value.clear_doc_string();
  return a_value.SerializeAsString() == b_value.SerializeAsString() ? "" : "has another value";
}

std::string quoted_list(const google::protobuf::RepeatedPtrField<std::string>& names) {
  std::string s;
  for (const auto& name : names) s += (s.empty() ? "'" : ", '") + name + "'";
  return "(" + s + ")";
}

// Said of a ConvTranspose that differs inside a subgraph, where per-node mode checks nothing.
std::string subgraph_hint(const onnx::NodeProto& node, const std::string& where) {
  return node.op_type() == "ConvTranspose" && !where.empty() ? " (per-node mode checks only the main graph's ConvTranspose nodes)" : "";
}

// How node b differs from node a ("" when it does not).
std::string node_difference(const onnx::NodeProto& a, const onnx::NodeProto& b, const std::string& where) {
  const auto domain = [](const onnx::NodeProto& n) { return n.domain() == "ai.onnx" ? std::string() : n.domain(); };
  if (a.op_type() != b.op_type() || domain(a) != domain(b)) {
    return describe_node(a) + where + " is " + (b.domain().empty() ? "" : b.domain() + "::") + b.op_type() +
           " in the rewritten model" + subgraph_hint(a, where);
  }
  if (!std::equal(a.input().begin(), a.input().end(), b.input().begin(), b.input().end())) {
    return describe_node(a) + where + " reads " + quoted_list(a.input()) + " in the original, " + quoted_list(b.input()) + " in the rewritten model";
  }
  std::map<std::string, const onnx::AttributeProto*> a_attrs, b_attrs;
  for (const auto& attr : a.attribute()) a_attrs[attr.name()] = &attr;
  for (const auto& attr : b.attribute()) b_attrs[attr.name()] = &attr;
  for (const auto& [name, attr] : a_attrs) {
    const auto it = b_attrs.find(name);
    const std::string label = describe_node(a) + where + ": attribute '" + name + "'";
    if (it == b_attrs.end()) return label + " is missing from the rewritten model";
    if (auto d = attribute_difference(*attr, *it->second, where + " in attribute '" + name + "' of " + describe_node(a));
        !d.empty()) {
      return attr->type() == onnx::AttributeProto::GRAPH || attr->type() == onnx::AttributeProto::GRAPHS ? d : label + " " + d;
    }
  }
  for (const auto& [name, attr] : b_attrs) {
    if (a_attrs.count(name) == 0) return describe_node(a) + where + ": attribute '" + name + "' is only in the rewritten model";
  }
  return "";
}

using ValueInfos = std::vector<const onnx::ValueInfoProto*>;

// The first difference between two lists of graph inputs or outputs, matched by name: a name only one side has,
// or a name whose type differs. The order is not compared (see interface_order_note()).
std::string value_info_difference(const ValueInfos& a, const ValueInfos& b, const std::string& what, const std::string& where) {
  std::map<std::string, const onnx::ValueInfoProto*> by_name;
  for (const auto* v : b) by_name.emplace(v->name(), v);
  std::string missing;
  for (const auto* v : a) {
    const auto it = by_name.find(v->name());
    if (it == by_name.end()) {
      if (missing.empty()) missing = v->name();
      continue;
    }
    if (v->type().SerializeAsString() != it->second->type().SerializeAsString()) {
      const std::string a_type = describe_type(v->type()), b_type = describe_type(it->second->type());
      return what + " '" + v->name() + "'" + where + " has another type in the rewritten model (" +
             (a_type != b_type ? a_type + " in the original, " + b_type + " in the rewritten model"
                               : a_type + " in both, with another denotation of the type or of a dim") + ")";
    }
    by_name.erase(it);
  }
  // by_name now holds what only the rewritten model has.
  if (!missing.empty()) {
    return what + " '" + missing + "'" + where + " is missing from the rewritten model" +
           (by_name.empty() ? std::string() : ", which has '" + by_name.begin()->first + "' instead");
  }
  if (!by_name.empty()) return "the rewritten model has a " + what + " the original lacks" + where + ": '" + by_name.begin()->first + "'";
  if (a.size() != b.size()) {  // a name listed twice on one side
    return std::to_string(a.size()) + " " + what + "s" + where + " in the original, " + std::to_string(b.size()) +
           " in the rewritten model";
  }
  return "";
}

// The graph's inputs; before IR 4, where every initializer is also listed as an input, only the others (the
// initializers are compared by content where the compared nodes read them).
ValueInfos real_inputs(const onnx::GraphProto& graph, bool initializers_listed) {
  std::set<std::string> initializers;
  if (initializers_listed) {
    for (const auto& init : graph.initializer()) initializers.insert(init.name());
  }
  ValueInfos inputs;
  for (const auto& in : graph.input()) {
    if (initializers.count(in.name()) == 0) inputs.push_back(&in);
  }
  return inputs;
}

ValueInfos infos_of(const google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>& list) {
  ValueInfos infos;
  for (const auto& vi : list) infos.push_back(&vi);
  return infos;
}

// The outputs a node is known by; a node without outputs by its position.
std::string node_key(const onnx::NodeProto& node, int index) {
  std::string key;
  for (const auto& name : node.output()) key += name + '\n';
  return key.empty() ? "#" + std::to_string(index) : key;
}

// How the graph inputs or outputs of b differ from a's: names, order and types ("" when they do not).
std::string io_difference(const onnx::GraphProto& a, const onnx::GraphProto& b, const std::string& where, bool initializers_listed) {
  if (auto d = value_info_difference(real_inputs(a, initializers_listed), real_inputs(b, initializers_listed), "graph input", where);
      !d.empty()) {
    return d;
  }
  return value_info_difference(infos_of(a.output()), infos_of(b.output()), "graph output", where);
}

std::string same_graph(const onnx::GraphProto& a, const onnx::GraphProto& b, const std::vector<bool>& a_compared,
                       const std::vector<bool>& b_compared, const std::string& where, bool initializers_listed) {
  if (auto d = io_difference(a, b, where, initializers_listed); !d.empty()) return d;
  const ValueInfos a_inputs = real_inputs(a, initializers_listed);

  std::map<std::string, const onnx::NodeProto*> b_nodes;
  for (int k = 0; k < b.node_size(); ++k) {
    if (b_compared[static_cast<size_t>(k)]) b_nodes[node_key(b.node(k), k)] = &b.node(k);
  }
  std::set<std::string> reads;  // by the compared nodes of either side
  for (const auto& o : a.output()) reads.insert(o.name());
  for (const auto* i : a_inputs) reads.insert(i->name());
  for (int k = 0; k < a.node_size(); ++k) {
    if (!a_compared[static_cast<size_t>(k)]) continue;
    const onnx::NodeProto& node = a.node(k);
    const auto it = b_nodes.find(node_key(node, k));
    if (it == b_nodes.end()) return describe_node(node) + where + " is missing from the rewritten model" + subgraph_hint(node, where);
    if (auto d = node_difference(node, *it->second, where); !d.empty()) return d;
    for (const auto& name : node_reads(node)) reads.insert(name);
    b_nodes.erase(it);
  }
  if (!b_nodes.empty()) {
    return "the rewritten model has a node the original lacks" + where + ": " + describe_node(*b_nodes.begin()->second);
  }

  std::map<std::string, const onnx::TensorProto*> a_inits, b_inits;
  for (const auto& init : a.initializer()) a_inits[init.name()] = &init;
  for (const auto& init : b.initializer()) b_inits[init.name()] = &init;
  for (const auto& name : reads) {
    const auto ia = a_inits.find(name), ib = b_inits.find(name);
    if (ia == a_inits.end() && ib == b_inits.end()) continue;
    if (ia == a_inits.end() || ib == b_inits.end()) {
      return "initializer '" + name + "'" + where + " is only in the " + (ia == a_inits.end() ? "rewritten" : "original") + " model";
    }
    if (!same_tensor(*ia->second, *ib->second)) return "initializer '" + name + "'" + where + " holds other values in the rewritten model";
  }
  if (a.sparse_initializer_size() != b.sparse_initializer_size()) return "the sparse initializers" + where + " differ";
  for (int k = 0; k < a.sparse_initializer_size(); ++k) {
    if (a.sparse_initializer(k).SerializeAsString() != b.sparse_initializer(k).SerializeAsString()) {
      return "the sparse initializers" + where + " differ";
    }
  }
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
    bool result = standard_domain(node) && upsampler_ops().count(node.op_type()) != 0;
    if (result && node.op_type() != "Shape") {
      for (const auto& in : node_reads(node)) result = result && (in.empty() || constant(in));
    }
    return memo[name] = result;
  };

  std::vector<Replacement> replaced;
  for (int k = 0; k < a.node_size(); ++k) {
    const onnx::NodeProto& node = a.node(k);
    if (!standard_domain(node) || (node.op_type() != "Conv" && node.op_type() != "ConvTranspose") || node.output_size() != 1) continue;
    const auto op = b_op.find(node.output(0));
    if (op == b_op.end() || op->second == node.op_type()) continue;
    Replacement r;
    r.node = &node;
    r.y = node.output(0);
    r.bias = node.input_size() > 2 ? node.input(2) : "";
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
    if (activations.size() == 1) {
      r.x = *activations.begin();
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

std::string interface_difference(const onnx::ModelProto& original, const onnx::ModelProto& rewritten) {
  return io_difference(original.graph(), rewritten.graph(), "", original.ir_version() < 4);
}

std::string interface_order_note(const onnx::ModelProto& original, const onnx::ModelProto& rewritten) {
  const auto names = [](const ValueInfos& list) {
    std::vector<std::string> out;
    for (const auto* v : list) out.push_back(v->name());
    return out;
  };
  const auto listed = [](const std::vector<std::string>& list) {
    std::string text;
    for (const auto& n : list) text += (text.empty() ? "'" : ", '") + n + "'";
    return text;
  };
  const bool listed_inputs = original.ir_version() < 4;
  std::string note;
  for (const auto& [what, a, b] :
       {std::tuple<const char*, std::vector<std::string>, std::vector<std::string>>{
            "inputs", names(real_inputs(original.graph(), listed_inputs)), names(real_inputs(rewritten.graph(), listed_inputs))},
        {"outputs", names(infos_of(original.graph().output())), names(infos_of(rewritten.graph().output()))}}) {
    if (a == b) continue;
    note += std::string(note.empty() ? "" : "; ") + "the graph " + what + " are listed in another order (" + listed(a) +
            " in the original, " + listed(b) + " in the rewritten model)";
  }
  return note.empty() ? note : note + ": matched by name; a caller that reads them by position sees them moved";
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
  for (size_t r = 0; r < replaced.size(); ++r) from_x[r].insert(replaced[r].x);
  for (int k = 0; k < original.graph().node_size(); ++k) {
    const int r = original_regions[static_cast<size_t>(k)];
    if (r < 0) continue;
    const auto index = static_cast<size_t>(r);
    if (auto d = original_region_node_difference(original.graph().node(k), replaced[index], from_x[index]); !d.empty()) return d;
  }
  return "";
}

std::vector<Replacement> replacements_from_record(const onnx::ModelProto& original,
                                                  const std::vector<core::ReplacedRegion>& regions) {
  const auto& graph = original.graph();
  const auto producer = producers(graph);
  std::vector<std::pair<int, Replacement>> ordered;
  for (const auto& region : regions) {
    Replacement r;
    r.y = region.output;
    r.x = region.input;
    r.bias = region.bias;
    const auto it = producer.find(region.output);
    if (it == producer.end()) {
      r.label = "'" + region.output + "'";
      r.problem = "the rewrite's record names '" + region.output + "', which the original's main graph does not compute";
      ordered.emplace_back(graph.node_size(), std::move(r));
      continue;
    }
    r.node = &graph.node(it->second);
    r.label = describe_node(*r.node);
    if (r.x.empty()) r.problem = "the rewrite's record of " + r.label + " names no input";
    ordered.emplace_back(it->second, std::move(r));
  }
  std::stable_sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Replacement> out;
  for (auto& [index, r] : ordered) out.push_back(std::move(r));
  return out;
}

std::string record_difference(const std::vector<Replacement>& recorded, const std::vector<Replacement>& found) {
  std::map<std::string, const Replacement*> by_y;
  for (const auto& r : found) by_y[r.y] = &r;
  for (const auto& r : recorded) {
    const auto it = by_y.find(r.y);
    if (it == by_y.end()) return "the rewrite recorded replacing " + r.label + ", but the rewritten model still computes '" + r.y + "' as the original does";
    // A region the graphs alone cannot resolve (x == "" and a problem: e.g. a mask built from Shape(x) reads x
    // twice) takes the record's x; difference_outside_replacements() then checks the region read from it.
    if (it->second->x != r.x && !it->second->x.empty()) {
      return "the rewrite recorded " + r.label + " as reading '" + r.x + "', but the graphs say '" + it->second->x + "'";
    }
    by_y.erase(it);
  }
  if (!by_y.empty()) return "the rewritten model replaces " + by_y.begin()->second->label + ", which the rewrite did not record";
  return "";
}

}  // namespace dwdeconv::runtime_check
