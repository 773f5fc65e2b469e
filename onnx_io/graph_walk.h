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

namespace dwdeconv::onnx_io {

// Calls fn(tensor) for every tensor that can hold data in `graph` and the subgraphs below it: initializers and
// tensor attributes (Constant's `value` and the like).
template <typename Fn>
void for_each_tensor(const onnx::GraphProto& graph, const Fn& fn) {
  for_each_graph(graph, [&fn](const onnx::GraphProto& g) {
    for (const auto& t : g.initializer()) fn(t);
    for (const auto& node : g.node()) {
      for (const auto& attr : node.attribute()) {
        if (attr.has_t()) fn(attr.t());
        for (const auto& t : attr.tensors()) fn(t);
      }
    }
  });
}

// The same walk with mutable tensors.
template <typename Fn>
void for_each_mutable_tensor(onnx::GraphProto& graph, const Fn& fn) {
  for (auto& t : *graph.mutable_initializer()) fn(t);
  for (auto& node : *graph.mutable_node()) {
    for (auto& attr : *node.mutable_attribute()) {
      if (attr.has_t()) fn(*attr.mutable_t());
      for (auto& t : *attr.mutable_tensors()) fn(t);
      if (attr.has_g()) for_each_mutable_tensor(*attr.mutable_g(), fn);
      for (auto& g : *attr.mutable_graphs()) for_each_mutable_tensor(g, fn);
    }
  }
}

}  // namespace dwdeconv::onnx_io
