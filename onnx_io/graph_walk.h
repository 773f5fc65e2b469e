// Visiting every graph of a model: the main graph and the bodies held by node attributes (If, Loop, Scan).
#pragma once

#include <onnx/onnx_pb.h>

namespace dwdeconv::onnx_io {

// Calls fn(graph) for `graph` and then, depth first in node order, for every subgraph below it.
template <typename Fn>
void for_each_graph(const onnx::GraphProto& graph, const Fn& fn) {
  fn(graph);
  for (const auto& node : graph.node()) {
    for (const auto& attr : node.attribute()) {
      if (attr.has_g()) for_each_graph(attr.g(), fn);
      for (const auto& g : attr.graphs()) for_each_graph(g, fn);
    }
  }
}

}  // namespace dwdeconv::onnx_io
