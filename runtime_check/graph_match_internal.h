// What the two halves of the graph match share: the names a node reads, and the structural comparison of two graphs
// (graph_match_compare.cpp) that graph_match.cpp runs outside the replaced regions. Not part of the library's API
// (graph_match.h is).
#pragma once

#include <set>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

namespace dwdeconv::runtime_check::detail {

inline void outer_reads(const onnx::GraphProto& graph, std::set<std::string>& reads);

// The names a node reads: its inputs, and what its subgraphs read from enclosing graphs.
inline std::vector<std::string> node_reads(const onnx::NodeProto& node) {
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
inline void outer_reads(const onnx::GraphProto& graph, std::set<std::string>& reads) {
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

// The first difference between graphs a and b, as a phrase naming the node or tensor: among the nodes a_compared and
// b_compared mark (matched by their outputs), the initializers those nodes read, the sparse initializers and the
// graph inputs and outputs; "" when there is none. `where` names the subgraph ("" for the main graph);
// initializers_listed: before IR 4, every initializer is also listed as an input.
std::string same_graph(const onnx::GraphProto& a, const onnx::GraphProto& b, const std::vector<bool>& a_compared,
                       const std::vector<bool>& b_compared, const std::string& where, bool initializers_listed);

}  // namespace dwdeconv::runtime_check::detail
