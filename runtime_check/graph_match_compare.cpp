// The structural half of the graph match: two graphs compared node for node (op, domain, inputs, attributes with
// their subgraphs), with the initializers the compared nodes read and the graph inputs and outputs, matched by name.
// graph_match.cpp finds the replaced regions this comparison leaves out.
#include "runtime_check/graph_match.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

#include "graph_match_internal.h"
#include "onnx_io/attributes.h"
#include "onnx_io/shapes.h"
#include "onnx_io/tensor.h"
#include "runtime_check/tensor.h"

namespace dwdeconv::runtime_check {
namespace {

using detail::node_reads;
using detail::same_graph;
using onnx_io::describe_node;
using onnx_io::describe_type;

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
    return va.ok() && vb.ok() && va->size() == vb->size() && std::memcmp(va->data(), vb->data(), va->size() * sizeof(double)) == 0;
  }
  onnx::TensorProto a_unnamed = a, b_unnamed = b;  // strings and other types: the same message
  a_unnamed.clear_name();
  b_unnamed.clear_name();
  return a_unnamed.SerializeAsString() == b_unnamed.SerializeAsString();
}

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
    return describe_node(a) + where + " is " + (b.domain().empty() ? "" : b.domain() + "::") + b.op_type() + " in the rewritten model" +
           subgraph_hint(a, where);
  }
  if (!std::equal(a.input().begin(), a.input().end(), b.input().begin(), b.input().end())) {
    return describe_node(a) + where + " reads " + quoted_list(a.input()) + " in the original, " + quoted_list(b.input()) +
           " in the rewritten model";
  }
  std::map<std::string, const onnx::AttributeProto*> a_attrs, b_attrs;
  for (const auto& attr : a.attribute()) a_attrs[attr.name()] = &attr;
  for (const auto& attr : b.attribute()) b_attrs[attr.name()] = &attr;
  for (const auto& [name, attr] : a_attrs) {
    const auto it = b_attrs.find(name);
    const std::string label = describe_node(a) + where + ": attribute '" + name + "'";
    if (it == b_attrs.end()) return label + " is missing from the rewritten model";
    if (auto d = attribute_difference(*attr, *it->second, where + " in attribute '" + name + "' of " + describe_node(a)); !d.empty()) {
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
                               : a_type + " in both, with another denotation of the type or of a dim") +
             ")";
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

}  // namespace

namespace detail {

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

}  // namespace detail

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

}  // namespace dwdeconv::runtime_check
