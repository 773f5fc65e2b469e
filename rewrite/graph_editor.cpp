#include "rewrite/graph_editor.h"

#include <algorithm>

#include "onnx_io/attributes.h"
#include "onnx_io/graph_walk.h"

namespace dwdeconv::rewrite {
namespace {

size_t count_graphs(const onnx::GraphProto& graph) {
  size_t n = 1;
  for (const auto& node : graph.node()) {
    for (const auto& attr : node.attribute()) {
      if (attr.has_g()) n += count_graphs(attr.g());
      for (const auto& g : attr.graphs()) n += count_graphs(g);
    }
  }
  return n;
}

bool is_graph_input(const onnx::GraphProto& graph, const std::string& name) {
  for (const auto& input : graph.input()) {
    if (input.name() == name) return true;
  }
  return false;
}

}  // namespace

GraphTree::GraphTree(onnx::ModelProto& model) {
  scopes_.reserve(count_graphs(model.graph()));
  collect(model.mutable_graph(), nullptr, "main");
  for (const auto& training : model.training_info()) {
    for (const auto* bindings : {&training.initialization_binding(), &training.update_binding()}) {
      for (const auto& b : *bindings) scopes_.front().trained.insert(b.key());
    }
  }
}

void GraphTree::collect(onnx::GraphProto* graph, const GraphScope* parent, const std::string& path) {
  scopes_.push_back({graph, parent, path, scopes_.size(), {}});
  const GraphScope* self = &scopes_.back();
  for (auto& node : *graph->mutable_node()) {
    for (auto& attr : *node.mutable_attribute()) {
      const std::string prefix = path + "/" + onnx_io::describe_node(node) + "/" + attr.name();
      if (attr.has_g()) collect(attr.mutable_g(), self, prefix);
      for (int i = 0; i < attr.graphs_size(); ++i) collect(attr.mutable_graphs(i), self, prefix + "[" + std::to_string(i) + "]");
    }
  }
}

NameAllocator::NameAllocator(const onnx::ModelProto& model) {
  const auto take = [this](const onnx::GraphProto& g) {
    if (!g.name().empty()) taken_.insert(g.name());
    for (const auto& v : g.input()) taken_.insert(v.name());
    for (const auto& v : g.output()) taken_.insert(v.name());
    for (const auto& v : g.value_info()) taken_.insert(v.name());
    for (const auto& t : g.initializer()) taken_.insert(t.name());
    for (const auto& t : g.sparse_initializer()) taken_.insert(t.values().name());
    for (const auto& n : g.node()) {
      if (!n.name().empty()) taken_.insert(n.name());
      for (const auto& s : n.input()) taken_.insert(s);
      for (const auto& s : n.output()) taken_.insert(s);
    }
  };
  onnx_io::for_each_graph(model.graph(), take);
  for (const auto& training : model.training_info()) {
    onnx_io::for_each_graph(training.initialization(), take);
    onnx_io::for_each_graph(training.algorithm(), take);
    for (const auto* bindings : {&training.initialization_binding(), &training.update_binding()}) {
      for (const auto& b : *bindings) {
        taken_.insert(b.key());
        taken_.insert(b.value());
      }
    }
  }
}

std::string NameAllocator::fresh(const std::string& base) {
  std::string name = base;
  for (int i = 1; taken_.count(name) != 0; ++i) name = base + "_" + std::to_string(i);
  taken_.insert(name);
  return name;
}

std::vector<std::pair<const GraphScope*, std::string>> computed_from(const std::string& name, const GraphScope& scope) {
  std::vector<std::pair<const GraphScope*, std::string>> found;
  std::set<std::pair<const GraphScope*, std::string>> seen;
  std::vector<std::string> todo{name};
  while (!todo.empty()) {
    const std::string current = todo.back();
    todo.pop_back();
    // Where `current` is defined as `scope` reads it: a node output or an initializer, the nearest graph first.
    for (const GraphScope* at = &scope; at != nullptr; at = at->parent) {
      const onnx::NodeProto* producer = nullptr;
      for (const auto& node : at->graph->node()) {
        if (std::find(node.output().begin(), node.output().end(), current) != node.output().end()) producer = &node;
      }
      const bool initializer = std::any_of(at->graph->initializer().begin(), at->graph->initializer().end(),
                                           [&](const onnx::TensorProto& t) { return t.name() == current; });
      if (producer == nullptr && !initializer) continue;
      if (!seen.insert({at, current}).second) break;
      found.push_back({at, current});
      if (producer != nullptr) {
        for (const auto& in : producer->input()) {
          if (!in.empty()) todo.push_back(in);
        }
      }
      break;
    }
  }
  return found;
}

core::Result<ConstantSource> resolve_constant(const std::string& name, const GraphScope& scope, int64_t ir_version) {
  ConstantSource source;
  std::string current = name;
  const GraphScope* at = &scope;
  // Walk Identity links and enclosing scopes until an initializer, a Constant, or something non-constant.
  for (int guard = 0; guard < 1 << 20; ++guard) {
    const onnx::NodeProto* producer = nullptr;
    for (const auto& node : at->graph->node()) {
      for (const auto& out : node.output()) {
        if (out == current) producer = &node;
      }
    }
    if (producer != nullptr) {
      const std::string& op = producer->op_type();
      const bool default_domain = producer->domain().empty() || producer->domain() == "ai.onnx";
      if (default_domain && op == "Identity" && producer->input_size() == 1) {
        source.identities.emplace_back(at, producer);
        current = producer->input(0);
        continue;
      }
      if (default_domain && op == "Constant") {
        const auto* value = onnx_io::find_attribute(*producer, "value");
        if (value == nullptr || !value->has_t()) {
          return core::declined("'" + current + "' is a Constant without a dense `value` tensor");
        }
        source.scope = at;
        source.tensor = &value->t();
        source.constant_node = producer;
        source.name = current;
        return source;
      }
      if (op == "DequantizeLinear") return core::declined("'" + current + "' comes from DequantizeLinear (QDQ)");
      return core::declined("'" + current + "' is computed by " + onnx_io::describe_node(*producer) + ", not constant");
    }
    for (const auto& init : at->graph->initializer()) {
      if (init.name() != current) continue;
      // From IR 4 on, an initializer that is also a graph input is only a default: the caller may feed it.
      if (ir_version >= 4 && is_graph_input(*at->graph, current)) {
        return core::declined("'" + current + "' is an initializer that is also a graph input, so it can be overridden");
      }
      // A phase weight gathered from it would stay behind when training writes a new value.
      if (at->trained.count(current) != 0) {
        return core::declined("'" + current + "' is written by training (a training_info binding), so it is not constant");
      }
      source.scope = at;
      source.tensor = &init;
      source.name = current;
      return source;
    }
    for (const auto& sparse : at->graph->sparse_initializer()) {
      if (sparse.values().name() != current) continue;
      source.scope = at;
      source.sparse = &sparse;
      source.name = current;
      return source;
    }
    if (is_graph_input(*at->graph, current)) return core::declined("'" + current + "' is a graph input, not constant");
    if (at->parent == nullptr) return core::invalid_model("tensor '" + current + "' is read but never defined");
    at = at->parent;  // an outer-scope value
  }
  return core::invalid_model("Identity chain behind '" + name + "' does not end");
}

std::map<std::string, int> count_uses(const onnx::ModelProto& model) {
  std::map<std::string, int> uses;
  const auto count = [&uses](const onnx::GraphProto& g) {
    for (const auto& n : g.node()) {
      for (const auto& s : n.input()) {
        if (!s.empty()) ++uses[s];
      }
    }
    for (const auto& out : g.output()) ++uses[out.name()];
  };
  onnx_io::for_each_graph(model.graph(), count);
  // Training graphs read the main graph's initializers by name, and the bindings name the initializers that
  // training initializes or updates: all of them must stay.
  for (const auto& training : model.training_info()) {
    onnx_io::for_each_graph(training.initialization(), count);
    onnx_io::for_each_graph(training.algorithm(), count);
    for (const auto* bindings : {&training.initialization_binding(), &training.update_binding()}) {
      for (const auto& b : *bindings) ++uses[b.key()];
    }
  }
  return uses;
}

}  // namespace dwdeconv::rewrite
