// A small graph editor: the model's graphs with their scopes, unique names, constant resolution through
// Constant and Identity nodes, use counts, and removal of what a rewrite orphaned.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/result.h"

namespace dwdeconv::rewrite {

// One graph of the model: the main graph or a subgraph held by an attribute of a node (If, Loop, Scan).
struct GraphScope {
  onnx::GraphProto* graph = nullptr;
  const GraphScope* parent = nullptr;  // nullptr for the main graph
  std::string path;                    // "main", "main/If 'cond'/then_branch", ... for messages
  size_t index = 0;                    // position in GraphTree::scopes(), the numbering onnx_io::infer_types uses
  // Main graph only: the initializers that training_info's bindings write (update_binding, and
  // initialization_binding). They change when the model is trained, so they are not constants to fold.
  std::set<std::string> trained;
};

// Every graph of a model, parents before children. Pointers stay valid while the graphs' node lists are not
// reordered; rebuild children before parents (see GraphEditor::rebuild).
class GraphTree {
 public:
  explicit GraphTree(onnx::ModelProto& model);
  const std::vector<GraphScope>& scopes() const { return scopes_; }
  const GraphScope& main() const { return scopes_.front(); }

 private:
  void collect(onnx::GraphProto* graph, const GraphScope* parent, const std::string& path);
  std::vector<GraphScope> scopes_;  // reserved up front, so parent pointers never dangle
};

// Hands out names that appear nowhere in the model (nodes, tensors, any graph, training_info's graphs and
// bindings included). Deterministic: the same model and the same requests give the same names.
class NameAllocator {
 public:
  explicit NameAllocator(const onnx::ModelProto& model);
  // `base` itself if free, else base_1, base_2, ...; the name is reserved from then on.
  std::string fresh(const std::string& base);

 private:
  std::set<std::string> taken_;
};

// Where a constant tensor comes from: an initializer or a Constant node, possibly behind Identity nodes.
struct ConstantSource {
  const GraphScope* scope = nullptr;                // the graph that holds the initializer or Constant node
  const onnx::TensorProto* tensor = nullptr;        // null when the source is a sparse initializer
  const onnx::SparseTensorProto* sparse = nullptr;  // set instead of `tensor` for a sparse initializer
  const onnx::NodeProto* constant_node = nullptr;   // set when the tensor is a Constant node's `value`
  std::string name;                                 // the initializer's name or the Constant's output
  // Identity nodes between the use and the source, use first, each with the graph that holds it.
  std::vector<std::pair<const GraphScope*, const onnx::NodeProto*>> identities;
};

// Finds the constant behind `name` as seen from `scope` (walking out to enclosing graphs). Declines with a
// reason when the tensor is not constant: a graph input, an overridable initializer, a DequantizeLinear, ...
core::Result<ConstantSource> resolve_constant(const std::string& name, const GraphScope& scope, int64_t ir_version);

// Every value that the computation of `name` reads, walking back from it through the nodes that compute it: each
// node output and initializer, with the graph that defines it (graph inputs end the walk). For a value computed from
// constants alone (a folded weight), what the rewrite may orphan once nothing else reads it.
std::vector<std::pair<const GraphScope*, std::string>> computed_from(const std::string& name, const GraphScope& scope);

// How many times each tensor name is read: node inputs in every graph (subgraphs read outer names), graph
// outputs, and training_info (its graphs read the main graph's initializers, its bindings name them).
std::map<std::string, int> count_uses(const onnx::ModelProto& model);

}  // namespace dwdeconv::rewrite
